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
4. **Runoff**: two finalists the rounds could not separate are timed in pairs
   (see :mod:`tunekit._measure.runoff`).

``adaptive=False`` is the fixed schedule: each candidate in turn, ``warmup`` untimed runs then
``samples`` timed ones, ranked by median.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence

from tunekit._base.deadline import past
from tunekit._base.errors import NOT_A_CANDIDATE, CandidateFailed, describe_error
from tunekit._base.settings_model import Settings
from tunekit._measure.client import Client, SupportsWarmup
from tunekit._measure.runner import CandidateRunner
from tunekit._measure.runoff import runoff
from tunekit._values.durations import BenchmarkDurations
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.records import (
    Eliminated,
    RecordEvent,
    Round,
    Runoff,
    SamplingStopped,
    ShortCircuit,
    StopReason,
    Warmup,
)

__all__ = ["BatchResult", "candidate_failure", "measure_batch"]

SEPARATION_Z = 3.0
"""Standard errors by which a candidate must trail the leader to be dropped before the runoff.

High on purpose: the test is repeated every round, and dropping the true best is the one
mistake the schedule cannot undo.
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


def _t_quantile(z: float, freedom: int) -> float:
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


class BatchResult(Mapping[int, Outcome]):
    """Each candidate's outcome by index, plus the decided order and what happened on the way.

    ``ranking`` lists the measured candidates fastest first; it can differ from the order of
    medians when a runoff or a short circuit decided.
    """

    def __init__(
        self, outcomes: dict[int, Outcome], ranking: Sequence[int], events: Sequence[RecordEvent] = ()
    ) -> None:
        self.outcomes = outcomes
        self.ranking = tuple(ranking)
        self.events = tuple(events)

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
    return BatchResult(outcomes, _by_median(outcomes, outcomes))


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
        self.outcomes: dict[int, Outcome] = {}
        self.live: list[int] = []
        self.eliminated: list[int] = []
        self.events: list[RecordEvent] = []
        self.first: int | None = None  # a finalist that must rank first (short circuit, runoff)
        self.second: int | None = None

    def name(self, index: int) -> str:
        return self.names[index] if self.names is not None else f"#{index}"

    def kept(self, index: int) -> list[int]:
        return self.samples[index][1:]

    def median(self, index: int) -> float:
        return float(statistics.median(self.kept(index)))

    def fail(self, index: int, exc: Exception) -> None:
        self.outcomes[index] = candidate_failure(exc)
        self.samples.pop(index, None)
        if index in self.live:
            self.live.remove(index)

    # -- the phases ------------------------------------------------------------------

    def run(self) -> BatchResult:
        self.warm_up_device()
        if not self.admit():
            self.rounds()
            if len(self.live) >= 2 and self.settings.runoff_pairs > 0:
                self.run_off()
        return self.result()

    def warm_up_device(self) -> None:
        duration_ns = int(self.settings.warmup_ms * 1e6)
        if duration_ns <= 0 or not self.batch:
            return
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
        round_samples: dict[str, int] = {}
        started = False
        for position, index in enumerate(self.batch):
            if index in self.outcomes:
                continue
            # Checked before each candidate, not once per batch, so a search overruns its time by one
            # candidate at most: those not started are not evaluated (the rounds still rank those that were).
            if started and past(self.deadline):
                break
            started = True
            try:
                # The first timed sample is the candidate's first warm-up run: timed for the
                # record, left out of the statistics. ``warmup`` - 1 untimed runs come before it.
                for _ in range(self.settings.warmup - 1):
                    self.runner.warmup(index)
                self.samples[index] = [self.runner.sample(index), self.runner.sample(index)]
            except Exception as exc:  # any candidate error disqualifies only that candidate
                self.fail(index, exc)
                continue
            self.live.append(index)
            round_samples[self.name(index)] = self.samples[index][1]
            if self.short_circuits(index):
                rest = [i for i in self.batch[position + 1 :] if i not in self.outcomes]
                for other in rest:
                    self.outcomes[other] = Skipped(f"short circuit: {self.name(index)} met the roofline limit")
                self.events.append(Round(number=1, samples_ns=round_samples))
                self.events.append(
                    ShortCircuit(
                        name=self.name(index),
                        limit_ns=float(self.limit_ns or 0.0),
                        samples_ns=self.kept(index)[-2:],
                        skipped=[self.name(i) for i in rest],
                    )
                )
                self.first = index
                self.stop("short_circuit", 1)
                return True
        if round_samples:
            self.events.append(Round(number=1, samples_ns=round_samples))
        return False

    def short_circuits(self, index: int) -> bool:
        """Whether ``index`` meets the limit twice: its kept sample, then a confirming one."""
        if self.limit_ns is None or self.samples[index][-1] > self.limit_ns:
            return False
        try:
            confirm = self.runner.sample(index)
        except Exception as exc:
            self.fail(index, exc)
            return False
        self.samples[index].append(confirm)
        return confirm <= self.limit_ns

    def rounds(self) -> None:
        number = 1
        while True:
            if len(self.live) <= 1 and not self.short_of_samples():
                self.stop("one_left" if not self.eliminated else "decided", number)
                return
            if min(len(self.kept(i)) for i in self.live) >= self.settings.min_samples:
                self.eliminate(number)
                if len(self.live) == 1:
                    self.stop("decided", number)
                    return
                if len(self.live) == 2:
                    self.stop("two_left", number)
                    return
            if min(len(self.kept(i)) for i in self.live) >= self.settings.max_samples:
                self.stop("max_samples", number)
                return
            number += 1
            self.one_round(number)

    def short_of_samples(self) -> bool:
        """The one candidate left has fewer kept samples than ``lone_samples``."""
        return len(self.live) == 1 and len(self.kept(self.live[0])) < self.lone_samples

    def one_round(self, number: int) -> None:
        # Rotating the order spreads the first and last slot of a round over every candidate.
        shift = number % len(self.live)
        order = self.live[shift:] + self.live[:shift]
        round_samples: dict[str, int] = {}
        for index in order:
            if len(self.kept(index)) >= self.settings.max_samples:
                continue
            try:
                sample = self.runner.sample(index)
            except Exception as exc:
                self.fail(index, exc)
                continue
            self.samples[index].append(sample)
            round_samples[self.name(index)] = sample
        self.events.append(Round(number=number, samples_ns=round_samples))

    def eliminate(self, number: int) -> None:
        medians = {i: self.median(i) for i in self.live}
        leader = min(self.live, key=lambda i: medians[i])
        best = min(self.kept(leader))
        noise, freedom = self.pooled_noise()
        # A noise estimate from few samples is itself noisy: Student's t, not the normal z.
        threshold = _t_quantile(SEPARATION_Z, freedom)
        for index in list(self.live):
            if index == leader:
                continue
            if medians[index] > self.settings.speed_factor * best:
                reason = "slower"
            elif medians[index] - medians[leader] > threshold * math.hypot(
                self.standard_error(index, medians, noise), self.standard_error(leader, medians, noise)
            ):
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
                    median_ns=medians[index],
                    leader=self.name(leader),
                    leader_best_ns=best,
                    leader_median_ns=medians[leader],
                )
            )

    def pooled_noise(self) -> tuple[float, int]:
        """Relative noise (standard deviation of log samples), pooled over the live candidates.

        Noise is multiplicative, so candidates share it and pooling gives a usable estimate
        after three samples each. Not a robust estimate, on purpose: an outlier inflates it,
        which only makes elimination more cautious.
        """
        squares = 0.0
        freedom = 0
        for index in self.live:
            logs = [math.log(max(s, 1)) for s in self.kept(index)]
            if len(logs) >= 2:
                mean = statistics.fmean(logs)
                squares += sum((x - mean) ** 2 for x in logs)
                freedom += len(logs) - 1
        return (math.sqrt(squares / freedom) if freedom else 0.0), freedom

    def standard_error(self, index: int, medians: dict[int, float], noise: float) -> float:
        """Standard error of a candidate's median, in ns (a median's is ~1.25x a mean's)."""
        return 1.2533 * noise * medians[index] / math.sqrt(len(self.kept(index)))

    def run_off(self) -> None:
        a, b = sorted(self.live, key=self.median)[:2]
        result = runoff(self.runner, a, b, self.settings.runoff_pairs)
        if result.forfeit is not None and result.error is not None:
            self.fail(result.forfeit, result.error)
            failure = candidate_failure(result.error)
            self.outcomes[result.forfeit] = Failed(f"forfeited the runoff: {failure.reason}", failure.stage)
        self.first = result.winner
        self.second = None if result.forfeit is not None else (b if result.winner == a else a)
        self.events.append(
            Runoff(
                finalists=[self.name(a), self.name(b)],
                pairs_ns=list(result.pairs_ns),
                ratio=result.ratio,
                margin=result.margin,
                winner=self.name(result.winner),
                forfeit=None if result.forfeit is None else self.name(result.forfeit),
                stopped_early=result.stopped_early,
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
        front = [i for i in (self.first, self.second) if i is not None and isinstance(outcomes.get(i), Measured)]
        survivors = _by_median((i for i in self.live if i not in front), outcomes)
        rest = _by_median((i for i in ordered if i not in front and i not in survivors), outcomes)
        return BatchResult(outcomes, [*front, *survivors, *rest], self.events)
