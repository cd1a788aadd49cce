"""The ``tunekit`` command on a real cache and a real records file, run in-process (see _command.py).

The installed entry point, its exit codes, a closed pipe and Ctrl-C are tested in real processes at the end.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Annotated, Any

import numpy as np
import pytest
from _command import run
from kt_cache import write_cache

import tunekit as tk
from tunekit._base.short_id import short_device_id
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import OpenCLClient
from tunekit_backends.simulated import NoiseModel, SimulatedClient

CLIENT = CpuClient()
_ENTRY = Path(sys.executable).with_name("tunekit")
COMMAND = [str(_ENTRY)] if _ENTRY.exists() else [sys.executable, "-m", "tunekit"]


@tk.autotune_key
class SumKey:
    n: Annotated[int, tk.Anchor()]


def _boom(x: np.ndarray) -> np.ndarray:
    raise RuntimeError("kernel exploded")


def _tune(records: Path) -> None:
    """Two keys of a real tuner, one candidate failing, recorded to ``records``."""
    tk.configure(record=str(records))
    tuner: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("cli_sum")
    tunables = (
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[0]))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(keepdims=True)))
        .with_tunable(tk.Tunable("einsum", lambda x: np.atleast_1d(np.einsum("i->", x))))
        .with_tunable(tk.Tunable("boom", _boom))
    )
    for n in (1000, 100_000):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(n),))


@pytest.fixture
def records(tmp_path: Path) -> Path:
    path = tmp_path / "records.jsonl"
    _tune(path)
    return path


def test_cache_path_list_show(records: Path, isolated_settings: Path) -> None:
    assert run("cache", "path").stdout.strip() == str(isolated_settings / tk.PersistentCache.FILENAME)
    listing = run("cache", "list").stdout
    assert '{"n":1024}' in listing and '{"n":131072}' in listing and short_device_id(CLIENT.device_id) in listing
    for device in (CLIENT.device_id, short_device_id(CLIENT.device_id)):  # the short form a table shows selects too
        only = run("cache", "list", "--key", "n=1024", "--tuner", "cli_sum", "--device", device).stdout
        assert '{"n":1024}' in only and "131072" not in only
    shown = run("cache", "show", "cli_sum", "--key", "n=1024").stdout
    assert "RuntimeError: kernel exploded" in shown and "winner" in shown and "ranking:" in shown


@tk.autotune_key
class ScaledKey:
    alpha: float
    flag: bool


def test_key_filters_match_numbers_as_numbers_and_bools_in_any_case(isolated_settings: Path) -> None:
    # Regression: compared as text, a float field stored as 2.0 did not match --key alpha=2, nor flag=True a true.
    tuner: tk.LocalTuner[ScaledKey, float] = tk.LocalTuner("cli_scaled")
    tunables = tk.TunableSet(key=lambda a, f: ScaledKey(alpha=a, flag=f)).with_tunable(
        tk.Tunable("mul", lambda a, f: a * 2)
    )
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (2, True))
    for given in (("alpha=2",), ("alpha=2.0", "flag=True"), ("flag=true",)):
        listing = run("cache", "list", "--tuner", "cli_scaled", *(a for g in given for a in ("--key", g))).stdout
        assert '{"alpha":2.0,"flag":true}' in listing, given
    assert "no stored key matching" in run("cache", "show", "cli_scaled", "--key", "alpha=3", check=2).stderr
    assert "no stored key matching" in run("cache", "show", "cli_scaled", "--key", "flag=no", check=2).stderr


def test_unknown_tuner_is_one_line_and_exit_code_2(records: Path) -> None:
    for args in (
        ("cache", "list", "--tuner", "nope"),
        ("cache", "show", "nope"),
        ("cache", "clear", "--tuner", "nope"),
    ):
        done = run(*args, check=2)
        assert done.stderr.count("\n") == 1
        assert "no tuner named 'nope'" in done.stderr and "cli_sum" in done.stderr, done.stderr
    assert run("cache", "list", "--key", "n", check=2).stderr.startswith("tunekit: --key takes FIELD=VALUE")


def test_a_key_field_no_stored_key_has_is_a_usage_error(records: Path) -> None:
    # A misspelt --key field matched nothing: `cache list` printed an empty table with exit code 0.
    for args in (("cache", "list"), ("cache", "show", "cli_sum"), ("cache", "export")):
        done = run(*args, "--key", "size=1024", check=2)
        assert done.stderr == "tunekit: no stored key has a field named 'size' (key fields there: n)\n"
    assert "no stored key matching" in run("cache", "show", "cli_sum", "--key", "n=7", check=2).stderr


def test_a_key_value_that_matches_nothing_shows_the_stored_buckets(records: Path) -> None:
    # Regression: `--key n=1000` (the caller's size, not its anchored bucket 1024) said only "no stored key matching".
    hint = "(stored n: 1024, 131072; anchored fields hold the rounded-up bucket, e.g. 1024 for 1000)"
    assert hint in run("cache", "show", "cli_sum", "--key", "n=1000", check=2).stderr
    assert hint in run("cache", "list", "--key", "n=1000").stderr
    # A value that is no size is never anchored: no bucket advice for it.
    assert run("cache", "list", "--key", "n=big").stderr.endswith("(stored n: 1024, 131072)\n")


def test_listing_a_cleared_cache_says_it_holds_no_winners(records: Path, isolated_settings: Path) -> None:
    # Regression: after `cache clear`, `cache list` printed a bare table header.
    run("cache", "clear", "--yes")
    done = run("cache", "list")
    assert done.stdout == ""
    assert done.stderr == f"no stored winners in {isolated_settings / tk.PersistentCache.FILENAME}\n"


def test_cache_clear_help_offers_the_filters_it_takes(records: Path) -> None:
    helped = run("cache", "clear", "--help").stdout
    assert all(option in helped for option in ("--tuner", "--device", "--key", "--yes"))


def test_export_clear_import_round_trip(records: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    exported = json.loads(bundle.read_text())
    assert exported["schema_version"] == 1 and len(exported["entries"]) == 2
    assert "removed 2 stored winners" in run("cache", "clear", "--yes").stdout
    assert "cli_sum" not in run("cache", "list").stdout
    assert "imported 2 winners" in run("cache", "import", str(bundle)).stdout
    assert run("cache", "export").stdout.split('"entries"')[1] == bundle.read_text().split('"entries"')[1]
    assert "2 already stored, kept" in run("cache", "import", str(bundle), "--keep-existing").stdout


def test_an_import_says_what_it_changed(records: Path, tmp_path: Path) -> None:
    """Regression: a bundle imported twice said "imported 2 winners" both times, and one entry "1 winners"."""
    bundle, one = tmp_path / "winners.json", tmp_path / "one.json"
    run("cache", "export", "-o", str(bundle))
    assert "exported 1 winner to" in run("cache", "export", "--key", "n=1024", "-o", str(one)).stderr
    again = run("cache", "import", str(bundle)).stdout
    assert again.startswith("imported 0 winners into ") and again.endswith(" (2 already stored, unchanged)\n"), again
    changed = json.loads(one.read_text())
    value = changed["entries"][0]["value"]
    other = "np_sum" if value["winner"] == "einsum" else "einsum"  # the one that lost here
    value["winner"], value["ranking"] = other, [other, value["winner"]]
    one.write_text(json.dumps(changed))
    said = run("cache", "import", str(one)).stdout
    assert said.startswith("imported 1 winner into ") and said.endswith(" (1 replaced the winner stored for its key)\n")
    assert f" {other} " in run("cache", "list", "--key", "n=1024").stdout.splitlines()[-1]
    back = run("cache", "import", str(bundle)).stdout
    assert back.endswith(" (1 replaced the winner stored for its key; 1 already stored, unchanged)\n"), back


@pytest.mark.opencl  # the warning lists every device found here, PoCL's too
def test_an_import_for_a_device_not_found_here_warns_and_still_imports(records: Path, tmp_path: Path) -> None:
    """Regression: a bundle of another numpy's CPU winners (another device id) imported quietly, never served."""
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    assert "warning" not in run("cache", "import", str(bundle)).stderr  # this machine's own device: no word
    other = CLIENT.device_id.replace("numpy-", "numpy-0.")
    doc = json.loads(bundle.read_text())
    for entry in doc["entries"]:
        entry["device_id"] = other
    bundle.write_text(json.dumps(doc))
    done = run("cache", "import", str(bundle))
    assert done.stdout.startswith("imported 2 winners into ")
    assert f"warning: {bundle} holds winners for a device no backend finds on this machine:" in done.stderr
    assert f"  {other} (2 winners)" in done.stderr and f"  {CLIENT.device_id}\n" in done.stderr
    assert "export again on a machine whose device id is this one's" in done.stderr
    assert other in run("cache", "list", "--wide").stdout  # imported all the same: another machine may read it


