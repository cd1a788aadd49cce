"""The decision of a tune as one value: the figures that decided it, the stage that did, and how sure it is.

Every place a tune is shown (``tunekit cache show``, ``records summary``, the HTML report, the
progress line, the demo) reads this one value, so they agree with each other and with what
chose the winner. It is derived from what a record already carries (each candidate's samples,
the sampling rounds, the runoff's pairs) by :func:`decision_of`, a pure function: the same
record always reads the same. A record whose batch ended with a ``Verdict`` event (every tune
since the schedule emits one) is read from it: the verdict holds the figures the schedule itself
decided on, including a runoff among more than two finalists.

The margin is the runner-up's time over the winner's, less one, as the deciding stage measured
them: +0.021 means the runner-up took 2.1% longer. Its 95% interval comes from the samples
themselves: for a paired runoff the distribution-free interval of the median of the pairs'
ratios (order statistics, no assumption on the noise), otherwise a bootstrap of the ratio of
medians (rounds resampled whole when the two shared them, so the drift they shared cancels),
with a fixed seed so that a record reads the same every time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import Literal

import numpy as np
from pydantic import Field

from tunekit._base.counted import counted
from tunekit._base.persisted import Persisted
from tunekit._base.units import format_duration_ns
from tunekit._values.records import (
    AutotuneRecord,
    CandidateRecord,
    RecordEvent,
    Round,
    Runoff,
    SearchEnded,
    ShortCircuit,
    Verdict,
)

__all__ = ["NOISE_TOLERANCE", "DecidedBy", "TuneDecision", "decision_of", "median_interval", "ratio_interval"]

DecidedBy = Literal["runoff", "rounds", "medians", "short_circuit", "forfeit", "only", "demoted"]
"""The stage that chose the winner.

