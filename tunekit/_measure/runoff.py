"""The paired runoff: two close finalists timed back to back, decided by the median of their ratios.

Within a pair both finalists see the same clock speed and temperature, so the ratio of a pair
cancels drift that separate medians would keep; alternating who runs first (A B, B A, ...)
cancels what drift remains inside a pair.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tunekit._base.errors import NOT_A_CANDIDATE
from tunekit._measure.runner import CandidateRunner

__all__ = ["RunoffResult", "runoff"]

MIN_PAIRS = 10
"""Pairs before an early decision is considered: fewer make the noise estimate unreliable."""

DECISION_Z = 2.5
"""Standard errors the median log-ratio must be from zero to stop early: a few looks stay safe."""

INDIFFERENCE = 0.005
"""A tie closer than this (0.5%) is not worth more pairs to break."""

# Standard error of a median from the MAD: 1.4826 turns a MAD into a standard deviation, and a
# median's standard error is sqrt(pi/2) ~ 1.2533 times a mean's.
_MEDIAN_SE = 1.4826 * 1.2533


@dataclass(frozen=True, slots=True)
class RunoffResult:
    """How a runoff between ``a`` and ``b`` ended."""

    a: int
    b: int
    pairs_ns: tuple[tuple[int, int], ...]
    winner: int
    ratio: float | None
    margin: float
    forfeit: int | None = None
    error: Exception | None = None
    stopped_early: bool = False


def _median_log_ratio(pairs: list[tuple[int, int]]) -> tuple[float, float]:
    """Median of log(A/B) over ``pairs`` and its standard error."""
    logs = [math.log(max(a, 1) / max(b, 1)) for a, b in pairs]
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    return centre, _MEDIAN_SE * mad / math.sqrt(len(logs))


def runoff(runner: CandidateRunner, a: int, b: int, max_pairs: int) -> RunoffResult:
    """Time ``a`` and ``b`` in up to ``max_pairs`` pairs; the lower median ratio wins.

    A finalist that raises forfeits: the other wins, whatever the pairs so far said.
    Sampling stops early once the median log-ratio is ``DECISION_Z`` standard errors from a
    tie, or known to within ``INDIFFERENCE`` of one.
    """
    pairs: list[tuple[int, int]] = []
    stopped_early = False
    for number in range(max_pairs):
        order = (a, b) if number % 2 == 0 else (b, a)
        times: dict[int, int] = {}
        for index in order:
            try:
                times[index] = runner.sample(index)
            except NOT_A_CANDIDATE:  # no finalist's fault: the tune stops instead of crowning the other
                raise
            except Exception as exc:  # a flaky finalist loses the runoff
                other = b if index == a else a
                return RunoffResult(a, b, tuple(pairs), other, None, 0.0, forfeit=index, error=exc)
        pairs.append((times[a], times[b]))
        if len(pairs) >= MIN_PAIRS:
            centre, se = _median_log_ratio(pairs)
            if abs(centre) > DECISION_Z * se or DECISION_Z * se < INDIFFERENCE:
                stopped_early = len(pairs) < max_pairs
                break
    if not pairs:
        return RunoffResult(a, b, (), a, None, 0.0)
    ratio = statistics.median(x / max(y, 1) for x, y in pairs)
    winner = a if ratio <= 1.0 else b
    return RunoffResult(a, b, tuple(pairs), winner, ratio, abs(1.0 - ratio), stopped_early=stopped_early)