def test_an_export_whose_filters_match_nothing_says_so(records: Path, tmp_path: Path) -> None:
    """Regression: `cache export --key n=1000` (the call's size; the key is stored as 1024) wrote an empty
    bundle, exit 0, without a word, where `cache list` with the same filter names the values stored."""
    bundle = tmp_path / "winners.json"
    done = run("cache", "export", "--key", "n=1000", "-o", str(bundle))
    assert "no stored winners matching the filters" in done.stderr and "stored n: 1024, 131072" in done.stderr
    assert "the bundle is empty" in done.stderr and json.loads(bundle.read_text())["entries"] == []
    assert "no stored winners" not in run("cache", "export", "--key", "n=1024", "-o", str(bundle)).stderr


def test_a_bundle_of_a_newer_tunekit_imports_with_its_new_fields(records: Path, tmp_path: Path) -> None:
    """Regression: a field added within schema_version 1 made `cache import` refuse the whole bundle."""
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    document = json.loads(bundle.read_text())
    document["exported_by"] = "ci"
    document["entries"][0]["measured_on"] = "gpu-7"
    document["entries"][0]["value"]["confidence"] = 0.97
    bundle.write_text(json.dumps(document))
    run("cache", "clear", "--yes")
    assert "imported 2 winners" in run("cache", "import", str(bundle)).stdout
    again = json.loads(run("cache", "export").stdout)
    assert again["entries"][0]["value"]["confidence"] == 0.97  # the row keeps what the newer version stored
    assert "2 rows checked, 0 problems" in run("cache", "verify").stdout


def test_a_bundle_of_another_schema_version_is_refused_as_another_tunekits(records: Path, tmp_path: Path) -> None:
    """It was "not a tunekit cache bundle: schema_version: Input should be 1; entries.0.value...", as if damaged."""
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    document = json.loads(bundle.read_text())
    document["schema_version"] = 7
    bundle.write_text(json.dumps(document))
    done = run("cache", "import", str(bundle), check=2)
    assert done.stderr.strip() == (
        f"tunekit: {bundle} is a cache bundle this tunekit cannot import: it was written by another tunekit version "
        f"(schema_version 7; tunekit {tk.__version__} reads 1); import it with that version"
    )


