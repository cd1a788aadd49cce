"""How the strategy benches judge versions: geometric means, and the held-out choice between strategies.

``benches/strategies.py`` and ``benches/strategy_replay.py`` both choose, for each fold of files
left out, the strategy with the lowest geometric mean on the other files; one rule, written once,
so the two benches cannot disagree on a tie.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

TIE = " (tie)"
"""Said after a pick whose other files gave another strategy the same figure."""


def geo(values: Sequence[float]) -> float:
    """The geometric mean."""
    return math.exp(sum(map(math.log, values)) / len(values))


def choose(scores: Mapping[str, float]) -> tuple[str, bool]:
    """The name of lowest score and whether another tied it (``scores`` in the order the names were listed).

    A tie is no evidence either way: it keeps the first listed, so a run that lists the version
    before first keeps it wherever the other files cannot tell the versions apart.
    """
    pick = min(scores, key=scores.__getitem__)
    return pick, list(scores.values()).count(scores[pick]) > 1


RESAMPLES = 2000
"""Seed-bootstrap resamples behind every interval the strategy benches print."""

LEVEL = 0.95
"""Coverage of those intervals (two-sided)."""


def bootstrap_medians(
    runs: Mapping[str, Sequence[Sequence[float]]], *, resamples: int = RESAMPLES, seed: int = 0
) -> dict[str, np.ndarray]:
    """Per strategy, the per-file medians of ``resamples`` seed resamples: a (resamples, files) array.

    ``runs[strategy][i]`` holds file ``i``'s figure for each seed, in seed order, every strategy over
    the same files. A file's seeds are drawn with replacement, and the same draws serve every
    strategy: two versions run on the same seeds, so a ratio between them keeps only the noise of
    which seeds there were, not that of drawing different ones for each. Where strategies ran
    different numbers of seeds on a file, the first ones all of them ran are drawn from.
    """
    names = list(runs)
    if not names:
        return {}
    files = len(runs[names[0]])
    rng = np.random.default_rng(seed)
    out = {name: np.empty((resamples, files)) for name in names}
    for i in range(files):
        n = min(len(runs[name][i]) for name in names)
        if n == 0:
            raise ValueError(f"file {i} has no seeds for some strategy: nothing to resample")
        draws = rng.integers(0, n, size=(resamples, n))
        for name in names:
            values = np.asarray(runs[name][i][:n], dtype=float)
            out[name][:, i] = np.median(values[draws], axis=1)
    return out


def geo_rows(medians: np.ndarray) -> np.ndarray:
    """The geometric mean over files (columns) of each resample (row)."""
    return np.asarray(np.exp(np.log(medians).mean(axis=1)))


def interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap values (percentile method)."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in logs so that hundreds of seeds do not underflow."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(n + 1)
    return math.fsum(
        math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q) for i in range(k + 1)
    )


def _solve(falling: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the decreasing ``falling(p)`` crosses ``target`` (bisection to 1e-9)."""
    low, high = 0.0, 1.0
    while high - low > 1e-9:
        middle = (low + high) / 2.0
        if falling(middle) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def miss_interval(misses: int, runs: int, level: float = LEVEL) -> tuple[float, float]:
    """Clopper-Pearson interval of a miss rate from ``misses`` of ``runs`` seeds (exact: never too narrow).

    A reach of 99 % is shown only when the interval's top is under 1 %: with no miss, that takes
    :func:`seeds_to_show` seeds.
    """
    if not 0 <= misses <= runs or runs < 1:
        raise ValueError(f"{misses} misses of {runs} runs: give 0 <= misses <= runs and at least one run")
    tail = (1.0 - level) / 2.0
    # The lowest rate that misses this often or more in ``tail`` of runs, the highest that misses no more.
    low = 0.0 if misses == 0 else _solve(lambda p: _binomial_cdf(misses - 1, runs, p), 1.0 - tail)
    high = 1.0 if misses == runs else _solve(lambda p: _binomial_cdf(misses, runs, p), tail)
    return low, high


def seeds_to_show(reach: float, level: float = LEVEL) -> int:
    """Seeds that must all reach the mark for :func:`miss_interval`'s top to fall under ``1 - reach``."""
    return math.ceil(math.log((1.0 - level) / 2.0) / math.log(reach))
