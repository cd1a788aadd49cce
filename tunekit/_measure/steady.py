"""Warming a device up until its speed stops changing, instead of for a fixed time.

A device's clocks ramp from idle over tens to hundreds of milliseconds, and each chunk of
work gets faster while they do; once three chunks in a row take as long, on average, as the
three before, the clocks have settled and more warm-up only costs time. A device that was
busy a moment ago (a CPU that has just compiled the candidates, say) settles at once, so the
fixed 300 ms that a cold GPU needs is not paid by every tune.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["warm_until_steady"]

_WINDOW = 3
_TOLERANCE = 0.01


def warm_until_steady(chunk: Callable[[], int], duration_ns: int, *, min_fraction: float = 1 / 3) -> int:
    """Run ``chunk`` (returns its own duration in ns) until steady, for at most ``duration_ns`` of wall time.

    At least ``min_fraction`` of ``duration_ns`` always runs: a GPU may hold its idle clock a
    little while before it ramps, or pause on a plateau partway up, and a short flat stretch
    would otherwise look steady. (The GPU behaviour is assumed: the warm-up is tested on CPUs only.)
    Returns the wall time spent, in ns.
    """
    start = time.perf_counter_ns()
    floor = start + int(duration_ns * min_fraction)
    deadline = start + duration_ns
    times: list[int] = []
    while (now := time.perf_counter_ns()) < deadline:
        times.append(chunk())
        if now >= floor and len(times) >= 2 * _WINDOW:
            recent = statistics.fmean(times[-_WINDOW:])
            before = statistics.fmean(times[-2 * _WINDOW : -_WINDOW])
            if abs(recent - before) <= _TOLERANCE * before:
                break
    return time.perf_counter_ns() - start
