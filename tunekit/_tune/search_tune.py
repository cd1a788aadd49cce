"""A tune that searches the set's space (``TunableSet.with_search``) instead of measuring it all.

The search driver proposes configurations in batches; each batch is compiled, checked and
timed exactly as a plan batch of an ordinary tune (prepare hooks, correctness gate, adaptive
schedule on the tuner's runner), so a search inside ``execute`` measures what ``tk.search``
would, and its winner is cached and recorded like any other.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from typing import Any

from tunekit._candidates.config import Config
from tunekit._candidates.plan import skip_reason
from tunekit._candidates.search_spec import SearchSpec
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import key_to_dict
from tunekit._measure.schedule import BatchResult
from tunekit._observe.observers import TuneObservation
from tunekit._store.trials import key_log_path
from tunekit._values.outcome import Outcome, Skipped
from tunekit._values.records import RecordEvent, SearchEnded, ShortCircuit

__all__ = ["search_note", "search_tune"]

RunBatch = Callable[[list[int], int, float | None], tuple[dict[int, Outcome], BatchResult]]
"""(batch indices, batch number, deadline) -> (every outcome, the schedule's result): the tuner's own
step for one batch (compile, check, time; roofline short circuit included), shared with plan batches.
No candidate after the first starts past the deadline (``time.monotonic()``; None: none); those
have no outcome."""


def search_tune(
    *,
    tuner: str,
    device_id: str,
    tunables: TunableSet[Any, Any],
    key: object,
    spec: SearchSpec,
    planned: Container[int],
    run_batch: RunBatch,
    events: list[RecordEvent],
    observation: TuneObservation | None = None,
) -> tuple[dict[int, Outcome], dict[int, int], tuple[int, ...]]:
    """Search the set's space for ``key``; the outcomes and batch of every evaluated candidate, and the ranking.

    A batch in which a candidate meets the set's roofline limit is short-circuited as in an
    ordinary tune, and the search ends there (``stopped_by="roofline"``).
    """
    # The search machinery (strategies, their numpy and threadpoolctl) loads when a set first
    # searches: importing tunekit, or tuning a set that measures every candidate, never needs it.
    from tunekit._search.driver import (  # noqa: PLC0415 - search loads when used (issue 30)
        Ranked,
        run_search,
        search_finished,
    )
    from tunekit._search.record import search_ended  # noqa: PLC0415 - search loads when used (issue 30)

    outcomes: dict[int, Outcome] = {}
    batch_of: dict[int, int] = {}
    index_of: dict[Config, int] = {}
    numbers = itertools.count()

    def evaluate(configs: Sequence[Config], deadline: float | None) -> Mapping[Config, Outcome]:
        number = next(numbers)
        ranked = Ranked()
        config_at: dict[int, Config] = {}
        for config in configs:
            index = tunables.index_of(spec.name_of(config))
            if index is None:
                ranked[config] = Skipped(f"the set has no candidate named {spec.name_of(config)!r}")
            elif index not in planned:
                # Kept in the tune's outcomes too: else the record and NoValidKernelFound would leave out
                # every evaluated variant that does not apply to the key, and say "no candidate was planned".
                ranked[config] = outcomes[index] = Skipped(skip_reason(key, tunables.tunables[index]))
                batch_of[index] = number
            else:
                index_of[config] = index
                config_at[index] = config
        if observation is not None:
            observation.batch(number, [tunables.tunables[i].name for i in config_at])
        results, measured = run_batch(list(config_at), number, deadline)
        for index, config in config_at.items():
            if (outcome := results.get(index)) is None:  # not started by the search's deadline: no trial
                continue
            outcomes[index] = outcome
            batch_of[index] = number
            ranked[config] = outcome
        ranked.ranking = tuple(config_at[i] for i in measured.ranking)
        ranked.met_limit = any(isinstance(event, ShortCircuit) for event in measured.events)
        ranked.events = measured.events
        return ranked

    # The set's budget, with the key's own trial log in place of the base path it names.
    budget = dataclasses.replace(spec.budget, log=_log_path(tuner, device_id, tunables, key, spec))
    result = run_search(
        spec.space, evaluate, budget=budget, tuner=tuner, device_id=device_id, key=key, observation=observation
    )
    if observation is not None:  # the tune's own end follows, with its record
        observation.search_finished(search_finished(observation.tune_id, result))
    events.append(search_ended(result))
    for trial in result.trials:
        # Answered from the trial log, never measured in this tune: without their outcomes here,
        # a resumed search's best could not win, nor its trials show in the record.
        if trial.config in index_of:  # measured in this tune: most trials
            continue
        index = tunables.index_of(spec.name_of(trial.config))
        if index is None:
            continue
        if index not in planned:  # a variant that does not apply to the key: skipped again, not answered from the log
            outcomes[index] = Skipped(skip_reason(key, tunables.tunables[index]))
            batch_of[index] = 0
            continue
        index_of[trial.config] = index
        outcomes[index] = trial.outcome
        batch_of[index] = 0  # measured by an earlier run, in no batch of this one
    ranking = tuple(index_of[trial.config] for trial in result.ranking if trial.config in index_of)
    return outcomes, batch_of, ranking


def search_note(
    *, tuner: str, device_id: str, tunables: TunableSet[Any, Any], key: object, events: list[RecordEvent]
) -> str:
    """How the search of a tune that found no winner ended, for ``NoValidKernelFound``; '' for a tune without one.

    Without it, the error would list the few configurations a search evaluated as if they were
    all the set held, naming neither the budget that stopped it nor the trial log keeping them.
    """
    ended = next((e for e in events if isinstance(e, SearchEnded)), None)
    if ended is None or tunables.search is None:
        return ""
    from tunekit._search.record import no_winner_note  # noqa: PLC0415 - search loads when used (issue 30)

    return no_winner_note(ended, _log_path(tuner, device_id, tunables, key, tunables.search))


def _log_path(tuner: str, device_id: str, tunables: TunableSet[Any, Any], key: object, spec: SearchSpec) -> Path | None:
    """The key's own trial log beside the budget's ``log`` (one search per key and device), or None without one."""
    if not spec.budget.log:
        return None
    base = Path(spec.budget.log)  # with_search keeps it as a Path, ~ expanded
    return key_log_path(base, tuner=tuner, device_id=device_id, key=key_to_dict(key), checksum=tunables.checksum())
