"""Roofline bounds: limits from work and peaks, the per-device peak cache, and the short circuit."""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import pytest

import tunekit as tk
from tunekit._measure.bounds import clear_peaks, device_peaks, time_limit_ns
from tunekit.backend import DevicePeaks, SupportsPeaks, SupportsWarmup
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import OpenCLClient
from tunekit_backends.simulated import SimulatedClient

MS = 1_000_000
PEAKS = DevicePeaks(ops_per_s=1e12, bytes_per_s=1e11, launch_overhead_ns=5_000.0)


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def test_memory_bound_work_is_limited_by_bandwidth_over_its_threshold() -> None:
    bound = tk.calculate_bounds(tk.Work(compute_ops=1e6, bytes=1e8), tk.Thresholds(0.5, 0.8), 1e12, 1e11)
    assert bound.binding == "memory"
    assert bound.memory_ns == pytest.approx(1e6) and bound.compute_ns == pytest.approx(1e3)
    assert bound.limit_ns == pytest.approx(1e6 / 0.8)


def test_compute_bound_work_is_limited_by_ops_over_its_threshold() -> None:
    bound = tk.calculate_bounds(tk.Work(compute_ops=2e12, bytes=1e6), tk.Thresholds.uniform(0.6), 1e12, 1e11)
    assert bound.binding == "compute"
    assert bound.limit_ns == pytest.approx(2e9 / 0.6)


def test_bounds_add_launch_overhead_per_launch_or_the_given_one() -> None:
    work = tk.Work(compute_ops=0, bytes=1e8)  # 1 ms at peak
    thresholds = tk.Thresholds.uniform(0.8)
    assert tk.Bounds(work).limit_ns(thresholds, PEAKS) == pytest.approx(1.25e6 + 5_000)
    assert tk.Bounds([work, work]).limit_ns(thresholds, PEAKS) == pytest.approx(2 * (1.25e6 + 5_000))
    assert tk.Bounds(work, launch_overhead=0.0).limit_ns(thresholds, PEAKS) == pytest.approx(1.25e6)


def test_bad_work_thresholds_and_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="Work.bytes"):
        tk.Work(compute_ops=1, bytes=-1)
    with pytest.raises(ValueError, match="Work.compute_ops"):
        tk.Work(compute_ops=math.nan, bytes=1)
    with pytest.raises(ValueError, match=r"Thresholds.memory must be in \(0, 1\]"):
        tk.Thresholds(0.5, 1.5)
    with pytest.raises(ValueError, match="Thresholds.compute"):
        tk.Thresholds.uniform(0)
    with pytest.raises(TypeError, match="tk.Work"):
        tk.Bounds([])
    # Regression: a number failed inside tuple() as "'int' object is not iterable".
    for wrong in (5, "work", None):
        with pytest.raises(TypeError, match=r"Bounds\(bounds=...\) takes a tk.Work .*, got"):
            tk.Bounds(wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="peaks must be positive"):
        tk.calculate_bounds(tk.Work(1, 1), tk.Thresholds.uniform(0.5), 0, 1)


def test_work_takes_numpy_scalars_as_plain_floats() -> None:
    # Regression: Work(2 * np.prod(a.shape) * n, ...) was refused as "must be a finite number >= 0, got np.int64(...)".
    work = tk.Work(compute_ops=2 * np.prod(np.array([300, 200])) * 150, bytes=np.float32(1e6))
    assert (work.compute_ops, work.bytes) == (18_000_000.0, 1e6)
    assert type(work.compute_ops) is float and type(work.bytes) is float
    assert tk.Bounds(work, launch_overhead=np.int64(0)).launch_overhead == 0.0
    assert tk.Thresholds(np.float64(0.5), 1).compute == 0.5


