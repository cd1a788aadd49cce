from __future__ import annotations

import time

import numpy as np
import pytest

import tunekit as tk
from tunekit.backend import SupportsCacheFlush
from tunekit_backends.cpu import CpuClient


class FlushCountingClient(CpuClient):
    """The real CPU client, plus the optional cache-flush capability."""

    def __init__(self) -> None:
        self.flushes = 0

    def flush_cache(self) -> None:
        self.flushes += 1


def test_statistics_are_consistent_ns() -> None:
    durations = tk.BenchmarkDurations((100, 300, 200, 1000))
    assert durations.min_ns == 100
    assert durations.median_ns == 250.0
    assert durations.mean_ns == 400.0
    assert durations.variance_ns2 == pytest.approx(500_000 / 3)
    assert durations.score == durations.median_ns


def test_tune_benchmark_times_real_runs() -> None:
    calls: list[int] = []

    def work(n: int) -> int:
        calls.append(n)
        time.sleep(0.002)
        return n

    durations = tk.tune_benchmark(work, (1,), CpuClient(), warmup=2, samples=4)
    assert len(calls) == 6
    assert len(durations.samples_ns) == 4
    assert durations.min_ns >= 2_000_000


def test_flush_runs_outside_timing_when_supported() -> None:
    client = FlushCountingClient()
    assert isinstance(client, SupportsCacheFlush)
    tk.tune_benchmark(lambda: None, (), client, warmup=0, samples=5)
    assert client.flushes == 5
    tk.tune_benchmark(lambda: None, (), client, warmup=0, samples=5, flush=False)
    assert client.flushes == 5


def test_candidate_error_propagates_and_bad_arguments_are_refused() -> None:
    def boom() -> None:
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        tk.tune_benchmark(boom, (), CpuClient())
    with pytest.raises(ValueError, match="samples >= 1"):
        tk.tune_benchmark(lambda: None, (), CpuClient(), samples=0)


def test_samples_given_as_an_array_list_or_generator_become_a_tuple_of_ints() -> None:
    """An objective's np.array of samples failed as "truth value ... ambiguous"; a generator was kept exhausted."""
    for given in (np.array([3, 1, 2]), [3, 1, 2], (s for s in (3, 1, 2))):
        durations = tk.BenchmarkDurations(given)  # type: ignore[arg-type]
        assert durations.samples_ns == (3, 1, 2) and type(durations.samples_ns[0]) is int
        assert durations.median_ns == 2.0 and hash(durations) == hash(tk.BenchmarkDurations((3, 1, 2)))
    with pytest.raises(TypeError, match="BenchmarkDurations takes a tuple of ints"):
        tk.BenchmarkDurations(5)  # type: ignore[arg-type]
    # A dict gave its keys as samples and a set an arbitrary order.
    for unordered in ({3: 1, 1: 2}, {3, 1, 2}):
        with pytest.raises(TypeError, match="BenchmarkDurations takes a tuple of ints"):
            tk.BenchmarkDurations(unordered)  # type: ignore[arg-type]
