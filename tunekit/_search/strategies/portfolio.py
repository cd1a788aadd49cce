"""A portfolio of strategies sharing one budget, each batch given to the one whose evaluations pay lately.

No single strategy holds on every landscape, and a strategy designed on a few files may fail on
one it never saw. The portfolio runs the model-guided search, iterated local search and random
draws side by side on one walker (one set of proposed configurations, so none is measured
twice) and hands each proposal batch to a member by a bandit over their observed progress: a
member's rate is its recent *gains* (evaluations of its own that improved the best so far by
more than ``gain``) plus a prior, over its recent evaluations plus a prior count, both fading
by ``1 - 1/horizon`` per evaluation. A member whose evaluations stop paying loses the turn; one
left idle drifts back to its prior and is tried again. Every member keeps at least its
``floor`` share of the evaluations, so a landscape that defeats the favourite still gets the
other members' searches.

The first fifth of the budget is the model-guided member's alone (``warmup``): it is where that
search reaches 5 % of the best on most of the shared GPU files, and every evaluation given
away there raised the medians (benches/README.md, "A portfolio"). The model-guided member learns
from every measurement (its surrogates are fitted to all of them) but climbs only from its own
moves; iterated local search kicks from the best point whoever found it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._search.strategies.base import Walker
from tunekit._search.strategies.local import IteratedLocalSearch
from tunekit._search.strategies.simple import RandomSearch
from tunekit._search.strategies.surrogate import ModelGuidedLocalSearch, initial_points, wide_after

__all__ = ["Member", "Portfolio"]


@dataclass
class Member:
    """One strategy of the portfolio and what it has earned."""

    name: str
    strategy: ModelGuidedLocalSearch | IteratedLocalSearch | RandomSearch
    prior_gains: float
    floor: float
    evaluations: int = 0
    recent_evaluations: float = 0.0
    recent_gains: float = 0.0

    def rate(self, prior_count: float) -> float:
        """Expected gains per evaluation lately: faded counts, shrunk towards the prior."""
        return (self.recent_gains + self.prior_gains) / (self.recent_evaluations + prior_count)


class Portfolio:
    """Model-guided search, iterated local search and random draws sharing one budget (see the module).

    ``max_evals`` sizes the model-guided member as ``model_ils`` is sized (its wide phase from a
    fifth of the budget) and the warm-up (a fifth of it; 28 evaluations without one). Per batch,
    a member below its floor share of the evaluations so far proposes, else the one with the
    highest :meth:`Member.rate`. ``priors`` and ``floors`` are per member: model_ils, ils, random.
    """

    def __init__(
        self,
        space: Space,
        rng: np.random.Generator,
        *,
        max_evals: int | None = None,
        warmup: int | None = None,
        priors: tuple[float, float, float] = (2.0, 1.0, 0.5),
        floors: tuple[float, float, float] = (0.3, 0.05, 0.03),
        prior_count: float = 8.0,
        gain: float = 0.005,
        horizon: float | None = None,
    ) -> None:
        self._w = Walker(space, rng)
        self._model = ModelGuidedLocalSearch(
            space, rng, initial=initial_points(max_evals), wide_after=wide_after(max_evals), walker=self._w
        )
        self.members = [
            Member("model_ils", self._model, prior_gains=priors[0], floor=floors[0]),
            Member("ils", IteratedLocalSearch(space, rng, walker=self._w), prior_gains=priors[1], floor=floors[1]),
            Member("random", RandomSearch(space, rng, walker=self._w), prior_gains=priors[2], floor=floors[2]),
        ]
        self._prior_count = prior_count
        self._gain = gain
        if warmup is None:
            warmup = initial_points(max_evals) + 8 if max_evals is None else math.ceil(max_evals / 5)
        self._warmup = warmup
        span = horizon if horizon is not None else max(32.0, (max_evals or 256) / 8)
        self._fade = 1.0 - 1.0 / span
        self._owner: dict[Config, Member] = {}
        self._best = math.inf
        self._evaluations = 0
        self.spent: dict[str, int] = {}
        """Evaluations each member proposed (for tests and benches)."""

    def _choose(self) -> Member:
        if self._evaluations < self._warmup:
            return self.members[0]
        total = self._evaluations
        starved = [m for m in self.members if m.evaluations < m.floor * total]
        if starved:
            return min(starved, key=lambda m: m.evaluations / (m.floor * total))
        return max(self.members, key=lambda m: m.rate(self._prior_count))

    def propose(self, n: int) -> list[Config]:
        """Up to ``n`` configurations from the chosen member (the next one when it has none left)."""
        first = self._choose()
        for member in (first, *(m for m in self.members if m is not first)):
            # The walker keeps members from proposing what another did; checked again here, as the
            # driver refuses a repeat outright.
            configs = [c for c in member.strategy.propose(n) if c not in self._owner]
            if configs:
                for c in configs:
                    self._owner[c] = member
                return configs
        return []

    def observe(self, config: Config, score: float | None) -> None:
        """Credit the member that proposed ``config``; the model-guided member learns every result."""
        member = self._owner.get(config)
        if member is not None:
            for m in self.members:
                m.recent_evaluations *= self._fade
                m.recent_gains *= self._fade
            member.evaluations += 1
            member.recent_evaluations += 1
            self.spent[member.name] = self.spent.get(member.name, 0) + 1
            self._evaluations += 1
            if score is not None and score < self._best * (1.0 - self._gain):
                member.recent_gains += 1
        if score is not None:
            self._best = min(self._best, score)
        if member is None or member.strategy is self._model:
            # Its own point, or one nobody proposed (an incumbent, a resumed search's logged trial).
            self._model.observe(config, score)
        else:
            member.strategy.observe(config, score)
            self._model.learn(config, score)