def test_import_refuses_a_malformed_bundle(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "entries": [{"tuner": "x"}]}))
    done = run("cache", "import", str(bad), check=2)
    assert "is not a tunekit cache bundle: entries.0" in done.stderr
    assert "cannot read" in run("cache", "import", str(tmp_path / "missing.json"), check=2).stderr
    # "{}" validated as an empty bundle: "imported 0 winners", exit 0.
    bad.write_text("{}")
    done = run("cache", "import", str(bad), check=2)
    assert "is not a tunekit cache bundle: it lacks entries, schema_version, tunekit_major" in done.stderr


def test_import_refuses_a_winner_outside_its_ranking_and_a_key_given_twice(records: Path, tmp_path: Path) -> None:
    """Regression: `cache import` stored both, exit 0: a row `cache verify` then flagged, and the last duplicate won."""
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    document = json.loads(bundle.read_text())
    run("cache", "clear", "--yes")
    unranked = json.loads(json.dumps(document))
    unranked["entries"][1]["value"]["winner"] = "renamed"
    bundle.write_text(json.dumps(unranked))
    done = run("cache", "import", str(bundle), check=2)
    assert "entries.1: Value error, winner 'renamed' is not in the ranking" in done.stderr
    twice = json.loads(json.dumps(document))
    twice["entries"].append(twice["entries"][0])
    bundle.write_text(json.dumps(twice))
    done = run("cache", "import", str(bundle), check=2)
    assert 'entries 0 and 2 are both cli_sum {"n":1024} on' in done.stderr and "keep one" in done.stderr
    assert "no stored winners" in run("cache", "list").stderr


def test_verify_reports_each_invalid_row(records: Path, isolated_settings: Path) -> None:
    assert "2 rows checked, 0 problems" in run("cache", "verify").stdout
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as connection:
        connection.execute("""UPDATE winners SET value='{"winner": 5}' WHERE key='{"n":1024}'""")
    done = run("cache", "verify", check=1)
    assert 'cli_sum/{"n":1024}' in done.stdout and "winner" in done.stdout
    assert "2 rows checked, 1 problem" in done.stdout


def test_export_leaves_out_a_row_that_is_no_valid_bundle_entry(records: Path, isolated_settings: Path) -> None:
    # A hand-edited key out of canonical form crashed `cache export` with a pydantic traceback.
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as connection:
        connection.execute("""UPDATE winners SET key='{"n": 1024}' WHERE key='{"n":1024}'""")
    done = run("cache", "export", check=1)
    assert [e["key"] for e in json.loads(done.stdout)["entries"]] == ['{"n":131072}']
    assert 'cli_sum/{"n": 1024}' in done.stderr and "canonical form" in done.stderr


def test_an_unreadable_row_is_named_with_why_and_exits_1_its_tuner_still_known(
    records: Path, isolated_settings: Path
) -> None:
    # Regression: `cache show cli_sum` said "no tuner named 'cli_sum' (tuners there: none: the cache is empty)"
    # with exit 2, `cache list` exited 0, and the reason was pydantic's "1 validation error for CacheValue".
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as connection:
        connection.execute('UPDATE winners SET value=\'{"schema_version": 1, "winner": 5}\'')
    reason = 'cli_sum/{"n":1024}: winner: Input should be a valid string; ranking: Field required'
    for args in (("cache", "list"), ("cache", "list", "--tuner", "cli_sum"), ("cache", "show", "cli_sum")):
        done = run(*args, check=1)
        assert f"unreadable row: {reason}" in done.stderr and "tunekit cache verify" in done.stderr, done.stderr
    assert f"skipped unreadable row: {reason}" in run("cache", "export", check=1).stderr
    assert "(tuners there: cli_sum)" in run("cache", "list", "--tuner", "nope", check=2).stderr


def test_records_summary_reports_a_corrupt_line_and_summarises_the_rest(records: Path) -> None:
    text = records.read_text()
    lines = text.splitlines()
    records.write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    done = run("records", "summary", str(records), check=1)
    assert f"{records}:2: not valid JSON" in done.stderr
    assert '{"n":1024}' in done.stdout and '{"n":131072}' in done.stdout
    assert "boom failed at run: RuntimeError: kernel exploded" in done.stdout
    summary = json.loads(run("records", "summary", "--json", str(records), check=1).stdout)
    assert (summary["records"], summary["bad_lines"]) == (2, 1)
    first = summary["keys"][0]
    assert first["winner"] in {"np_sum", "einsum"} and first["runner_up"] in {"np_sum", "einsum"}
    # Kept samples: each measured candidate's, and a runoff's when the rounds left two close (noise decides).
    tune = tk.AutotuneRecord.model_validate_json(lines[0])
    runoff = sum(len(r) for e in tune.events if isinstance(e, tk.Runoff) for r in e.rounds_ns)
    assert first["margin"] >= 0 and first["samples"] == sum(len(c.samples_ns) for c in tune.candidates) + runoff
    assert first["samples"] >= 2 * 3
    assert first["failures"][0]["reason"] == "RuntimeError: kernel exploded"


def test_a_tune_of_one_sample_costs_one_sample(tmp_path: Path) -> None:
    """Regression: a key whose only valid candidate was timed once cost "1 samples" in `records summary`."""
    records = tmp_path / "records.jsonl"
    tk.configure(record=str(records))
    tuner: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("cli_one")
    tunables = (
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[0]))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(keepdims=True)))
        .with_tunable(tk.Tunable("boom", _boom))
    )
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(8),))
    (line,) = tk.read_records(records)
    assert isinstance(line, tk.RecordLine)
    (measured,) = [c for c in line.record.candidates if c.status == "measured"]
    assert measured.stats is not None and measured.stats.count == 1  # the only one left: nothing to compare
    row = next(row for row in run("records", "summary", str(records)).stdout.splitlines() if "cli_one" in row)
    assert row.endswith(" s, 1 sample"), row


