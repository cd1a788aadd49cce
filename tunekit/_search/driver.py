"""The search driver: a strategy proposes, the caller's ``evaluate`` measures, the budget stops it.

One loop serves kernels (``tk.search``, and a set searched inside ``execute``) and engine-scale
objectives (``tk.tune_objective``): each gets its incumbents measured first, the resumable trial
log, and a result that says which limit ended the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tunekit._base import settings as _settings
from tunekit._base.errors import AutotuneDisabled
from tunekit._base.settings_model import Settings
from tunekit._candidates.budget import BATCH, FINALISTS, Budget
from tunekit._candidates.config import Config
from tunekit._candidates.search_spec import empty_space_error, incumbents_of
from tunekit._candidates.space import Space
from tunekit._keys.key import is_autotune_key, key_to_dict
from tunekit._observe.events import SearchAdvanced, SearchFinished
from tunekit._observe.observers import TuneObservation
from tunekit._search.choose import choose_strategy
from tunekit._search.entries import entry_of, outcome_of
from tunekit._search.proposals import check_proposals
from tunekit._search.result import SearchResult, StopReason, Trial, score_of
from tunekit._search.strategies import Strategy
from tunekit._store.trials import TrialLog
from tunekit._values.outcome import Outcome, Skipped
from tunekit._values.records import AutotuneRecord, RecordEvent

__all__ = ["Evaluate", "Ranked", "refuse_autotune_off", "run_search", "search_finished"]

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
    events: tuple[RecordEvent, ...] = ()
    """What the schedule did (rounds, eliminations, a runoff): kept in the record for the finalists' batch."""


def refuse_autotune_off(where: str, settings: Settings) -> None:
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


def run_search(
    space: Space,
    evaluate: Evaluate,
    *,
    budget: Budget,
    tuner: str,
    device_id: str,
    key: object = None,
    remaining: Callable[[], int | None] | None = None,
    build_id: str | None = None,
    build_name: str | None = None,
    observation: TuneObservation | None = None,
) -> SearchResult:
    """Search ``space`` until ``budget`` ends it; see ``tk.search``.

    The caller records the result (``emit_search_record``, or as part of its own record); its
    budget was checked when made, naming the caller's own call in the errors. A budget that
    leaves ``batch`` or ``finalists`` unset gets :data:`BATCH` and :data:`FINALISTS`.
    ``remaining``: how many more measurements an objective allows (None: no limit of its own).
    ``build_id``: a digest of the code that builds the candidates (``build_name``, where it is defined),
    kept in the trial log's header so that a log measured with other code is refused, and in the result.
    ``observation``: told when the search starts, after each batch and before the finalists'
    (a progress display); the caller tells it when the search ends (:func:`search_finished`).
    """
    key_dict: dict[str, Any] | None = None
    if key is not None:
        if not is_autotune_key(key):
            raise TypeError(f"search(key=...) takes an @tk.autotune_key instance, got {type(key).__name__}")
        key_dict = key_to_dict(key)
    max_evals, max_seconds = budget.max_evals, budget.max_seconds
    if observation is not None:
        size = space.counted_size()
        observation.search_started(
            tuner,
            device_id,
            key_dict or {},
            space_size=space.cartesian_size if size is None else size,
            max_evals=max_evals,
            max_seconds=max_seconds,
            size_counted=size is not None,  # counting a restricted space would walk it
        )
    batch = BATCH if budget.batch is None else budget.batch
    incumbents = incumbents_of(space, budget.require)
    name, factory = choose_strategy(space, budget)
    # Another search on the log (another process on the same key) is waited for as another tune of
    # a key is: then its trials are resumed here instead of measured again.
    wait_s = _settings.current().tune_lock_timeout_s
    trial_log = (
        TrialLog.open(
            Path(budget.log), tuner=tuner, space=space, device_id=device_id, key=key_dict, build=build_id, wait_s=wait_s
        )
        if budget.log
        else None
    )
    # Started once the log is open: a wait for another search on it is in that search's logged
    # time (``offset`` below) already, and is not counted twice.
    started = time.monotonic()
    try:
        previous = trial_log.previous if trial_log else {}
        done: dict[Config, Trial] = {}
        # The log's clock goes on: max_seconds bounds the whole search, not each run of it, as
        # max_evals counts the logged trials.
        offset = trial_log.spent_s if trial_log is not None else 0.0
        # Every logged trial belongs to the search and uses its budget, whether or not this run's
        # strategy proposes it again.
        evaluated: set[Config] = set(previous)
        # What max_evals counts: configurations that ran (measured or failed). A variant that does
        # not apply to the key (skipped) is not built or timed, so it leaves the budget to one that is.
        ran = {config for config, entry in previous.items() if entry.status != "skipped"}

        met_limit = False
        # Where max_seconds ends, on this run's clock: handed to each batch, which starts no trial
        # after it, so a search overruns its time by the trials already started, not by a batch.
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
                    trials.append(Trial(config, outcome_of(previous[config]), resumed=True))
                    continue
                if config not in outcomes:
                    continue
                outcome = outcomes[config]
                if trial_log is not None:
                    entry = entry_of(config, outcome, offset + time.monotonic() - started)
                    trial_log.append(entry.model_copy(update={"batch": number, "batch_size": len(fresh)}))
                trials.append(Trial(config, outcome))
            for trial in trials:
                done[trial.config] = trial
                evaluated.add(trial.config)
                if not isinstance(trial.outcome, Skipped):
                    ran.add(trial.config)
            if observation is not None:
                observation.search_advanced(_advanced(observation.tune_id, done))
            return trials

        spent = 0.0
        strat = factory(space, np.random.default_rng(budget.seed))
        if not isinstance(strat, Strategy):
            raise TypeError(f"strategy {name!r} built {type(strat).__name__}, which lacks propose(n) and observe()")
        for trial in measure(incumbents):
            t0 = time.thread_time()
            strat.observe(trial.config, trial.score)
            spent += time.thread_time() - t0
        # Every logged trial is observed before the first proposal, in the order it was measured, so
        # the strategy resumes knowing all of them (the log's best included) and never proposes one again.
        t0 = time.thread_time()
        for config, entry in previous.items():
            if config not in done:
                done[config] = Trial(config, outcome_of(entry), resumed=True)
                strat.observe(config, done[config].score)
        spent += time.thread_time() - t0
        proposed: set[Config] = set()
        stopped: StopReason = "exhausted"
        while True:
            if met_limit:
                stopped = "roofline"
                break
            # Before the budgets: a space searched whole is "exhausted" even when its last
            # configuration also spent max_evals, as no limit cut the search short.
            if _searched_whole(space, len(evaluated)):
                break
            if max_evals is not None and len(ran) >= max_evals:
                stopped = "max_evals"
                break
            # Not before anything is evaluated: a budget spent opening the log or building the
            # strategy still leaves a winner (else execute() would store a failed tune).
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
            check_proposals(name, space, proposals, want, proposed)
            if not proposals:
                break
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
    finalists = FINALISTS if budget.finalists is None else budget.finalists
    # Timed apart: the budget ends the search phase, and the finalists' batch comes after it, outside it.
    final_started = time.monotonic()
    final, final_events = _final_batch(evaluate, done, incumbents, finalists, observation)
    finalists_seconds = time.monotonic() - final_started if final else 0.0
    return SearchResult(
        tuner=tuner,
        device_id=device_id,
        space=space,
        strategy=name,
        seed=budget.seed,
        trials=tuple(done.values()),
        stopped_by=stopped,
        strategy_seconds=spent,
        wall_seconds=time.monotonic() - started,
        finalists_seconds=finalists_seconds,
        finalists=final,
        final_events=final_events,
        key=key,
        build_id=build_id,
        build_name=build_name,
        earlier_seconds=offset,
    )


