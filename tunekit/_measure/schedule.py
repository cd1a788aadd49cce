"""The measurement schedule: how a batch of candidates is timed and ranked.

The default (``adaptive``) schedule:

1. **Device warm-up** of ``warmup_ms`` so clocks have ramped before the first timed sample.
2. **Admission round**, in priority order: each candidate's warm-up runs, the last of them timed
   (kept in the record, left out of the statistics: it is warm-up-biased), and one kept
   sample. A candidate whose sample meets the roofline limit gets a confirming sample;
   when that meets it too, the rest of the batch is skipped (short circuit).
3. **Rounds**: every live candidate gets one sample per round, in rotating order, so all of
   them share the device's clock and temperature. After ``min_samples`` kept samples, a
   candidate is eliminated when its median exceeds ``speed_factor`` x the leader's best sample,
   or when it is slower than the leader beyond the noise of both. The rounds stop when one or
   two candidates are left, or at ``max_samples``.
4. **Runoff**: the finalists the rounds could not separate are timed back to back, within a
   sample budget they share (see :mod:`tunekit._measure.runoff`).

``adaptive=False`` is the fixed schedule: each candidate in turn, ``warmup`` untimed runs then
``samples`` timed ones, ranked by median.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from tunekit._base.deadline import past
from tunekit._base.errors import NOT_A_CANDIDATE, CandidateFailed, describe_error
from tunekit._base.settings_model import Settings
from tunekit._measure.client import Client, SupportsWarmup
from tunekit._measure.evidence import Gap, centred_scores, gap
from tunekit._measure.runner import CandidateRunner, SupportsPhases
from tunekit._measure.runoff import Ending, runoff
from tunekit._values.durations import BenchmarkDurations
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.records import (
    DecidedBy,
    Eliminated,
    RecordEvent,
    Round,
    Runoff,
    SamplingStopped,
    ShortCircuit,
    Stage,
    StopReason,
    Verdict,
    Warmup,
)

__all__ = ["BatchResult", "candidate_failure", "measure_batch"]

SEPARATION_Z = 3.0
"""Standard errors by which a candidate must trail the leader to be dropped before the runoff.

High on purpose: the test is repeated every round, and dropping the true best is the one
mistake the schedule cannot undo.
"""

SPACING = 2
"""Runs of other work before a candidate's first confirming sample (twice as many before its second)."""

CONFIRMATIONS = 3
"""Confirming samples a candidate that met the roofline limit needs, each after other candidates' runs.

Noise that is correlated in time (a clock state, periodic interference) makes a sample taken
right after a fast one fast too; samples with other work between them are nearer independent.
"""


def candidate_failure(exc: Exception) -> Failed:
    """The outcome of a candidate that raised: the runner's verdict when it has one.

    A client that went away (:class:`ClientClosed`) or a worker that could not be started
    (:class:`WorkerStartFailed`) is no candidate's failure: it ends the tune.
    """
    if isinstance(exc, NOT_A_CANDIDATE):
        raise exc
    if isinstance(exc, CandidateFailed):  # crash, timeout, or an error in a worker process
        return Failed(exc.reason, exc.stage)
    return Failed(describe_error(exc), "run")


class BatchResult(Mapping[int, Outcome]):
    """Each candidate's outcome by index, plus the decided order and what happened on the way.

    ``ranking`` lists the measured candidates fastest first; it can differ from the order of
    medians when a runoff or a short circuit decided.
    """

    def __init__(
        self,
        outcomes: dict[int, Outcome],
        ranking: Sequence[int],
        events: Sequence[RecordEvent] = (),
        phase_s: Mapping[str, float] | None = None,
    ) -> None:
        self.outcomes = outcomes
        self.ranking = tuple(ranking)
        self.events = tuple(events)
        self.phase_s: dict[str, float] = dict(phase_s or {})
        """Wall seconds of the schedule's phases: ``warmup``, ``measure`` (admission and rounds), ``runoff``."""

    def __getitem__(self, index: int) -> Outcome:
        return self.outcomes[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)