def _counted_samples(records: Path) -> tuple[tk.AutotuneRecord, dict[str, Any], str]:
    """The one record in ``records``, its key's entry in `records summary --json`, and its table row."""
    (line,) = tk.read_records(records)
    assert isinstance(line, tk.RecordLine)
    (key,) = json.loads(run("records", "summary", "--json", str(records)).stdout)["keys"]
    row = next(row for row in run("records", "summary", str(records)).stdout.splitlines() if line.record.tuner in row)
    return line.record, key, row


def test_the_decision_and_the_cost_count_the_same_samples(tmp_path: Path) -> None:
    """Regression: "interleaved rounds, 12 samples" beside a cost of 9 samples: each candidate's first,
    discarded sample was counted in the decision and not in the cost."""
    records = tmp_path / "records.jsonl"
    tk.configure(record=str(records), runoff_pairs=0)  # decided in the rounds
    tunables = (
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[0]))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(keepdims=True)))
        .with_tunable(tk.Tunable("einsum", lambda x: np.atleast_1d(np.einsum("i->", x))))
        .with_tunable(tk.Tunable("loop", lambda x: np.atleast_1d(sum(x[:64]))))
    )
    tk.LocalTuner[SumKey, np.ndarray]("cli_count").execute(CLIENT.device_id, CLIENT, tunables, (np.ones(4096),))
    record, key, row = _counted_samples(records)
    kept = sum(len(c.samples_ns) for c in record.candidates)
    assert sum(len(c.discarded_ns) for c in record.candidates) == 3  # timed, and no sample
    assert key["decision"]["stage"] == "rounds" and key["decision"]["samples"] == key["samples"] == kept
    assert f"interleaved rounds, {kept} samples" in row and row.endswith(f" s, {kept} samples"), row


def test_a_runoffs_samples_are_in_the_cost(tmp_path: Path) -> None:
    """A runoff decides by pairs (the decision counts those); the cost, as the verdict, counts each sample it took."""
    records = tmp_path / "records.jsonl"
    tk.configure(record=str(records), samples=10, warmup=1)
    client = SimulatedClient(NoiseModel(noise=0.05, cold_factor=3.0), seed=5)
    kernels = [client.kernel(t * 1e6) for t in (1.0, 1.005, 3.0)]
    tunables = tk.TunableSet(key=lambda n: SumKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", k) for i, k in enumerate(kernels)]
    )
    tk.LocalTuner[SumKey, None]("cli_runoff").execute(client.device_id, client, tunables, (8,))
    record, key, row = _counted_samples(records)
    (runoff,) = [e for e in record.events if isinstance(e, tk.Runoff)]
    (verdict,) = [e for e in record.events if isinstance(e, tk.Verdict)]
    pairs = verdict.pairs  # the runoff's and the earlier rounds' pairs behind the margin
    assert key["decision"]["stage"] == "runoff" and key["decision"]["samples"] == pairs
    taken = sum(len(r) for r in runoff.rounds_ns)
    assert key["samples"] == verdict.samples == sum(len(c.samples_ns) for c in record.candidates) + taken
    assert f"paired runoff, {pairs} pairs" in row and row.endswith(f" s, {key['samples']} samples"), row


def test_a_key_taken_with_autotuning_off_says_so_in_the_summary(tmp_path: Path) -> None:
    """Regression: with TUNEKIT_AUTOTUNE=0 the summary row read "np_sum -  -  -  -  0 s, 0 samples"."""
    records = tmp_path / "records.jsonl"
    tk.configure(record=str(records), autotune=False)
    tunables = tk.TunableSet(key=lambda x: SumKey(n=x.shape[0])).with_tunable(
        tk.Tunable("np_sum", lambda x: x.sum(keepdims=True))
    )
    tk.LocalTuner[SumKey, np.ndarray]("cli_off").execute(CLIENT.device_id, CLIENT, tunables, (np.ones(8),))
    row = next(row for row in run("records", "summary", str(records)).stdout.splitlines() if "cli_off" in row)
    assert row.split()[2:4] == ["np_sum", "-"] and "autotuning off: taken unmeasured" in row, row


def test_missing_records_file_is_one_line(tmp_path: Path) -> None:
    for command in ("summary", "tail"):
        done = run("records", command, str(tmp_path / "nope.jsonl"), check=2)
        assert done.stderr == f"tunekit: no records file at {tmp_path / 'nope.jsonl'}: " + (
            "records are written where TUNEKIT_RECORD points, once a tune decides something "
            "(a run served from the cache writes none; TUNEKIT_COUNT_HITS=1 counts its hits)\n"
        )
    # docs/observability.md: a warm run may leave no file, and `tunekit records`/`report` say why.
    assert "a run served from the cache writes none" in run("report", str(tmp_path / "nope.jsonl"), check=2).stderr


# How long a started `tunekit` may take to answer before the test calls it hung: a ceiling, not a speed
# (each wait ends as soon as the line or the exit arrives); a loaded 2-core machine can take many seconds.
HUNG_S = 300


