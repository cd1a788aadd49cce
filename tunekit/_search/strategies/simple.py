"""Exhaustive and random search: the baselines every other strategy must beat."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._search.strategies.base import Walker

__all__ = ["Exhaustive", "RandomSearch"]


class Exhaustive:
    """Every valid configuration in the space's order."""

    def __init__(self, space: Space, rng: np.random.Generator) -> None:
        self._configs: Iterator[Config] = iter(space)
        self._observed: set[Config] = set()

    def propose(self, n: int) -> list[Config]:
        """The next ``n`` configurations in enumeration order that were not observed already."""
        out = []
        for config in self._configs:
            if config in self._observed:
                continue
            out.append(config)
            if len(out) == n:
                break
        return out

    def observe(self, config: Config, score: float | None) -> None:
        """Exhaustive search learns only what it must not propose (an incumbent, a resumed search's logged trial)."""
        self._observed.add(config)


class RandomSearch:
    """Uniform random sampling without replacement."""

    def __init__(self, space: Space, rng: np.random.Generator, *, walker: Walker | None = None) -> None:
        self._walker = walker if walker is not None else Walker(space, rng)

    def propose(self, n: int) -> list[Config]:
        """``n`` configurations never proposed before, uniformly at random."""
        return self._walker.take(self._walker.random_fresh(n))

    def observe(self, config: Config, score: float | None) -> None:
        """Random search learns nothing but what it must not draw again (an incumbent it did not propose)."""
        self._walker.record(config, score)