def _searched_whole(space: Space, evaluated: int) -> bool:
    """Whether ``evaluated`` distinct configurations are every one of ``space``, as far as known without a walk.

    As many valid configurations as the Cartesian product holds are all of them, counted or not.
    """
    size = space.counted_size()
    return evaluated >= (space.cartesian_size if size is None else size)


def _advanced(search_id: int, done: Mapping[Config, Trial], finalists: int = 0) -> SearchAdvanced:
    best = min((t for t in done.values() if t.score is not None), key=score_of, default=None)
    return SearchAdvanced(
        search_id,
        len(done),
        None if best is None else best.config.name,
        None if best is None else best.score,
        "finalists" if finalists else "search",
        finalists,
    )


def search_finished(search_id: int, result: SearchResult, record: AutotuneRecord | None = None) -> SearchFinished:
    """The event that ends a search's progress: its counts, its two phases' times, and its record if it has one."""
    return SearchFinished(
        search_id,
        result.evaluations,
        result.stopped_by,
        result.search_seconds,
        len(result.finalists),
        result.finalists_seconds,
        record,
    )


def _final_batch(
    evaluate: Evaluate,
    done: Mapping[Config, Trial],
    incumbents: Sequence[Config],
    finalists: int,
    observation: TuneObservation | None = None,
) -> tuple[tuple[Trial, ...], tuple[RecordEvent, ...]]:
    """The ``finalists`` fastest trials and every measured incumbent, re-measured side by side, and the events of
    that batch (the comparison that decided the winner); nothing for fewer than two.

    One batch, so the schedule decides between close candidates under the same conditions rather
    than across a long search's drift. Not counted in the budget, and not logged.
    """
    leaders = sorted((t for t in done.values() if t.score is not None), key=score_of)[:finalists]
    if finalists:
        # Every measured incumbent joins them: measured first, alone, on a device that may still be
        # cold, its score is no fair comparison with the rest, and the winner must not be slower than it.
        chosen = {t.config for t in leaders}
        leaders += [done[c] for c in incumbents if c in done and done[c].score is not None and c not in chosen]
    if len(leaders) <= 1:
        return (), ()
    if observation is not None:
        observation.search_advanced(_advanced(observation.tune_id, done, len(leaders)))
    outcomes = evaluate([t.config for t in leaders], None)
    order = list(outcomes.ranking) if isinstance(outcomes, Ranked) and outcomes.ranking else []
    by_score = sorted(
        (t.config for t in leaders if t.config not in order),
        key=lambda c: score_of(Trial(c, outcomes.get(c, Skipped("not measured")))),
    )
    events = outcomes.events if isinstance(outcomes, Ranked) else ()
    return tuple(Trial(c, outcomes.get(c, Skipped("not measured"))) for c in [*order, *by_score]), events
