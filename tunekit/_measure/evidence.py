"""What samples say about two candidates: paired log-ratios, their robust estimate and its uncertainty.

Candidates sampled in the same round (or back to back in a runoff) share the device's state at
that moment: its clock, its temperature, whoever else was using it. The log of the ratio of their
two samples cancels that shared part; what is left is each candidate's own noise, which differs
from candidate to candidate (one kernel depends on scheduling more than another). So every test
here is on one pair of candidates' paired log-ratios, with that pair's own scale: a noisy
candidate is kept until its own evidence says it is slower, however quiet the others are.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Gap", "gap", "t_quantile", "trimmed_mean"]

TRIM = 0.2
"""Share cut from each end before averaging (a 20% trimmed mean).

Under normal noise it is nearly as efficient as the mean (about 94%), so a decision needs few more
samples; a spike in a fifth of the samples of either end moves it by no more than its neighbours.
Not the median: at 64% efficiency it would need half as many samples again for the same answer.
"""


def t_quantile(z: float, freedom: int) -> float:
    """Student's t quantile at the normal quantile ``z`` with ``freedom`` degrees of freedom.

    The Cornish-Fisher expansion: within a few percent from 10 degrees of freedom up, and
    below the true value (so still cautious enough) down to 4. Infinite below 2: no decision.
    """
    if freedom < 2:
        return math.inf
    v = float(freedom)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


@dataclass(frozen=True, slots=True)
class Gap:
    """How much slower one candidate is than another, from their paired samples.

    ``estimate`` is the log of the ratio (0.02 ~ 2% slower; < 0 faster), ``se`` its standard error,
    ``freedom`` the degrees of freedom behind ``se`` and ``pairs`` how many pairs it rests on.
    """

    estimate: float
    se: float
    freedom: int
    pairs: int

    def beyond(self, z: float) -> bool:
        """Slower beyond ``z`` standard errors (Student's t for the freedom at hand)."""
        return self.estimate > t_quantile(z, self.freedom) * self.se

    def within(self, z: float, tolerance: float) -> bool:
        """Known to within ``tolerance`` of a tie: the ``z`` interval's half-width is below it."""
        return t_quantile(z, self.freedom) * self.se < tolerance

    def decidable(self, z: float, more: int) -> float:
        """The predictive probability that ``more`` pairs on, the gap is beyond ``z`` standard errors either way.

        The stochastic curtailment of a sequential test (Spiegelhalter, Freedman and Blackburn 1986):
        the true gap is as the pairs so far say (a normal of mean ``estimate`` and deviation ``se``),
        the pairs to come are as noisy as those so far, and the test at the end is the one every
        round applies (Student's t at ``z`` for the freedom then). With ``n`` pairs now and ``N`` then,
        the final estimate is normal with the same mean and deviation ``se * sqrt((N - n) / N)``,
        and the final half-width is ``t * se * sqrt(n / N)``.
        """
        if self.pairs < 2 or not math.isfinite(self.se):
            return 1.0
        if self.se <= 0.0:
            return 1.0 if self.estimate != 0.0 else 0.0
        total = self.pairs + max(more, 0)
        bound = t_quantile(z, round(self.freedom * total / self.pairs)) * self.se * math.sqrt(self.pairs / total)
        spread = self.se * math.sqrt(max(more, 0) / total)
        if spread == 0.0:
            return 1.0 if abs(self.estimate) > bound else 0.0
        return _normal_cdf((self.estimate - bound) / spread) + _normal_cdf((-self.estimate - bound) / spread)


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> tuple[float, float, int]:
    """The trimmed mean of ``values``, its standard error and degrees of freedom (Yuen's).

    The standard error comes from the winsorized variance: the trimmed ends replaced by the
    nearest value kept, so a spike counts as an ordinary large sample, not as itself.
    """
    n = len(values)
    ordered = sorted(values)
    cut = int(trim * n)
    kept = ordered[cut : n - cut]
    centre = math.fsum(kept) / len(kept)
    if n < 2:
        return centre, math.inf, 0
    # Plain floats, not statistics.stdev's exact fractions: the schedule calls this every round.
    low, high = ordered[cut], ordered[n - cut - 1]
    mean = (math.fsum(kept) + cut * (low + high)) / n
    squares = math.fsum((x - mean) ** 2 for x in kept) + cut * ((low - mean) ** 2 + (high - mean) ** 2)
    spread = math.sqrt(squares / (n - 1))
    se = spread / ((1 - 2 * cut / n) * math.sqrt(n))
    return centre, se, len(kept) - 1


def _trimmed_centre(values: list[float], trim: float) -> float:
    ordered = sorted(values)
    cut = int(trim * len(ordered))
    kept = ordered[cut : len(ordered) - cut]
    return math.fsum(kept) / len(kept)


def log_ratios(a: Mapping[int, int], b: Mapping[int, int]) -> list[float]:
    """log(a/b) of every round both were sampled in."""
    return [math.log(max(a[r], 1) / max(b[r], 1)) for r in a.keys() & b.keys()]


def gap(a: Mapping[int, int], b: Mapping[int, int], *, trim: float = TRIM) -> Gap:
    """How much slower ``a`` is than ``b`` (samples by round), from their paired log-ratios."""
    logs = log_ratios(a, b)
    if not logs:
        return Gap(0.0, math.inf, 0, 0)
    estimate, se, freedom = trimmed_mean(logs, trim)
    return Gap(estimate, se, freedom, len(logs))


def centred_scores(
    rounds: Mapping[int, Mapping[int, int]], among: Sequence[int], trim: float = TRIM
) -> dict[int, float]:
    """Each candidate of ``among``'s typical log time relative to the others in the same rounds.

    A round's samples are centred on that round's median log sample, so what the device did in
    that round (a slow clock state, a throttle step) moves every candidate of the round alike and
    leaves their scores as they were. Lower is faster.
    """
    centres: dict[int, float] = {}
    every_round = set().union(*(rounds[i].keys() for i in among)) if among else set()
    for r in every_round:
        logs = [math.log(max(rounds[i][r], 1)) for i in among if r in rounds[i]]
        centres[r] = statistics.median(logs)
    scores: dict[int, float] = {}
    for i in among:
        centred = [math.log(max(s, 1)) - centres[r] for r, s in rounds[i].items() if r in centres]
        scores[i] = _trimmed_centre(centred, trim) if centred else math.inf
    return scores
