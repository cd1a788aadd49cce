"""Search strategies behind one small protocol: propose configurations, observe their scores."""

from __future__ import annotations

import functools

from tunekit._candidates.strategy import STRATEGIES, Strategy, StrategyFactory, StrategyName
from tunekit._search.strategies.base import Walker
from tunekit._search.strategies.genetic import Genetic
from tunekit._search.strategies.local import IteratedLocalSearch
from tunekit._search.strategies.portfolio import Portfolio
from tunekit._search.strategies.simple import Exhaustive, RandomSearch
from tunekit._search.strategies.surrogate import ModelGuidedLocalSearch, initial_points, wide_after
from tunekit._search.strategies.tpe import OptunaTPE

__all__ = [
    "STRATEGIES",
    "Exhaustive",
    "Genetic",
    "IteratedLocalSearch",
    "ModelGuidedLocalSearch",
    "Portfolio",
    "RandomSearch",
    "Strategy",
    "StrategyFactory",
    "StrategyName",
    "Walker",
    "make_strategy",
]


def make_strategy(name: str, max_evals: int | None = None) -> StrategyFactory:
    """The factory of the strategy called ``name``, sized for ``max_evals`` (``auto`` is resolved by the driver)."""
    match name:
        case "exhaustive":
            return Exhaustive
        case "random":
            return RandomSearch
        case "ils":
            return IteratedLocalSearch
        case "genetic":
            return Genetic
        case "model_ils":
            return functools.partial(
                ModelGuidedLocalSearch, initial=initial_points(max_evals), wide_after=wide_after(max_evals)
            )
        case "portfolio":
            return functools.partial(Portfolio, max_evals=max_evals)
        case "optuna_tpe":
            return OptunaTPE
    raise ValueError(f"unknown strategy {name!r}; choose one of {list(STRATEGIES)} or pass a factory")
