"""The search driver: a strategy proposes, the schedule measures, a budget stops it.

One loop serves kernels (:func:`search`, timed through a candidate runner and
``measure_batch`` like every other tuning) and engine-scale objectives (``tk.Objective``):
both get incumbents measured first, the resumable trial log, and a result that says
which limit ended the search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tunekit._base import settings as _settings
from tunekit._base.errors import AutotuneDisabled, NoValidKernelFound, TunekitError
from tunekit._candidates.config import Config
from tunekit._candidates.reference import reference_of
from tunekit._candidates.search_spec import (
    check_build,
    check_search_args,
    check_search_names,
    config_name,
    empty_space_error,
    incumbents_of,
)
from tunekit._candidates.space import Space
from tunekit._candidates.strategy import StrategyName
from tunekit._candidates.tunable import Tunable
from tunekit._candidates.tunable_set import LazyBuild, TunableSet, build_identity
from tunekit._keys.key import is_autotune_key, key_to_dict
from tunekit._measure.check import Gate
from tunekit._measure.client import Client, require_client
from tunekit._measure.isolation import check_each, open_runner, refuse_unforkable
from tunekit._measure.schedule import measure_batch
from tunekit._observe.sinks import RecordSink, as_sinks, emit_to_all
from tunekit._search.strategies import Strategy, StrategyFactory, make_strategy
from tunekit._store.trials import TrialLog
from tunekit._values.durations import BenchmarkDurations
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped, outcome_reason
from tunekit._values.records import AutotuneRecord, CandidateRecord, SearchEnded
from tunekit._values.trial_log import TrialEntry

__all__ = [
    "AUTO_COUNT_LIMIT",
    "BestTrial",
    "Evaluate",
    "Ranked",
    "SearchResult",
    "StopReason",
    "Trial",
    "emit_search_record",
    "no_winner_note",
    "raise_if_no_winner",
    "refuse_autotune_off",
    "run_search",
    "search",
    "search_ended",
]

StopReason = Literal["max_evals", "max_seconds", "exhausted", "objective_budget", "roofline"]

Evaluate = Callable[[Sequence[Config], float | None], Mapping[Config, Outcome]]
"""Measures a batch of configurations; one outcome per configuration evaluated.

