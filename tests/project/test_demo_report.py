"""What the demo's OpenCL table reports of a tune: the winner's own time, and numpy's with its spread."""

from __future__ import annotations

import sys
from pathlib import Path

import tunekit as tk

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "opencl"))

from _report import summarize, time_host


@tk.autotune_key
class NKey:
    n: int


def _measured(name: str, *samples: int) -> tk.CandidateRecord:
    return tk.CandidateRecord.of(name, 0, tk.Measured(tk.BenchmarkDurations(samples)))


def test_the_winner_is_reported_at_its_own_time_not_the_lowest_median() -> None:
    """Regression: the table gave the winner the lowest median of all, another candidate's after a runoff."""
    runoff = tk.Runoff(
        finalists=["a", "b"], pairs_ns=[(1_000 + i, 1_050 + i) for i in range(12)], ratio=0.95, margin=0.05, winner="a"
    )
    record = tk.AutotuneRecord(
        tuner="demo_report",
        device_id="d",
        key={"n": 1},
        checksum="c",
        decision="tuned",
        winner="a",
        stored=False,
        wall_time_s=0.1,
        candidates=[_measured("a", 1_100, 1_000, 1_200), _measured("b", 900, 950, 1_300), _measured("c", 5_000)],
        events=[runoff],
    )
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("demo_report")
    result = summarize("demo", tuner, "d", NKey(n=1), "1", time_host(lambda: None), 1e3, "GB/s", [record])
    assert result.decision is not None and result.decision.stage == "runoff"
    assert result.winner_ns == result.decision.winner_ns == 1_005.5  # the median over the pairs, not b's 950
    assert (result.worst, result.worst_ns) == ("c", 5_000)


def test_numpy_is_timed_after_a_warm_up_call_with_its_spread() -> None:
    calls: list[int] = []
    timing = time_host(lambda: calls.append(1), repeats=9)
    assert len(calls) == 10  # one untimed call first
    assert timing.median_ns > 0 and timing.spread >= 0
