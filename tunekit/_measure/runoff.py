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
result says which way it ended (``ended``).

**Its cost is bounded twice**: at most ``max_rounds`` rounds, and at most ``BUDGET_FINALISTS *
max_rounds`` samples in all, shared by the finalists (a budget, not ``max_rounds`` x finalists: a
runoff among sixteen near-identical variants, which no number of rounds here separates, costs
what six finalists' would). Where the budget is what cuts the runoff short (it allows each finalist
still in fewer rounds than are left), a finalist no faster than the leader leaves as tied once it
is *undecidable in the budget*: the predictive probability that the budget's remaining pairs carry
its gap beyond ``DECISION_Z`` either way is below ``FUTILITY``. That is the stochastic curtailment
of a sequential test (a futility bound: Spiegelhalter, Freedman and Blackburn 1986), applied to the
horizon the budget sets; see :meth:`tunekit._measure.evidence.Gap.decidable`. When the budget or the
last round ends it, the lowest paired estimate decides.

What was tried and not kept, on ``benches/selection.py`` (500 seeds, tunekit only, mean regret):

- the same futility bound against ``max_rounds`` (every runoff, not only those the budget cuts
  short): at 1% it costs "picked best" in every 30-candidate layout (best 4x noisier 89.4% to 80.8%,
  heavy tails 90.2% to 82.0%). Significance is the wrong target there: a pair 0.75% apart under
  6% noise rarely reaches it in 100 rounds, yet each round still makes the leader likelier the
  true best; the bound stops exactly those runoffs.
- a smaller budget: two finalists' worth (200 samples) takes the near-identical scenario's runoff
  from 1125 samples to 195, but mean regret rises in the 30-candidate layouts (heavy tails 0.078%
  to 0.119%, periodic interference 0.059% to 0.108%); three: 0.090% and 0.081%; four, with the
  futility bound: 0.096% and 0.095%; five: "within 1%" of the noisiest scenario 93.0% to 92.8%.
- a one-sided practical-equivalence exit (a finalist leaves once the leader is known to be at most
  0.5% slower than it): on the 0.75%-apart layouts it picked the true best less often (heavy tails:
  90.2% to 88.6%), and on PoCL's CPU device the convolution's finalists differ by 0.1% under 2.3%
  noise per pair, where no 0.5% bound is reached in 100 rounds.
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

BUDGET_FINALISTS = 6
"""The runoff's samples in all: ``max_rounds`` rounds of this many finalists, shared by however many there are.

Six leaves every figure of ``benches/selection.py`` as it was (its runoffs have 2-8 finalists, most
of them separated within a few rounds); two, three or four finalists' worth cost "picked best" in
its 30-candidate layouts (see the module docstring).
"""

FUTILITY = 0.05
"""A finalist the budget cuts short leaves as tied when its chance of being told from the leader is below this."""

Ending = Literal["separated", "tied", "max_rounds", "forfeit"]
"""What ended a runoff: every other finalist separated from the leader (or forfeited); the rest all
known to within ``INDIFFERENCE`` of a tie with it, or undecidable in the budget (``FUTILITY``); the
last round or the budget; or forfeits alone."""


