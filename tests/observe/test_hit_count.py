"""Cache hits you can count (``count_hits``): one summary record per interval, an OTel counter, nothing when off."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tunekit as tk
from tunekit._observe.hit_count import current_counter, hit_counter, read_hit_summaries, stop_hit_counter
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class SizeKey:
    n: Annotated[int, tk.Anchor()]
    dtype: np.dtype


def _first(x: np.ndarray) -> np.ndarray:
    return x


def _second(x: np.ndarray) -> np.ndarray:
    return x


def _set() -> tk.TunableSet[SizeKey, np.ndarray]:
    return tk.TunableSet(key=lambda x: SizeKey(n=x.size, dtype=x.dtype)).with_tunables(
        [tk.Tunable("first", _first), tk.Tunable("second", _second)]
    )


@pytest.fixture(autouse=True)
def no_counter_left() -> Iterator[None]:
    stop_hit_counter()
    yield
    stop_hit_counter()


def _calls(tuner: tk.LocalTuner[SizeKey, np.ndarray], *arrays: np.ndarray) -> None:
    tunables = tuner.init(_set)
    for x in arrays:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (x,))


def test_hits_are_counted_per_key_bucket_and_written_as_one_summary_record(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    tk.configure(count_hits=True, record=str(records), cache=False)
    tuner = tk.LocalTuner[SizeKey, np.ndarray]("hits_counted")
    small, large = np.zeros(1000, np.float32), np.zeros(5000, np.float64)
    _calls(tuner, *[small] * 30, *[large] * 5)  # each key tuned once, then served from memory

    summary = stop_hit_counter()
    assert summary is not None
    counts = {(c.tuner, json.dumps(c.key, sort_keys=True), c.source): c.hits for c in summary.counts}
    assert counts == {
        ("hits_counted", '{"dtype": "float32", "n": 1024}', "memory"): 29,
        ("hits_counted", '{"dtype": "float64", "n": 8192}', "memory"): 4,
    }
    assert all(c.device_id == CLIENT.device_id for c in summary.counts)
    # One summary line for the 33 hits, beside the two tune records, which the records reader still reads alone.
    (written,) = read_hit_summaries(records)
    assert written == summary and written.total == 33
    assert len(records.read_text().splitlines()) == 3
    tunes = list(tk.read_records(records))
    assert [type(line).__name__ for line in tunes] == ["RecordLine", "RecordLine"]


def test_a_summary_holds_only_the_hits_since_the_last_and_none_is_written_without_hits(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    tk.configure(count_hits=True, record=str(records), cache=False)
    tuner = tk.LocalTuner[SizeKey, np.ndarray]("hits_interval")
    x = np.zeros(100, np.float32)
    _calls(tuner, x, x, x)
    counter = hit_counter()
    assert counter is not None
    first = counter.flush()
    assert first is not None and first.total == 2
    assert counter.flush() is None  # no hit since: no line
    _calls(tuner, x)
    second = counter.flush()
    assert second is not None and second.total == 1 and second.start >= first.end
    assert [s.total for s in read_hit_summaries(records)] == [2, 1]


def test_a_winner_read_from_the_persistent_cache_counts_as_a_persistent_hit(tmp_path: Path) -> None:
    tk.configure(count_hits=True, record=str(tmp_path / "records.jsonl"))
    x = np.zeros(100, np.float32)
    _calls(tk.LocalTuner[SizeKey, np.ndarray]("hits_persistent"), x)
    # Another process's tuner, as it were: nothing in its memory, the winner on disk.
    _calls(tk.LocalTuner[SizeKey, np.ndarray]("hits_persistent"), x, x)
    summary = stop_hit_counter()
    assert summary is not None
    assert {c.source: c.hits for c in summary.counts} == {"persistent": 1, "memory": 1}


def test_off_the_hit_path_reads_the_tuners_own_winners_and_nothing_is_counted_or_written(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    tk.configure(record=str(records), cache=False)
    assert tk.settings().count_hits is False  # the default
    tuner = tk.LocalTuner[SizeKey, np.ndarray]("hits_off")
    x = np.zeros(100, np.float32)
    _calls(tuner, x, x, x)
    # The very dicts the tuner keeps: no counting view, so a hit costs what it cost before.
    assert tuner._hot[CLIENT.device_id] is tuner.tuner(CLIENT.device_id).tune_cache.hot
    assert current_counter() is None and hit_counter() is None
    assert list(read_hit_summaries(records)) == []
    assert len(records.read_text().splitlines()) == 1  # the tune's record alone


def test_the_hits_are_an_opentelemetry_counter(tmp_path: Path) -> None:
    metrics = InMemoryMetricReader()
    observer = tk.instrument_opentelemetry(meter_provider=MeterProvider(metric_readers=[metrics]))
    try:
        tk.configure(count_hits=True, cache=False)
        tuner = tk.LocalTuner[SizeKey, np.ndarray]("hits_otel")
        x = np.zeros(100, np.float32)
        _calls(tuner, x, x, x, x)
        data = metrics.get_metrics_data()
    finally:
        tk.remove_observer(observer)
    assert data is not None
    points: dict[tuple[tuple[str, Any], ...], Any] = {
        tuple(sorted(point.attributes.items())): point.value  # type: ignore[union-attr]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "tunekit.cache.hits"
        for point in metric.data.data_points
    }
    assert points == {
        (
            ("tunekit.device_id", CLIENT.device_id),
            ("tunekit.key", '{"dtype":"float32","n":128}'),
            ("tunekit.source", "memory"),
            ("tunekit.tuner", "hits_otel"),
        ): 3
    }


_EXITING = """
import numpy as np
import tunekit as tk
from tunekit_backends.cpu import CpuClient
from test_hit_count import SizeKey, _set

