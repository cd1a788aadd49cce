"""A tune that searches the set's space (``TunableSet.with_search``) instead of measuring it all.

The search driver proposes configurations in batches; each batch is compiled, checked and
timed exactly as a plan batch of an ordinary tune (prepare hooks, correctness gate, adaptive
schedule on the tuner's runner), so a search inside ``execute`` measures what ``tk.search``
would, and its winner is cached and recorded like any other.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunekit._client import Client
from tunekit._outcome import Failed, Outcome, Skipped
from tunekit._records import RecordEvent, ShortCircuit
from tunekit._runner import CandidateRunner
from tunekit._schedule import measure_batch
from tunekit._search import Ranked, run_search, search_ended
from tunekit._search_spec import SearchSpec
from tunekit._settings import Settings
from tunekit._space import Config
from tunekit._tunable_set import TunableSet

__all__ = ["search_tune"]

PrepareAndCheck = Callable[[list[int], int], dict[int, Failed]]
"""(batch indices, batch number) -> failures: the tuner's compile-and-check step for one batch."""


def search_tune(
    *,
    tuner: str,
    client: Client,
    tunables: TunableSet[Any, Any],
    key: object,
    spec: SearchSpec,
    planned: set[int],
    runner: CandidateRunner,
    prepare_and_check: PrepareAndCheck,
    settings: Settings,
    events: list[RecordEvent],
    on_outcomes: Callable[[Mapping[int, Outcome]], None],
    limit_ns: float | None = None,
) -> tuple[dict[int, Outcome], dict[int, int], tuple[int, ...]]:
    """Search the set's space for ``key``; the outcomes and batch of every evaluated candidate, and the ranking.

    With a roofline ``limit_ns`` (the set's bounds), a batch in which a candidate meets it is
    short-circuited as in an ordinary tune, and the search ends there (``stopped_by="roofline"``).
    """
    outcomes: dict[int, Outcome] = {}
    batch_of: dict[int, int] = {}
    index_of: dict[Config, int] = {}
    numbers = itertools.count()

    def evaluate(configs: Sequence[Config]) -> Mapping[Config, Outcome]:
        number = next(numbers)
        ranked = Ranked()
        config_at: dict[int, Config] = {}
        for config in configs:
            index = tunables.index_of(spec.name_of(config))
            if index is None:
                ranked[config] = Skipped(f"the set has no candidate named {spec.name_of(config)!r}")
            elif index not in planned:
                ranked[config] = Skipped("negative priority for this key")
            else:
                index_of[config] = index
                config_at[index] = config
        batch = list(config_at)
        results: dict[int, Outcome] = dict(prepare_and_check(batch, number))
        measured = measure_batch(
            runner,
            [i for i in batch if i not in results],
            settings,
            client=client,
            limit_ns=limit_ns,
            names=tunables.names,
        )
        results.update(measured)
        events.extend(measured.events)
        on_outcomes(results)
        for index, config in config_at.items():
            outcome = results.get(index, Skipped("not measured"))
            outcomes[index] = outcome
            batch_of[index] = number
            ranked[config] = outcome
        ranked.ranking = tuple(config_at[i] for i in measured.ranking)
        ranked.met_limit = any(isinstance(event, ShortCircuit) for event in measured.events)
        return ranked

    result = run_search(
        spec.space,
        evaluate,
        tuner=tuner,
        device_id=client.device_id,
        key=key,
        strategy=spec.strategy,  # type: ignore[arg-type]
        seed=spec.seed,
        max_evals=spec.max_evals,
        max_seconds=spec.max_seconds,
        batch=spec.batch,
        finalists=spec.finalists,
    )
    events.append(search_ended(result))
    ranking = tuple(index_of[trial.config] for trial in result.ranking if trial.config in index_of)
    return outcomes, batch_of, ranking
