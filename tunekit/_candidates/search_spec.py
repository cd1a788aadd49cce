"""How a tuner searches a set's space instead of measuring every candidate."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunekit._base.errors import TrialLogError
from tunekit._candidates.arguments import unbindable
from tunekit._candidates.budget import Budget
from tunekit._candidates.config import Config
from tunekit._candidates.space import Space

__all__ = [
    "SearchSpec",
    "check_build",
    "check_enumerable",
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
    """The space, how its configurations name candidates, and the search's budget.

    Set by ``TunableSet.with_search``; the tuner then tunes each key with ``tk.search``'s
    driver over the set's own candidates (compiled, checked and timed as in any tune), so
    a space too big to measure whole still goes through ``execute``, the cache and records.
    The budget's ``require`` holds points of ``space`` and its ``log``, ``~`` expanded, is the
    base path of the per-key trial logs (``key_log_path``).
    """

    space: Space
    name_of: Callable[[Config], str]
    budget: Budget


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


def check_build(where: str, build: object) -> None:
    """Refuse a ``build`` that is not a callable taking one configuration, before anything is measured.

    Checked at the call: a ``build()`` without a parameter would fail every candidate at its first
    run, each with the same TypeError, after a whole search (and its compiles) had been spent.
    """
    if not callable(build):
        raise TypeError(f"{where}(build=...) takes a callable config -> runnable, got {type(build).__name__}")
    if refused := unbindable(build, 1):
        name, exc = refused
        raise TypeError(
            f"{where}(build=...): {name} cannot be called as build(config) ({exc}); it takes the configuration "
            "(a tk.Config) and returns the candidate, e.g. build=lambda c: make_kernel(c.BLOCK)"
        ) from None


def check_search_names(where: str, *, tuner: object, device_id: object) -> None:
    """Refuse a tuner name or device id that is not a non-empty str, naming ``where``.

    They name the search's record and trial log: an empty tuner would be recorded as ``""``, and
    a non-str one would fail only after the whole search, when its record is built.
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
    # Not expanded, log="~/trials.jsonl" would quietly make a directory named "~" in the working directory.
    path = Path(path).expanduser()
    if path.is_dir():
        raise TrialLogError(
            f"trial log {path} is a directory; give a file path, e.g. log={str(path / 'trials.jsonl')!r}"
        )
    return path