client = CpuClient()
tuner = tk.LocalTuner[SizeKey, np.ndarray]("hits_at_exit")
tunables = tuner.init(_set)
x = np.zeros(100, np.float32)
for _ in range(500):
    tuner.execute(client.device_id, client, tunables, (x,))
"""


@pytest.mark.subprocess
def test_the_last_summary_is_written_at_exit(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    env = {
        "TUNEKIT_COUNT_HITS": "1",
        "TUNEKIT_RECORD": str(records),
        "TUNEKIT_CACHE": "0",
        "TUNEKIT_WARMUP_MS": "5",
        "PYTHONPATH": str(Path(__file__).parent),
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run([sys.executable, "-c", textwrap.dedent(_EXITING)], env=env, check=True, timeout=120)
    (summary,) = read_hit_summaries(records)
    assert summary.total == 499 and summary.counts[0].tuner == "hits_at_exit"


_POOL_TUNER = tk.LocalTuner[SizeKey, np.ndarray]("hits_in_workers")


def _hits_in_a_worker(n: int) -> int:
    _calls(_POOL_TUNER, *[np.zeros(100, np.float32)] * n)
    return os.getpid()


@pytest.mark.subprocess
def test_the_hits_of_forked_pool_workers_are_written_once_each(tmp_path: Path) -> None:
    """Regression: a forked multiprocessing worker leaves by os._exit, past atexit: its hits were never written;
    and a child writing them would have counted its parent's unwritten hits again."""
    records = tmp_path / "records.jsonl"
    tk.configure(count_hits=True, record=str(records), cache=False)
    _calls(_POOL_TUNER, *[np.zeros(100, np.float32)] * 11)  # tuned here, then 10 hits not yet written
    pool = multiprocessing.get_context("fork").Pool(2)
    workers = set(pool.map(_hits_in_a_worker, [30, 40], chunksize=1))
    pool.close()  # workers leave by themselves: terminate() (a `with` block's exit) would kill them, hits and all
    pool.join()
    stop_hit_counter()
    by_pid: dict[int, int] = {}
    for summary in read_hit_summaries(records):
        by_pid[summary.pid] = by_pid.get(summary.pid, 0) + summary.total
    assert by_pid.pop(os.getpid()) == 10
    assert set(by_pid) == workers and sum(by_pid.values()) == 70, by_pid


def test_reading_the_records_of_a_warm_run_that_wrote_none_says_why(tmp_path: Path) -> None:
    """Regression: a warm run writes no record, and reading its records file back raised a bare FileNotFoundError."""
    records = tmp_path / "records.jsonl"
    tk.configure(record=str(records))
    x = np.zeros(100, np.float32)
    _calls(tk.LocalTuner[SizeKey, np.ndarray]("warm_run"), x)
    records.unlink()  # the next process is served from the cache: nothing decided, nothing written
    _calls(tk.LocalTuner[SizeKey, np.ndarray]("warm_run"), x, x)
    assert not records.exists()
    with pytest.raises(FileNotFoundError, match="a run served from the cache writes none") as raised:
        list(tk.read_records(records))
    assert str(records) in str(raised.value)
