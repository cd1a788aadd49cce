"""``tk.search``: search a space of kernels too big to measure whole, each candidate timed on a client."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from typing_extensions import TypeVar

from tunekit._base import settings as _settings
from tunekit._base.errors import describe_error
from tunekit._candidates.budget import SEARCH_KEYS, Budget, SearchOptions, budget_from
from tunekit._candidates.config import Config
from tunekit._candidates.reference import reference_of
from tunekit._candidates.search_spec import ENUMERABLE_LIMIT, check_build, check_search_names, config_name
from tunekit._candidates.space import Space
from tunekit._candidates.tunable import Tunable
from tunekit._candidates.tunable_set import LazyBuild, TunableSet, build_identity, build_name
from tunekit._measure.check import Gate
from tunekit._measure.client import Client, require_client
from tunekit._measure.isolation import check_each, open_runner, refuse_unforkable
from tunekit._measure.schedule import measure_batch
from tunekit._observe.events import SearchFinished
from tunekit._observe.observers import observe_search
from tunekit._observe.sinks import RecordSink, as_sinks
from tunekit._search.driver import Ranked, refuse_autotune_off, run_search, search_finished
from tunekit._search.record import emit_search_record, raise_if_no_winner
from tunekit._search.result import SearchResult
from tunekit._values.outcome import Failed, Outcome
from tunekit._values.records import AutotuneRecord

__all__ = ["search"]

K = TypeVar("K", default=Any)

_SEARCH_IN_A_TUNER_FIX = (
    "search inside a tuner, which takes a worker factory: a set made from the space "
    "(tk.TunableSet.from_space(space, build, key=...), or KernelTemplate(...).tunable_set(...)) with "
    ".with_search(...).with_isolation('process', worker=factory), run through TUNER.execute, where "
    "factory(key_fields, *, device_id, locator) -> (client, tunables, inputs) is a function at the top level "
    "of a module (docs/robustness.md)"
)
"""The fix ``tk.search`` offers for a client that cannot be forked: the same search, run by a tuner."""


def search(
    space: Space,
    build: Callable[[Config], Callable[..., Any]],
    client: Client,
    inputs: Sequence[Any],
    *,
    tuner: str,
    key: K | None = None,
    budget: Budget | None = None,
    sinks: Sequence[RecordSink | Callable[[AutotuneRecord], object]] = (),
    name_of: Callable[[Config], str] = config_name,
    reference: Callable[..., Any] | None = None,
    outputs: Sequence[int] | None = None,
    rtol: float = 0.0,
    atol: float = 0.0,
    compare: Callable[[Any, Any], bool] | None = None,
    **options: Unpack[SearchOptions],
) -> SearchResult[K]:
    """Search a space of kernels too big to measure whole; every candidate timed on ``client``.

    ``build(config)`` returns the runnable for a configuration (called lazily, once per
    measured configuration; raising makes that configuration a failure at stage ``compile``).
    Candidates are timed in batches of ``batch`` through ``measure_batch``, like every other tuning.

    ``budget``: a ``tk.Budget``, or its fields given here as keywords (not both):
    stop after ``max_evals`` distinct configurations and/or ``max_seconds``;
    ``result.stopped_by`` says which ended it (``exhausted`` when the strategy ran out).
    Both bound the whole search, not each run: a search resumed from ``log`` counts the
    logged trials against ``max_evals`` and the time they took against ``max_seconds``.
    ``require``: incumbent configurations measured first, whatever the budget, so the
    winner is never slower than them; one outside the space is an error. ``log``: a JSONL
    trial log; a rerun resumes it, skipping configurations it already measured.
    ``finalists`` (4 unless set): the fastest few, and every measured incumbent, are re-measured
    together in one batch at the end, and that measurement picks the winner (not counted in the
    budget; not logged). ``batch``: 8 unless set.
    ``strategy``: ``auto`` (exhaustive when the budget covers the space, else the best
    large-space strategy), a name from ``tk.STRATEGIES``, or a factory.
    ``name_of``: a configuration's candidate name in the record and errors, as the set the
    winner is for names it: ``template.name_of`` for an OpenCL ``KernelTemplate``
    (``fill[BLOCK=16]``, as its tuner and ``tk.Record`` name it); by default ``config.name``
    (``BLOCK=16``, as ``TunableSet.from_space`` names it).
    ``reference``, ``outputs``, ``rtol``, ``atol``, ``compare``: the correctness gate of
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
    # A bare array would be iterated into one argument per row, and every candidate fail on arity.
    if not isinstance(inputs, tuple | list):
        raise TypeError(f"tk.search() takes the inputs as a tuple, e.g. (x,) or (a, b); got {type(inputs).__name__}")
    # Checked before the search: a sink that is not one would fail only at the end, losing the record.
    resolved_sinks = as_sinks(sinks, "tk.search(sinks=...)")
    # Checked here: a string or the client's class would fail later as "'str' has no attribute 'device_id'".
    require_client(client, "tk.search(client=...)")
    check_search_names("tk.search", tuner=tuner, device_id=client.device_id)
    budget = budget_from("tk.search", budget, options, SEARCH_KEYS)
    _refuse_unbounded(space, budget)
    args = tuple(inputs)
    settings = _settings.current()
    where = f"tk.search(tuner={tuner!r})"
    refuse_autotune_off(where, settings)  # before anything is built or the trial log is opened
    # Before the trial log is opened. tk.search takes no worker factory, but a tuner does and searches
    # a set as tk.search would, so the refusal offers that route: a searched OpenCL set under process
    # isolation works through execute.
    refuse_unforkable(client, None, settings, where=where, other_fixes=(_SEARCH_IN_A_TUNER_FIX,))

    if reference is None and (outputs is not None or rtol or atol or compare is not None):
        # Refused, not ignored: the caller would believe the configurations checked, and a wrong one could win.
        raise TypeError(
            "tk.search(outputs=, rtol=, atol=, compare=) tune the correctness check, which needs the expected outputs: "
            "pass reference=fn too (fn(*inputs) returns them)"
        )
    if reference is not None and not callable(reference):
        raise TypeError(f"tk.search(reference=...) takes a callable (*inputs) -> expected, got {reference!r}")
    # One gate for the whole search: the reference runs once, and every batch is checked on the
    # inputs as they were at the first check (timed runs of in-place kernels change them).
    gate = (
        None
        if reference is None
        else Gate(client, args, reference_of("tk.search", reference, outputs, rtol, atol, compare))
    )

    # A progress display (a terminal, an observer) sees the search, and each batch's compile, check and schedule.
    observation = observe_search(settings)
    batches = itertools.count()

    def evaluate(configs: Sequence[Config], deadline: float | None) -> Mapping[Config, Outcome]:
        tunables: TunableSet[Any, Any] = TunableSet(key=lambda *_: None).with_tunables(
            [Tunable(name_of(c), LazyBuild(build, c)) for c in configs]
        )
        failed: dict[int, Outcome] = {}
        observation.batch(next(batches), tunables.names)
        with open_runner(client, tunables, args, settings, key=key, where=where, gate=gate) as opened:
            runner = observation.runner(opened, tunables.names)
            if gate is not None:
                # Those that fail the check (or raise) are never timed.
                for index, check in check_each(runner, gate, range(len(configs)), tunables):
                    if isinstance(check, Failed) or not check.passed:
                        failed[index] = check if isinstance(check, Failed) else Failed(check.detail, "check")
                    else:
                        observation.checked(tunables.names[index])
            measured = measure_batch(
                runner,
                [i for i in range(len(configs)) if i not in failed],
                settings,
                client=client,
                names=tunables.names,
                lone_samples=settings.min_samples,
                deadline=deadline,
            )
        observation.outcomes({**measured.outcomes, **failed}, tunables.names)
        # Those the deadline kept from starting are left out: they are no trials.
        ranked = Ranked({c: o for i, c in enumerate(configs) if (o := failed.get(i, measured.get(i))) is not None})
        ranked.ranking = tuple(configs[i] for i in measured.ranking)
        ranked.events = measured.events
        return ranked

    try:
        result = run_search(
            space,
            evaluate,
            budget=budget,
            tuner=tuner,
            device_id=client.device_id,
            key=key,
            build_id=build_identity(build),
            build_name=build_name(build),
            observation=observation,
        )
    except BaseException as exc:
        observation.search_finished(
            SearchFinished(observation.tune_id, 0, "error", 0.0, 0, 0.0, None, describe_error(exc))
        )
        raise
    record = emit_search_record(result, key, resolved_sinks, name_of)
    observation.search_finished(search_finished(observation.tune_id, result, record))
    raise_if_no_winner(result, key, budget.log, name_of)
    return result


def _refuse_unbounded(space: Space, budget: Budget) -> None:
    """Refuse a search that would measure a space too big to walk, having no limit but its end.

    Without ``max_evals`` or ``max_seconds`` a named strategy ends only once every configuration
    was measured: over ``ENUMERABLE_LIMIT`` points that is days of measurement, silently. A
    strategy factory may end on its own, so it is left to run.
    """
    unbounded = budget.max_evals is None and budget.max_seconds is None and isinstance(budget.strategy, str)
    if unbounded and space.walk_cost > ENUMERABLE_LIMIT:
        raise ValueError(
            f"tk.search() without max_evals or max_seconds measures every configuration of the space, "
            f"up to {space.walk_cost:,} of them here (over {ENUMERABLE_LIMIT:,}: days at a millisecond each); "
            "give it a budget, e.g. max_evals=200 or max_seconds=600"
        )
