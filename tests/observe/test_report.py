"""The HTML report: self-contained, one plot per key with every sample, failures with reasons."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from _tunables import sleeping as _sleep

import tunekit as tk
from tunekit._observe.report import render_report
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _hostile(n: int) -> int:
    raise ValueError("<script>alert(1)</script> & more")


def _records(tmp_path: Path) -> Path:
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [_sleep(0.002), _sleep(0.0002), tk.Tunable("<b>hostile</b>", _hostile)]
    )
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("report_tuner")
    for n in (3, 100):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (n,))
    return path


def test_report_has_every_sample_the_margin_and_the_failures(tmp_path: Path) -> None:
    path = _records(tmp_path)
    records = [line.record for line in tk.read_records(path) if isinstance(line, tk.RecordLine)]
    html = tk.write_report(path, tmp_path / "report.html").read_text()
    sections = html.split("<h2>")[2:]  # after the cost-over-time section
    assert len(sections) == 2
    for section, record in zip(sections, sorted(records, key=lambda r: r.key["n"]), strict=True):
        timed = sum(len(c.samples_ns) + len(c.discarded_ns) for c in record.candidates)
        assert section.count("<circle") == timed  # one dot per timed sample, discarded ones hollow
        assert section.count('fill="none"') == sum(len(c.discarded_ns) for c in record.candidates)
        assert re.search(r"margin \[95%\]<b>\+", section) and "winner<b" in section
        assert "ValueError: &lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in section
        assert "&lt;b&gt;hostile&lt;/b&gt;" in section
    assert "<script" not in html and "<b>hostile" not in html


def test_report_is_self_contained(tmp_path: Path) -> None:
    html = tk.write_report(_records(tmp_path), tmp_path / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<link|<script""", html)
    assert html.count("<svg") == 3  # cost over time, then one per key
    assert "Tuning cost over time" in html


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
    assert ">1 µs<" in html and ">10 ms<" in html  # decade ticks


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