def _next_line(stream: IO[str]) -> str:
    """The next line ``stream`` gives, failing the test if none comes within ``HUNG_S``."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=HUNG_S)
    except queue.Empty:
        pytest.fail(f"`tunekit records tail` printed no line within {HUNG_S} s")


@pytest.mark.slow
@pytest.mark.subprocess
def test_records_tail_follows_appended_records(records: Path) -> None:
    process = subprocess.Popen(
        [*COMMAND, "records", "tail", str(records), "-n", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = _next_line(process.stdout)
        assert "cli_sum" in first and '{"n":131072}' in first
        line = json.loads(records.read_text().splitlines()[0])
        line["tuner"] = "appended_later"
        with records.open("a") as file:  # half a line, then the rest: tail must wait for the newline
            text = json.dumps(line) + "\n"
            file.write(text[:50])
            file.flush()
            time.sleep(0.5)
            file.write(text[50:])
        assert "appended_later" in _next_line(process.stdout)
        # Log rotation: a new file, shorter than the lines tail has shown, moved into place. Its first
        # lines were skipped as already shown (regression).
        line["tuner"] = "after_rotation"
        rotated = records.with_name("rotated.jsonl")
        rotated.write_text(json.dumps(line) + "\n")
        rotated.replace(records)
        assert "after_rotation" in _next_line(process.stdout)
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            _, said = process.communicate(timeout=HUNG_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    assert process.returncode == 130
    assert "Traceback" not in said


def test_records_tail_refuses_a_negative_count(records: Path) -> None:
    # Regression: `-n -3` was taken as 0, showed nothing and followed the file, as if it were empty.
    done = run("records", "tail", str(records), "-n", "-3", check=2)
    assert "argument -n/--lines: expected a whole number >= 0, got '-3'" in done.stderr


def test_schema_is_the_record_schema() -> None:
    assert json.loads(run("schema").stdout) == tk.AutotuneRecord.model_json_schema()


def test_report_writes_html(records: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert str(out) in run("report", str(records), "-o", str(out)).stdout
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "cli_sum" in html and "<svg" in html


def test_report_names_each_bad_line_and_exits_1(records: Path, tmp_path: Path) -> None:
    """Regression: bad lines were named on stderr, yet `tunekit report` exited 0, not 1 as docs/cli.md says."""
    lines = records.read_text().splitlines()
    records.write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    out = tmp_path / "report.html"
    done = run("report", str(records), "-o", str(out), check=1)
    assert f"{records}:2: not valid JSON" in done.stderr
    assert f"report of 2 records written to {out}, 1 bad line skipped" in done.stdout
    assert "cli_sum" in out.read_text()  # the valid records are still reported


_QUANTITY = re.compile(r"[\d.]+|[kMGT]?(op|B)/s|[nµum]?s")


def _parts(text: str) -> list[str]:
    """The words of ``text``, each broken after its commas, colons and equals signs: where a table may break it."""
    return [part for word in text.split() for part in re.split(r"(?<=[,:=])", word) if part]


@pytest.mark.slow
@pytest.mark.opencl
def test_devices_lists_the_cpu_client() -> None:
    # PoCL, from the opencl extra the tests run with; each row says how to select its device (it did not).
    pocl = OpenCLClient(flush_cache=False, platform=0, device=0, compile_in="thread").device_id
    rows = {line.split("  ")[0]: line for line in run("devices", "--no-peaks", "--wide").stdout.splitlines()}
    assert CLIENT.device_id in rows["cpu"] and pocl in rows["opencl (platform=0, device=0)"]
    listed = json.loads(run("devices", "--json").stdout)["devices"]
    cpu = next(d for d in listed if d["backend"] == "cpu")
    assert cpu["ops_per_s"] > 0 and cpu["bytes_per_s"] > 0 and cpu["launch_overhead_ns"] > 0
    # Only a device that started has peaks: one that could not (pip's PoCL 3.0-rc2 beside Debian's on
    # an AMD CPU: "unknown target CPU 'generic'") is a line under the table saying why, not a row.
    available = [d for d in listed if d["unavailable"] is None]
    # At 80 columns a peak keeps its unit on its line, as memory and launch do (compute folded `282 / Gop/s`).
    narrow = run("devices", env={"COLUMNS": "80"}).stdout
    assert len(re.findall(r"\d op/s|\d [kMGT]op/s", narrow)) == len(available), narrow
    # Regression: at 80 columns the backend cell folded to `(platfo` `rm=0,` `device=` and the locator to
    # `opencl:` `platfor` `m=0,dev` `ice=0`. A cell breaks at spaces, commas, `:` and `=` only, so each
    # part of the table is a part of what it lists: a header, a backend, a device id, a locator, a peak.
    lines = narrow.splitlines()
    table = lines[: next((i for i, line in enumerate(lines) if ": unavailable: " in line), len(lines))]
    listed_text = " ".join(f"{d['backend']} {d['device_short']} {d['locator'] or ''}" for d in available)
    whole = {*_parts(listed_text), *_parts("backend device locator or compute memory launch -")}
    split = [p for line in table for p in _parts(line) if p not in whole and not _QUANTITY.fullmatch(p)]
    assert not split, narrow
    unwrapped = " ".join(narrow.split())
    for broken in (d for d in listed if d["unavailable"] is not None):
        assert f"{broken['backend']}: unavailable: {' '.join(broken['unavailable'].split())}" in unwrapped, narrow


@pytest.mark.opencl
def test_devices_shows_each_opencl_devices_locator() -> None:
    listed = json.loads(run("devices", "--no-peaks", "--json").stdout)["devices"]
    pocl = next(d for d in listed if d["backend"] == "opencl (platform=0, device=0)")
    assert pocl["locator"] == "opencl:platform=0,device=0"
    # The listed string is what OpenCLClient(locator=) takes back: it opens the very device listed.
    assert OpenCLClient(flush_cache=False, locator=pocl["locator"], compile_in="thread").device_id == pocl["device_id"]
    assert next(d for d in listed if d["backend"] == "cpu")["locator"] is None  # CpuClient has none
    table = run("devices", "--no-peaks").stdout
    assert f"{pocl['device_short']}  opencl:platform=0,device=0" in table


def test_usage_errors_exit_2_without_traceback() -> None:
    assert "invalid choice: 'frobnicate'" in run("frobnicate", check=2).stderr
    assert run(check=2).stdout.startswith("usage: tunekit")
    done = run("cache", "list", check=2, env={"TUNEKIT_SAMPLES": "many"})
    assert done.stderr.startswith("tunekit: invalid tunekit settings: samples = 'many' from TUNEKIT_SAMPLES")
    assert run("--version").stdout.startswith("tunekit ")


def test_a_bad_argument_is_one_line_starting_with_tunekit() -> None:
    # Regression: argparse printed its usage, then "tunekit records tail: error: ...", not the documented one line.
    # An unknown option was told from the top level, pointing at `tunekit --help`, which does not list it.
    for args, told, helped in (
        (("cache", "list", "--bogus"), "tunekit: cache list: unrecognized arguments: --bogus", "cache list"),
        (("records", "tail", "f", "-n", "x"), "tunekit: records tail: argument -n/--lines: expected a", "records tail"),
        (("cache", "frob"), "tunekit: cache: argument ACTION: invalid choice: 'frob'", "cache"),
    ):
        done = run(*args, check=2)
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(told), done.stderr
        assert f"(`tunekit {helped} --help` lists the arguments)" in done.stderr


def test_a_bad_cache_dir_option_is_named_as_the_option(tmp_path: Path) -> None:
    """`tunekit --cache-dir FILE` said the value came "from tk.configure(cache_dir=...)", a call the user never made."""
    afile = tmp_path / "winners.json"
    afile.write_text("{}")
    done = run("--cache-dir", str(afile), "cache", "list", check=2)
    assert done.stderr.startswith(f"tunekit: invalid tunekit settings: cache_dir = '{afile}' from --cache-dir: ")
    assert "tk.configure" not in done.stderr


def test_reading_commands_never_create_a_cache(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    env = {"TUNEKIT_CACHE_DIR": str(empty)}
    assert "no tuning cache at" in run("cache", "list", env=env).stderr
    assert "nothing to verify" in run("cache", "verify", env=env).stdout
    assert "nothing to export" in run("cache", "export", env=env, check=2).stderr
    assert not empty.exists()


def test_cache_dir_may_follow_the_cache_action(records: Path, tmp_path: Path) -> None:
    """Regression: `tunekit cache list --cache-dir B`, where an operator types it, was "unrecognized arguments:
    --cache-dir B (`tunekit cache list --help` lists the arguments)", and that help did not list it."""
    other = tmp_path / "other"
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    assert "imported 2 winners" in run("cache", "import", str(bundle), "--cache-dir", str(other)).stdout
    assert run("cache", "path", "--cache-dir", str(other)).stdout.strip() == str(other / tk.PersistentCache.FILENAME)
    assert "cli_sum" in run("cache", "list", "--cache-dir", str(other)).stdout
    assert "--cache-dir" in run("cache", "list", "--help").stdout
    # Given both ways, the action's own is the one used; given before only, it is not overwritten.
    both = run("--cache-dir", str(tmp_path / "nowhere"), "cache", "path", "--cache-dir", str(other)).stdout
    assert both.strip() == str(other / tk.PersistentCache.FILENAME)
    before = run("--cache-dir", str(other), "cache", "path").stdout
    assert before.strip() == str(other / tk.PersistentCache.FILENAME)


