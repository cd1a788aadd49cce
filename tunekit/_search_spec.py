"""How a tuner searches a set's space instead of measuring every candidate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tunekit._space import Config, Space

__all__ = ["SearchSpec", "config_name"]


def config_name(config: Config) -> str:
    """The candidate name ``TunableSet.from_space`` gives a configuration."""
    return config.name


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """The space, how its configurations name candidates, the strategy and the budget.

    Set by ``TunableSet.with_search``; the tuner then tunes each key with ``tk.search``'s
    driver over the set's own candidates (compiled, checked and timed as in any tune), so
    a space too big to measure whole still goes through ``execute``, the cache and records.
    """

    space: Space
    name_of: Callable[[Config], str]
    strategy: str | Callable[..., object]
    max_evals: int | None
    max_seconds: float | None
    seed: int
    batch: int
    finalists: int