runoff: the paired runoff among the finalists the rounds left close; rounds: interleaved sampling rounds
(eliminations, or the lowest median when they ended); medians: the fixed schedule's medians;
short_circuit: the winner met the roofline limit twice, which ended its batch; forfeit: the other
finalist raised during the runoff; only: no other candidate was measured beside it; demoted:
the winner took the place of one that failed on real inputs.
"""

NOISE_TOLERANCE = 0.02
"""How much faster the runner-up may plausibly be (at the margin interval's low end) before the
decision is called untrusted: a tie within 2% costs little, a busy machine's wide spread more."""

CONFIDENCE = 0.95
_BOOTSTRAP = 1000
_SEED = 20_26  # fixed: the same record always gives the same interval

_STAGE_TEXT: dict[str, str] = {
    "runoff": "paired runoff",
    "rounds": "interleaved rounds",
    "medians": "medians, fixed schedule",
    "short_circuit": "short circuit",
    "forfeit": "runoff forfeited",
    "only": "only one measured",
    "demoted": "demoted winner replaced",
}


class TuneDecision(Persisted):
    """The figures that decided one tune: the winner's estimate, the runner-up's, the margin and the stage.

    Kept in the cache row beside the winner (``tunekit cache show`` has no samples to derive it
    from); new fields are optional, so a reader keeps what a newer tunekit adds.
    """

    winner: str
    winner_ns: float = Field(ge=0, description="The winner's time as the deciding stage measured it (a median).")
    runner_up: str | None = None
    runner_up_ns: float | None = Field(
        None,
        ge=0,
        description="The runner-up's time as the deciding stage measured it: its median, or after a paired runoff "
        "the winner's time times the pairs' median ratio, so the two times and the margin agree.",
    )
    margin: float | None = Field(
        None, description="The runner-up's time over the winner's, less one (0.02: the runner-up took 2% longer)."
    )
    margin_low: float | None = Field(None, description="Low end of the margin's 95% interval.")
    margin_high: float | None = Field(None, description="High end of the margin's 95% interval.")
    stage: DecidedBy
    samples: int = Field(0, ge=0, description="Samples (pairs, for a runoff) the deciding comparison used.")
    spread: float = Field(
        0.0, ge=0, description="Noise of the deciding samples: interquartile range over the median (0.05 = 5%)."
    )
    search: bool = Field(False, description="A search chose the winner, its finalists re-measured side by side.")
    faster: str | None = Field(None, description="A candidate whose median over all its samples is below the winner's.")
    faster_ns: float | None = Field(None, ge=0)
    faster_compared: bool = Field(
        False, description="Whether ``faster`` was in the deciding comparison (else it was timed apart, earlier)."
    )

    @property
    def stage_text(self) -> str:
        """The deciding stage in a few words, with how many samples it used."""
        text = _STAGE_TEXT[self.stage]
        if self.stage == "runoff":
            text += f", {counted(self.samples, 'pair')}"
        elif self.stage in ("rounds", "medians") and self.samples:
            text += f", {counted(self.samples, 'sample')}"
        return f"search finalists, {text}" if self.search else text

    @property
    def margin_text(self) -> str:
        """The margin with its interval, e.g. ``+2.1% [+0.4%, +3.9%]``; ``-`` without a runner-up."""
        if self.margin is None:
            return "-"
        if self.margin_low is None or self.margin_high is None:
            return f"{self.margin:+.1%}"
        return f"{self.margin:+.1%} [{self.margin_low:+.1%}, {self.margin_high:+.1%}]"

    @property
    def trusted(self) -> bool:
        """Whether the margin stands out of the noise: False when the spread exceeds the margin and the
        runner-up may be more than :data:`NOISE_TOLERANCE` faster than the winner."""
        if self.margin is None or self.margin_low is None or self.stage in ("short_circuit", "forfeit", "only"):
            return True
        return not (self.spread > max(self.margin, 0.0) and self.margin_low < -NOISE_TOLERANCE)

    def why(self) -> str | None:
        """Why the winner stands beside a faster-looking median or a negative margin; None when nothing needs it."""
        if self.stage == "short_circuit":
            return f"{self.winner} met the roofline limit twice, so the rest of its batch was not timed further"
        if self.stage == "demoted":
            return "the tuned winner failed on real inputs; the next in the tuned ranking took its place"
        if self.stage == "forfeit":
            return f"{self.runner_up or 'the other finalist'} raised during the runoff and forfeited it"
        if self.faster is None or self.faster_ns is None:
            return None
        faster = f"{self.faster}'s median {format_duration_ns(self.faster_ns)}"
        if not self.faster_compared:
            where = "in the search, apart from the finalists" if self.search else "in an earlier batch"
            return f"{faster} was measured {where}; the side-by-side comparison decided"
        if self.stage == "runoff":
            return (
                f"{faster} over all its samples is lower, but the paired runoff, timing both back to back, "
                f"put {self.winner} ahead"
            )
        return f"{faster} is lower over all its samples"

    def text(self) -> str:
        """The decision on one line: winner, runner-up, margin with its interval, stage, and why if needed."""
        winner = f"{self.winner} {format_duration_ns(self.winner_ns)}"
        if self.runner_up is None:
            line = f"{winner} ({self.stage_text})"
        else:
            runner = f"{self.runner_up} {format_duration_ns(self.runner_up_ns)}"
            line = f"{winner} vs {runner}: {self.margin_text} ({self.stage_text})"
        why = self.why()
        return f"{line}; {why}" if why else line

    def warning(self, tuner: str = "NAME", *, stored: bool = True) -> str | None:
        """What to tell the user when the decision is not :attr:`trusted`; None when it is.

        ``stored``: whether the winner went to the persistent cache. One that did not (the cache
        off, or degraded to memory) is tuned again by the next process: no cache to clear.
        """
        if self.trusted or self.margin_low is None:
            return None
        retune = (
            f"`tunekit cache clear --tuner {tuner}`, then run again"
            if stored
            else "run again: this winner is in this process's memory only, not in a cache"
        )
        return (
            f"the winner {self.winner} leads {self.runner_up} by {self.margin_text}, but the measurements spread "
            f"{self.spread:.0%} (interquartile range over the median), so {self.runner_up} may be up to "
            f"{-self.margin_low:.0%} faster: the machine was probably busy, or the samples too few. Re-tune "
            f"when it is quiet ({retune}), or take more samples (TUNEKIT_MAX_SAMPLES, TUNEKIT_RUNOFF_PAIRS)"
        )


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free interval of the median of ``values``: a pair of order statistics.

    The number of values below the true median is Binomial(n, 1/2), so the j-th smallest and
    j-th largest bound it with the binomial's coverage; below 6 values, the whole range. Up to
    2000 values the binomial's tail is summed exactly (integers, so nothing overflows or
    underflows; under 1 ms at 2000); above, its normal approximation with continuity correction
    (a few µs at any n), which on every n checked picks the exact order statistic or the one
    just outside it, so its coverage is never below ``confidence``.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median_interval needs at least one value")
    tail = (1.0 - confidence) / 2.0
    j = _exact_rank(n, tail) if n <= _EXACT_UP_TO else _normal_rank(n, tail)
    if j == 0:
        return ordered[0], ordered[-1]
    return ordered[j - 1], ordered[n - j]


_EXACT_UP_TO = 2000


