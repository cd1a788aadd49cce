"""Engine-scale objectives: when "fast" means a whole request, the caller measures.

tunekit cannot own the launch of a serving engine's request or of a multi-stage
pipeline: the caller implements :class:`Objective` (the space, how to measure one
configuration end to end, and how much budget the engine has left), and
:func:`tune_objective` runs it with the same strategies, budget, incumbents, trial
log and result as kernel tuning, so its winner can go into a committed ``tk.Record``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Unpack, runtime_checkable

from typing_extensions import TypeVar

from tunekit._base import settings as _settings
from tunekit._base.deadline import past
from tunekit._base.errors import ClientClosed, describe_error
from tunekit._candidates.arguments import is_int
from tunekit._candidates.budget import OBJECTIVE_KEYS, Budget, BudgetOptions, budget_from
from tunekit._candidates.config import Config
from tunekit._candidates.search_spec import check_search_names
from tunekit._candidates.space import Space
from tunekit._observe.events import SearchFinished
from tunekit._observe.observers import observe_search
from tunekit._observe.sinks import RecordSink, as_sinks
from tunekit._search.driver import refuse_autotune_off, run_search, search_finished
from tunekit._search.record import emit_search_record, raise_if_no_winner
from tunekit._search.result import SearchResult
from tunekit._values.durations import BenchmarkDurations
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.records import AutotuneRecord

__all__ = ["Objective", "tune_objective"]

K = TypeVar("K", default=Any)


@runtime_checkable
class Objective(Protocol):
    """A caller-measured objective over a declared space (lower is better).

    ``measure`` runs one configuration at engine scope and returns ``tk.Measured``
    (durations in ns, or any lower-is-better cost scaled to integers) or ``tk.Failed``
    with the reason it is invalid; an exception it raises is recorded as a failure of
    that configuration. ``remaining`` is how many more measurements the engine allows,
    or None when only tunekit's budget applies.
    """

    @property
    def space(self) -> Space:
        """The configurations to search."""
        ...

    def measure(self, config: Config) -> Outcome:
        """Measure ``config`` end to end."""
        ...

    def remaining(self) -> int | None:
        """Measurements the engine still allows (None: no limit of its own)."""
        ...


def tune_objective(
    objective: Objective,
    *,
    tuner: str,
    device_id: str,
    key: K | None = None,
    budget: Budget | None = None,
    sinks: Sequence[RecordSink | Callable[[AutotuneRecord], object]] = (),
    **options: Unpack[BudgetOptions],
) -> SearchResult[K]:
    """Search ``objective.space``, measuring one configuration at a time through the objective.

    Arguments mean what they mean for ``tk.search`` (``budget=tk.Budget(...)``, or its fields as
    keywords), but the objective measures one configuration at a time and no finalist is measured
    again, so a budget here leaves ``batch`` and ``finalists`` unset. The search also stops with
    ``stopped_by == "objective_budget"`` once ``objective.remaining()`` reaches 0.
    The incumbents (``require``) are measured whatever the budget, as for ``tk.search``:
    even when ``remaining()`` is already 0, so the engine's budget can be overrun by up
    to ``len(require)`` measurements. Raises ``tk.NoValidKernelFound`` when no configuration
    was measured (every one invalid, or none evaluated), after emitting the record, and
    ``tk.AutotuneDisabled``, before the objective measures anything, when autotuning is off.
    """
    if isinstance(objective, type):
        # The class passes the protocol check (its space is a class attribute), then remaining()
        # would fail unbound: "missing 1 required positional argument: 'self'".
        raise TypeError(
            f"tune_objective() takes a tk.Objective instance, got the class {objective.__name__}; "
            f"pass {objective.__name__}(...)"
        )
    if not isinstance(objective, Objective):
        raise TypeError(
            f"tune_objective() takes a tk.Objective (space, measure, remaining), got {type(objective).__name__}"
        )
    # Checked before the search: a sink that is not one would fail only at the end, losing the record.
    resolved_sinks = as_sinks(sinks, "tk.tune_objective(sinks=...)")
    check_search_names("tk.tune_objective", tuner=tuner, device_id=device_id)
    budget = _one_at_a_time(budget_from("tk.tune_objective", budget, options, OBJECTIVE_KEYS))
    refuse_autotune_off(f"tk.tune_objective(tuner={tuner!r})", _settings.current())
    space = objective.space
    if not isinstance(space, Space):
        raise TypeError(f"objective.space must be a tk.Space, got {type(space).__name__}")

    def remaining() -> int | None:
        # A str or float would be compared against the budget deep in the driver ('<=' not supported,
        # or a fractional batch size); an engine's answer is checked where it is read.
        left = objective.remaining()
        if left is not None and not is_int(left):
            raise TypeError(
                f"{type(objective).__name__}.remaining() must return an int (measurements the engine still "
                f"allows) or None (no limit of its own), got {left!r}"
            )
        return None if left is None else int(left)

    remaining()  # once before anything is measured, so a bad answer stops the search before it starts

    def evaluate(configs: Sequence[Config], deadline: float | None) -> Mapping[Config, Outcome]:
        outcomes: dict[Config, Outcome] = {}
        for config in configs:
            if outcomes and past(deadline):
                break  # the search's time is spent: the rest are no trials
            try:
                outcome = objective.measure(config)
            except ClientClosed:  # the engine's client went away: the search stops, no configuration is blamed
                raise
            except Exception as exc:  # the engine's error disqualifies only this configuration
                outcome = Failed(describe_error(exc), "run")
            _check_outcome(objective, config, outcome)
            outcomes[config] = outcome
        return outcomes

    observation = observe_search(_settings.current())
    try:
        result = run_search(
            space,
            evaluate,
            budget=budget,
            tuner=tuner,
            device_id=device_id,
            key=key,
            remaining=remaining,
            observation=observation,
        )
    except BaseException as exc:
        failed = SearchFinished(observation.tune_id, 0, "error", 0.0, 0, 0.0, error=describe_error(exc))
        observation.search_finished(failed)
        raise
    record = emit_search_record(result, key, resolved_sinks)
    observation.search_finished(search_finished(observation.tune_id, result, record))
    raise_if_no_winner(result, key, budget.log)
    return result


def _check_outcome(objective: Objective, config: Config, outcome: object) -> None:
    """Raise at the first return of the wrong type: every other configuration would return it too.

    A mistake in the objective's code (a bare float of seconds, a forgotten ``return``) is no
    configuration's failure: recorded as one, it would spend the whole budget failing and end in
    ``NoValidKernelFound``.
    """
    if isinstance(outcome, Measured):
        if isinstance(outcome.durations, BenchmarkDurations):
            return
        got = f"tk.Measured of {type(outcome.durations).__name__} {outcome.durations!r:.60}"
    elif isinstance(outcome, Failed | Skipped):
        return
    else:
        got = f"{type(outcome).__name__} {outcome!r:.60}"
    raise TypeError(
        f"{type(objective).__name__}.measure({config}) returned {got}; it must return "
        "tk.Measured(tk.BenchmarkDurations(samples_ns)) (the integer costs, ns for durations, lower is better) "
        "or tk.Failed(reason) for a configuration that is invalid"
    )


def _one_at_a_time(budget: Budget) -> Budget:
    """``budget`` measuring one configuration per batch and re-measuring no finalist, as an objective's search does.

    An objective's measurement is a whole request at engine scale: the engine's own budget
    (``remaining()``) is read before each, and a finalists' batch would spend it past that count.
    """
    if budget.batch not in (None, 1) or budget.finalists not in (None, 0):
        raise ValueError(
            "tk.tune_objective(budget=...) measures one configuration at a time and measures no finalist again, "
            f"so its budget leaves batch and finalists unset; got batch={budget.batch!r}, "
            f"finalists={budget.finalists!r}: leave them out of the tk.Budget"
        )
    return dataclasses.replace(budget, batch=1, finalists=0)
