"""The runoff: the finalists the rounds could not separate, timed back to back and compared in pairs.

Every finalist the rounds left within noise of the leader takes part, not just the two best by
median: with several close candidates and noisy samples, the true best is as likely third as
second. A runoff round times every finalist once, back to back, so they share the device's clock
and temperature; the order alternates (A B C, C B A, then rotated) so what drift remains inside
a round favours no one. Each finalist is compared with the leader through the log-ratios of their
paired samples (the rounds' pairs included), by a trimmed mean with that pair's own scale; a
finalist separated from the leader drops out, so the runoff narrows like a tournament and spends
its samples where the decision is still open.

A runoff whose remaining finalists are all known to within ``INDIFFERENCE`` of the leader ends
*tied*: the leader is kept, by the rule that made it the leader (the lowest centred score). The
result says which way it ended (``ended``). A looser, one-sided tie (a finalist leaving once the
leader is known to be at most 0.5% slower than it) was tried for races among many near-identical
variants and not kept: on ``benches/selection.py`` it picked the true best less often in the
0.75%-apart layouts (heavy tails: 90.2% to 88.6%), and on PoCL's CPU device the convolution's
finalists differ by 0.1% under 2.3% noise per pair, where no 0.5% bound is reached in 100 rounds.

Its cost is bounded: at most ``max_rounds`` rounds, each with one sample per finalist still in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tunekit._base.errors import NOT_A_CANDIDATE
from tunekit._measure.evidence import Gap, centred_scores, gap
from tunekit._measure.runner import CandidateRunner

__all__ = ["RunoffResult", "runoff"]

MIN_PAIRS = 10
"""Pairs (the rounds' included) before a comparison may end a finalist's run: fewer make its scale unreliable."""

DECISION_Z = 2.5
"""Standard errors (Student's t) by which a finalist must trail the leader to drop out before the last round."""

INDIFFERENCE = 0.005
"""A tie closer than this (0.5%) is not worth more rounds to break."""

Ending = Literal["separated", "tied", "max_rounds", "forfeit"]
"""What ended a runoff: every other finalist separated from the leader (or forfeited), the rest all
known to within ``INDIFFERENCE`` of a tie with it, the last round, or forfeits alone."""


@dataclass(frozen=True, slots=True)
class RunoffResult:
    """How a runoff among ``finalists`` ended; ``winner`` is None when every finalist forfeited.

    ``rounds`` holds each runoff round's samples by finalist, in sampling order; ``dropped`` the
    finalists separated from the leader before the end, in order; ``tied`` those that left as
    tied with the leader (within ``INDIFFERENCE``), in order. ``gap`` is the runner-up's paired
    gap over the winner (log ratio, its standard error): how clear the decision is. ``ended``
    says what ended it (see ``Ending``).
    """

    finalists: tuple[int, ...]
    rounds: tuple[dict[int, int], ...]
    winner: int | None
    runner_up: int | None
    gap: Gap | None
    dropped: tuple[int, ...] = ()
    forfeit: int | None = None
    error: Exception | None = None
    stopped_early: bool = False
    forfeits: tuple[tuple[int, Exception], ...] = ()
    samples: dict[int, dict[int, int]] = field(default_factory=dict)
    tied: tuple[int, ...] = ()
    ended: Ending = "max_rounds"


def _tied(g: Gap) -> bool:
    """Known to within ``INDIFFERENCE`` of a tie with the leader: both the estimate and the interval's half-width."""
    return g.pairs >= MIN_PAIRS and g.within(DECISION_Z, INDIFFERENCE) and abs(g.estimate) < INDIFFERENCE


def _order(alive: Sequence[int], number: int) -> list[int]:
    shift = (number // 2) % len(alive)
    base = [*alive[shift:], *alive[:shift]]
    return base if number % 2 == 0 else base[::-1]


def runoff(
    runner: CandidateRunner,
    finalists: Sequence[int],
    max_rounds: int,
    *,
    earlier: Mapping[int, Mapping[int, int]] | None = None,
    first_round: int = 1,
) -> RunoffResult:
    """Time ``finalists`` in up to ``max_rounds`` rounds; the one with the lowest paired estimate wins.

    ``earlier``: each finalist's samples by round number from the rounds before, paired with the
    runoff's own; the runoff's rounds are numbered from ``first_round`` on, after those.
    A finalist that raises forfeits and is out (``forfeits``; ``forfeit`` and ``error`` name the
    first); the others go on, and one left alone wins.
    Sampling stops early once every finalist but the leader is separated from it
    (``DECISION_Z``), or the rest are known to within ``INDIFFERENCE`` of a tie with it (``tied``).
    """
    alive = list(dict.fromkeys(finalists))
    if len(alive) < 2:
        raise ValueError(f"a runoff needs at least two finalists, got {list(finalists)}")
    samples: dict[int, dict[int, int]] = {i: dict((earlier or {}).get(i, {})) for i in alive}
    rounds: list[dict[int, int]] = []
    dropped: list[int] = []
    tied: list[int] = []
    forfeits: list[tuple[int, Exception]] = []
    stopped_early = False
    for number in range(max_rounds):
        times: dict[int, int] = {}
        for index in _order(alive, number):
            try:
                times[index] = runner.sample(index)
            except NOT_A_CANDIDATE:  # no finalist's fault: the tune stops instead of crowning another
                raise
            except Exception as exc:  # a flaky finalist loses the runoff; the others go on
                alive.remove(index)
                forfeits.append((index, exc))
        if times:
            rounds.append(times)
        if len(alive) <= 1:  # none left to compare: one wins by forfeit, or every one forfeited
            break
        for index in alive:
            samples[index][first_round + number] = times[index]
        leader = _leader(samples, alive)
        gaps = {i: gap(samples[i], samples[leader]) for i in alive if i != leader}
        for index, g in gaps.items():
            if g.pairs >= MIN_PAIRS and g.beyond(DECISION_Z):
                alive.remove(index)
                dropped.append(index)
        rest = [i for i in alive if i != leader]
        if len(alive) == 1 or all(_tied(gaps[i]) for i in rest):
            tied = rest
            stopped_early = number + 1 < max_rounds
            break
    forfeit, error = forfeits[0] if forfeits else (None, None)
    if not alive or (len(alive) == 1 and forfeits and not dropped):
        # Every finalist raised (no one to crown: the schedule ranks what else it measured), or one
        # won by forfeit: nothing the samples said decided it.
        return RunoffResult(
            tuple(finalists),
            tuple(rounds),
            alive[0] if alive else None,
            None,
            None,
            forfeit=forfeit,
            error=error,
            forfeits=tuple(forfeits),
            samples=samples,
            ended="forfeit",
        )
    if len(alive) >= 2:
        winner, runner_up, last = _decide(samples, alive)
        ended: Ending = "tied" if tied else "max_rounds"
    else:  # every other finalist separated from it (or forfeited): the closest of those is the runner-up
        winner = alive[0]
        behind = {i: gap(samples[i], samples[winner]) for i in dropped}
        runner_up = min(behind, key=lambda i: behind[i].estimate)
        last = behind[runner_up]
        ended = "separated"
    return RunoffResult(
        tuple(finalists),
        tuple(rounds),
        winner,
        runner_up,
        last,
        tuple(dropped),
        forfeit=forfeit,
        error=error,
        forfeits=tuple(forfeits),
        stopped_early=stopped_early,
        samples=samples,
        tied=tuple(tied),
        ended=ended,
    )


def _leader(samples: Mapping[int, Mapping[int, int]], among: Sequence[int]) -> int:
    scores = centred_scores(samples, among)
    return min(among, key=lambda i: scores[i])


def _decide(samples: Mapping[int, Mapping[int, int]], among: Sequence[int]) -> tuple[int, int, Gap]:
    """The winner among ``among``, the closest other, and that one's gap over the winner."""
    winner = _leader(samples, among)
    gaps = {i: gap(samples[i], samples[winner]) for i in among if i != winner}
    runner_up = min(gaps, key=lambda i: gaps[i].estimate)
    return winner, runner_up, gaps[runner_up]
