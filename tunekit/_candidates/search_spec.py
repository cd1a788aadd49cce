"""How a tuner searches a set's space instead of measuring every candidate."""

from __future__ import annotations

import inspect
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from tunekit._base.errors import TrialLogError
from tunekit._base.extras import require_extra
from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._candidates.strategy import STRATEGIES

__all__ = [
    "SearchSpec",
    "check_build",
    "check_enumerable",
    "check_search_args",
    "check_search_names",
    "config_name",
    "empty_space_error",
    "incumbents_of",
]


def config_name(config: Config) -> str:
    """The candidate name ``TunableSet.from_space`` gives a configuration."""
    return config.name


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """The space, how its configurations name candidates, the strategy, the budget, incumbents and log.

    Set by ``TunableSet.with_search``; the tuner then tunes each key with ``tk.search``'s
    driver over the set's own candidates (compiled, checked and timed as in any tune), so
    a space too big to measure whole still goes through ``execute``, the cache and records.
    ``log`` is the base path of the per-key trial logs (``key_log_path``).
    """

    space: Space
    name_of: Callable[[Config], str]
    strategy: str | Callable[..., object]
    max_evals: int | None
    max_seconds: float | None
    seed: int
    batch: int
    finalists: int
    require: tuple[Config, ...] = ()
    log: Path | None = None


def incumbents_of(space: Space, require: Sequence[Mapping[str, Any]]) -> list[Config]:
    """The required configurations as points of ``space``, in order, without repeats.

    Raises ValueError naming a configuration that is not in the space (and why).
    """
    incumbents: list[Config] = []
    for given in require:
        try:
            config = space.config(given)
        except ValueError as exc:
            raise ValueError(f"required configuration is not in the space: {exc}") from None
        if config not in incumbents:
            incumbents.append(config)
    return incumbents


def _is_int(value: object) -> TypeGuard[int]:
    # numbers.Integral: numpy integers (a seed drawn from a Generator) are ints here too.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_search_args(
    where: str,
    *,
    seed: object,
    max_evals: object,
    max_seconds: object,
    batch: object,
    finalists: object,
    require: object = (),
    strategy: object = "auto",
    log: object = None,
) -> None:
    """Refuse a search's arguments before anything is measured, naming ``where`` (the call).

    Checked up front because a bad value used to surface only at the end (a ``seed=None``
    failed the record after the whole search ran) or as another part's fault (``max_evals=2.5``
    blamed the strategy).
    """
    if not _is_int(seed):
        raise TypeError(
            f"{where}(seed=...) must be an int, got {seed!r}; pass seed=0 (or any int >= 0) to reproduce a search"
        )
    # numpy's generators take no negative seed: -1 failed inside the strategy as "expected non-negative integer".
    if seed < 0:
        raise ValueError(f"{where}(seed=...) must be an int >= 0, got {seed}; pass seed=0 (or any int >= 0)")
    if max_evals is not None and not (_is_int(max_evals) and max_evals >= 1):
        raise ValueError(
            f"{where}(max_evals=...) must be a positive int (configurations to evaluate) or None, got {max_evals!r}"
        )
    if max_seconds is not None and not (
        isinstance(max_seconds, numbers.Real) and not isinstance(max_seconds, bool) and float(max_seconds) > 0
    ):
        raise ValueError(f"{where}(max_seconds=...) must be a positive number of seconds or None, got {max_seconds!r}")
    if not (_is_int(batch) and batch >= 1):
        raise ValueError(f"{where}(batch=...) must be a positive int (configurations per batch), got {batch!r}")
    if not (_is_int(finalists) and finalists >= 0):
        raise ValueError(f"{where}(finalists=...) must be an int >= 0 (0: no final re-measurement), got {finalists!r}")
    if not isinstance(require, list | tuple):
        raise TypeError(
            f"{where}(require=...) takes a list of configurations (tk.Config or dicts name -> value), got {require!r}; "
            "a single configuration goes in a list: require=[config]"
        )
    for position, given in enumerate(require):
        if not isinstance(given, Mapping):
            # A list was given: saying to put the configuration in a list sent the user back to what they wrote.
            raise TypeError(
                f"{where}(require=...): item {position} is the {type(given).__name__} {given!r}, not a configuration; "
                "give a tk.Config (space.config(BLOCK=256, ...)) or a dict name -> value ({'BLOCK': 256, ...})"
            )
    # Checked here: an unknown name surfaced only after the trial log was opened, and a
    # non-callable one as "'int' object is not callable" from inside the driver.
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
    else:
        _check_factory(where, strategy)
    if log is not None and not isinstance(log, str | os.PathLike):
        raise TypeError(f"{where}(log=...) takes a file path (str or pathlib.Path) or None, got {log!r}")


