"""Which strategy a search runs: the one asked for, or for ``auto`` the one its budget calls for."""

from __future__ import annotations

from tunekit._candidates.budget import Budget
from tunekit._candidates.space import Space
from tunekit._search.strategies import StrategyFactory, make_strategy

__all__ = ["AUTO_COUNT_LIMIT", "budget_covers", "choose_strategy"]

AUTO_COUNT_LIMIT = 1_000_000
"""The largest restricted space (in Cartesian points) that ``auto`` counts to compare with ``max_evals``.

A count walks the space, one restriction call per point: 2-3.5 µs each on the shared
development VM (benches/auto_choice.py), so up to a few seconds, paid in full only when the
walk cannot stop early at ``max_evals + 1`` valid points: when the valid points are few, where
``model_ils`` would walk the space to sample it anyway (it takes 2.6x longer than counting and
measuring every point there). Past this size the budget must cover the Cartesian size.
"""


def budget_covers(space: Space, max_evals: int | None, max_seconds: float | None) -> bool:
    """Whether measuring every configuration fits the budget (counting a restricted space up to a size)."""
    if max_evals is None:
        return max_seconds is None
    if space.cartesian_size <= max_evals:
        return True
    # Counted only up to max_evals + 1: a budget that covers every valid configuration means
    # exhaustive (a user expects all of them measured), however sparse the restrictions make them.
    return space.cartesian_size <= AUTO_COUNT_LIMIT and space.size_up_to(max_evals) is not None


def choose_strategy(space: Space, budget: Budget) -> tuple[str, StrategyFactory]:
    """The strategy's name, as the record shows it, and its factory."""
    strategy = budget.strategy
    if not isinstance(strategy, str):
        return getattr(strategy, "__name__", type(strategy).__name__), strategy
    if strategy == "auto":
        strategy = "exhaustive" if budget_covers(space, budget.max_evals, budget.max_seconds) else "model_ils"
    return strategy, make_strategy(strategy, budget.max_evals)
