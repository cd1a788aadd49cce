"""The strategy protocol and the bookkeeping every strategy shares."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space

__all__ = ["Positions", "Walker"]

_WALK_LIMIT = 1_000_000
"""Cartesian points past which a walker keeps drawing at random rather than walk the space."""

_LEADERS = 10
"""Best measurements the walker keeps at hand (a restart keeps away from them)."""

Positions = tuple[int, ...]
"""A configuration as the position of each value in its parameter's domain."""


class Walker:
    """Positions, validity (memoised) and the set of configurations already proposed."""

    def __init__(self, space: Space, rng: np.random.Generator) -> None:
        self.space = space
        self.rng = rng
        self.widths = tuple(len(space.domains[n]) for n in space.names)
        self._width_array = np.array(self.widths)
        self.seen: set[Positions] = set()
        self.scores: dict[Positions, float | None] = {}
        self._valid: dict[Positions, bool] = {}
        self._exhausted = False
        self._everything: list[Positions] | None = None
        # The _LEADERS best (score, positions) measured, fastest first, kept as scores come (None: rebuild).
        self._leaders: list[tuple[float, Positions]] | None = []
        # A sparse space that walks cheaply (a replayed cache: 20,000 points of 10^10) is walked at once and
        # its points kept as a set: nearly every neighbour and kick there is invalid, and testing each through
        # the restriction would cost 1.7 s of a 2,000-evaluation search, and a rejected draw most of the rest.
        self._members: frozenset[Positions] | None = None
        if space.walk_cost <= _WALK_LIMIT and 8 * space.walk_cost <= space.cartesian_size:
            self._everything = [space.positions(c) for c in space]
            self._members = frozenset(self._everything)

    @property
    def walked(self) -> list[Positions] | None:
        """Every valid point in the space's order, once the space was walked (else None)."""
        return self._everything

    def valid(self, p: Positions) -> bool:
        """Whether ``p`` is in the space (restrictions memoised)."""
        if self._members is not None:
            return p in self._members
        ok = self._valid.get(p)
        if ok is None:
            ok = self._valid[p] = self.space.allows(self.space.from_positions(p))
        return ok

    def fresh(self, p: Positions) -> bool:
        """Valid and never proposed."""
        return p not in self.seen and self.valid(p)

    def _fresh_unmemoised(self, p: Positions) -> bool:
        """``fresh``, remembering only valid points: at 0.001 % valid, 40 draws would keep 4 million invalid ones."""
        if p in self.seen or self._valid.get(p) is False:
            return False
        if self.space.allows(self.space.from_positions(p)):
            self._valid[p] = True
            return True
        return False

    def take(self, ps: Iterable[Positions]) -> list[Config]:
        """Mark ``ps`` proposed and return them as configurations."""
        out = []
        for p in ps:
            self.seen.add(p)
            out.append(self.space.from_positions(p))
        return out

    def record(self, config: Config, score: float | None) -> Positions:
        """Remember an observation; returns its positions."""
        p = self.space.positions(config)
        self.seen.add(p)
        rescored = p in self.scores
        if rescored and self.scores[p] == score:
            # The same result again: a portfolio's members share one walker, and each records what it observes.
            return p
        self.scores[p] = score
        if rescored:
            self._leaders = None  # its old score may be among them: found again when asked
        elif score is not None and self._leaders is not None:
            bisect.insort(self._leaders, (score, p))
            del self._leaders[_LEADERS:]
        return p

    def random_fresh(self, n: int) -> list[Positions]:
        """Up to ``n`` distinct random fresh positions (rejection first, a full walk when that stalls)."""
        if self._everything is not None:
            return self._draw_walked(n)
        out: list[Positions] = []
        chosen: set[Positions] = set()
        tries = 0
        # A walk of a space past a million points costs seconds to days (a 10^12-point space with
        # 0.1 % valid would hang every strategy but exhaustive): there rejection goes on until it would
        # cost more than half a walk, as in Space.sample. Smaller spaces are walked after 200 draws per
        # point. A walk's cost, not the product's size: a replayed sparse cache (300 points of 4^20) walks
        # its keys in microseconds, and weighed against the product its draws would go on for hours.
        patient = self.space.walk_cost > _WALK_LIMIT
        while len(out) < n and not self._exhausted:
            if tries >= 200 * n + 200 and (not patient or self.space._draws_outcost_walk(tries, len(out), n)):
                break
            if patient and self.space._hopeless(tries, len(out)):
                # Every point proposed or observed (an incumbent) is in the space, as is every valid draw.
                if not self.seen and not any(self._valid.values()):
                    raise self.space._hopeless_error(tries)
                # Valid points were found before: those left are too rare to draw, and a walk is out of reach.
                self._exhausted = True
                break
            tries += 1
            # One call for every parameter: the same draws as one call each, at a third of the cost.
            p = tuple(self.rng.integers(0, self._width_array).tolist())
            if p not in chosen and (self.fresh(p) if not patient else self._fresh_unmemoised(p)):
                chosen.add(p)
                out.append(p)
        if len(out) < n and not self._exhausted:
            # Walked once: restrictions that reject almost everything would otherwise make every later
            # call walk the whole Cartesian space again.
            self._everything = [self.space.positions(c) for c in self.space]
            self._valid.update(dict.fromkeys(self._everything, True))
            self._fill_from_walk(out, chosen, n)
        return out

    def _draw_walked(self, n: int) -> list[Positions]:
        """``random_fresh`` once the space was walked: draws among its valid points, not the product.

        Drawing in the product, every restart would make its 200 draws per point again
        (6 s of a 200-evaluation search on a replayed file of 2,000 points of 10^10).
        """
        assert self._everything is not None
        everything = self._everything
        out: list[Positions] = []
        chosen: set[Positions] = set()
        tries = 0
        while len(out) < n and tries < 20 * n + 20:
            # Drawn a batch at a time: one generator call per point would be most of this function's cost.
            wanted = 2 * (n - len(out)) + 8
            tries += wanted
            for i in self.rng.integers(len(everything), size=wanted).tolist():
                p = everything[i]
                if p not in self.seen and p not in chosen:
                    chosen.add(p)
                    out.append(p)
                    if len(out) == n:
                        break
        if len(out) < n and not self._exhausted:
            self._fill_from_walk(out, chosen, n)
        return out

    def _fill_from_walk(self, out: list[Positions], chosen: set[Positions], n: int) -> None:
        """Append to ``out`` random fresh walked points not in ``chosen``, up to ``n`` in all."""
        assert self._everything is not None
        rest = [q for q in self._everything if q not in self.seen and q not in chosen]
        # Exhausted only when nothing is fresh: a caller may take one of the points returned (a
        # restart picks the farthest of 40), and the rest must stay proposable. Flagged as soon
        # as all are returned, the space would end model_ils's search with them never measured.
        if not rest and not out:
            self._exhausted = True
        for i in self.rng.permutation(len(rest))[: n - len(out)]:
            out.append(rest[int(i)])

    def neighbours(self, p: Positions, *, far: bool = False) -> list[Positions]:
        """Positions one parameter away: to an adjacent value, or with ``far`` to any value."""
        out = []
        for k, width in enumerate(self.widths):
            targets = range(width) if far else (p[k] - 1, p[k] + 1)
            for v in targets:
                if 0 <= v < width and v != p[k]:
                    out.append((*p[:k], v, *p[k + 1 :]))
        return out

    def kicks(self, start: Positions, steps: int, tries: int) -> Iterator[Positions]:
        """Where ``tries`` random walks of ``steps`` valid one-parameter moves (any value) from ``start`` end.

        Lazy, so a caller that stops early draws no more. The first step's moves are found once for
        every walk: a kick tries 32-64 walks from the same best point, and where that point has no
        valid neighbour (most points of a sparse replayed cache) each walk would test all of them
        again, most of a 2,000-evaluation search's own CPU.
        """
        first = [q for q in self.neighbours(start, far=True) if self.valid(q)]
        if not first:
            return
        for _ in range(tries):
            p = start
            for step in range(steps):
                moves = first if step == 0 else [q for q in self.neighbours(p, far=True) if self.valid(q)]
                if not moves:
                    break
                p = moves[int(self.rng.integers(len(moves)))]
            yield p

    def leaders(self) -> list[tuple[float, Positions]]:
        """The best measurements so far as (score, positions), fastest first, up to ten (read, never changed).

        Kept as observations come: a long search asks at every kick and restart.
        """
        if self._leaders is None:
            self._leaders = heapq.nsmallest(_LEADERS, ((s, p) for p, s in self.scores.items() if s is not None))
        return self._leaders

    def best(self) -> tuple[Positions, float] | None:
        """The best observation so far."""
        leaders = self.leaders()
        return (leaders[0][1], leaders[0][0]) if leaders else None