def _exact_rank(n: int, tail: float) -> int:
    """The least j with P(Bin(n, 1/2) <= j) > tail, by exact integer sums: sum C(n, k) > tail * 2**n."""
    limit = Fraction(tail) * (1 << n)
    below = 0
    term = 1  # C(n, j), updated in place so that each term costs one multiply and one divide
    for j in range(n):
        below += term
        if below > limit:
            return j
        term = term * (n - j) // (j + 1)
    return n


def _normal_rank(n: int, tail: float) -> int:
    """:func:`_exact_rank` by the normal approximation N(n/2, n/4), with continuity correction."""
    z = NormalDist().inv_cdf(1.0 - tail)
    return max(0, min(n, math.floor(n / 2 - 0.5 - z * math.sqrt(n) / 2) + 1))


def ratio_interval(
    winner: Sequence[int], runner_up: Sequence[int], *, paired: bool, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Bootstrap interval of median(runner_up) / median(winner) - 1, deterministic.

    ``paired``: the two sequences are samples of the same rounds, resampled together so the
    drift a round shared cancels in the ratio.
    """
    rng = np.random.default_rng(_SEED)
    won, lost = np.asarray(winner, dtype=np.float64), np.asarray(runner_up, dtype=np.float64)
    picks = rng.integers(0, len(won), size=(_BOOTSTRAP, len(won)))
    w = np.median(won[picks], axis=1)
    # Paired: the same rounds for both, so what a round shared cancels in the ratio.
    r = np.median(lost[picks if paired else rng.integers(0, len(lost), size=(_BOOTSTRAP, len(lost)))], axis=1)
    ratios = np.sort(np.maximum(r, 1.0) / np.maximum(w, 1.0) - 1.0)
    tail = (1.0 - confidence) / 2.0
    return float(ratios[int(tail * (_BOOTSTRAP - 1))]), float(ratios[math.ceil((1.0 - tail) * (_BOOTSTRAP - 1))])


def _spread(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    centre = statistics.median(values)
    if centre <= 0:
        return 0.0
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    return (quartiles[2] - quartiles[0]) / centre


def _last_batch(events: Sequence[RecordEvent]) -> list[RecordEvent]:
    """The events of the last batch that was sampled: from its first round on (a search's finalists last)."""
    starts = [i for i, e in enumerate(events) if isinstance(e, Round) and e.number == 1]
    return list(events[starts[-1] :]) if starts else list(events)


def _median(candidate: CandidateRecord) -> float:
    assert candidate.stats is not None
    return candidate.stats.median_ns


def decision_of(
    record: AutotuneRecord, *, winner: str | None = None, demoted: Collection[str] = ()
) -> TuneDecision | None:
    """The decision ``record`` holds; None when it measured no winner (autotuning off, nothing valid).

    ``winner`` and ``demoted``: for a later demotion of this tune's winner, the candidate that took
    its place and those that failed on real inputs (left out of the comparison).
    """
    winner = winner or record.winner
    measured = {c.name: c for c in record.candidates if c.stats is not None and c.name not in demoted}
    if winner is None or winner not in measured:
        return None
    events = _last_batch(record.events)
    rounds = [e for e in events if isinstance(e, Round)]
    in_rounds = {name for e in rounds for name in e.samples_ns}
    runoff = next((e for e in reversed(events) if isinstance(e, Runoff)), None)
    short = next((e for e in events if isinstance(e, ShortCircuit) and e.name == winner), None)
    search = any(isinstance(e, SearchEnded) for e in record.events)
    # The deciding comparison: the last sampled batch's candidates (a search's finalists), else every one.
    compared = {n: c for n, c in measured.items() if n in in_rounds} if in_rounds and winner in in_rounds else measured
    faster = min((c for n, c in measured.items() if n != winner), key=_median, default=None)
    extra: dict[str, object] = {"search": search and bool(rounds)}
    if faster is not None and _median(faster) < _median(measured[winner]):
        extra |= {"faster": faster.name, "faster_ns": _median(faster), "faster_compared": faster.name in compared}
    if record.decision == "demoted" or demoted:
        return _by_medians(winner, compared, "demoted", rounds, extra)
    if runoff is not None and runoff.winner == winner and runoff.forfeit is not None and runoff.ratio is None:
        return _by_medians(winner, compared, "forfeit", rounds, extra, interval=False)
    verdict = next((e for e in reversed(events) if isinstance(e, Verdict)), None)
    if verdict is not None and verdict.winner == winner:
        return _by_verdict(verdict, compared, extra)
    # Records written before the schedule emitted a Verdict: derived from the samples.
    if short is not None:
        return _by_medians(winner, compared, "short_circuit", rounds, extra, interval=False)
    if runoff is not None and runoff.winner == winner and winner in runoff.finalists:
        if runoff.forfeit is not None or not runoff.pairs_ns:
            return _by_medians(winner, compared, "forfeit", rounds, extra, interval=False)
        return _by_runoff(winner, runoff, extra)
    return _by_medians(winner, compared, "rounds" if rounds else "medians", rounds, extra)


_VERDICT_STAGE: dict[str, DecidedBy] = {
    "rounds": "rounds",
    "runoff": "runoff",
    "short_circuit": "short_circuit",
    "single": "only",
}
_Z95 = 1.959964


def _by_verdict(verdict: Verdict, compared: dict[str, CandidateRecord], extra: dict[str, object]) -> TuneDecision:
    """The schedule's own figures; the interval from its paired log-ratio's standard error."""
    fields: dict[str, object] = {
        "winner": verdict.winner,
        "winner_ns": verdict.winner_ns,
        "stage": _VERDICT_STAGE[verdict.stage],
        "samples": verdict.pairs if verdict.stage == "runoff" else verdict.samples,
        **extra,
    }
    won = compared.get(verdict.winner)
    spreads = [won.stats.spread] if won is not None and won.stats is not None else []
    if verdict.runner_up is not None and verdict.margin is not None:
        fields |= {"runner_up": verdict.runner_up, "runner_up_ns": verdict.runner_up_ns, "margin": verdict.margin}
        runner = compared.get(verdict.runner_up)
        if runner is not None and runner.stats is not None:
            spreads.append(runner.stats.spread)
        if verdict.margin_se is not None and verdict.stage != "short_circuit":
            centre, half = math.log1p(verdict.margin), _Z95 * verdict.margin_se
            fields |= {"margin_low": math.expm1(centre - half), "margin_high": math.expm1(centre + half)}
    fields["spread"] = max(spreads, default=0.0)
    return TuneDecision.model_validate(fields)


def _by_runoff(winner: str, runoff: Runoff, extra: dict[str, object]) -> TuneDecision:
    first = runoff.finalists[0] == winner
    won = [a if first else b for a, b in runoff.pairs_ns]
    lost = [b if first else a for a, b in runoff.pairs_ns]
    ratios = [max(r, 1) / max(w, 1) for w, r in zip(won, lost, strict=True)]
    low, high = median_interval(ratios)
    ratio = statistics.median(ratios)
    winner_ns = float(statistics.median(won))
    return TuneDecision.model_validate(
        {
            "winner": winner,
            "winner_ns": winner_ns,
            "runner_up": runoff.finalists[1] if first else runoff.finalists[0],
            # As the pairs put it, relative to the winner: the median of each one's samples apart could
            # order them the other way under heavy noise, beside a margin that says the opposite.
            "runner_up_ns": winner_ns * ratio,
            "margin": ratio - 1.0,
            "margin_low": low - 1.0,
            "margin_high": high - 1.0,
            "stage": "runoff",
            "samples": len(ratios),
            "spread": _spread(ratios),
            **extra,
        }
    )


def _by_medians(
    winner: str,
    compared: dict[str, CandidateRecord],
    stage: DecidedBy,
    rounds: Sequence[Round],
    extra: dict[str, object],
    *,
    interval: bool = True,
) -> TuneDecision:
    won = compared.get(winner)
    assert won is not None and won.stats is not None
    others = sorted((c for n, c in compared.items() if n != winner), key=_median)
    fields: dict[str, object] = {
        "winner": winner,
        "winner_ns": won.stats.median_ns,
        "stage": "only" if not others and stage in ("rounds", "medians") else stage,
        "samples": won.stats.count,
        "spread": won.stats.spread,
        **extra,
    }
    if others:
        runner = others[0]
        assert runner.stats is not None
        fields |= {
            "runner_up": runner.name,
            "runner_up_ns": runner.stats.median_ns,
            "margin": max(runner.stats.median_ns, 1.0) / max(won.stats.median_ns, 1.0) - 1.0,
            "spread": max(won.stats.spread, runner.stats.spread),
        }
        if interval and len(won.samples_ns) >= 2 and len(runner.samples_ns) >= 2:
            pairs = [(e.samples_ns[winner], e.samples_ns[runner.name]) for e in rounds if _both(e, winner, runner.name)]
            if len(pairs) >= 5:
                low, high = ratio_interval([w for w, _ in pairs], [r for _, r in pairs], paired=True)
            else:
                low, high = ratio_interval(won.samples_ns, runner.samples_ns, paired=False)
            fields |= {"margin_low": low, "margin_high": high}
    return TuneDecision.model_validate(fields)


def _both(event: Round, a: str, b: str) -> bool:
    return a in event.samples_ns and b in event.samples_ns
