"""`tunekit records` given a file that is no records file says so in one line; bad lines are capped."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from _command import run

import tunekit as tk
from tunekit._cli.records import BAD_LINES_SHOWN
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: int


def _records(path: Path) -> None:
    tk.configure(record=str(path), samples=3)
    tunables = tk.TunableSet(key=lambda x: NKey(n=len(x))).with_tunable(tk.Tunable("np_sum", np.sum))
    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("not_records")
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(64, np.float32),))
    tk.configure()


def test_the_sqlite_cache_given_as_records_is_named_in_one_line(tmp_path: Path, isolated_settings: Path) -> None:
    """Regression: `tunekit records summary` on the SQLite cache printed 31 "not valid JSON" lines."""
    _records(tmp_path / "records.jsonl")
    cache = isolated_settings / tk.PersistentCache.FILENAME
    assert cache.read_bytes().startswith(b"SQLite format 3\x00")
    for args in (("records", "summary", str(cache)), ("records", "tail", str(cache)), ("report", str(cache))):
        done = run(*args, check=2)
        assert done.stderr.count("\n") == 1, (args, done.stderr)
        assert f"{cache} is a SQLite database" in done.stderr and "tunekit cache list" in done.stderr, done.stderr


def test_a_binary_file_given_as_records_is_named_in_one_line(tmp_path: Path) -> None:
    """Regression: a 5 MB random file printed 19,428 lines."""
    noise = tmp_path / "noise.bin"
    noise.write_bytes(random.Random(5).randbytes(5_000_000))
    done = run("records", "summary", str(noise), check=2)
    assert (
        done.stderr == f"tunekit: {noise} is binary data (not text), not a records file (JSONL of tk.AutotuneRecord)\n"
    )


def test_bad_lines_are_capped_with_a_count(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    _records(path)
    good = path.read_text()
    path.write_text(good + "".join(f"{{not json {i}\n" for i in range(500)))
    done = run("records", "summary", str(path), check=1)
    errors = done.stderr.splitlines()
    assert len(errors) == BAD_LINES_SHOWN + 1, errors
    assert errors[-1] == f"{path}: ... and {500 - BAD_LINES_SHOWN} more bad lines (500 in all)"
    assert "1 record, 1 key, 500 bad lines skipped" in done.stdout


def test_a_file_of_hit_summaries_alone_says_so_with_their_totals(tmp_path: Path) -> None:
    """Regression: a warm run's hits alone (TUNEKIT_COUNT_HITS=1) summarised as "0 records, 0 keys", nothing more."""
    _records(tmp_path / "cold.jsonl")  # tuned and cached: the warm run below only hits
    hits = tmp_path / "hits.jsonl"
    tk.configure(record=str(hits), count_hits=True)
    tunables = tk.TunableSet(key=lambda x: NKey(n=len(x))).with_tunable(tk.Tunable("np_sum", np.sum))
    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("not_records")
    for _ in range(5):  # the first read from the cache file, then four from memory
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(64, np.float32),))
    tk.flush_hit_counts()
    tk.configure()
    counts = [c for summary in tk.read_hit_summaries(hits) for c in summary.counts]
    memory = sum(c.hits for c in counts if c.source == "memory")
    persistent = sum(c.hits for c in counts if c.source == "persistent")
    total = memory + persistent
    assert list(tk.read_records(hits)) == [] and (memory, persistent) == (4, 1), counts
    out = run("records", "summary", str(hits)).stdout
    assert out.startswith(f"{hits}: 0 records, 0 keys; 1 hit summary, {total} cache hits\n"), out
    assert "tk.read_hit_summaries" in out
    (row,) = [line for line in out.splitlines() if line.startswith("not_records")]
    assert row.split() == ["not_records", '{"n":64}', str(memory), str(persistent)], out
    document = json.loads(run("records", "summary", str(hits), "--json").stdout)
    assert (document["records"], document["hit_summaries"], document["cache_hits"]) == (0, 1, total)


def test_a_hit_summary_line_of_another_shape_is_a_named_bad_line(tmp_path: Path) -> None:
    """Regression: a whole JSON line that starts as a hit summary but is none was skipped without a word."""
    path = tmp_path / "records.jsonl"
    _records(path)
    good = path.read_text()
    path.write_text(good + '{"kind":"hit_summary","counts":"many"}\n')
    done = run("records", "summary", str(path), check=1)
    assert done.stderr.startswith(f"{path}:2: not a valid hit summary: "), done.stderr
    assert "1 record, 1 key, 1 bad line skipped\n" in done.stdout, done.stdout
    document = json.loads(run("records", "summary", str(path), "--json", check=1).stdout)
    assert (document["records"], document["bad_lines"], document["hit_summaries"]) == (1, 1, 0)


def test_a_text_file_of_no_json_given_as_records_is_named_in_one_line(tmp_path: Path) -> None:
    """Regression: a script or a log given as the records file printed 20 "not valid JSON" lines, then a count."""
    script = tmp_path / "tune_saxpy.py"
    script.write_text("".join(f"print({i})  # not a record\n" for i in range(40)))
    for args in (("records", "summary", str(script)), ("records", "tail", str(script)), ("report", str(script))):
        done = run(*args, check=2)
        assert done.stderr == (
            f"tunekit: {script} is not a records file: none of its 40 lines is JSON (a records file holds one JSON "
            "record per line, written where TUNEKIT_RECORD or tk.configure(record=...) points)\n"
        ), (args, done.stderr)


def test_a_records_file_whose_only_line_is_torn_is_still_read_as_records(tmp_path: Path) -> None:
    """The first record of a running tune, half-written, is one bad line of a records file, not another file."""
    path = tmp_path / "records.jsonl"
    _records(path)
    path.write_text(path.read_text()[:100])
    done = run("records", "summary", str(path), check=1)
    assert f"{path}:1: last line is cut short" in done.stderr and "0 records, 0 keys, 1 bad line skipped" in done.stdout
