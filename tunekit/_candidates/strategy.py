"""The search strategy protocol: what a strategy does, and the names of the built-in ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol, get_args, runtime_checkable

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space

__all__ = ["STRATEGIES", "Strategy", "StrategyFactory", "StrategyName"]


@runtime_checkable
class Strategy(Protocol):
    """Proposes configurations to measure and learns from their scores.

    The search driver calls ``propose(n)`` for up to ``n`` configurations that were never
    proposed before and lie in the space (an empty list ends the search), measures them,
    and calls ``observe`` once for each: ``score`` is lower-is-better, None for a failure.
    """

    def propose(self, n: int) -> list[Config]:
        """Up to ``n`` new configurations of the space; [] when there is nothing left to try."""
        ...

    def observe(self, config: Config, score: float | None) -> None:
        """The result of a proposed configuration: its score, or None when it failed."""
        ...


StrategyFactory = Callable[[Space, np.random.Generator], Strategy]
"""Builds a strategy for one search over ``space``, drawing randomness only from the generator."""


StrategyName = Literal["auto", "exhaustive", "random", "ils", "genetic", "model_ils", "portfolio", "optuna_tpe"]


STRATEGIES: tuple[str, ...] = get_args(StrategyName)
"""Every strategy name ``search(strategy=...)`` accepts."""
