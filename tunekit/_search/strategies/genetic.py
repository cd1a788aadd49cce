"""A steady (mu + lambda) genetic algorithm over parameter positions."""

from __future__ import annotations

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._search.strategies.base import Positions, Walker

__all__ = ["Genetic"]

_FAILED = float("inf")


class Genetic:
    """Tournament selection, uniform crossover, mutation to adjacent or random values.

    Children already measured or outside the space are mutated again (a few tries) and
    otherwise replaced by a random fresh point, so no evaluation is ever repeated.
    """

    def __init__(self, space: Space, rng: np.random.Generator, *, population: int = 20) -> None:
        self._w = Walker(space, rng)
        self._size = population
        self._population: list[tuple[float, Positions]] = []

    def _child(self) -> Positions | None:
        w = self._w
        pop = self._population
        if len(pop) < 2:
            fresh = w.random_fresh(1)
            return fresh[0] if fresh else None

        def pick() -> Positions:
            a, b = (pop[int(i)] for i in w.rng.integers(len(pop), size=2))
            return min(a, b)[1]

        mum, dad = pick(), pick()
        mask = w.rng.random(len(mum)) < 0.5
        child = tuple(m if keep else d for m, d, keep in zip(mum, dad, mask, strict=True))
        rate = 1.0 / len(child)
        for _ in range(16):
            genes = list(child)
            for k, width in enumerate(w.widths):
                if width > 1 and w.rng.random() < rate:
                    if w.rng.random() < 0.7:
                        genes[k] = min(width - 1, max(0, genes[k] + (1 if w.rng.random() < 0.5 else -1)))
                    else:
                        genes[k] = int(w.rng.integers(width))
            candidate = tuple(genes)
            if w.fresh(candidate):
                return candidate
            rate = min(1.0, rate * 1.5)
        fresh = w.random_fresh(1)
        return fresh[0] if fresh else None

    def propose(self, n: int) -> list[Config]:
        """Random points until the first population is measured, then children."""
        w = self._w
        if len(w.scores) < self._size:
            return w.take(w.random_fresh(min(n, self._size)))
        out: list[Positions] = []
        for _ in range(n):
            child = self._child()
            if child is None:
                break
            w.seen.add(child)
            out.append(child)
        return [w.space.from_positions(p) for p in out]

    def observe(self, config: Config, score: float | None) -> None:
        """Insert the child; keep the best ``population`` points."""
        p = self._w.record(config, score)
        self._population.append((_FAILED if score is None else score, p))
        self._population.sort()
        del self._population[self._size :]
