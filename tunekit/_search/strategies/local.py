"""Iterated local search: climb the parameter neighbourhood, perturb at a local optimum."""

from __future__ import annotations

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._search.strategies.base import Positions, Walker

__all__ = ["IteratedLocalSearch"]


class IteratedLocalSearch:
    """First-improvement hill climbing over one-parameter moves, restarted by perturbation.

    Moves go to the adjacent value of a parameter first (kernel parameters are mostly
    ordinal), then to any value; at a local optimum the best point so far is perturbed by
    a few random moves and the climb restarts there.
    """

    def __init__(
        self, space: Space, rng: np.random.Generator, *, initial: int = 8, kick: int = 3, walker: Walker | None = None
    ) -> None:
        self._w = walker if walker is not None else Walker(space, rng)
        self._initial = initial
        self._kick = kick
        self._current: tuple[Positions, float] | None = None
        self._queue: list[Positions] = []
        self._far = False
        self._initial_left = initial
        self._kicked: Positions | None = None

    def _plan(self) -> None:
        """Fill the queue with the current point's unseen neighbours, or restart."""
        w = self._w
        assert self._current is not None
        here = self._current[0]
        while not self._queue:
            moves = [p for p in w.neighbours(here, far=self._far) if w.fresh(p)]
            if moves:
                self._queue = [moves[int(i)] for i in w.rng.permutation(len(moves))]
                return
            if not self._far:
                self._far = True
                continue
            kicked = self._perturb()
            if kicked is None:
                return
            self._queue = [kicked]
            self._kicked = kicked
            return

    def _perturb(self) -> Positions | None:
        w = self._w
        best = w.best()
        start = best[0] if best is not None else self._current[0] if self._current else None
        if start is None:
            fresh = w.random_fresh(1)
            return fresh[0] if fresh else None
        for p in w.kicks(start, self._kick, 64):
            if w.fresh(p):
                return p
        fresh = w.random_fresh(1)
        return fresh[0] if fresh else None

    def propose(self, n: int) -> list[Config]:
        """Initial random points, then neighbours of the current point."""
        w = self._w
        if self._initial_left > 0 or self._current is None:
            k = min(n, self._initial_left) if self._initial_left > 0 else n
            self._initial_left -= k
            return w.take(w.random_fresh(k))
        out: list[Positions] = []
        while len(out) < n:
            if not self._queue:
                self._plan()
                if not self._queue:
                    break
            p = self._queue.pop(0)
            if w.fresh(p):
                out.append(p)
                w.seen.add(p)
        return [w.space.from_positions(p) for p in out]

    def observe(self, config: Config, score: float | None) -> None:
        """Move to ``config`` when it improves on the current point."""
        w = self._w
        p = w.record(config, score)
        if score is None:
            return
        if p == self._kicked:
            self._kicked = None
            self._current = (p, score)
            self._queue = []
            self._far = False
        elif self._current is None or score < self._current[1]:
            self._current = (p, score)
            self._queue = []
            self._far = False
