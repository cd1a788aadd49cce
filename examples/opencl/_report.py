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
    shape: str
    winner: str
    winner_ns: float
    worst: str
    worst_ns: float
    numpy_ns: float
    candidates: int
    failed: int
    work: float
    unit: str
    tuned_now: bool

    def rate(self, ns: float) -> float:
        """Throughput of a run of ``ns`` nanoseconds, in ``unit`` (GB/s or GFLOP/s)."""
        return self.work / ns if ns > 0 else float("nan")


def time_host(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Median wall time of ``fn`` in ns (host clock: numpy runs on the host)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return float(statistics.median(samples))


def summarize(
    example: str,
    tuner: tk.LocalTuner[Any, Any],
    device_id: str,
    key: object,
    shape: str,
    numpy_ns: float,
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
    else:
        cache = tk.persistent_cache()
        rows = cache.rows(device_id=device_id, tuner=tuner.name) if cache is not None else []
        row = next((r for r in rows if not isinstance(r, str) and r.key == key_to_json(key)), None)
        if row is None:
            raise RuntimeError(f"{example}: {key} was neither tuned now nor found in the persistent cache")
        winner = row.value.winner
        results = [(r.name, r.status, r.median_ns) for r in row.value.results]
    measured = [(median, name) for name, _, median in results if median is not None]
    best, worst = min(measured), max(measured)
    return ExampleResult(
        example=example,
        shape=shape,
        winner=winner,
        winner_ns=best[0],
        worst=worst[1],
        worst_ns=worst[0],
        numpy_ns=numpy_ns,
        candidates=len(results),
        failed=sum(1 for _, status, _ in results if status != "measured"),
        work=work,
        unit=unit,
        tuned_now=bool(tuned),
    )


def print_result(result: ExampleResult) -> None:
    """One paragraph per example, for running it as a script."""
    print(f"{result.example} {result.shape}: winner {result.winner}")
    for label, ns in (("winner", result.winner_ns), ("worst", result.worst_ns), ("numpy", result.numpy_ns)):
        print(f"  {label:>6}: {ns / 1e3:10.1f} us  {result.rate(ns):8.2f} {result.unit}")