def test_non_numbers_in_work_bounds_and_thresholds_are_named() -> None:
    # Regression: a str in Thresholds or launch_overhead failed as "'<' not supported between 'int' and 'str'".
    with pytest.raises(TypeError, match=r"Work.compute_ops takes a number, got str '1'"):
        tk.Work(compute_ops="1", bytes=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Work.bytes takes a number, got bool True"):
        tk.Work(compute_ops=1, bytes=True)
    with pytest.raises(TypeError, match=r"Bounds.launch_overhead takes a number, got str '5'"):
        tk.Bounds(tk.Work(1, 1), launch_overhead="5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Bounds.launch_overhead must be a finite number of ns >= 0"):
        tk.Bounds(tk.Work(1, 1), launch_overhead=math.inf)
    with pytest.raises(TypeError, match=r"Thresholds.compute takes a number, got str 'a'"):
        tk.Thresholds("a", 0.5)  # type: ignore[arg-type]


def test_autotune_level_picks_the_threshold() -> None:
    levels = {"minimal": 0.6, "balanced": 0.8, "extensive": 0.95, "full": None}
    for level, fraction in levels.items():
        assert tk.configure(autotune_level=level).short_circuit_threshold == fraction


class CountingClient(SimulatedClient):
    measured = 0

    def measure_peaks(self) -> DevicePeaks:
        CountingClient.measured += 1
        return super().measure_peaks()


def test_peaks_are_measured_once_per_device() -> None:
    clear_peaks()
    CountingClient.measured = 0
    for _ in range(3):
        assert device_peaks(CountingClient(device_id="counting-a")) is not None
    device_peaks(CountingClient(device_id="counting-b"))
    assert CountingClient.measured == 2
    assert device_peaks(_NoPeaks()) is None


class _NoPeaks:
    device_id = "no-peaks"


def test_cpu_client_measures_plausible_peaks() -> None:
    peaks = CpuClient().measure_peaks()
    assert 1e8 < peaks.ops_per_s < 1e14
    assert 1e8 < peaks.bytes_per_s < 1e13
    assert 0 < peaks.launch_overhead_ns < 1e6


def test_time_limit_reports_a_broken_bounds_function_naming_the_tuner() -> None:
    client = SimulatedClient(peaks=PEAKS, device_id="limit-errors")
    with pytest.raises(tk.TunekitError, match="'mine': the bounds function returned int"):
        time_limit_ns(lambda key, inputs: 3, NKey(n=1), (), client, 0.8, "mine")
    with pytest.raises(tk.TunekitError, match="'mine': the bounds function raised ZeroDivisionError"):
        time_limit_ns(lambda key, inputs: 1 / 0, NKey(n=1), (), client, 0.8, "mine")
    assert time_limit_ns(lambda key, inputs: 3, NKey(n=1), (), client, None, "mine") is None


def _tune(level: str, seed: int) -> tk.AutotuneRecord:
    tk.configure(autotune_level=level, warmup_ms=1.0)
    client = SimulatedClient(peaks=PEAKS, device_id=f"bounds-{level}-{seed}", seed=seed)
    # 1e8 bytes at 1e11 B/s: 1 ms at peak; at 0.8 the limit is 1.25 ms + 5 us launch.
    good, slower, best = client.kernel(1.1 * MS), client.kernel(3 * MS), client.kernel(1.05 * MS)
    tunables = (
        tk.TunableSet(key=lambda n: NKey(n=n))
        .with_tunables([tk.Tunable("good", good), tk.Tunable("slower", slower), tk.Tunable("best", best)])
        .with_bounds(lambda key, inputs: tk.Bounds(tk.Work(compute_ops=1e9, bytes=1e8)))
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tk.LocalTuner[NKey, None](f"bounds-{level}").execute(client.device_id, client, tunables, (4,))
    finally:
        tk.remove_record_sink(sink)
    return records[0]


def test_a_candidate_within_the_limit_short_circuits_its_batch_and_the_record_says_so() -> None:
    record = _tune("balanced", 0)
    short = next(e for e in record.events if isinstance(e, tk.ShortCircuit))
    # The next candidate's admission spaces the first confirming sample from the one it confirms.
    assert short.name == "good" and short.skipped == ["best"]
    assert short.limit_ns == pytest.approx(1.25e6 + 5_000)
    assert record.winner == "good"
    assert {c.name: c.status for c in record.candidates} == {
        "good": "measured",
        "slower": "measured",
        "best": "skipped",
    }


def test_full_level_never_short_circuits() -> None:
    record = _tune("full", 0)
    assert not any(isinstance(e, tk.ShortCircuit) for e in record.events)
    assert record.winner == "best"


@pytest.mark.opencl
def test_opencl_client_measures_plausible_peaks_on_its_device() -> None:
    pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")  # peaks compile nothing in workers
    assert isinstance(client, SupportsPeaks) and isinstance(client, SupportsWarmup)
    peaks = client.measure_peaks()
    assert 1e8 < peaks.ops_per_s < 1e15
    assert 1e8 < peaks.bytes_per_s < 1e13
    assert 0 < peaks.launch_overhead_ns < 1e7