def measure_batch(
    runner: CandidateRunner,
    batch: Sequence[int],
    settings: Settings,
    *,
    client: Client | None = None,
    limit_ns: float | None = None,
    names: Sequence[str] | None = None,
    lone_samples: int = 1,
    deadline: float | None = None,
) -> BatchResult:
    """Time the candidates of ``batch`` and rank them.

    Args:
        runner: runs one candidate (warm-up or timed sample).
        batch: candidate indices in priority order.
        settings: the schedule's knobs (``adaptive``, ``min_samples``, ...).
        client: the device, for its own warm-up when it supports one.
        limit_ns: the roofline short-circuit limit, None for no short circuit.
        names: candidate names by index, for the record's events.
        lone_samples: kept samples a candidate left alone gets. One for a tune, which ranks a batch on
            its own; a search compares the candidate's score with other batches' medians.
        deadline: a ``time.monotonic()`` time (a search's ``max_seconds``) after which no further
            candidate starts: those are left out of the result, unevaluated. The first always runs.

    A candidate that raises is disqualified with its error; the rest still run.
    """
    if not settings.adaptive:
        return _fixed(runner, batch, settings, deadline)
    return _Adaptive(runner, batch, settings, client, limit_ns, names, lone_samples, deadline).run()


def _fixed(runner: CandidateRunner, batch: Sequence[int], settings: Settings, deadline: float | None) -> BatchResult:
    outcomes: dict[int, Outcome] = {}
    started = time.perf_counter()
    for index in batch:
        if outcomes and past(deadline):
            break
        try:
            for _ in range(settings.warmup):
                runner.warmup(index)
            samples = tuple(runner.sample(index) for _ in range(settings.samples))
        except Exception as exc:  # any candidate error disqualifies only that candidate
            outcomes[index] = candidate_failure(exc)
        else:
            outcomes[index] = Measured(BenchmarkDurations(samples))
    return BatchResult(outcomes, _by_median(outcomes, outcomes), phase_s={"measure": time.perf_counter() - started})


def _by_median(indices: Iterator[int] | Mapping[int, Outcome], outcomes: Mapping[int, Outcome]) -> list[int]:
    measured = [(o.durations.score, i) for i in indices if isinstance(o := outcomes[i], Measured)]
    return [i for _, i in sorted(measured)]


