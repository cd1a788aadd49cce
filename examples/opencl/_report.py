"""What each OpenCL example reports: the winner, the worst candidate and numpy, with throughput."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tunekit as tk
from tunekit._key import key_to_json


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
    tuned_now: bool,
) -> ExampleResult:
    """Read the stored ranking of ``key`` (fresh or cached) into an :class:`ExampleResult`."""
    cache = tk.persistent_cache()
    row = None
    if cache is not None:
        for got in cache.rows(device_id=device_id, tuner=tuner.name):
            if not isinstance(got, str) and got.key == key_to_json(key):
                row = got
    if row is None:
        raise RuntimeError(f"{example}: no stored result for {key}; run with the persistent cache on")
    measured = [(r.median_ns, r.name) for r in row.value.results if r.median_ns is not None]
    best, worst = min(measured), max(measured)
    return ExampleResult(
        example=example,
        shape=shape,
        winner=row.value.winner,
        winner_ns=best[0],
        worst=worst[1],
        worst_ns=worst[0],
        numpy_ns=numpy_ns,
        candidates=len(row.value.results),
        failed=sum(1 for r in row.value.results if r.status != "measured"),
        work=work,
        unit=unit,
        tuned_now=tuned_now,
    )


def print_result(result: ExampleResult) -> None:
    """One paragraph per example, for running it as a script."""
    print(f"{result.example} {result.shape}: winner {result.winner}")
    for label, ns in (("winner", result.winner_ns), ("worst", result.worst_ns), ("numpy", result.numpy_ns)):
        print(f"  {label:>6}: {ns / 1e3:10.1f} us  {result.rate(ns):8.2f} {result.unit}")
