"""What each OpenCL example reports: the winner, the worst candidate and numpy, with throughput."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tunekit as tk
from tunekit._keys.key import key_to_dict, key_to_json


@dataclass(frozen=True)
class ExampleResult:
    """One tuned call: who won, who was slowest, and how numpy on the host compares."""

    example: str
    tuner: str
    shape: str
    winner: str
    winner_ns: float
    worst: str
    worst_ns: float
    numpy_ns: float
    numpy_spread: float
    """numpy's interquartile range over its median: a wide one (a busy host) makes its figure unreliable."""
    decision: tk.TuneDecision | None
    """The figures that decided the winner (its time, the runner-up's, the margin, the stage); None if not kept."""
    candidates: int
    failed: int
    work: float
    unit: str
    tuned_now: bool

    def rate(self, ns: float) -> float:
        """Throughput of a run of ``ns`` nanoseconds, in ``unit`` (GB/s or GFLOP/s)."""
        return self.work / ns if ns > 0 else float("nan")


@dataclass(frozen=True)
class HostTiming:
    """numpy's time on the host: the median, and the spread that says whether to believe it."""

    median_ns: float
    spread: float


NOISY_HOST = 0.25
"""A host timing whose interquartile range exceeds this fraction of its median is reported as unreliable."""


def time_host(fn: Callable[[], Any], repeats: int = 9) -> HostTiming:
    """Median wall time of ``fn`` in ns (host clock: numpy runs on the host), after one untimed call.

    The untimed call starts BLAS's threads and faults the output in, which the first timed call
    would otherwise pay (a 100-fold outlier on a busy machine).
    """
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    median = float(statistics.median(samples))
    quartiles = statistics.quantiles(samples, n=4, method="inclusive")
    return HostTiming(median, (quartiles[2] - quartiles[0]) / median if median > 0 else 0.0)


def summarize(
    example: str,
    tuner: tk.LocalTuner[Any, Any],
    device_id: str,
    key: object,
    shape: str,
    numpy: HostTiming,
    work: float,
    unit: str,
    records: Sequence[tk.AutotuneRecord],
) -> ExampleResult:
    """Read the ranking of ``key`` into an :class:`ExampleResult`: from its tune's record, else the cache.

    ``records``: what the call emitted. A key tuned now is read from its record, so the example
    reports with the cache off (TUNEKIT_CACHE=0) too; one served from the cache from its row.
    """
    tuned = [r for r in records if r.decision == "tuned" and r.tuner == tuner.name and r.key == key_to_dict(key)]
    if tuned:
        winner = tuned[-1].winner or ""
        results = [(c.name, c.status, c.stats.median_ns if c.stats else None) for c in tuned[-1].candidates]
        decision = tk.decision_of(tuned[-1])
    else:
        cache = tk.persistent_cache()
        rows = cache.rows(device_id=device_id, tuner=tuner.name) if cache is not None else []
        row = next((r for r in rows if not isinstance(r, str) and r.key == key_to_json(key)), None)
        if row is None:
            raise RuntimeError(f"{example}: {key} was neither tuned now nor found in the persistent cache")
        winner = row.value.winner
        results = [(r.name, r.status, r.median_ns) for r in row.value.results]
        decision = row.value.decision if row.value.decision and row.value.decision.winner == winner else None
    measured = [(median, name) for name, _, median in results if median is not None]
    worst = max(measured)
    # The winner's time as the stage that chose it measured it: the lowest median may be another
    # candidate's (a runoff decided), and showing it as the winner's would mislabel it.
    winner_ns = decision.winner_ns if decision is not None else next(m for m, name in measured if name == winner)
    return ExampleResult(
        example=example,
        tuner=tuner.name,
        shape=shape,
        winner=winner,
        winner_ns=winner_ns,
        worst=worst[1],
        worst_ns=worst[0],
        numpy_ns=numpy.median_ns,
        numpy_spread=numpy.spread,
        decision=decision,
        candidates=len(results),
        failed=sum(1 for _, status, _ in results if status != "measured"),
        work=work,
        unit=unit,
        tuned_now=bool(tuned),
    )


def print_result(result: ExampleResult) -> None:
    """One paragraph per example, for running it as a script."""
    print(f"{result.example} {result.shape}: winner {result.winner}")
    if result.decision is not None:
        print(f"  decided: {result.decision.text()}")
    for label, ns in (("winner", result.winner_ns), ("worst", result.worst_ns), ("numpy", result.numpy_ns)):
        print(f"  {label:>6}: {tk.format_duration_ns(ns):>10}  {result.rate(ns):8.2f} {result.unit}")