def test_a_kernel_tuner_cache_given_as_records_bundle_or_record_is_named(tmp_path: Path) -> None:
    """A Kernel Tuner cache (which tunekit replays) given to `records summary` was listed as one "not valid JSON"
    line per line, and to `cache import` as a bundle lacking entries: it is named, with what reads it."""
    told = "is a Kernel Tuner cache file; replay it as a device with tunekit_backends.replay.load_kernel_tuner_cache"
    whole = write_cache(tmp_path / "whole.json.gz")
    document = json.loads(write_cache(tmp_path / "whole.json").read_text())
    entries = document.pop("cache")
    running = tmp_path / "running.json"  # as Kernel Tuner leaves it mid-run: JSON left open, one entry a line
    running.write_text(
        json.dumps({**document, "cache": {}}, indent="")[:-3]
        + "".join("\n" + json.dumps({k: v})[1:-1] + "," for k, v in entries.items())
    )
    for path in (whole, tmp_path / "whole.json", running):
        for args in (("records", "summary", str(path)), ("report", str(path)), ("cache", "import", str(path))):
            done = run(*args, check=2)
            assert done.stderr.count("\n") == 1 and told in done.stderr, (args, done.stderr)
        with pytest.raises(tk.RecordMismatch, match="is a Kernel Tuner cache file"):
            tk.Record.load(path)


def test_cache_clear_of_a_tuner_with_only_failed_tunes_forgets_them(isolated_settings: Path) -> None:
    """Regression: `cache clear --tuner T` said no tuner T existed when T had only recorded failed tunes."""
    tunables = tk.TunableSet(key=lambda x: SumKey(n=x.shape[0])).with_tunable(tk.Tunable("boom", _boom))
    with pytest.raises(tk.NoValidKernelFound):
        tk.LocalTuner[SumKey, np.ndarray]("cli_doomed").execute(CLIENT.device_id, CLIENT, tunables, (np.ones(8),))
    cache = tk.PersistentCache(isolated_settings)
    assert [f[1] for f in cache.failed_keys()] == ["cli_doomed"]
    done = run("cache", "clear", "--yes", "--tuner", "cli_doomed", "--device", CLIENT.device_id)
    assert "removed 0 stored winners and 1 recorded failed tune of tuner 'cli_doomed'" in done.stdout
    assert cache.failed_keys() == []
    assert "no tuner named 'cli_doomed'" in run("cache", "clear", "--tuner", "cli_doomed", check=2).stderr