@dataclass(frozen=True, slots=True)
class RunoffResult:
    """How a runoff among ``finalists`` ended; ``winner`` is None when every finalist forfeited.

    ``rounds`` holds each runoff round's samples by finalist, in sampling order; ``dropped`` the
    finalists separated from the leader before the end, in order; ``tied`` those that left as
    tied with the leader (within ``INDIFFERENCE``, or undecidable in the budget), in order.
    ``gap`` is the runner-up's paired gap over the winner (log ratio, its standard error): how
    clear the decision is. ``ended`` says what ended it (see ``Ending``).
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
    budget: int | None = None,
) -> RunoffResult:
    """Time ``finalists`` in up to ``max_rounds`` rounds; the one with the lowest paired estimate wins.

    ``earlier``: each finalist's samples by round number from the rounds before, paired with the
    runoff's own; the runoff's rounds are numbered from ``first_round`` on, after those.
    ``budget``: the samples the runoff may take in all, shared by the finalists (default
    ``BUDGET_FINALISTS * max_rounds``); a round that would not fit is not started (the first always is).
    A finalist that raises forfeits and is out (``forfeits``; ``forfeit`` and ``error`` name the
    first); the others go on, and one left alone wins.
    Sampling stops early once every finalist but the leader is separated from it
    (``DECISION_Z``), known to within ``INDIFFERENCE`` of a tie with it, or undecidable in what is
    left of the budget (``FUTILITY``): those last two leave as ``tied``.
    """
    alive = list(dict.fromkeys(finalists))
    if len(alive) < 2:
        raise ValueError(f"a runoff needs at least two finalists, got {list(finalists)}")
    if budget is None:
        budget = BUDGET_FINALISTS * max_rounds
    samples: dict[int, dict[int, int]] = {i: dict((earlier or {}).get(i, {})) for i in alive}
    rounds: list[dict[int, int]] = []
    dropped: list[int] = []
    tied: list[int] = []
    forfeits: list[tuple[int, Exception]] = []
    stopped_early = False
    spent = 0
    for number in range(max_rounds):
        if rounds and spent + len(alive) > budget:
            break
        times: dict[int, int] = {}
        for index in _order(alive, number):
            try:
                times[index] = runner.sample(index)
            except NOT_A_CANDIDATE:  # no finalist's fault: the tune stops instead of crowning another
                raise
            except Exception as exc:  # a flaky finalist loses the runoff; the others go on
                alive.remove(index)
                forfeits.append((index, exc))
        spent += len(times)
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
        if rest and all(_tied(gaps[i]) for i in rest):
            tied += rest
            alive = [leader]
        else:
            # What the budget still allows each finalist, were none to leave: a gap that so many more
            # pairs would most likely leave undecided is not worth them.
            more = (budget - spent) // len(alive)
            if more < max_rounds - number - 1:
                for index in [i for i in rest if _futile(gaps[i], more)]:
                    alive.remove(index)
                    tied.append(index)
        if len(alive) == 1:
            stopped_early = number + 1 < max_rounds
            break
    forfeit, error = forfeits[0] if forfeits else (None, None)
    if not alive or (len(alive) == 1 and forfeits and not dropped and not tied):
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
    ended: Ending
    if len(alive) >= 2:  # the budget or the last round ended it: the lowest paired estimate decides
        winner, runner_up, last = _decide(samples, alive)
        ended = "max_rounds"
    else:  # every other finalist separated from it, tied with it or forfeited: the closest is the runner-up
        winner = alive[0]
        behind = {i: gap(samples[i], samples[winner]) for i in (*dropped, *tied)}
        runner_up = min(behind, key=lambda i: behind[i].estimate)
        last = behind[runner_up]
        ended = "tied" if tied else "separated"
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


def _futile(g: Gap, more: int) -> bool:
    """No faster than the leader by its pairs, and unlikely to be told from it in ``more`` pairs (``FUTILITY``)."""
    return g.pairs >= MIN_PAIRS and g.estimate >= 0.0 and g.decidable(DECISION_Z, more) < FUTILITY


def _leader(samples: Mapping[int, Mapping[int, int]], among: Sequence[int]) -> int:
    scores = centred_scores(samples, among)
    return min(among, key=lambda i: scores[i])


def _decide(samples: Mapping[int, Mapping[int, int]], among: Sequence[int]) -> tuple[int, int, Gap]:
    """The winner among ``among``, the closest other, and that one's gap over the winner."""
    winner = _leader(samples, among)
    gaps = {i: gap(samples[i], samples[winner]) for i in among if i != winner}
    runner_up = min(gaps, key=lambda i: gaps[i].estimate)
    return winner, runner_up, gaps[runner_up]