class _Adaptive:
    """One run of the adaptive schedule; all of its state lives here, none on the caller."""

    def __init__(
        self,
        runner: CandidateRunner,
        batch: Sequence[int],
        settings: Settings,
        client: Client | None,
        limit_ns: float | None,
        names: Sequence[str] | None,
        lone_samples: int = 1,
        deadline: float | None = None,
    ) -> None:
        self.runner = runner
        self.lone_samples = lone_samples
        self.deadline = deadline
        self.batch = list(batch)
        self.settings = settings
        self.client = client
        self.limit_ns = limit_ns
        self.names = names
        self.samples: dict[int, list[int]] = {}  # every timed sample; the first is discarded
        self.by_round: dict[int, dict[int, int]] = {}  # kept samples taken in a round, by round number
        self.outcomes: dict[int, Outcome] = {}
        self.live: list[int] = []
        self.eliminated: list[int] = []
        self.events: list[RecordEvent] = []
        self.front: list[int] = []  # candidates that rank first, in order (short circuit, runoff)
        self.stage: Stage = "rounds"
        self.runner_up: int | None = None
        self.margin: Gap | None = None
        self.number = 1  # the last round run
        self.runoff_samples = 0
        self.runoff_ended: Ending | None = None
        self.round_samples: dict[str, int] = {}  # the admission round's samples
        self.next_up = 0
        self.spacer_turn = -1
        self.phase_s: dict[str, float] = {}

    def name(self, index: int) -> str:
        return self.names[index] if self.names is not None else f"#{index}"

    def kept(self, index: int) -> list[int]:
        return self.samples[index][1:]

    def median(self, index: int) -> float:
        return float(statistics.median(self.kept(index)))

    def fail(self, index: int, exc: Exception) -> None:
        self.outcomes[index] = candidate_failure(exc)
        self.samples.pop(index, None)
        self.by_round.pop(index, None)
        if index in self.live:
            self.live.remove(index)

    # -- the phases ------------------------------------------------------------------

    def run(self) -> BatchResult:
        started = time.perf_counter()
        self.warm_up_device()
        warmed = time.perf_counter()
        short_circuited = self.admit()
        if not short_circuited:
            self.rounds()
        sampled = time.perf_counter()
        if not short_circuited and len(self.live) >= 2 and self.settings.runoff_pairs > 0:
            self.run_off()
        self.verdict()
        self.phase_s = {
            "warmup": warmed - started,
            "measure": sampled - warmed,
            "runoff": time.perf_counter() - sampled,
        }
        return self.result()

    def announce(self, phase: str, indices: Sequence[int], *, number: int = 0, limit: int | None = None) -> None:
        """Tell a runner that displays progress which phase this is (the others are not asked)."""
        if isinstance(self.runner, SupportsPhases):
            self.runner.phase(phase, indices, number=number, limit=limit)

    def warm_up_device(self) -> None:
        duration_ns = int(self.settings.warmup_ms * 1e6)
        if duration_ns <= 0 or not self.batch:
            return
        self.announce("warmup", self.batch)
        if isinstance(self.client, SupportsWarmup):
            spent_ns = self.client.warm_up(duration_ns)
            spent_ms = self.settings.warmup_ms if spent_ns is None else spent_ns / 1e6
            self.events.append(Warmup(duration_ms=spent_ms, method="device"))
            return
        # No device warm-up of its own: keep it busy with the batch itself, for wall time.
        deadline = time.perf_counter_ns() + duration_ns
        while time.perf_counter_ns() < deadline:
            runnable = [i for i in self.batch if i not in self.outcomes]
            if not runnable:
                break
            for index in runnable:
                try:
                    self.runner.warmup(index)
                except Exception as exc:
                    self.fail(index, exc)
        self.events.append(Warmup(duration_ms=self.settings.warmup_ms, method="candidates"))

    def admit(self) -> bool:
        """The first round, in priority order; True when a short circuit ended the batch."""
        self.announce("admission", [i for i in self.batch if i not in self.outcomes])
        started = False
        while self.next_up < len(self.batch):
            index = self.batch[self.next_up]
            self.next_up += 1
            if index in self.outcomes:
                continue
            # Checked before each candidate, not once per batch, so a search overruns its time by one
            # candidate at most: those not started are not evaluated (the rounds still rank those that were).
            if started and past(self.deadline):
                break
            started = True
            if self.admit_one(index) and self.meets_limit(index) and self.confirmed(index):
                self.short_circuit(index)
                return True
        if self.round_samples:
            self.events.append(Round(number=1, samples_ns=self.round_samples))
        return False

    def admit_one(self, index: int) -> bool:
        """Time ``index`` for the first time; whether it is live (it did not raise)."""
        try:
            # The first timed sample is the candidate's first warm-up run: timed for the
            # record, left out of the statistics. ``warmup`` - 1 untimed runs come before it.
            for _ in range(self.settings.warmup - 1):
                self.runner.warmup(index)
            self.samples[index] = [self.runner.sample(index), self.runner.sample(index)]
        except Exception as exc:  # any candidate error disqualifies only that candidate
            self.fail(index, exc)
            return False
        self.live.append(index)
        self.by_round[index] = {1: self.samples[index][1]}
        self.round_samples[self.name(index)] = self.samples[index][1]
        return True

    def meets_limit(self, index: int) -> bool:
        return self.limit_ns is not None and index in self.samples and self.samples[index][-1] <= self.limit_ns

    def confirmed(self, index: int) -> bool:
        """Whether ``index``, whose kept sample met the roofline limit, meets it in confirming samples too.

        The ``j``-th confirming sample comes after ``2 j`` runs of other work (``spacer``): the
        spacing grows, so no period of the noise lines up with it, and a fast clock state or a
        lull in interference that made one sample fast is unlikely to make the next one fast too.
        """
        for number in range(1, CONFIRMATIONS + 1):
            runs = 0
            while runs < SPACING * number:
                runs += self.spacer(index)
            if index not in self.live:
                return False
            try:
                self.samples[index].append(self.runner.sample(index))
            except Exception as exc:
                self.fail(index, exc)
                return False
            if not self.meets_limit(index):
                return False
        return True

    def spacer(self, contender: int) -> int:
        """Run other work between two samples of ``contender``; how many runs it took.

        Another live candidate's sample when there is one (it is kept: not a wasted run), else the
        next candidate's admission, else an untimed run of the contender itself.
        """
        others = [i for i in self.live if i != contender]
        if others:
            self.spacer_turn += 1
            other = others[self.spacer_turn % len(others)]
            try:
                self.samples[other].append(self.runner.sample(other))
            except Exception as exc:
                self.fail(other, exc)
            return 1
        while self.next_up < len(self.batch) and not past(self.deadline):
            index = self.batch[self.next_up]
            self.next_up += 1
            if index not in self.outcomes:
                self.admit_one(index)
                return self.settings.warmup + 1
        try:
            self.runner.warmup(contender)
        except Exception as exc:
            self.fail(contender, exc)
        return 1

    def short_circuit(self, index: int) -> None:
        rest = [i for i in self.batch[self.next_up :] if i not in self.outcomes]
        for other in rest:
            self.outcomes[other] = Skipped(f"short circuit: {self.name(index)} met the roofline limit")
        self.events.append(Round(number=1, samples_ns=self.round_samples))
        self.events.append(
            ShortCircuit(
                name=self.name(index),
                limit_ns=float(self.limit_ns or 0.0),
                samples_ns=self.kept(index),
                skipped=[self.name(i) for i in rest],
            )
        )
        self.front = [index]
        self.stage = "short_circuit"
        self.stop("short_circuit", 1)

    def rounds(self) -> None:
        number = 1
        while True:
            self.number = number
            if len(self.live) <= 1 and not self.short_of_samples():
                self.stop("one_left" if not self.eliminated else "decided", number)
                return
            if min(len(self.by_round[i]) for i in self.live) >= self.settings.min_samples:
                self.eliminate(number)
                if len(self.live) == 1:
                    self.stop("decided", number)
                    return
                if len(self.live) == 2:
                    self.stop("two_left", number)
                    return
            if min(len(self.by_round[i]) for i in self.live) >= self.settings.max_samples:
                self.stop("max_samples", number)
                return
            number += 1
            self.one_round(number)

    def short_of_samples(self) -> bool:
        """The one candidate left has fewer kept samples than ``lone_samples``."""
        return len(self.live) == 1 and len(self.kept(self.live[0])) < self.lone_samples

    def one_round(self, number: int) -> None:
        self.announce("rounds", self.live, number=number, limit=self.settings.max_samples)
        # Rotating the order spreads the first and last slot of a round over every candidate.
        shift = number % len(self.live)
        order = self.live[shift:] + self.live[:shift]
        round_samples: dict[str, int] = {}
        for index in order:
            if len(self.by_round[index]) >= self.settings.max_samples:
                continue
            try:
                sample = self.runner.sample(index)
            except Exception as exc:
                self.fail(index, exc)
                continue
            self.samples[index].append(sample)
            self.by_round[index][number] = sample
            round_samples[self.name(index)] = sample
        self.events.append(Round(number=number, samples_ns=round_samples))

    def leader(self, among: Sequence[int]) -> int:
        scores = centred_scores(self.by_round, among)
        return min(among, key=lambda i: scores[i])

    def eliminate(self, number: int) -> None:
        """Drop the candidates that the evidence says are slower than the leader.

        Each is compared with the leader through their paired samples (same rounds), with that
        pair's own scale and a t quantile for its own count: a candidate much noisier than the
        rest needs more rounds before it can go, instead of being judged by the others' quiet.
        The mean of the log-ratios, not a trimmed one: a spike inflates the scale more than the
        mean, which only makes the test more cautious, and the trimmed mean's standard error
        loses degrees of freedom that the few samples of the rounds cannot spare.
        """
        leader = self.leader(self.live)
        best = min(self.kept(leader))
        leader_median = self.median(leader)
        for index in list(self.live):
            if index == leader:
                continue
            median = self.median(index)
            if median > self.settings.speed_factor * best and min(self.kept(index)) > leader_median:
                reason: Literal["slower", "separated"] = "slower"
            elif gap(self.by_round[index], self.by_round[leader], trim=0.0).beyond(SEPARATION_Z):
                reason = "separated"
            else:
                continue
            self.live.remove(index)
            self.eliminated.append(index)
            self.events.append(
                Eliminated(
                    name=self.name(index),
                    round=number,
                    reason=reason,
                    median_ns=median,
                    leader=self.name(leader),
                    leader_best_ns=best,
                    leader_median_ns=leader_median,
                )
            )

    def run_off(self) -> None:
        finalists = sorted(self.live, key=centred_scores(self.by_round, self.live).__getitem__)
        self.announce("runoff", finalists, limit=self.settings.runoff_pairs)
        result = runoff(
            self.runner,
            finalists,
            self.settings.runoff_pairs,
            earlier=self.by_round,
            first_round=self.number + 1,
        )
        self.runoff_samples = sum(len(r) for r in result.rounds)
        for index, error in result.forfeits:
            self.fail(index, error)
            failure = candidate_failure(error)
            self.outcomes[index] = Failed(f"forfeited the runoff: {failure.reason}", failure.stage)
        if result.winner is None:
            # Every finalist forfeited: no runoff decided anything (a Runoff event names a winner), and
            # the verdict falls to what the rounds measured, if anything.
            return
        # The runoff's samples stay in its event; the candidates' own samples are the rounds'.
        standing = [i for i in finalists if i not in dict(result.forfeits)]
        scores = centred_scores(result.samples, standing) if len(standing) >= 2 else {}
        self.front = [result.winner, *sorted((i for i in standing if i != result.winner), key=scores.__getitem__)]
        self.stage = "runoff"
        self.runoff_ended = result.ended
        self.runner_up = result.runner_up
        self.margin = result.gap
        names = {i: self.name(i) for i in finalists}
        ratio = None if result.gap is None else math.exp(-result.gap.estimate)
        self.events.append(
            Runoff(
                finalists=[names[i] for i in finalists],
                pairs_ns=[(r[finalists[0]], r[finalists[1]]) for r in result.rounds if len(r) == 2]
                if len(finalists) == 2
                else [],
                rounds_ns=[{names[i]: t for i, t in r.items()} for r in result.rounds],
                ratio=ratio,
                margin=0.0 if ratio is None else abs(1.0 - ratio),
                winner=names[result.winner],
                runner_up=None if result.runner_up is None else names[result.runner_up],
                dropped=[names[i] for i in result.dropped],
                forfeit=None if result.forfeit is None else names[result.forfeit],
                stopped_early=result.stopped_early,
                tied=[names[i] for i in result.tied],
                ended=result.ended,
            )
        )

    def verdict(self) -> None:
        """The ``Verdict`` event: who won, by how much, how sure, and which stage decided."""
        measured = [i for i in self.samples if i not in self.outcomes or isinstance(self.outcomes[i], Measured)]
        if not measured:
            return
        winner = self.front[0] if self.front else min(measured, key=self.median)
        if self.stage == "rounds" and len(measured) >= 2:
            others = {i: gap(self.by_round[i], self.by_round[winner]) for i in measured if i != winner}
            paired = {i: g for i, g in others.items() if g.pairs}
            if paired:
                self.runner_up = min(paired, key=lambda i: paired[i].estimate)
                self.margin = paired[self.runner_up]
        stage: Stage = "single" if len(measured) == 1 and self.stage == "rounds" else self.stage
        decided_by: DecidedBy
        if stage == "runoff":
            decided_by = self.runoff_ended or "max_rounds"
        elif stage == "rounds":
            decided_by = "eliminations" if len(self.live) <= 1 else "max_rounds"
        else:
            decided_by = stage
        winner_ns = self.median(winner)
        margin = self.margin
        self.events.append(
            Verdict(
                stage=stage,
                winner=self.name(winner),
                winner_ns=winner_ns,
                runner_up=None if self.runner_up is None else self.name(self.runner_up),
                runner_up_ns=None if margin is None else winner_ns * math.exp(margin.estimate),
                margin=None if margin is None else math.exp(margin.estimate) - 1.0,
                margin_se=None if margin is None or not math.isfinite(margin.se) else margin.se,
                pairs=0 if margin is None else margin.pairs,
                # Kept samples, as each candidate's record holds them: its first, warm-up-biased one is
                # timed but left out of every statistic, so counting it would not match the records' cost.
                samples=sum(len(s[1:]) for s in self.samples.values()) + self.runoff_samples,
                decided_by=decided_by,
            )
        )

    def stop(self, reason: StopReason, rounds: int) -> None:
        if not self.live:
            # Every candidate failed (or none reached the schedule): there is nothing to stop, and
            # a "one_left" event naming no one would read as a tune that measured something.
            return
        self.events.append(SamplingStopped(reason=reason, rounds=rounds, survivors=[self.name(i) for i in self.live]))

    def result(self) -> BatchResult:
        for index, samples in self.samples.items():
            kept = tuple(samples[1:])
            self.outcomes[index] = Measured(BenchmarkDurations(kept), discarded_ns=tuple(samples[:1]))
        ordered = [i for i in self.batch if i in self.outcomes]
        outcomes = {i: self.outcomes[i] for i in ordered}
        front = [i for i in self.front if isinstance(outcomes.get(i), Measured)]
        survivors = _by_median((i for i in self.live if i not in front), outcomes)
        rest = _by_median((i for i in ordered if i not in front and i not in survivors), outcomes)
        return BatchResult(outcomes, [*front, *survivors, *rest], self.events, self.phase_s)