def test_list_and_show_of_a_tuner_with_only_failed_tunes_say_so_and_how_to_forget_them(isolated_settings: Path) -> None:
    """Regression: `cache show T` of a tuner whose key had failed to tune said "no tuner named T ... (tuners there:
    none: the cache is empty)", and `cache list` "no stored winners", while `cache clear --tuner T` removed its
    recorded failed tune: the one thing that makes other processes repeat the failure for failed_tune_retry_s."""
    doomed = tk.TunableSet(key=lambda x: SumKey(n=x.shape[0])).with_tunable(tk.Tunable("boom", _boom))
    with pytest.raises(tk.NoValidKernelFound):
        tk.LocalTuner[SumKey, np.ndarray]("cli_doomed").execute(CLIENT.device_id, CLIENT, doomed, (np.ones(8),))
    told = '1 recorded failed tune (cli_doomed {"n":8}): no candidate was valid for that key'
    shown = run("cache", "show", "cli_doomed", check=2)
    assert shown.stderr.startswith("tunekit: tuner 'cli_doomed' has no stored key; " + told), shown.stderr
    assert "`tunekit cache clear --tuner cli_doomed` forgets it" in shown.stderr
    listed = run("cache", "list", "--tuner", "cli_doomed", "--key", "n=8").stderr
    assert told in listed and "`tunekit cache clear --tuner cli_doomed --key n=8` forgets it" in listed, listed
    run("cache", "clear", "--tuner", "cli_doomed", "--key", "n=8", "--yes")
    assert "no tuner named 'cli_doomed'" in run("cache", "show", "cli_doomed", check=2).stderr


def test_a_trial_log_or_committed_record_given_as_records_or_bundle_is_named(tmp_path: Path) -> None:
    """records summary of a trial log printed one "not a valid AutotuneRecord" per line (121 for a 120-trial log) and
    `cache import` of a committed record listed its fields as wrong: they are other tunekit files, said in one line."""
    space = tk.Space(A=[1, 2, 3])
    tunables = tk.TunableSet.from_space(space, lambda c: lambda x: x, key=lambda x: SumKey(n=x.shape[0]))
    log = tmp_path / "trials.jsonl"
    result = tk.search(space, lambda c: lambda x: x, CLIENT, (np.ones(4),), tuner="t", log=log)
    record = tk.Record.for_tunables("t", CLIENT.device_id, tunables)
    record.add(SumKey(n=4), result)
    record.save(tmp_path / "t.json")
    for command in ("summary", "tail"):
        done = run("records", command, str(log), check=2)
        assert done.stderr == f"tunekit: {log} is a trial log (written by tk.search(log=...)); " + (
            "a search's record goes where TUNEKIT_RECORD or sinks= send records, not a records file\n"
        )
    assert (
        "is a committed record (tk.Record.save)" in run("records", "summary", str(tmp_path / "t.json"), check=2).stderr
    )
    assert "is a trial log" in run("report", str(log), check=2).stderr
    done = run("cache", "import", str(tmp_path / "t.json"), check=2)
    assert done.stderr.count("\n") == 1
    assert "is a committed record (tk.Record.save); production loads it with tk.Record.load_verified" in done.stderr


def test_records_summary_lists_skipped_candidates_apart_from_the_failures(tmp_path: Path) -> None:
    """Regression: a candidate skipped by design (not for this key) was listed under "failures:" as if it had failed."""
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    only_small = tk.TuneGroup("only_small", lambda key: 0)
    tunables = (
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[0]))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(keepdims=True)))
        .with_tunable(tk.Tunable("boom", _boom))
        .with_tunable(tk.Tunable("small", lambda x: x.sum(keepdims=True)).group(only_small, lambda k: -1))
    )
    tuner: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("cli_skip")
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(64),))
    out = run("records", "summary", str(path)).stdout
    failures, skipped = out.split("\nfailures:\n")[1].split("\nskipped (not measured, by design):\n")
    assert failures.strip() == 'cli_skip {"n":64}: boom failed at run: RuntimeError: kernel exploded'
    assert skipped.strip() == 'cli_skip {"n":64}: small: negative priority for this key'
    (summary,) = json.loads(run("records", "summary", "--json", str(path)).stdout)["keys"]
    assert [f["name"] for f in summary["failures"]] == ["boom"]
    assert summary["skipped"] == [{"name": "small", "reason": "negative priority for this key"}]


