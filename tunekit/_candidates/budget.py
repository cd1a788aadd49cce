"""A search's budget and options as one frozen value, the one every search entry point takes.

``tk.search``, ``TunableSet.with_search`` and ``tk.tune_objective`` take ``budget=tk.Budget(...)``;
their keywords of the same names build the same value, so the options are declared, checked and
carried in one place.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from tunekit._base.extras import require_extra
from tunekit._candidates.arguments import is_int, unbindable
from tunekit._candidates.strategy import STRATEGIES, StrategyFactory, StrategyName

__all__ = [
    "BATCH",
    "FINALISTS",
    "OBJECTIVE_KEYS",
    "SEARCH_KEYS",
    "Budget",
    "BudgetOptions",
    "SearchOptions",
    "budget_from",
]

BATCH = 8
"""Configurations proposed and measured together when a budget leaves ``batch`` unset."""

FINALISTS = 4
"""The fastest configurations re-measured side by side at the end when a budget leaves ``finalists`` unset."""


class BudgetOptions(TypedDict, total=False):
    """The search keywords every entry point takes (``tk.tune_objective``'s): fields of ``tk.Budget``."""

    max_evals: int | None
    max_seconds: float | None
    strategy: StrategyName | StrategyFactory
    seed: int
    require: Sequence[Mapping[str, Any]]
    log: str | os.PathLike[str] | None


class SearchOptions(BudgetOptions, total=False):
    """The search keywords of ``tk.search`` and ``TunableSet.with_search``: every field of ``tk.Budget``."""

    batch: int | None
    finalists: int | None


OBJECTIVE_KEYS = ("max_evals", "max_seconds", "strategy", "seed", "require", "log")
"""The keywords of :class:`BudgetOptions`, in the order errors list them."""

SEARCH_KEYS = (*OBJECTIVE_KEYS, "batch", "finalists")
"""The keywords of :class:`SearchOptions`, in the order errors list them."""


@dataclass(frozen=True, slots=True, init=False)
class Budget:
    """How long a search may run, how it proposes configurations, and what it must measure.

    Checked when made (each wrong value is refused with what to pass instead), so one budget can be
    kept and shared by the searches of a project: ``tk.search(..., budget=budget)``,
    ``tunables.with_search(budget=budget)``, ``tk.tune_objective(..., budget=budget)``. Their
    keywords of the same names (``max_evals=``, ``seed=``, ...) build the same budget; a call takes
    one or the other.

    Attributes:
        max_evals: distinct configurations that run (measured or failed) before the search stops;
            None for no count. A resumed search counts its logged trials.
        max_seconds: the search's time; no configuration starts after it, and a resumed search
            counts the logged time. None for no time limit.
        strategy: ``"auto"`` (exhaustive when the budget covers the space, else the best
            large-space strategy), a name from ``tk.STRATEGIES``, or a factory
            ``(space, numpy Generator) -> tk.Strategy``.
        seed: the strategy's randomness, so a search can be reproduced.
        batch: configurations proposed and measured together; None for the entry point's
            default (8; ``tk.tune_objective`` measures one at a time).
        finalists: the fastest few, re-measured side by side at the end to pick the winner;
            None for the entry point's default (4; ``tk.tune_objective`` re-measures none).
        require: incumbent configurations (``tk.Config`` or dicts), measured first whatever the
            budget, so the winner is never slower than them.
        log: a JSONL trial log that a rerun resumes; None for none.
    """

    max_evals: int | None
    max_seconds: float | None
    strategy: StrategyName | StrategyFactory
    seed: int
    batch: int | None
    finalists: int | None
    # Left out of the hash: dict incumbents are not hashable, and equal budgets still hash alike.
    require: tuple[Mapping[str, Any], ...] = field(hash=False)
    log: str | os.PathLike[str] | None

    def __init__(
        self,
        *,
        max_evals: int | None = None,
        max_seconds: float | None = None,
        strategy: StrategyName | StrategyFactory = "auto",
        seed: int = 0,
        batch: int | None = None,
        finalists: int | None = None,
        require: Sequence[Mapping[str, Any]] = (),
        log: str | os.PathLike[str] | None = None,
    ) -> None:
        _check(
            "tk.Budget",
            max_evals=max_evals,
            max_seconds=max_seconds,
            strategy=strategy,
            seed=seed,
            batch=batch,
            finalists=finalists,
            require=require,
            log=log,
        )
        # Written by hand (init=False) so that every value is checked before it is stored and require
        # is kept as a tuple; frozen, so the fields are set past the dataclass's own __setattr__, once.
        fields = (
            ("max_evals", max_evals),
            ("max_seconds", max_seconds),
            ("strategy", strategy),
            ("seed", seed),
            ("batch", batch),
            ("finalists", finalists),
            ("require", tuple(require)),
            ("log", log),
        )
        for name, value in fields:
            object.__setattr__(self, name, value)


def budget_from(where: str, budget: Budget | None, options: BudgetOptions, keys: Collection[str]) -> Budget:
    """The budget of a call to ``where``: ``budget=`` as given, or one built from its keywords ``options``.

    ``keys`` are the keywords ``where`` takes (:data:`SEARCH_KEYS` or :data:`OBJECTIVE_KEYS`). Errors
    name ``where``'s own argument (``tk.search(seed=...)``), as the user wrote it.
    """
    unknown = [name for name in options if name not in keys]
    if unknown:
        raise TypeError(
            f"{where}() got an unexpected keyword argument {unknown[0]!r}; its search options are "
            f"{', '.join(keys)} (the fields of tk.Budget)"
        )
    if budget is None:
        _check(where, **options)
        return Budget(**options)
    if not isinstance(budget, Budget):
        raise TypeError(f"{where}(budget=...) takes a tk.Budget, e.g. budget=tk.Budget(max_evals=100), got {budget!r}")
    if options:
        given = ", ".join(f"{name}=" for name in options)
        example = ", ".join(f"{name}=..." for name in options)
        raise TypeError(
            f"{where}() takes its search options in budget= or as keywords, not both; got budget= and {given}: "
            f"set {'it' if len(options) == 1 else 'them'} in the budget (tk.Budget({example})) or leave budget= out"
        )
    return budget


def _check(
    where: str,
    *,
    max_evals: object = None,
    max_seconds: object = None,
    strategy: object = "auto",
    seed: object = 0,
    batch: object = None,
    finalists: object = None,
    require: object = (),
    log: object = None,
) -> None:
    """Refuse a search's options before anything is measured, naming ``where`` (the call).

    Checked up front so that a wrong value is reported as the user's, at the call: found later it
    surfaces after the whole search (a ``seed=None`` in the record) or as another part's fault
    (``max_evals=2.5`` as the strategy's).
    """
    if not is_int(seed):
        raise TypeError(
            f"{where}(seed=...) must be an int, got {seed!r}; pass seed=0 (or any int >= 0) to reproduce a search"
        )
    # numpy's generators take no negative seed; the strategy would fail with numpy's own words.
    if seed < 0:
        raise ValueError(f"{where}(seed=...) must be an int >= 0, got {seed}; pass seed=0 (or any int >= 0)")
    if max_evals is not None and not (is_int(max_evals) and max_evals >= 1):
        raise ValueError(
            f"{where}(max_evals=...) must be a positive int (configurations to evaluate) or None, got {max_evals!r}"
        )
    if max_seconds is not None and not (
        isinstance(max_seconds, numbers.Real) and not isinstance(max_seconds, bool) and float(max_seconds) > 0
    ):
        raise ValueError(f"{where}(max_seconds=...) must be a positive number of seconds or None, got {max_seconds!r}")
    if batch is not None and not (is_int(batch) and batch >= 1):
        raise ValueError(f"{where}(batch=...) must be a positive int (configurations per batch), got {batch!r}")
    if finalists is not None and not (is_int(finalists) and finalists >= 0):
        raise ValueError(f"{where}(finalists=...) must be an int >= 0 (0: no final re-measurement), got {finalists!r}")
    if not isinstance(require, list | tuple):
        raise TypeError(
            f"{where}(require=...) takes a list of configurations (tk.Config or dicts name -> value), got {require!r}; "
            "a single configuration goes in a list: require=[config]"
        )
    for position, given in enumerate(require):
        if not isinstance(given, Mapping):
            # Not "put it in a list": the user gave a list, and the item is what is wrong.
            raise TypeError(
                f"{where}(require=...): item {position} is the {type(given).__name__} {given!r}, not a configuration; "
                "give a tk.Config (space.config(BLOCK=256, ...)) or a dict name -> value ({'BLOCK': 256, ...})"
            )
    # Checked here, before the trial log is opened: a non-callable factory would otherwise fail
    # inside the driver as "'int' object is not callable".
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise ValueError(f"{where}(strategy=...): unknown strategy {strategy!r}; choose one of {list(STRATEGIES)}")
        if strategy == "optuna_tpe":
            require_extra("optuna", "optuna", f"{where}(strategy='optuna_tpe'): the 'optuna_tpe' strategy needs Optuna")
    elif not callable(strategy):
        raise TypeError(
            f"{where}(strategy=...) takes a strategy name (one of tk.STRATEGIES) or a factory "
            f"(space, numpy Generator) -> tk.Strategy, got {strategy!r}"
        )
    elif refused := unbindable(strategy, 2):
        name, exc = refused
        raise TypeError(
            f"{where}(strategy=...): {name} cannot be called as factory(space, numpy Generator) -> tk.Strategy "
            f"({exc}); pass a strategy name from tk.STRATEGIES, or a class or function taking those two arguments"
        ) from None
    if log is not None and not isinstance(log, str | os.PathLike):
        raise TypeError(f"{where}(log=...) takes a file path (str or pathlib.Path) or None, got {log!r}")