The second argument is the search's deadline (a ``time.monotonic()`` time, from ``max_seconds``;
None without one): no configuration after the first starts past it, and those left out of the
outcomes are no trials (not logged, not counted, not observed).
"""


class Ranked(dict[Config, Outcome]):
    """Outcomes plus the schedule's decided order (a runoff can overrule the medians).

    ``met_limit``: a candidate met the roofline limit (a short circuit), so nothing the search
    could still find would be much faster; the search stops there.
    """

    ranking: tuple[Config, ...] = ()
    met_limit: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class Trial:
    """One evaluated configuration; ``resumed`` when its outcome came from the trial log."""

    config: Config
    outcome: Outcome
    resumed: bool = False

    @property
    def score(self) -> float | None:
        """Median ns when measured, else None."""
        return self.outcome.durations.score if isinstance(self.outcome, Measured) else None

    # By value across the subclass: ``result.best in result.finalists`` holds for the same trial.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trial):
            return NotImplemented
        return (self.config, self.outcome, self.resumed) == (other.config, other.outcome, other.resumed)

    def __hash__(self) -> int:
        return hash((self.config, self.outcome, self.resumed))


@dataclass(frozen=True, slots=True, eq=False)
class BestTrial(Trial):
    """The winner of a search: a measured trial, so its ``score`` is a float, never None.

    Typed apart from ``Trial`` so that ``result.best.score / 1e6`` passes ``mypy --strict``
    without a None check (the winner is measured by definition).
    """

    @property
    def score(self) -> float:
        """Median ns of the winner's measurement."""
        if not isinstance(self.outcome, Measured):
            raise AssertionError("a search's best trial is a measured one")
        return self.outcome.durations.score


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a search found, what it cost, and why it stopped."""

    tuner: str
    device_id: str
    space: Space
    strategy: str
    seed: int
    trials: tuple[Trial, ...]
    stopped_by: StopReason
    strategy_seconds: float
    wall_seconds: float

    finalists: tuple[Trial, ...] = ()
    key: object = None
    """The key bucket the search was for (``key=``), None when it was given none."""
    earlier_seconds: float = 0.0
    """Seconds earlier runs of this search spent, as its trial log holds them; ``max_seconds`` counts them.

    ``wall_seconds`` is this call's alone, from its trial log's opening (a wait for another search
    holding the log is that search's time): a resumed search can stop at ``max_seconds`` after a
    fraction of a second, its time spent before it was killed.
    """

    @property
    def ranking(self) -> tuple[Trial, ...]:
        """Measured configurations, fastest first: the finalists as their final batch decided, then the rest."""
        final = [t for t in self.finalists if t.score is not None]
        # A finalist that failed its re-measurement (its check, a crash, a timeout) is out: ranked by
        # its search-phase median instead, it won with a failed outcome in the record and the cache.
        decided = {t.config for t in self.finalists if t.score is not None or isinstance(t.outcome, Failed)}
        rest = sorted((t for t in self.trials if t.score is not None and t.config not in decided), key=_score)
        return (*final, *rest)

    @property
    def best(self) -> BestTrial:
        """The fastest measured configuration (by the finalists' measurement when there was one).

        Never ``None``: ``tk.search`` and ``tk.tune_objective`` raise ``tk.NoValidKernelFound``
        rather than return a result that measured nothing, so callers need no None check.
        """
        ranking = self.ranking
        if not ranking:
            raise ValueError(f"the search for tuner {self.tuner!r} measured no configuration, so it has no best")
        first = ranking[0]
        return BestTrial(first.config, first.outcome, first.resumed)

    @property
    def evaluations(self) -> int:
        """Distinct configurations evaluated (resumed ones included)."""
        return len(self.trials)


def _score(trial: Trial) -> float:
    return trial.score if trial.score is not None else math.inf


def _entry(config: Config, outcome: Outcome, elapsed: float) -> TrialEntry:
    match outcome:
        case Measured(durations):
            return TrialEntry(
                config=config.to_dict(),
                status="measured",
                samples_ns=list(durations.samples_ns),
                score_ns=durations.score,
                elapsed_s=elapsed,
            )
        case Failed(reason, stage):
            return TrialEntry(config=config.to_dict(), status="failed", stage=stage, error=reason, elapsed_s=elapsed)
        case Skipped(reason):
            return TrialEntry(config=config.to_dict(), status="skipped", error=reason, elapsed_s=elapsed)


def _outcome(entry: TrialEntry) -> Outcome:
    if entry.status == "measured" and entry.samples_ns:
        return Measured(BenchmarkDurations(tuple(entry.samples_ns)))
    if entry.status == "skipped":
        return Skipped(entry.error or "skipped")
    stage = entry.stage if entry.stage in ("compile", "check", "run", "timeout", "crash") else "run"
    return Failed(entry.error or "failed", stage)  # type: ignore[arg-type]


AUTO_COUNT_LIMIT = 1_000_000
"""The largest restricted space (in Cartesian points) that ``auto`` counts to compare with ``max_evals``.

A count walks the space, one restriction call per point: 2-3.5 µs each on the shared
development VM (benches/auto_choice.py), so up to a few seconds, paid in full only when the
walk cannot stop early at ``max_evals + 1`` valid points: when the valid points are few, where
``model_ils`` would walk the space to sample it anyway (it took 2.6x longer than counting and
measuring every point there). Past this size the budget must cover the Cartesian size.
"""


def _budget_covers(space: Space, max_evals: int | None, max_seconds: float | None) -> bool:
    """Whether measuring every configuration fits the budget (counting a restricted space up to a size)."""
    if max_evals is None:
        return max_seconds is None
    if space.cartesian_size <= max_evals:
        return True
    # Counted only up to max_evals + 1: a budget that covers every valid configuration means
    # exhaustive (a user expects all of them measured), however sparse the restrictions make them.
    return space.cartesian_size <= AUTO_COUNT_LIMIT and space.size_up_to(max_evals) is not None


def _searched_whole(space: Space, evaluated: int) -> bool:
    """Whether ``evaluated`` distinct configurations are every one of ``space``, as far as known without a walk."""
    size = space.counted_size()
    return size is not None and evaluated >= size


def _choose(
    space: Space, strategy: str | StrategyFactory, max_evals: int | None, max_seconds: float | None
) -> tuple[str, StrategyFactory]:
    if not isinstance(strategy, str):
        return getattr(strategy, "__name__", type(strategy).__name__), strategy
    if strategy == "auto":
        strategy = "exhaustive" if _budget_covers(space, max_evals, max_seconds) else "model_ils"
    return strategy, make_strategy(strategy, max_evals)


def run_search(
    space: Space,
    evaluate: Evaluate,
    *,
    tuner: str,
    device_id: str,
    key: object = None,
    strategy: StrategyName | StrategyFactory = "auto",
    seed: int = 0,
    max_evals: int | None = None,
    max_seconds: float | None = None,
    require: Sequence[Mapping[str, Any]] = (),
    log: str | Path | None = None,
    remaining: Callable[[], int | None] | None = None,
    batch: int = 8,
    finalists: int = 0,
    build_id: str | None = None,
) -> SearchResult:
    """Search ``space`` with ``strategy`` until a budget ends it; see :func:`search`.

    The caller records the result (:func:`emit_search_record`, or as part of its own record)
    and has checked the arguments (``check_search_args``), naming its own call in the errors.
    ``build_id``: a digest of the code that builds the candidates, kept in the trial log's
    header so that a log measured with other code is refused.
    """
    key_dict: dict[str, Any] | None = None
    if key is not None:
        if not is_autotune_key(key):
            raise TypeError(f"search(key=...) takes an @tk.autotune_key instance, got {type(key).__name__}")
        key_dict = key_to_dict(key)
    incumbents = incumbents_of(space, require)
    name, factory = _choose(space, strategy, max_evals, max_seconds)
    # Another search on the log (another process on the same key) is waited for as another tune of
    # a key is: then its trials are resumed here instead of measured again.
    wait_s = _settings.current().tune_lock_timeout_s
    trial_log = (
        TrialLog.open(log, tuner=tuner, space=space, device_id=device_id, key=key_dict, build=build_id, wait_s=wait_s)
        if log
        else None
    )
    # Once the log is open: the time spent waiting for another search on it is in that search's
    # logged time (offset below) already, and counted twice it left the resumed search no budget.
    started = time.monotonic()
    try:
        previous = trial_log.previous if trial_log else {}
        done: dict[Config, Trial] = {}
        # The log's clock goes on: max_seconds bounds the search, not each run of it, as max_evals
        # counts the logged trials. A killed search resumed with the whole time again measured
        # 20 more configurations after 13 logged ones, where an uninterrupted one measured 20 in all.
        offset = trial_log.spent_s if trial_log is not None else 0.0
        # Every logged trial belongs to the search and uses its budget: counted only when proposed
        # again, a resume from 30 logged trials to max_evals=40 measured 26 more (56 in all), and
        # one to max_evals=20 returned 20 trials, not the log's best.
        evaluated: set[Config] = set(previous)
        # What max_evals counts: configurations that ran (measured or failed). A variant that does
        # not apply to the key (skipped) is not built or timed, and used the budget of one that is:
        # max_evals=6 over a template whose first 5 variants did not apply measured 1.
        ran = {config for config, entry in previous.items() if entry.status != "skipped"}

        met_limit = False
        # Where max_seconds ends, on this run's clock: handed to each batch, which starts no trial
        # after it. Checked only between batches, the budget was overrun by up to a whole batch.
        deadline = None if max_seconds is None else started + max_seconds - offset

        def measure(configs: Sequence[Config]) -> list[Trial]:
            nonlocal met_limit
            fresh = [c for c in configs if c not in previous]
            # A batch's first configuration always runs, so a budget spent before any (opening the log,
            # building the strategy) still evaluates one.
            outcomes = evaluate(fresh, deadline) if fresh else {}
            met_limit = met_limit or (isinstance(outcomes, Ranked) and outcomes.met_limit)
            # Those the deadline left out are no trials: a resume measures them, as a batch's size counts only trials.
            fresh = [c for c in fresh if c in outcomes]
            number = trial_log.take_batch() if trial_log is not None and fresh else 0
            trials = []
            for config in configs:
                if config in previous:
                    trials.append(Trial(config, _outcome(previous[config]), resumed=True))
                    continue
                if config not in outcomes:
                    continue
                outcome = outcomes[config]
                if trial_log is not None:
                    entry = _entry(config, outcome, offset + time.monotonic() - started)
                    trial_log.append(entry.model_copy(update={"batch": number, "batch_size": len(fresh)}))
                trials.append(Trial(config, outcome))
            for trial in trials:
                done[trial.config] = trial
                evaluated.add(trial.config)
                if not isinstance(trial.outcome, Skipped):
                    ran.add(trial.config)
            return trials

        spent = 0.0
        strat = factory(space, np.random.default_rng(seed))
        if not isinstance(strat, Strategy):
            raise TypeError(f"strategy {name!r} built {type(strat).__name__}, which lacks propose(n) and observe()")
        for trial in measure(incumbents):
            t0 = time.thread_time()
            strat.observe(trial.config, trial.score)
            spent += time.thread_time() - t0
        # Every logged trial is observed before the first proposal, in the order it was measured, so the
        # strategy resumes knowing all of them and never proposes one again. Answered only when
        # re-proposed, the logged trials this run's path did not reach were unknown to it: model_ils
        # climbed on as if the log's best had never been measured.
        t0 = time.thread_time()
        for config, entry in previous.items():
            if config not in done:
                done[config] = Trial(config, _outcome(entry), resumed=True)
                strat.observe(config, done[config].score)
        spent += time.thread_time() - t0
        proposed: set[Config] = set()
        stopped: StopReason = "exhausted"
        while True:
            if met_limit:
                stopped = "roofline"
                break
            if _searched_whole(space, len(evaluated)):
                # Before the budgets: a space of 80 searched whole with max_evals=80 was recorded
                # as stopped by max_evals, as if the budget had cut it.
                break
            if max_evals is not None and len(ran) >= max_evals:
                stopped = "max_evals"
                break
            # Not before anything is evaluated: a budget spent opening the log or building the
            # strategy ended the search with no winner (and execute() stored that as a failed tune).
            if max_seconds is not None and evaluated and offset + time.monotonic() - started >= max_seconds:
                stopped = "max_seconds"
                break
            left = remaining() if remaining is not None else None
            if left is not None and left <= 0:
                stopped = "objective_budget"
                break
            want = batch if max_evals is None else min(batch, max_evals - len(ran))
            if left is not None:
                want = min(want, left)
            t0 = time.thread_time()
            proposals = strat.propose(want)
            spent += time.thread_time() - t0
            if not isinstance(proposals, list | tuple):  # a generator was always truthy, then had no len()
                raise TunekitError(
                    f"strategy {name!r} proposed a {type(proposals).__name__}; propose(n) returns a list of tk.Config"
                )
            if not proposals:
                break
            if len(proposals) > want:
                raise TunekitError(f"strategy {name!r} proposed {len(proposals)} configurations when asked for {want}")
            for config in proposals:
                if not isinstance(config, Config):
                    raise TunekitError(
                        f"strategy {name!r} proposed {config!r}, a {type(config).__name__}, not a tk.Config; "
                        f"make it propose points of the space: {_VALID_POINTS}"
                    )
                if config in proposed:
                    raise TunekitError(f"strategy {name!r} proposed {config.name} twice")
                if config not in space:
                    raise TunekitError(_not_in_space(name, space, config))
                proposed.add(config)
            new = [c for c in proposals if c not in done]
            measured = {t.config: t for t in measure(new)}
            t0 = time.thread_time()
            for config in proposals:
                if (answered := measured.get(config) or done.get(config)) is not None:  # else not started in time
                    strat.observe(config, answered.score)
            spent += time.thread_time() - t0
        if not done and stopped == "exhausted" and next(iter(space), None) is None:
            # Checked once the strategy found nothing rather than up front, where walking a
            # large space to its first valid point would cost every search.
            raise empty_space_error("the search", space)
    finally:
        if trial_log is not None:
            trial_log.close()
    final: tuple[Trial, ...] = ()
    leaders = sorted((t for t in done.values() if t.score is not None), key=_score)[:finalists]
    if finalists:
        # Every measured incumbent joins the finalists: measured first, alone, on a device that may
        # still be cold, its score could keep it out, and the winner then showed slower than it.
        chosen = {t.config for t in leaders}
        leaders += [done[c] for c in incumbents if c in done and done[c].score is not None and c not in chosen]
    if len(leaders) > 1:
        # Re-measured side by side in one batch, so the schedule decides between close
        # candidates under the same conditions rather than across a long search's drift.
        outcomes = evaluate([t.config for t in leaders], None)  # not counted in the budget
        order = list(outcomes.ranking) if isinstance(outcomes, Ranked) and outcomes.ranking else []
        by_score = sorted(
            (t.config for t in leaders if t.config not in order),
            key=lambda c: _score(Trial(c, outcomes.get(c, Skipped("not measured")))),
        )
        final = tuple(Trial(c, outcomes.get(c, Skipped("not measured"))) for c in [*order, *by_score])
    result = SearchResult(
        tuner=tuner,
        device_id=device_id,
        space=space,
        strategy=name,
        seed=seed,
        trials=tuple(done.values()),
        stopped_by=stopped,
        strategy_seconds=spent,
        wall_seconds=time.monotonic() - started,
        finalists=final,
        key=key,
        earlier_seconds=offset,
    )
    return result


def search_ended(result: SearchResult) -> SearchEnded:
    """The record event that says how a search went."""
    return SearchEnded(
        strategy=result.strategy,
        seed=result.seed,
        space_hash=result.space.hash,
        evaluations=result.evaluations,
        resumed=sum(t.resumed for t in result.trials),
        stopped_by=result.stopped_by,
        strategy_seconds=result.strategy_seconds,
        earlier_seconds=result.earlier_seconds,
    )


def emit_search_record(
    result: SearchResult, key: object, sinks: Sequence[RecordSink], name_of: Callable[[Config], str] = config_name
) -> None:
    """The record of a search run on its own (``tk.search``, ``tk.tune_objective``), to every sink.

    Candidates are named by ``name_of``, as the set being tuned names them, so that the record
    and a tuner's record of the same candidates agree.
    """
    ranking = result.ranking
    # The finalists' re-measurement decided the winner, so it is what the record shows for them:
    # with the search-phase medians, a summary could show the winner slower than its runner-up.
    final = {t.config: t.outcome for t in result.finalists}
    record = AutotuneRecord(
        tuner=result.tuner,
        device_id=result.device_id,
        key=key_to_dict(key) if key is not None else {},
        checksum=result.space.hash,
        decision="tuned",
        candidates=[CandidateRecord.of(name_of(t.config), 0, final.get(t.config, t.outcome)) for t in result.trials],
        winner=name_of(ranking[0].config) if ranking else None,
        stored=False,
        wall_time_s=result.wall_seconds,
        events=[search_ended(result)],
    )
    emit_to_all(record, sinks)


def raise_if_no_winner(
    result: SearchResult, key: object, log: str | Path | None, name_of: Callable[[Config], str] = config_name
) -> None:
    """Raise ``NoValidKernelFound`` when no evaluated configuration was measured, as ``execute`` does.

    Called once the record is emitted and the trial log closed, so the failures are kept in
    both: a rerun with a larger budget resumes the log instead of measuring them again.
    """
    if result.ranking:
        return
    final = {t.config: t.outcome for t in result.finalists}  # a finalist's failure is its last word
    failures = [(name_of(t.config), outcome_reason(final.get(t.config, t.outcome), staged=True)) for t in result.trials]
    raise NoValidKernelFound(result.tuner, key, failures, recorded=no_winner_note(search_ended(result), log))


def no_winner_note(ended: SearchEnded, log: str | Path | None) -> str:
    """How a search that measured nothing ended, and where its trials are kept (``NoValidKernelFound.recorded``)."""
    kept = f"; every trial is kept in {log}: a rerun with the same log resumes it" if log is not None else ""
    budget_empty_at_start = not ended.evaluations and ended.stopped_by == "objective_budget"
    why = " (the objective's remaining() was 0 before anything was measured)" if budget_empty_at_start else ""
    # Cut short by the budget, the rest of the space was never tried: a larger one tries more of it.
    more = "; a larger max_evals or max_seconds evaluates more of the space" if ended.stopped_by in _BUDGETS else ""
    return (
        f"the search ({ended.strategy}, seed {ended.seed}) evaluated {ended.evaluations} "
        f"configuration{'s' if ended.evaluations != 1 else ''} and stopped at {ended.stopped_by}{why}{more}{kept}"
    )


_BUDGETS = ("max_evals", "max_seconds")

_SEARCH_IN_A_TUNER_FIX = (
    "search inside a tuner, which takes a worker factory: a set made from the space "
    "(tk.TunableSet.from_space(space, build, key=...), or KernelTemplate(...).tunable_set(...)) with "
    ".with_search(...).with_isolation('process', worker=factory), run through TUNER.execute, where "
    "factory(key_fields, *, device_id, locator) -> (client, tunables, inputs) is a function at the top level "
    "of a module (docs/robustness.md)"
)
"""The fix ``tk.search`` offers for a client that cannot be forked: the same search, run by a tuner."""


def refuse_autotune_off(where: str, settings: _settings.Settings) -> None:
    """Raise ``tk.AutotuneDisabled`` when autotuning is off: a search measures, and the setting says measure nothing."""
    if settings.autotune:
        return
    raise AutotuneDisabled(
        f"{where} searches by measuring configurations, and autotuning is off (TUNEKIT_AUTOTUNE=0, autotune = false "
        "in tunekit.toml or [tool.tunekit], or tk.configure(autotune=False)): nothing was built, measured or written. "
        "To search, switch it on for this run (unset TUNEKIT_AUTOTUNE, or tk.configure(autotune=True)); to run "
        "without measuring, seed a committed record (tk.Record.load_verified(...).seed(...)) or run the set "
        "through TUNER.execute, which takes the first candidate in plan order while it is off"
    )


def search(
    space: Space,
    build: Callable[[Config], Callable[..., Any]],
    client: Client,
    inputs: Sequence[Any],
    *,
    tuner: str,
    key: object = None,
    strategy: StrategyName | StrategyFactory = "auto",
    seed: int = 0,
    max_evals: int | None = None,
    max_seconds: float | None = None,
    require: Sequence[Mapping[str, Any]] = (),
    log: str | Path | None = None,
    batch: int = 8,
    finalists: int = 4,
    sinks: Sequence[RecordSink | Callable[[AutotuneRecord], object]] = (),
    name_of: Callable[[Config], str] = config_name,
    reference: Callable[..., Any] | None = None,
    outputs: Sequence[int] | None = None,
    rtol: float = 0.0,
    atol: float = 0.0,
) -> SearchResult:
    """Search a space of kernels too big to measure whole; every candidate timed on ``client``.

    ``build(config)`` returns the runnable for a configuration (called lazily, once per
    measured configuration; raising makes that configuration a failure at stage ``compile``).
    Candidates are timed in batches of ``batch`` through ``measure_batch``, like every other tuning.

    Budget: stop after ``max_evals`` distinct configurations and/or ``max_seconds``;
    ``result.stopped_by`` says which ended it (``exhausted`` when the strategy ran out).
    Both bound the whole search, not each run: a search resumed from ``log`` counts the
    logged trials against ``max_evals`` and the time they took against ``max_seconds``.
    ``require``: incumbent configurations measured first, whatever the budget, so the
    winner is never slower than them; one outside the space is an error. ``log``: a JSONL
    trial log; a rerun resumes it, skipping configurations it already measured.
    ``finalists``: the fastest few, and every measured incumbent, are re-measured together in
    one batch at the end, and that measurement picks the winner (not counted in the budget;
    not logged).
    ``strategy``: ``auto`` (exhaustive when the budget covers the space, else the best
    large-space strategy), a name from ``tk.STRATEGIES``, or a factory.
    ``name_of``: a configuration's candidate name in the record and errors, as the set the
    winner is for names it: ``template.name_of`` for an OpenCL ``KernelTemplate``
    (``fill[BLOCK=16]``, as its tuner and ``tk.Record`` name it); by default ``config.name``
    (``BLOCK=16``, as ``TunableSet.from_space`` names it).
    ``reference``, ``outputs``, ``rtol``, ``atol``: the correctness gate of
    ``TunableSet.with_reference``: each configuration runs once on fresh copies of the inputs
    and is timed only if its outputs match ``reference(*inputs)``; one that does not is a
    failure (stage ``check``) in the result, the log and the record.

    Raises ``tk.NoValidKernelFound`` (listing each configuration and why it failed) when no
    evaluated configuration could be measured, as ``execute`` does, after emitting the
    search's record and keeping every trial in ``log``. Raises ``tk.AutotuneDisabled``, before
    anything is built, measured or written, when autotuning is off (``TUNEKIT_AUTOTUNE=0``).
    """
    if not isinstance(space, Space):
        raise TypeError(
            f"tk.search() takes a tk.Space first, got {type(space).__name__}; e.g. tk.Space(BLOCK=[64, 128])"
        )
    check_build("tk.search", build)
    if not callable(name_of):
        raise TypeError(
            f"tk.search(name_of=...) takes a callable config -> candidate name (e.g. template.name_of), "
            f"got {type(name_of).__name__}"
        )
    # A bare array was iterated into one argument per row, so every candidate failed on arity.
    if not isinstance(inputs, tuple | list):
        raise TypeError(f"tk.search() takes the inputs as a tuple, e.g. (x,) or (a, b); got {type(inputs).__name__}")
    # Checked before the search: a sink that is not one failed only at the end, losing the record.
    resolved_sinks = as_sinks(sinks, "tk.search(sinks=...)")
    # A string or the client's class failed as "'str' object has no attribute 'device_id'".
    require_client(client, "tk.search(client=...)")
    check_search_names("tk.search", tuner=tuner, device_id=client.device_id)
    check_search_args(
        "tk.search",
        seed=seed,
        max_evals=max_evals,
        max_seconds=max_seconds,
        batch=batch,
        finalists=finalists,
        require=require,
        strategy=strategy,
        log=log,
    )
    args = tuple(inputs)
    settings = _settings.current()
    where = f"tk.search(tuner={tuner!r})"
    refuse_autotune_off(where, settings)  # before anything is built or the trial log is opened
    # Before the trial log is opened. tk.search takes no worker factory, but a tuner does, and
    # searches a set as tk.search would: without that route the refusal left only untimed-in-
    # process tuning, though a searched OpenCL set under process isolation works through execute.
    refuse_unforkable(client, None, settings, where=where, other_fixes=(_SEARCH_IN_A_TUNER_FIX,))

    if reference is None and (outputs is not None or rtol or atol):
        # Else ignored: the caller believed the configurations checked, and a wrong one could win.
        raise TypeError(
            "tk.search(outputs=, rtol=, atol=) tune the correctness check, which needs the expected outputs: "
            "pass reference=fn too (fn(*inputs) returns them)"
        )
    if reference is not None and not callable(reference):
        raise TypeError(f"tk.search(reference=...) takes a callable (*inputs) -> expected, got {reference!r}")
    # One gate for the whole search: the reference runs once, and every batch is checked on the
    # inputs as they were at the first check (timed runs of in-place kernels change them).
    gate = None if reference is None else Gate(client, args, reference_of("tk.search", reference, outputs, rtol, atol))

    def evaluate(configs: Sequence[Config], deadline: float | None) -> Mapping[Config, Outcome]:
        tunables: TunableSet[Any, Any] = TunableSet(key=lambda *_: None).with_tunables(
            [Tunable(name_of(c), LazyBuild(build, c)) for c in configs]
        )
        failed: dict[int, Outcome] = {}
        with open_runner(client, tunables, args, settings, key=key, where=where, gate=gate) as runner:
            if gate is not None:
                # Those that fail the check (or raise) are never timed.
                for index, check in check_each(runner, gate, range(len(configs)), tunables):
                    if isinstance(check, Failed) or not check.passed:
                        failed[index] = check if isinstance(check, Failed) else Failed(check.detail, "check")
            measured = measure_batch(
                runner,
                [i for i in range(len(configs)) if i not in failed],
                settings,
                client=client,
                names=tunables.names,
                lone_samples=settings.min_samples,
                deadline=deadline,
            )
        # Those the deadline kept from starting are left out: they are no trials.
        ranked = Ranked({c: o for i, c in enumerate(configs) if (o := failed.get(i, measured.get(i))) is not None})
        ranked.ranking = tuple(configs[i] for i in measured.ranking)
        return ranked

    result = run_search(
        space,
        evaluate,
        tuner=tuner,
        device_id=client.device_id,
        key=key,
        strategy=strategy,
        seed=seed,
        max_evals=max_evals,
        max_seconds=max_seconds,
        require=require,
        log=log,
        batch=batch,
        finalists=finalists,
        build_id=build_identity(build) if log is not None else None,  # only a log keeps it
    )
    emit_search_record(result, key, resolved_sinks, name_of)
    raise_if_no_winner(result, key, log, name_of)
    return result


_VALID_POINTS = (
    "space.sample(n, rng), space.config(...), space.neighbours(config) or iter(space) give only points the "
    "space's restrictions allow; space.at(i) and space.from_positions(...) give any Cartesian point, so keep "
    "those for which space.allows(config) holds"
)
"""How a strategy gets valid configurations: the advice to use ``space.at(i)`` gave restricted-out ones."""


def _not_in_space(strategy: str, space: Space, config: Config) -> str:
    """Why ``config``, proposed by ``strategy``, is no point of ``space``, and how to propose one."""
    try:
        space.config(config)
    except ValueError as exc:
        why = str(exc)
    else:  # not reached: `config in space` asks space.config too
        why = "the space refuses it"
    return f"strategy {strategy!r} proposed {config!r}, which is not in the space ({why}); {_VALID_POINTS}"