def _unbindable(fn: Callable[..., object], arity: int) -> tuple[str, TypeError] | None:
    """``fn``'s name and why it cannot take ``arity`` positional arguments; None when it can or cannot be told."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without one: its call will tell
        return None
    try:
        signature.bind(*([None] * arity))
    except TypeError as exc:
        return getattr(fn, "__qualname__", type(fn).__qualname__), exc
    return None


def _check_factory(where: str, factory: Callable[..., object]) -> None:
    """Refuse a factory that cannot be called as ``factory(space, rng)``, before the search opens its log."""
    if refused := _unbindable(factory, 2):
        name, exc = refused
        raise TypeError(
            f"{where}(strategy=...): {name} cannot be called as factory(space, numpy Generator) -> tk.Strategy "
            f"({exc}); pass a strategy name from tk.STRATEGIES, or a class or function taking those two arguments"
        ) from None


def check_build(where: str, build: object) -> None:
    """Refuse a ``build`` that is not a callable taking one configuration, before anything is measured.

    ``build()`` without a parameter failed every candidate at its first run, each with the same
    TypeError, after a whole search (and its compiles) had been spent.
    """
    if not callable(build):
        raise TypeError(f"{where}(build=...) takes a callable config -> runnable, got {type(build).__name__}")
    if refused := _unbindable(build, 1):
        name, exc = refused
        raise TypeError(
            f"{where}(build=...): {name} cannot be called as build(config) ({exc}); it takes the configuration "
            "(a tk.Config) and returns the candidate, e.g. build=lambda c: make_kernel(c.BLOCK)"
        ) from None


def check_search_names(where: str, *, tuner: object, device_id: object) -> None:
    """Refuse a tuner name or device id that is not a non-empty str, naming ``where``.

    They name the search's record and trial log: an empty tuner was recorded as ``""``, and
    a non-str one failed only after the whole search, when its record was built.
    """
    for argument, value in (("tuner", tuner), ("device_id", device_id)):
        if not isinstance(value, str) or not value:
            raise (TypeError if not isinstance(value, str) else ValueError)(
                f"{where}({argument}=...) must be a non-empty str, got {value!r}"
            )


def empty_space_error(where: str, space: Space) -> ValueError:
    """The error for a space whose restrictions admit nothing, naming ``where`` it was found."""
    return ValueError(
        f"{where}: the space has no valid configuration: its restrictions reject all {space.cartesian_size} "
        f"points of {space!r}; loosen restrict=..."
    )


ENUMERABLE_LIMIT = 10_000_000
"""Points past which a set of one tunable per configuration is refused: 10^6 took 10-21 s and 577 MB."""


def check_enumerable(where: str, space: Space, fix: str) -> None:
    """Refuse one tunable per configuration of a space whose walk is out of reach; ``fix`` says what to do."""
    if space.walk_cost > ENUMERABLE_LIMIT:
        raise ValueError(
            f"{where} makes one tunable per valid configuration, walking all {space.walk_cost:,} points of "
            f"the space to find them (over {ENUMERABLE_LIMIT:,}: minutes to weeks of restriction calls, and "
            f"memory for each tunable); {fix}"
        )


def check_log_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path (``~`` expanded), refused (TrialLogError) when it names a directory: a log is a file."""
    # Not expanded, log="~/trials.jsonl" quietly made a directory named "~" in the working directory.
    path = Path(path).expanduser()
    if path.is_dir():
        raise TrialLogError(
            f"trial log {path} is a directory; give a file path, e.g. log={str(path / 'trials.jsonl')!r}"
        )
    return path