def test_records_summary_shows_the_search_that_chose_a_winner(tmp_path: Path) -> None:
    """Regression: the summary of a searched key said nothing of its strategy or of what ended the search."""
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    space = tk.Space(SCALE=[1, 2, 3, 4, 5, 6])

    def build(config: tk.Config) -> object:
        return lambda x: x * config.SCALE

    x = np.ones(1000)
    tk.search(space, build, CLIENT, (x,), tuner="cli_searched", key=SumKey(n=1000), strategy="random", max_evals=4)
    tk.search(space, build, CLIENT, (x,), tuner="cli_searched", key=SumKey(n=10), strategy="random", max_evals=9)
    tuner: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("cli_plain")
    plain = tk.TunableSet(key=lambda x: SumKey(n=x.shape[0])).with_tunable(tk.Tunable("np_sum", lambda x: x.sum()))
    tuner.execute(CLIENT.device_id, CLIENT, plain, (x,))
    out = run("records", "summary", str(path)).stdout
    header, *rows = out.split("\n\n")[1].splitlines()[1:]  # the device's table, not the notes under it
    start = header.index("search")
    search = {tuple(row.split()[:2]): row[start:].strip() for row in rows}
    assert search == {
        ("cli_plain", '{"n":1024}'): "-",
        ("cli_searched", '{"n":1024}'): "random, 4 evaluated, stopped by max_evals",
        ("cli_searched", '{"n":16}'): "random, 6 evaluated, stopped by exhausted",
    }
    summaries = {
        (s["tuner"], s["key"]["n"]): s
        for s in json.loads(run("records", "summary", "--json", str(path)).stdout)["keys"]
    }
    searched = summaries[("cli_searched", 1024)]
    assert (searched["strategy"], searched["evaluations"], searched["stopped_by"]) == ("random", 4, "max_evals")
    assert summaries[("cli_searched", 16)]["stopped_by"] == "exhausted"
    assert (summaries[("cli_plain", 1024)]["strategy"], summaries[("cli_plain", 1024)]["stopped_by"]) == (None, None)


def test_verify_a_relative_cache_dir(records: Path, isolated_settings: Path) -> None:
    """Regression: `cache verify` with a relative TUNEKIT_CACHE_DIR crashed: relative path can't be a file URI."""
    relative = os.path.relpath(isolated_settings, records.parent)
    done = run("cache", "verify", cwd=records.parent, env={"TUNEKIT_CACHE_DIR": relative})
    assert "2 rows checked, 0 problems" in done.stdout, done.stdout


def test_reexport_of_an_unchanged_cache_is_identical(records: Path, isolated_settings: Path, tmp_path: Path) -> None:
    """Regression: every export wrote a new exported_at, so a committed bundle re-exported unchanged diffed."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    run("cache", "export", "-o", str(first))
    time.sleep(0.01)
    run("cache", "export", "-o", str(second))
    assert first.read_bytes() == second.read_bytes()
    older = json.loads(first.read_text())
    older["exported_at"] = "2026-01-01T00:00:00Z"  # a bundle an earlier tunekit exported still imports
    first.write_text(json.dumps(older))
    run("cache", "clear", "--yes")
    assert "imported 2 winners" in run("cache", "import", str(first)).stdout


# Real processes, on purpose: what only the installed command shows.


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_installed_command_runs_and_exits_with_its_codes(records: Path, isolated_settings: Path) -> None:
    """The entry point pip installs: 0 when done, 2 for a usage mistake, 1 for a data problem; never a traceback."""

    def real(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*COMMAND, *args], check=False, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    version = real("--version")
    assert version.returncode == 0 and version.stdout.startswith("tunekit "), version
    usage = real("frobnicate")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and "invalid choice: 'frobnicate'" in usage.stderr
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as connection:
        connection.execute("""UPDATE winners SET value='{"winner": 5}' WHERE key='{"n":1024}'""")
    problem = real("cache", "verify")
    assert problem.returncode == 1 and "2 rows checked, 1 problem" in problem.stdout, problem


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_pipe_closed_by_head_ends_the_command_quietly(records: Path, tmp_path: Path) -> None:
    """`tunekit records tail FILE | head -n 1`: the command stops when head does, exit 0, nothing on stderr."""
    many = tmp_path / "many.jsonl"
    many.write_text(records.read_text() * 2000)  # far more than a pipe holds: the command writes after head is gone
    piped = 'set -o pipefail; "$@" | head -n 1'
    done = subprocess.run(
        ["bash", "-c", piped, "bash", *COMMAND, "records", "tail", str(many), "-n", "4000"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.count("\n") == 1 and "cli_sum" in done.stdout
    assert done.stderr == ""


def test_records_summary_of_a_tune_without_a_winner_says_so_in_the_winner_column(tmp_path: Path) -> None:
    """Regression: a key whose every candidate failed showed "- -" as its winner (a name and a time, both missing)."""
    records = tmp_path / "doomed.jsonl"
    tk.configure(record=str(records))
    tunables = tk.TunableSet(key=lambda x: SumKey(n=x.shape[0])).with_tunable(tk.Tunable("boom", _boom))
    with pytest.raises(tk.NoValidKernelFound):
        tk.LocalTuner[SumKey, np.ndarray]("cli_no_winner").execute(CLIENT.device_id, CLIENT, tunables, (np.ones(8),))
    tk.configure()
    row = next(line for line in run("records", "summary", str(records)).stdout.splitlines() if "cli_no_winner" in line)
    assert re.split(r"\s{2,}", row.strip())[:3] == ["cli_no_winner", '{"n":8}', "no valid candidate"], row


@pytest.mark.subprocess
def test_devices_without_pyopencl_names_the_extra_that_brings_it(tmp_path: Path) -> None:
    """A plain `pip install tunekit` has no pyopencl: the listing says how to get OpenCL devices, and exits 0."""
    (tmp_path / "pyopencl.py").write_text("raise ImportError(\"No module named 'pyopencl'\")\n")  # as if not installed
    ran = subprocess.run(
        [sys.executable, "-m", "tunekit", "devices", "--no-peaks"],
        env={**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "200"},  # one line, whatever the terminal
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "cpu:" in ran.stdout
    assert "opencl: unavailable: the OpenCL backend needs pyopencl" in ran.stdout
    assert "pip install 'tunekit[opencl]'" in ran.stdout
