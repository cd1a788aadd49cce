"""tk.bench: one function timed by the tuner's measurement engine, on the host and CPU clients."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._base.units import format_duration_ns
from tunekit._measure.bench import MIN_SAMPLES
from tunekit_backends.cpu import CpuClient
from tunekit_backends.simulated import NoiseModel, SimulatedClient


class FlushCountingClient(CpuClient):
    """The real CPU client, plus the optional cache-flush capability (counted)."""

    def __init__(self) -> None:
        self.flushes = 0

    def flush_cache(self) -> None:
        self.flushes += 1


def spin(n: int) -> int:
    """Pure-Python work proportional to ``n``; a short one (0.1-0.4 ms here), which a busy machine seldom preempts."""
    total = 0
    for i in range(n):
        total += i * i
    return total


def test_four_times_the_work_measures_about_four_times_slower() -> None:
    small = tk.bench(spin, 3_000, samples=25, warmup_ms=0)
    large = tk.bench(spin, 12_000, samples=25, warmup_ms=0)
    # The fastest samples scale with the work; a loaded CI machine (a second test worker on two cores)
    # only adds time, and once slowed over half of the small one's samples (median ratio 2.4, minimum 3.9).
    assert 2.5 < large.min_ns / small.min_ns < 6.5, (str(small), str(large))
    assert 1.5 < large.median_ns / small.median_ns < 10, (str(small), str(large))


def test_the_median_agrees_with_an_independent_host_timing_of_the_same_calls() -> None:
    result = tk.bench(spin, 3_000, samples=25, warmup_ms=0)
    independent = []
    for _ in range(25):
        started = time.perf_counter_ns()
        spin(3_000)
        independent.append(time.perf_counter_ns() - started)
    assert 0.5 < result.median_ns / statistics.median(independent) < 2.0, (str(result), sorted(independent))


def test_the_same_ratio_on_the_cpu_client_with_its_device_warm_up() -> None:
    client = CpuClient()
    small = tk.bench(spin, 3_000, client=client, samples=25, warmup_ms=2)
    large = tk.bench(spin, 12_000, client=client, samples=25, warmup_ms=2)
    assert 2.5 < large.min_ns / small.min_ns < 6.5, (str(small), str(large))  # as above
    assert 1.5 < large.median_ns / small.median_ns < 10, (str(small), str(large))
    assert small.device_id == client.device_id and small.timer == "CpuClient.profile"
    assert small.warmup_method == "device" and small.warmup_ms > 0


def test_samples_are_the_functions_own_time_within_the_wall_time_of_the_call() -> None:
    calls: list[float] = []

    def nap(seconds: float) -> None:
        calls.append(seconds)
        time.sleep(seconds)

    started = time.perf_counter_ns()
    result = tk.bench(nap, 0.002, samples=6, warmup=2, warmup_ms=0)
    elapsed = time.perf_counter_ns() - started
    assert calls == [0.002] * 8  # 2 untimed runs, 6 samples, each with the arguments given
    assert result.count == 6 and result.warmup_runs == 2 and result.warmup_method == "none"
    assert min(result.samples_ns) >= 2_000_000  # a sleep lasts at least as long as asked
    assert sum(result.samples_ns) <= elapsed
    assert result.timer == "host time.perf_counter_ns" and result.device_id == "host"


def test_the_statistics_agree_with_the_samples() -> None:
    client = SimulatedClient(NoiseModel(noise=0.05), seed=3)
    result = tk.bench(client.kernel(1_000_000), client=client, samples=101, warmup_ms=50)
    ordered = sorted(result.samples_ns)
    assert result.median_ns == ordered[50] and result.min_ns == ordered[0]
    assert result.q1_ns == ordered[25] and result.q3_ns == ordered[75]
    assert result.spread == pytest.approx((ordered[75] - ordered[25]) / ordered[50])
    assert ordered[35] <= result.median_low_ns < result.median_ns < result.median_high_ns <= ordered[65]
    assert 950_000 < result.median_ns < 1_050_000  # the simulated kernel's declared 1 ms, 5% noise
    assert result.warmup_method == "device" and result.warmup_ms == 50 and client.warmup_ns == 50_000_000


def test_a_time_budget_takes_at_least_five_samples_and_stops_when_spent() -> None:
    slow = tk.bench(time.sleep, 0.01, max_seconds=0.001, warmup_ms=0)
    assert slow.count == MIN_SAMPLES
    quick = tk.bench(time.sleep, 0, max_seconds=0.02, warmup_ms=0)
    assert quick.count > MIN_SAMPLES
    both = tk.bench(time.sleep, 0.01, samples=3, max_seconds=0.001, warmup_ms=0)
    assert both.count == 3  # fewer asked for than the budget's floor: the count wins


def test_the_sample_count_has_no_cap() -> None:
    # Capped at 1000 while the median's interval overflowed above 1023 samples.
    many = tk.bench(int, samples=2500, warmup_ms=0)
    assert many.count == 2500 and many.median_low_ns <= many.median_ns <= many.median_high_ns
    ordered = sorted(many.samples_ns)
    assert ordered[1150] <= many.median_low_ns and many.median_high_ns <= ordered[1349]  # the middle 8%
    budget = tk.bench(int, max_seconds=0.3, warmup_ms=0)  # a no-op: far more than 1000 fit in 0.3 s
    assert budget.count > 1000


def test_the_default_budget_is_a_tenth_of_a_second_of_samples() -> None:
    started = time.perf_counter()
    result = tk.bench(time.sleep, 0.005, warmup_ms=0)
    assert time.perf_counter() - started >= 0.1
    assert MIN_SAMPLES <= result.count < 0.1 / 0.005 + 1


def test_without_a_device_warm_up_the_function_itself_warms_until_steady() -> None:
    runs = 0

    def counted() -> None:
        nonlocal runs
        runs += 1

    result = tk.bench(counted, samples=3, warmup=0, warmup_ms=20)
    assert result.warmup_method == "function" and result.warmup_ms > 0
    assert runs > 3 + 6  # the steady check needs two windows of three runs, after a third of the time


def test_samples_are_cold_where_the_client_flushes_unless_told_warm() -> None:
    client = FlushCountingClient()
    cold = tk.bench(lambda: None, client=client, samples=7, warmup_ms=0)
    assert client.flushes == 7 and cold.cold
    warm = tk.bench(lambda: None, client=client, samples=7, warmup_ms=0, cold=False)
    assert client.flushes == 7 and not warm.cold
    assert not tk.bench(lambda: None, samples=2, warmup_ms=0).cold  # the host clock cannot flush


def test_the_result_reads_in_one_unit_spelling_and_is_frozen() -> None:
    a = np.ones((64, 64), np.float32)
    result = tk.bench(np.matmul, a, a, samples=20, warmup_ms=0)
    text = str(result)
    assert text.startswith(format_duration_ns(result.median_ns) + " median (95% CI ")
    assert f"IQR {format_duration_ns(result.q1_ns)}" in text
    assert "20 warm samples timed by host time.perf_counter_ns on host, after 1 untimed run" in text
    assert " us" not in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.device_id = "elsewhere"  # type: ignore[misc]


def test_an_exception_from_the_function_propagates_from_its_first_run() -> None:
    runs = 0

    def broken() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        tk.bench(broken, warmup_ms=0)
    assert runs == 1


BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"samples": 0}, ValueError, r"samples=\.\.\.\) must be >= 1, got 0"),
    ({"samples": -5}, ValueError, ">= 1, got -5"),
    ({"samples": True}, TypeError, r"samples=\.\.\.\) takes an int, got bool"),
    ({"samples": 2.5}, TypeError, "takes an int, got float"),
    ({"max_seconds": 0}, ValueError, r"max_seconds=\.\.\.\) must be a finite number > 0, got 0"),
    ({"max_seconds": -1.0}, ValueError, "finite number > 0"),
    ({"max_seconds": math.inf}, ValueError, "finite number > 0, got inf"),
    ({"max_seconds": math.nan}, ValueError, "finite number > 0, got nan"),
    ({"max_seconds": "1"}, TypeError, "takes a number, got str"),
    ({"warmup": -1}, ValueError, r"warmup=\.\.\.\) must be >= 0, got -1"),
    ({"warmup_ms": -5}, ValueError, r"warmup_ms=\.\.\.\) must be a finite number >= 0"),
    ({"cold": "no"}, TypeError, r"cold=\.\.\.\) takes True or False, got 'no'"),
    ({"client": "cpu"}, TypeError, r"tk.bench\(\): the client must be a tk.Client"),
    ({"client": CpuClient}, TypeError, r"the client is the class CpuClient, not an instance of it"),
]


@pytest.mark.parametrize(("options", "error", "message"), BAD, ids=[str(o) for o, _, _ in BAD])
def test_bad_options_are_refused_before_anything_runs(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    runs: list[None] = []
    with pytest.raises(error, match=message):
        tk.bench(lambda: runs.append(None), **options)
    assert runs == []


def test_something_not_callable_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"tk.bench\(\) takes the function to time first, got ndarray"):
        tk.bench(np.ones(3))  # type: ignore[arg-type]
