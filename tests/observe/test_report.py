"""The HTML report, read back as a browser would parse it: the summary on top, every candidate by its full name,
the parameter plots and heat maps of a space, the key x candidate grid, the history across two records files.

The records come from real tunes on the simulated device (instant, deterministic), run once per module:
a two-parameter space of long kernel-template names whose distinguishing part comes last, three keys
with different winners, tuned twice into two files.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Annotated

import pytest
from _command import run

import tunekit as tk
from tunekit._observe.report import render_report
from tunekit._observe.report_params import param_table, parse_params
from tunekit._observe.summary import KeySummary, summarise
from tunekit_backends.simulated import NoiseModel, SimulatedClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


SIZES = (1024, 4096, 16384)
BLOCKS = (64, 256, 1024)
VECS = (1, 4, 8)
# The part that tells the candidates apart comes last, as in a kernel template's names: clipped, all read alike.
PREFIX = "fused_bias_add_gelu[DTYPE=float32,LAYOUT=row_major_contiguous,"


def _name(block: int, vec: int) -> str:
    return f"{PREFIX}BLOCK={block},VEC={vec}]"


def _true_ns(block: int, vec: int, n: int) -> float:
    """Each size has its best BLOCK (n/16, so the winners differ by key); VEC=4 is best everywhere."""
    return n * 60 * (1 + 0.4 * abs(math.log2(block / (n / 16)))) * (1 + 0.2 * abs(math.log2(vec) - 2))


def _tune(path: Path, seed: int) -> None:
    client = SimulatedClient(NoiseModel(noise=0.02), seed=seed)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n))
    for block in BLOCKS:
        for vec in VECS:
            kernels = {n: client.kernel(_true_ns(block, vec, n)) for n in SIZES}
            tunables = tunables.with_tunable(tk.Tunable(_name(block, vec), lambda n, k=kernels: k[n](n)))
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("bias_gelu")
    tk.configure(record=str(path), cache=False)
    try:
        for n in SIZES:
            tuner.execute(client.device_id, client, tunables, (n,))
    finally:
        tk.configure()


class _Page(HTMLParser):
    """The tables of a page (each a list of rows of cell texts) by class, and every ``title`` attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self.titles: list[str] = []
        self._cell: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("title"):
            self.titles.append(found["title"] or "")
        if tag == "table":
            self.tables.append((found.get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def table(self, css: str) -> list[list[str]]:
        (rows,) = [rows for found, rows in self.tables if found == css]
        return rows


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("runs")
    first, second = directory / "monday.jsonl", directory / "tuesday.jsonl"
    _tune(first, seed=1)
    _tune(second, seed=2)
    return first, second


@pytest.fixture(scope="module")
def report(two_runs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    return tk.write_report(two_runs, tmp_path_factory.mktemp("report") / "report.html").read_text()


@pytest.fixture(scope="module")
def summaries(two_runs: tuple[Path, Path]) -> list[KeySummary]:
    return summarise(
        line.record for path in two_runs for line in tk.read_records(path) if isinstance(line, tk.RecordLine)
    )


def _sections(html: str) -> list[str]:
    return html.split('<section class="key-section">')[1:]


def test_the_tunes_are_what_the_report_is_tested_on(summaries: list[KeySummary]) -> None:
    assert [s.key["n"] for s in summaries] == list(SIZES)
    assert len({s.winner for s in summaries}) == 3  # a different winner per key: the grid has something to show
    assert all(s.decisions == 2 for s in summaries)


def test_the_summary_table_on_top_gives_each_key_its_winner_runner_up_margin_and_cost(
    report: str, summaries: list[KeySummary]
) -> None:
    assert report.index('<table class="summary">') < report.index('<section class="key-section">')
    header, *rows = _parse(report).table("summary")
    assert header == ["tuner", "key", "winner", "time", "runner-up", "time", "margin [95%]", "decided by", "cost"]
    assert len(rows) == len(summaries)
    for row, summary in zip(rows, summaries, strict=True):
        assert summary.decision is not None and summary.winner is not None and summary.runner_up is not None
        assert row[:3] == ["bias_gelu", summary.key_json, summary.winner]
        assert row[4] == summary.runner_up
        assert row[6].startswith(summary.decision.margin_text)
        assert row[7] == summary.decision.stage_text
        assert row[8] == f"{summary.tuning_time_s:.3g} s"


def test_every_candidate_is_named_in_full_in_each_key_and_in_the_grid(report: str) -> None:
    names = {_name(b, v) for b in BLOCKS for v in VECS}
    assert "…" not in report
    for section in _sections(report):
        listed = [row[1] for row in _parse(section).table("candidates")[1:]]
        assert sorted(listed) == sorted(names)
        # The plot's hover tips name each candidate in full too.
        assert all(
            any(title.startswith(name + "\n") for title in re.findall(r"<title>([^<]*)", section)) for name in names
        )
    assert {row[0] for row in _parse(report).table("grid")[1:]} == names


def test_a_two_parameter_space_gets_a_plot_per_parameter_and_a_heat_map(
    report: str, summaries: list[KeySummary]
) -> None:
    for section, summary in zip(_sections(report), summaries, strict=True):
        params = section[section.index('<h3 class="params">') : section.index('<h3 class="heatmaps">')]
        heat = section[section.index('<h3 class="heatmaps">') : section.index('<h3 class="samples">')]
        assert params.count("<svg") == 1 and heat.count("<svg") == 1
        for axis in ("BLOCK", "VEC"):
            assert f">{axis}</text>" in params and f">{axis}</text>" in heat
        # In each parameter's panel one dot per configuration, its tip naming it; nine labelled cells, the winner's
        # among them.
        assert len(re.findall(r"<title>fused_bias_add_gelu\[[^<]*: \d", params)) == 2 * len(BLOCKS) * len(VECS)
        cells = re.findall(r"<title>best of BLOCK=(\d+), VEC=(\d+): ([^<]*)</title>", heat)
        assert len(cells) == len(BLOCKS) * len(VECS)
        assert summary.winner is not None
        winner_params = parse_params(summary.winner)
        assert winner_params is not None
        block, vec = winner_params[1]["BLOCK"], winner_params[1]["VEC"]
        assert any(c[:2] == (str(block), str(vec)) and c[2].startswith(summary.winner) for c in cells)


def test_the_key_by_candidate_grid_marks_each_keys_winner(report: str, summaries: list[KeySummary]) -> None:
    header, *rows = _parse(report).table("grid")
    assert header[3:] == [s.key_json for s in summaries]
    for column, summary in enumerate(summaries, 3):
        (winner_row,) = [row for row in rows if row[column] == "winner"]
        assert winner_row[0] == summary.winner and winner_row[1] == "1"
        assert all(re.fullmatch(r"\d+\.\d\d\u00d7", row[column]) for row in rows if row is not winner_row)


def test_two_records_files_give_each_keys_history(report: str, two_runs: tuple[Path, Path]) -> None:
    history = report[report.index('<h2 id="history">') : report.index('<section class="key-section">')]
    assert history.count("<svg") == 1
    tables = [rows for css, rows in _parse(history).tables if css == "history"]
    assert len(tables) == len(SIZES)
    for header, *rows in tables:
        assert header[:3] == ["when (UTC)", "from", "winner"]
        assert [row[1] for row in rows] == [str(path) for path in two_runs]  # oldest first
        assert all(row[2].startswith(PREFIX) for row in rows)


def test_one_file_that_grew_over_two_runs_gives_the_history_too(two_runs: tuple[Path, Path]) -> None:
    grown = [
        line.record
        for path in two_runs
        for line in tk.read_records(path)
        if isinstance(line, tk.RecordLine) and line.record.key == {"n": SIZES[0]}  # one key: fewer plots to draw
    ]
    tables = [rows for css, rows in _parse(render_report(grown, source="grown.jsonl")).tables if css == "history"]
    assert len(tables) == 1
    assert [row[1] for row in tables[0][1:]] == ["grown.jsonl"] * 2


def test_one_file_of_one_key_has_no_grid_and_no_history(two_runs: tuple[Path, Path]) -> None:
    (record, *_) = [line.record for line in tk.read_records(two_runs[0]) if isinstance(line, tk.RecordLine)]
    html = render_report([record], source="one.jsonl")
    assert 'class="grid"' not in html and 'id="history"' not in html
    assert len(_parse(html).table("summary")) == 2


def test_the_report_is_one_self_contained_file(report: str) -> None:
    assert "<script" not in report and "<link" not in report and "@import" not in report
    # Links only within the page: the summary's to each key, the SVGs' to their own markers and clip paths;
    # images inline as data.
    assert all(ref.startswith(("#", "data:")) for ref in re.findall(r"""(?:href|src)\s*=\s*["']([^"']*)""", report))
    assert all(url.startswith("#") for url in re.findall(r"url\(([^)]*)\)", report))


def test_a_hostile_name_is_shown_as_text(tmp_path: Path) -> None:
    client = SimulatedClient(seed=3)

    def hostile(n: int) -> None:
        raise ValueError("<script>alert(1)</script> & more")

    tunables = (
        tk.TunableSet(key=lambda n: NKey(n=n))
        .with_tunable(tk.Tunable("fast", client.kernel(1_000)))
        .with_tunable(tk.Tunable("<b>$x$ hostile</b>", client.kernel(2_000)))
        .with_tunable(tk.Tunable("<i>raises</i>", hostile))
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("hostile")
        tuner.execute(client.device_id, client, tunables, (3,))
    finally:
        tk.remove_record_sink(sink)
    html = render_report(records)
    assert "<script" not in html and "<b>$x$" not in html and "<i>raises" not in html
    assert "ValueError: &lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    assert "&lt;b&gt;$x$ hostile&lt;/b&gt;" in html  # the $ kept as text, not read as TeX by matplotlib


def test_samples_spanning_decades_use_a_log_axis() -> None:
    record = tk.AutotuneRecord(
        tuner="wide",
        device_id="cpu:test",
        key={"n": 1},
        checksum="c",
        decision="tuned",
        winner="fast",
        stored=True,
        wall_time_s=1.0,
        candidates=[
            tk.CandidateRecord.of("fast", 0, tk.Measured(tk.BenchmarkDurations((1_000, 1_100, 1_050)))),
            tk.CandidateRecord.of("slow", 0, tk.Measured(tk.BenchmarkDurations((10_000_000, 11_000_000)))),
        ],
    )
    html = render_report([record])
    assert ">1 µs</text>" in html and ">10 ms</text>" in html  # decade ticks


def test_a_skipped_candidate_is_shown_with_why_but_not_as_a_failure() -> None:
    """The report's table of non-measured candidates must keep the skipped ones once they left the failures."""
    record = tk.AutotuneRecord(
        tuner="skips",
        device_id="cpu:test",
        key={"n": 1},
        checksum="c",
        decision="tuned",
        winner="a",
        stored=True,
        wall_time_s=1.0,
        candidates=[
            tk.CandidateRecord.of("a", 0, tk.Measured(tk.BenchmarkDurations((1_000, 1_100)))),
            tk.CandidateRecord.of("b", 0, tk.Failed("RuntimeError: x", "run")),
            tk.CandidateRecord.of("c", 0, tk.Skipped("negative priority for this key")),
        ],
    )
    html = render_report([record])
    assert '<tr class="fail"><td>b</td><td>failed</td><td>run</td><td>RuntimeError: x</td></tr>' in html
    assert "<tr><td>c</td><td>skipped</td><td></td><td>negative priority for this key</td></tr>" in html


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("BLOCK=64,VEC=2", ("", {"BLOCK": 64, "VEC": 2})),
        ("gelu[VEC=8,MODE=fast,SCALE=0.5]", ("gelu", {"VEC": 8, "MODE": "fast", "SCALE": 0.5})),
        ("np_sum", None),
        ("a=1,a=2", None),
        ("k[A=1", None),
    ],
)
def test_a_configurations_name_reads_back_as_its_parameters(name: str, parsed: object) -> None:
    assert parse_params(name) == parsed


def test_candidates_of_different_shapes_are_not_a_space() -> None:
    measured = tk.Measured(tk.BenchmarkDurations((1_000,)))
    same = [tk.CandidateRecord.of(n, 0, measured) for n in ("A=1,B=2", "A=2,B=2")]
    assert param_table(same) is not None and param_table(same).varied == ("A",)  # type: ignore[union-attr]
    mixed = [tk.CandidateRecord.of(n, 0, measured) for n in ("A=1,B=2", "A=2")]
    assert param_table(mixed) is None


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec then finds no such module
    yield


def test_without_the_report_extra_the_error_says_what_to_install(no_matplotlib: None, tmp_path: Path) -> None:
    (tmp_path / "records.jsonl").write_text("")
    with pytest.raises(ImportError, match=re.escape("pip install 'tunekit[report]'")):
        tk.write_report(tmp_path / "records.jsonl", tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists()


@pytest.mark.subprocess
def test_the_command_reports_several_files(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = run("report", *map(str, two_runs), "-o", str(out))
    assert f"report of {2 * len(SIZES)} records written to {out}" in done.stdout
    history = [rows for css, rows in _parse(out.read_text()).tables if css == "history"]
    assert len(history) == len(SIZES)


def _record(key: int, candidates: list[tk.CandidateRecord], winner: str | None) -> tk.AutotuneRecord:
    return tk.AutotuneRecord(
        tuner="made",
        device_id="cpu:test",
        key={"n": key},
        checksum="c",
        decision="tuned",
        winner=winner,
        stored=winner is not None,
        wall_time_s=0.1,
        candidates=candidates,
    )


def test_three_parameters_get_a_heat_map_for_each_pair() -> None:
    candidates = [
        tk.CandidateRecord.of(
            f"A={a},B={b},C={c}", 0, tk.Measured(tk.BenchmarkDurations((1_000 * a + 10 * b + len(c),)))
        )
        for a in (1, 2)
        for b in (1, 2, 3)
        for c in ("x", "y")
    ]
    html = render_report([_record(1, candidates, "A=1,B=1,C=x")])
    pairs = {tuple(re.findall(r"(\w)=", title)) for title in re.findall(r"<title>best of ([^:]*):", html)}
    assert pairs == {("A", "B"), ("A", "C"), ("B", "C")}


def test_a_tune_that_measured_nothing_still_renders() -> None:
    failed = [tk.CandidateRecord.of(n, 0, tk.Failed("RuntimeError: no", "run")) for n in ("A=1,B=2", "A=2,B=2")]
    html = render_report([_record(1, failed, None)])
    (_, row) = _parse(html).table("summary")
    assert row[2] == "no valid candidate"
    assert html.count('<tr class="fail">') == 2


def test_long_device_ids_are_labelled_in_tables_and_given_in_full() -> None:
    """A PoCL device id (250 characters) in the summary's column wrapped over a dozen lines per row."""
    pocl = "opencl:Portable Computing Language|OpenCL 3.0 PoCL 3.0-rc2 Linux, Release, RELOC, LLVM 14.0.6" * 2
    measured = [tk.CandidateRecord.of("a", 0, tk.Measured(tk.BenchmarkDurations((1_000, 1_100))))]
    records = [
        _record(1, measured, "a").model_copy(update={"device_id": device})
        for device in ("cpu:Intel(R) Xeon(R)", pocl, "opencl:other")
    ]
    html = render_report(records)
    page = _parse(html)
    header, *rows = page.table("summary")
    assert header[-1] == "device" and sorted(row[-1] for row in rows) == ["cpu", "opencl 1", "opencl 2"]
    assert pocl in page.titles  # on hover
    assert f"opencl 1 = {pocl}; opencl 2 = opencl:other" in html  # listed on top with its label
