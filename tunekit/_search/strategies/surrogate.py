"""Model-guided iterated local search: a cheap surrogate orders the climb, a richer one jumps.

Two surrogates, both ridge regression of log(time). The additive one (one weight per
parameter value: each value multiplies the time by a learned factor, which is how kernel
parameters mostly act) is refitted as observations grow by an eighth, costs microseconds to
query, and only ever *orders* the climb's moves: every such proposal is a real neighbour of a
real measured point, so a wrong model slows the climb but cannot trap it (half of the climbs
ignore it anyway, and restarts go where nothing was measured yet).

The pairwise one (:class:`PairwiseModel`: values and pairs of values) learns interactions and
ranks a pool of unmeasured configurations (all of them when the space is small, else a large
random sample); every few evaluations the search measures its few best predictions, wherever
they lie. That exploitation step, as in Bayesian optimisation, is what reaches an isolated
best basin that no neighbour move leads into; when a prediction wins, the climb moves there.

Until the search goes wide, half of each batch of guesses (``gp_guesses``, 2 of 4) comes from a
:class:`GaussianProcess` instead, ranked by expected improvement: the pairwise model's guesses are
where it predicts the best time, the process's where a better time is likely *or* still possible,
and it models an interaction of any order between nearby points. The files disagree about which
to trust (the pairwise model's guesses find convolution A100's single best point, the process's
find dedispersion MI250X's best region twice as fast); half and half did better than either alone
in a direct replay of the shared GPU files, and better still with the process silent in the wide
phase, whose climbs it cost more than it found (seeds 40-99 and 100-159: 48.7 -> 42.7 and 49.6 ->
43.7 evaluations to 5 % of the best, 89.0 -> 69.9 and 82.6 -> 66.2 to 1 %; benches/README.md,
"Guesses from a Gaussian process").

Until the search goes wide, the pairwise model is fitted to the fastest two thirds of what was
measured (``fit_share=0.65``, at least 16 observations), not to all of it. What the guesses need is
the order among the fast configurations, and a least-squares fit of every log time spends its
weights on telling the slow third apart (a block size off a power of two, 90x slower on an AMD
GPU). Fitted to the fastest 65 % of 120 random measurements instead of all of them, the model ranks
its first configuration within 5 % of the best sooner (median of 15 draws: gemm RTX 3090 128th ->
45th, convolution MI250X 30th -> 9th, W6600 328th -> 150th; benches/model_ranking.py). In the
search, through benches/strategies.py (seeds 0-59): 44.5 -> 42.9 evaluations to 5 % of the best,
70.5 -> 71.0 to 1 %; in a direct replay (seeds 40-239) 42.5 -> 42.0. Not in the wide phase: there
the fit already holds the search's many measurements near its best points, and a share of them cost
convolution A100 (its single best is found by the wide phase's guesses) 130 -> 170 evaluations
(benches/README.md, "Guesses fitted to the fastest two thirds").

The pairwise model can be fitted to log times capped at a quantile (``cap``, off by default): kernel
landscapes span 100x and more, and a least-squares fit of the raw log times spends its few dozen
observations on telling slow from slower. Capped at the median, it did better in a direct replay
of the nine shared GPU files (160 fresh seeds: 46.8 -> 45.2 evaluations to 5 % of the best, 86.5 ->
82.2 to 1 %) but not held out through ``benches/strategies.py`` (60 seeds: 53.7 by kernel family and
52.9 by GPU against 51.6 uncapped), the judge the project keeps, so ``auto`` stays uncapped
(benches/README.md, "Guesses fitted to capped times").

Except into a climb that a restart began: until it first reaches a local optimum, only a
prediction that beats every measurement so far may take it over. On a landscape with a wide
plateau just above an isolated best basin (a W6600 convolution: hundreds of configurations at
1.2x the best, four at the best), the model's guesses land on the plateau and would pull every
restart back onto it before the restart's own climb could find the basin.

Past a fifth of a known budget the search goes wide: what is left buys as many climbs from far
apart as it can. On most landscapes the kicked, half-random climbs of the first phase have
found the best by then (the median run on the shared GPU files hits 5 % of the best at 3-25 %
of its budget); where they have not, the best is in a basin they keep missing, and only new
starts find it. Climbs are then ordered by the additive model alone, in steps of two moves
(a first-improvement step should not pay for eight neighbours), and restart from the farthest
of forty random points at every local optimum instead of kicking.

A wide climb skips the moves the additive model predicts over 1.5x (``wide_prune``) slower than
the point it is at. A local optimum is only known once every move from it was measured, and on
an AMD GPU most of those moves are ruinous: on the W6600 convolution a block size off a power of
two (9 of the 14 other values of ``block_size_x``) is 60-100x slower, and each climb paid for all
of them again. The first phase's climbs measure every move: the model is young there, and pruning
them cost convolution MI250X 61 -> 105 evaluations. Nor is a move skipped to a value measured
fewer than 5 times (``prune_evidence``): on a 59-evaluation slice of the W6600 file the model had
14 measurements when the wide phase began, and pruning on it cut the seeds reaching 5 % of the
best from 98 % to 78 %. Direct replay, 200 seeds (40-239): W6600 reaches 5 % of the best in 179
evaluations instead of 203; no other file's median moves by more than 1.5 evaluations
(benches/README.md, "Wide climbs skip moves predicted far slower"). Held out, the folds cannot
credit it: every other file ties.

Every 8 evaluations of the wide phase one of them goes to a uniformly random unmeasured point.
Climbs and guesses both follow what was measured, so a best basin that no move leads into and
the model predicts poorly (pnpoly: climbs stuck at 1.15x on use_method 2, the best needing a tile
change *and* use_method 0) would be found by fewer seeds than random search alone finds it in;
an eighth of the phase spent at random puts a floor under that. Through benches/strategies.py,
300 seeds, share reaching 5 % of the best without and with it: pnpoly RTX 3090 95.0 -> 98.7 %,
RTX 3060 98.3 -> 99.3 %, convolution MI250X 99.0 -> 100 %, but W6600 96.7 -> 95.0 % and A100
99.0 -> 97.7 % (benches/README.md). The first phase, where most medians are reached, draws no such point.

A wide climb may also be *pinned*: when one value of a two-valued parameter measures on average
three times slower than the other (so every climb leaves it at its first move) and its best is
over 5 % worse than the best so far, the next climb starts inside that half and never changes
that parameter (the half with the fewest pinned climbs first). On the W6600 convolution the
best basin sits in such a half (use_shmem=0, 90x slower by median); in the direct replay
(300 seeds) pinning raises the share of seeds reaching 5 % of the best from 95 % to 99 %, and
lowers it from 99.7 % to 98.7 % on convolution A100, whose best is not in its slow half; a
threshold of 2x costs A100 more, 4-5x gives W6600 back.

While a climb is pinned the model's guesses wait for it to end. The pairwise model is fitted mostly to
the fast half, so its guesses land there (on W6600, the shared-memory plateau at 1.2x), cannot take
over the pinned climb (a restart's climb yields only to a new best) and took a third of its
evaluations. Held, the pinned climb reaches its optimum in two thirds of the evaluations and more of
them fit in the budget: W6600 reaches 5 % of the best in 98 % of replayed seeds instead of 94-95 %
(median 225 -> 199.5 evaluations, seeds 40-99; 231.5 -> 186.5, seeds 100-299) and in all 60 of
benches/strategies.py's (90 % before). Convolution A100's median moves with the seed set (equal to
12 % higher), and no file without a pinned climb changes (benches/README.md, "Guesses held while a
climb is pinned").

Two options for a pinned climb, off by default: ``pinned_pairs`` (the pairwise model's best
two-parameter moves from a pinned local optimum) and ``pinned_guesses`` (guesses from the pinned
half only). On W6600 they raise the share of seeds reaching 5 % from 93 % to 94-97 % (direct replay,
seeds 200-299) but change no other file, so held out they tie and ``auto`` does not use them
(benches/README.md, "Two-parameter moves and guesses in a pinned half").
"""

from __future__ import annotations

import math

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._search.strategies.additive import AdditiveModel
from tunekit._search.strategies.base import Positions, Walker
from tunekit._search.strategies.blas import one_blas_thread
from tunekit._search.strategies.gaussian import GaussianProcess
from tunekit._search.strategies.pairwise import PairwiseModel

__all__ = ["ModelGuidedLocalSearch", "initial_points", "wide_after"]


def wide_after(max_evals: int | None) -> int | None:
    """Evaluations before the search goes wide: a fifth of ``max_evals`` (never, without one).

    Measured on the shared GPU files (direct replay, 200-500 seeds): convolution W6600 reaches
    5 % of the best in 92 % of seeds instead of 83 %, and no other file's median moves beyond
    the spread between seed sets. A switch at 15-30 % of the budget, or after a tenth of it
    without a 3 % gain, does no better.
    """
    return None if max_evals is None else math.ceil(max_evals / 5)


def initial_points(max_evals: int | None) -> int:
    """Random points before the first climb: 20, or a quarter of a budget under 80 (at least 4).

    Twenty random points would spend all of a budget of 20 on random search; on 21 small
    slices of the shared GPU files (budgets of 8-60, 40 seeds each) a quarter raises the mean
    share of seeds reaching 5 % of the best from 54 % to 63 %.
    """
    if max_evals is None:
        return 20
    return max(4, min(20, math.ceil(max_evals / 4)))


_APART_SCAN = 16
"""Best predictions per guess wanted among which a batch's guesses are chosen apart."""

_FIT_LEAST = 16
"""Observations the pairwise model is fitted to however small ``fit_share`` makes its share."""

_GP_FIT = 200
"""Best observations the Gaussian process is fitted to: its cost grows with their cube."""

_GP_POOL = 1500
"""Unmeasured candidates drawn from the pool for expected improvement at each step (all, when fewer)."""

_GP_LEADERS = 3
"""Best points whose unmeasured one-parameter neighbours join the drawn candidates (refining a leader)."""

_GP_SPREAD = 0.5
"""How much a chosen guess damps the expected improvement of the points like it (1: as measured)."""


def _smallest(values: np.ndarray, n: int) -> np.ndarray:
    """The indices of the ``n`` smallest values, as ``np.argsort(values, kind="stable")[:n]`` gives them.

    Sorting a pool of 20,000 predictions for its 4 best at every exploitation step would take a
    tenth of a sparse file's search; ties at the cut are kept so the stable order decides them.
    """
    if n >= len(values):
        return np.argsort(values, kind="stable")
    cut = np.partition(values, n - 1)[n - 1]
    if np.isnan(cut):  # NaN sorts last in both; the comparison below would keep none of them
        return np.argsort(values, kind="stable")[:n]
    near = np.flatnonzero(values <= cut)
    return near[np.argsort(values[near], kind="stable")][:n]


class _Observations:
    """Measured positions and log times, appended one at a time and read as arrays.

    Read at every restart and model fit: a list converted to an array at each read would cost
    seconds over a search of 8,000 evaluations (83k configurations, a tenth as budget).
    """

    def __init__(self, parameters: int) -> None:
        self._xs = np.zeros((64, parameters), dtype=np.intp)
        self._ys = np.zeros(64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, p: Positions, y: float) -> None:
        if self._n == len(self._ys):
            self._xs = np.concatenate([self._xs, np.zeros_like(self._xs)])
            self._ys = np.concatenate([self._ys, np.zeros_like(self._ys)])
        self._xs[self._n] = p
        self._ys[self._n] = y
        self._n += 1

    @property
    def xs(self) -> np.ndarray:
        """Positions, one row per measurement (a view: read, never kept)."""
        return self._xs[: self._n]

    @property
    def ys(self) -> np.ndarray:
        """Log times, one per row of :attr:`xs`."""
        return self._ys[: self._n]

    def best(self, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``limit`` fastest rows (ties in measurement order) as (xs, ys); all of them when no more."""
        xs, ys = self.xs, self.ys
        if len(ys) <= limit:
            return xs, ys
        keep = np.argsort(ys, kind="stable")[:limit]
        return xs[keep], ys[keep]


class _Halves:
    """Count, sum and least log time measured on each value of a two-valued parameter."""

    __slots__ = ("count", "least", "total")

    def __init__(self) -> None:
        self.count = [0, 0]
        self.total = [0.0, 0.0]
        self.least = [math.inf, math.inf]

    def add(self, value: int, y: float) -> None:
        self.count[value] += 1
        self.total[value] += y
        self.least[value] = min(self.least[value], y)


class ModelGuidedLocalSearch:
    """Iterated local search whose neighbour scan is ordered by an :class:`AdditiveModel`.

    Climb: first improvement over one-parameter moves (any value), most promising first.
    At a local optimum, kick the best point by ``kick`` random moves (the model picks
    the most promising of ``kicks`` such kicks); after ``patience`` kicks without a new
    best better by ``gain`` (relative: smaller gains are what noise finds on a plateau),
    restart from the random point farthest (in parameters changed) from the best points so
    far, so a wrong model cannot keep the search in one basin.

    Every ``exploit_every`` observations (or a 32nd of them, when more; never, when None), the next batch is the
    ``exploit_top`` best predictions of a :class:`PairwiseModel` fitted to the ``fit_max`` best
    observations, over a pool of up to ``pool_max`` unmeasured valid configurations, each at
    least ``apart`` parameters away from the batch's better guesses.

    ``gp_guesses`` of each batch (2, the default; 0: none) are instead the unmeasured configurations of most
    expected improvement under a :class:`GaussianProcess` fitted to the best observations, drawn from
    the pool and the best points' neighbours, each pick damping the points like it; in the wide phase
    too only with ``gp_wide``, but in either phase the process fills a batch the pairwise model leaves
    short (none of its next best predictions is two parameters from the ones taken).

    ``cap``: the pairwise model is fitted to log times capped at this quantile (None, the default: uncapped).

    ``fit_share``: until the search goes wide, the pairwise model is fitted to this share of the
    observations, the fastest (0.65, the default; at least 16; 1: all of them, up to ``fit_max``).

    ``pinned_pairs``: at the local optimum of a pinned climb, the pairwise model's ``pinned_pairs`` best
    two-parameter moves (the pin kept) are tried before the climb ends (0, the default: none).
    ``pinned_guesses``: while a climb is pinned, the guesses are drawn from the pinned half only.
    ``pinned_quiet`` (the default, unless ``pinned_guesses``): while a climb is pinned, no guesses at all.

    After ``wide_after`` observations (never, when None) the search goes wide: ``mix`` 0,
    ``patience`` 0, restarts from the farthest of ``wide_diverse`` random points, climb
    batches of at most ``wide_batch`` moves, one uniformly random point every
    ``wide_random_every`` observations (never, when 0), and no move the additive model predicts
    over ``wide_prune`` times slower than the point the climb is at (0: every move), when the value
    it moves to was measured at least ``prune_evidence`` times.
    """

    def __init__(
        self,
        space: Space,
        rng: np.random.Generator,
        *,
        initial: int = 20,
        kick: int = 3,
        kicks: int = 8,
        mix: float = 0.5,
        patience: int = 1,
        gain: float = 0.03,
        diverse: int = 20,
        exploit_every: int | None = 8,
        exploit_top: int = 4,
        fit_max: int = 384,
        pool_max: int = 4096,
        wide_after: int | None = None,
        wide_diverse: int = 40,
        wide_batch: int = 2,
        wide_random_every: int = 8,
        wide_prune: float = 1.5,
        prune_evidence: int = 5,
        pin_slower: float = 3.0,
        apart: int = 2,
        cap: float | None = None,
        pinned_pairs: int = 0,
        pinned_guesses: bool = False,
        pinned_quiet: bool = True,
        gp_guesses: int = 2,
        gp_wide: bool = False,
        fit_share: float = 0.65,
        walker: Walker | None = None,
    ) -> None:
        if not 0 < fit_share <= 1:
            raise ValueError(
                f"fit_share={fit_share!r} is not a share of the observations: give one above 0 and at most 1"
                " (0.65 fits the pairwise model to the fastest 65 %, 1 to all of them)"
            )
        if not (wide_prune == 0 or wide_prune > 1):
            raise ValueError(
                f"wide_prune={wide_prune!r} is not a slowdown: give a factor above 1 (1.5 skips moves predicted"
                " over 1.5x slower) or 0 to measure every move"
            )
        self._cap = cap
        self._pinned_pairs = pinned_pairs
        self._pinned_guesses = pinned_guesses
        self._pinned_quiet = pinned_quiet and not pinned_guesses
        # The local optimum of a pinned climb whose two-parameter moves were last queued (once per optimum).
        self._paired: Positions | None = None
        self._w = walker if walker is not None else Walker(space, rng)
        self._model = AdditiveModel(self._w.widths)
        self._initial_left = initial
        self._kick = kick
        self._kicks = kicks
        self._mix = mix
        self._patience = patience
        self._gain = gain
        self._diverse = diverse
        self._fitted_at = 0
        self._observed = _Observations(len(self._w.widths))
        self._current: tuple[Positions, float] | None = None
        self._queue: list[Positions] | None = None
        self._kicked: Positions | None = None
        self._stale = 0
        self._best = math.inf
        self._exploit_every = exploit_every
        self._exploit_top = exploit_top
        self._fit_max = fit_max
        self._pool_max = pool_max
        # A portfolio's wide climber guesses nothing: the model-guided member's guesses cover that.
        self._exploit_at: float = math.inf if exploit_every is None else initial + exploit_every
        self._apart = apart
        self._pool: np.ndarray | None = None
        self._pool_rows: dict[Positions, int] = {}
        self._pool_codes: np.ndarray = np.zeros((0, 0), dtype=np.intp)
        self._pool_fresh: np.ndarray = np.zeros(0, dtype=bool)
        self._pairwise = PairwiseModel(self._w.widths)
        self._gp_guesses = gp_guesses
        self._gp_wide = gp_wide
        self._fit_share = fit_share
        self._gp = GaussianProcess(self._w.widths)
        self._gp_pool: np.ndarray | None = None
        self._failed: list[Positions] = []
        self._guesses: set[Positions] = set()
        # The current climb began at a restart and has not reached a local optimum yet.
        self._restarted = False
        self._wide_after = wide_after
        self._wide_diverse = wide_diverse
        self._climb_batch: int | None = None
        self._wide_batch = wide_batch
        self._wide_random_every = wide_random_every
        self._wide_prune = math.log(wide_prune) if wide_prune > 0 else math.inf
        self._prune_evidence = prune_evidence
        # Measurements holding each value of each parameter: a move is skipped only on a value seen often enough.
        self._value_counts = [np.zeros(width, dtype=np.intp) for width in self._w.widths]
        self._random_at: int | None = None
        self._pin_slower = pin_slower
        # (parameter, value) that the running climb never changes, and how many climbs each pin had.
        self._pin: tuple[int, int] | None = None
        self._pinned: dict[tuple[int, int], int] = {}
        # Log times of each half of every two-valued parameter, summed as they come: the pin is chosen at
        # every wide restart, and a pass over all measurements each time would cost a fifth of a long search.
        self._halves = {k: _Halves() for k, width in enumerate(self._w.widths) if width == 2}

    def _refit(self) -> None:
        n = len(self._observed)
        if n >= 2 and n >= self._fitted_at + max(8, n // 8):
            with one_blas_thread():
                self._model.fit(self._observed.xs, self._observed.ys)
            self._fitted_at = n

    def _rank(self, ps: list[Positions]) -> list[Positions]:
        rng = self._w.rng
        if not ps or self._fitted_at == 0 or rng.random() < self._mix:
            return [ps[int(i)] for i in rng.permutation(len(ps))]
        return [ps[int(i)] for i in np.argsort(self._model.predict(np.array(ps)), kind="stable")]

    def _likely(self, here: Positions, moves: list[Positions]) -> list[Positions]:
        """The moves worth measuring: all but those predicted over ``wide_prune`` times slower, on enough evidence."""
        predicted = self._model.predict(np.array([here, *moves]))
        limit = predicted[0] + self._wide_prune
        counts = self._value_counts
        return [
            q
            for q, y in zip(moves, predicted[1:], strict=True)
            if y <= limit or min(counts[k][v] for k, v in enumerate(q) if v != here[k]) < self._prune_evidence
        ]

    def _restart(self, pin: tuple[int, int] | None = None) -> Positions | None:
        w = self._w
        candidates = w.random_fresh(self._diverse)
        if pin is not None:
            k, v = pin
            pinned = dict.fromkeys((*p[:k], v, *p[k + 1 :]) for p in candidates)
            candidates = [p for p in pinned if w.fresh(p)]
        if not candidates:
            return None
        measured = w.leaders()
        if not measured:
            return candidates[0]
        best = np.array([p for _, p in measured])
        distance = (np.array(candidates)[:, None, :] != best[None, :, :]).sum(axis=2).min(axis=1)
        return candidates[int(np.argmax(distance))]

    def _kick_point(self) -> Positions | None:
        w = self._w
        best = w.best()
        self._restarted = False
        if best is None or self._stale >= self._patience:
            self._stale = 0
            return self._fresh_climb()
        self._stale += 1
        kicked: list[Positions] = []
        for p in w.kicks(best[0], self._kick, 4 * self._kicks):
            if w.fresh(p) and p not in kicked:
                kicked.append(p)
                if len(kicked) == self._kicks:
                    break
        if not kicked:
            return self._fresh_climb()
        return self._rank(kicked)[0]

    def _fresh_climb(self) -> Positions | None:
        self._pin = None
        start = None
        pin = self._choose_pin() if self._climb_batch is not None else None
        if pin is not None:
            # Counted even when the half has no fresh start left: else it is chosen at every restart
            # and starves every other slow half.
            self._pinned[pin] = self._pinned.get(pin, 0) + 1
            start = self._restart(pin)
            if start is not None:
                self._pin = pin
        if start is None:
            start = self._restart()
        self._restarted = start is not None
        return start

    def _choose_pin(self) -> tuple[int, int] | None:
        """The value of a two-valued parameter to hold through the next climb, if one is a neglected slow half.

        A half qualifies when its measurements average ``pin_slower`` times slower than the other
        half's (climbs leave it at their first move) and its best is over 5 % slower than the best
        so far; of those, the one with the fewest pinned climbs (then the first parameter).
        """
        if not len(self._observed):
            return None
        best = float(self._observed.ys.min())
        chosen: tuple[int, tuple[int, int]] | None = None
        for k, half in self._halves.items():
            if not half.count[0] or not half.count[1]:
                continue
            means = (half.total[0] / half.count[0], half.total[1] / half.count[1])
            for v in range(2):
                slower = means[v] - means[1 - v]
                if slower <= math.log(self._pin_slower) or half.least[v] - best <= math.log(1.05):
                    continue
                climbs = self._pinned.get((k, v), 0)
                if chosen is None or climbs < chosen[0]:
                    chosen = (climbs, (k, v))
        return None if chosen is None else chosen[1]

    def _pool_array(self) -> np.ndarray:
        """Candidates for the pairwise model to rank, measured rows included (drawn, encoded and indexed once)."""
        w = self._w
        if self._pool is None:
            space = w.space
            affordable = 8 * self._pool_max
            # A sparse space walked cheaply (a replayed cache of 20,000 points of 10^10) is ranked whole: its
            # points have almost no valid neighbours, so the model's guesses are what the search has, and a
            # pool of a fifth of it misses the best in 3 of 3 seeds (found at ~80 evaluations ranked whole).
            # Not a dense one: ranking all of gemm RTX 3090 (a fifth of its product) doubles the strategy's
            # CPU and raises its median from 56 to 67 evaluations.
            sparse = 8 * space.walk_cost <= space.cartesian_size
            small = space.cartesian_size <= affordable or (sparse and space.walk_cost <= affordable)
            # Draws capped at 8 per point wanted: the shared GPU files need at most 5 (gemm RTX 3090, 22 %
            # valid), a sparse space gets a smaller pool rather than seconds of rejected draws.
            if small and w.walked is not None:
                rows = list(w.walked)  # the same points in the same order, not a second walk
            else:
                configs = list(space) if small else space._sample(self._pool_max, w.rng, affordable)
                rows = [space.positions(c) for c in configs]
            self._pool = np.array(rows, dtype=np.intp).reshape(len(rows), len(w.widths))
            self._pool_codes = self._pairwise.encode(self._pool)
            self._pool_rows = {p: i for i, p in enumerate(rows)}
            self._pool_fresh = np.array([p not in w.seen for p in rows], dtype=bool)
        return self._pool

    def _fit_pairwise(self) -> None:
        """Fit the pairwise model to the best observations (and the failures, when ``fit_max`` holds them all).

        Until the search goes wide, the fastest ``fit_share`` of them (at least ``_FIT_LEAST``); then all,
        up to ``fit_max``.
        """
        n = len(self._observed)
        keep = self._fit_max
        if self._climb_batch is None:
            keep = min(keep, max(_FIT_LEAST, math.ceil(self._fit_share * n)))
        xs, ys = self._observed.best(keep)
        if n <= self._fit_max and self._failed:
            # A failure is evidence too: fitted as a little worse than the worst time seen.
            xs = np.concatenate([xs, np.array(self._failed, dtype=np.intp)])
            ys = np.concatenate([ys, np.full(len(self._failed), ys.max() + 1.0)])
        if self._cap is not None:
            ys = np.minimum(ys, np.quantile(ys, self._cap))
        with one_blas_thread():
            self._pairwise.fit(xs, ys)

    def _pair_moves(self, here: Positions) -> list[Positions]:
        """The pairwise model's ``pinned_pairs`` best fresh two-parameter moves from ``here``, the pin kept."""
        if self._pin is None or len(self._observed) < 2:
            return []
        w = self._w
        pinned = self._pin[0]
        moves: list[Positions] = []
        for k1, w1 in enumerate(w.widths):
            for k2 in range(k1 + 1, len(w.widths)):
                if pinned in (k1, k2):
                    continue
                for v1 in range(w1):
                    if v1 == here[k1]:
                        continue
                    for v2 in range(w.widths[k2]):
                        if v2 == here[k2]:
                            continue
                        q = list(here)
                        q[k1], q[k2] = v1, v2
                        moves.append(tuple(q))
        moves = [q for q in moves if w.fresh(q)]
        if not moves:
            return []
        self._fit_pairwise()
        with one_blas_thread():
            predicted = self._pairwise.predict(np.array(moves, dtype=np.intp))
        return [moves[int(i)] for i in _smallest(predicted, self._pinned_pairs).tolist()]

    def _exploit(self, n: int) -> list[Positions]:
        """The batch of guesses: the pairwise model's best predictions, then the Gaussian process's."""
        from_gp = min(n, self._gp_guesses) if len(self._observed) >= 4 else 0
        if self._climb_batch is not None and not self._gp_wide:
            from_gp = 0
        guesses = self._pairwise_guesses(n - from_gp)
        if self._gp_guesses:
            for p in guesses:
                self._mark(p)  # not the Gaussian process's guesses too
            # Also what the pairwise model leaves short, in either phase: its guesses two parameters apart ran out.
            guesses += self._gp_guesses_of(n - len(guesses))
        self._guesses.update(guesses)
        return guesses

    def _gp_guesses_of(self, n: int) -> list[Positions]:
        """The ``n`` unmeasured configurations of most expected improvement, each damping those like it."""
        if n <= 0:
            return []
        w = self._w
        pool = self._pool_array()
        if self._gp_pool is None:
            self._gp_pool = self._gp.encode(pool)
        candidates = np.flatnonzero(self._pool_fresh)
        if len(candidates) > _GP_POOL:
            candidates = np.sort(w.rng.choice(candidates, size=_GP_POOL, replace=False))
        near = {
            row
            for _, p in w.leaders()[:_GP_LEADERS]
            for q in w.neighbours(p, far=True)
            if (row := self._pool_rows.get(q)) is not None and self._pool_fresh[row]
        }
        if near:
            candidates = np.union1d(candidates, np.array(sorted(near), dtype=np.intp))
        if self._pinned_guesses and self._pin is not None:
            k, v = self._pin
            candidates = candidates[pool[candidates, k] == v]
        if len(candidates) == 0:
            return []
        xs, ys = self._observed.best(_GP_FIT)
        encoded = self._gp_pool[candidates]
        with one_blas_thread():
            self._gp.fit(xs, ys)
            improvement = self._gp.expected_improvement(encoded)
            chosen: list[int] = []
            # A batch of the n best would be one point and its look-alikes: each pick damps the points
            # the process deems like it, so the next goes where the first tells little.
            for _ in range(min(n, len(candidates))):
                i = int(np.argmax(improvement))
                if not np.isfinite(improvement[i]):
                    break
                chosen.append(i)
                improvement[i] = -np.inf
                improvement *= 1.0 - _GP_SPREAD * self._gp.similarity(encoded, encoded[i])
        return [tuple(int(v) for v in pool[candidates[i]]) for i in chosen]

    def _pairwise_guesses(self, n: int) -> list[Positions]:
        """The pairwise model's ``n`` best predictions among unmeasured configurations."""
        if n <= 0:
            return []
        pool = self._pool_array()
        # Indices, not a copy of the unmeasured rows: a copy of a 20,000-key pool at every step.
        candidates = np.flatnonzero(self._pool_fresh)
        if self._pinned_guesses and self._pin is not None:
            k, v = self._pin
            candidates = candidates[pool[candidates, k] == v]
        if len(candidates) == 0 or len(self._observed) < 2:
            return []
        self._fit_pairwise()
        with one_blas_thread():
            # The whole pool, encoded once, then its unmeasured rows.
            predicted = self._pairwise.predict_encoded(self._pool_codes)[candidates]
        # The model's best predictions crowd together (one guess and its one-parameter variants): a batch
        # spread over 2+ parameters tests more of what the model believes in the same evaluations.
        # Direct replay of the 8 shared files with a budget of 20+ (seeds 40-139): geometric mean to 5 %
        # 77.6 -> 72.2 evaluations, to 1 % 117.5 -> 106.3 (benches/README.md).
        chosen: list[int] = []
        for i in _smallest(predicted, _APART_SCAN * n).tolist():
            row = pool[candidates[i]]
            if all(int(np.count_nonzero(row != pool[candidates[j]])) >= self._apart for j in chosen):
                chosen.append(i)
                if len(chosen) == n:
                    break
        return [tuple(int(v) for v in pool[candidates[i]]) for i in chosen]

    def _mark(self, p: Positions) -> None:
        row = self._pool_rows.get(p)
        if row is not None:
            self._pool_fresh[row] = False

    def propose(self, n: int) -> list[Config]:
        """Random points first, then the climb's next moves (a kick ends a batch), or the model's best guesses."""
        w = self._w
        if self._initial_left > 0 or self._current is None:
            k = min(n, self._initial_left) if self._initial_left > 0 else n
            self._initial_left -= k
            return self._take(w.random_fresh(k))
        observed = len(w.scores)
        if self._wide_after is not None and observed >= self._wide_after and self._climb_batch is None:
            self._mix, self._patience, self._diverse = 0.0, 0, self._wide_diverse
            self._climb_batch = self._wide_batch
            if self._wide_random_every:
                self._random_at = observed + self._wide_random_every
        if self._random_at is not None and observed >= self._random_at:
            self._random_at = observed + self._wide_random_every
            fresh = self._w.random_fresh(1)
            if fresh:
                # Held to the guesses' rule: it takes over a climb begun by a restart only as a new best.
                self._guesses.update(fresh)
                return self._take(fresh)
        # Held, not skipped: the guesses due while a climb was pinned come as soon as it ends.
        if observed >= self._exploit_at and not (self._pinned_quiet and self._pin is not None):
            self._exploit_at = observed + max(self._exploit_every or 0, observed // 32)
            guesses = self._exploit(min(n, self._exploit_top))
            if guesses:
                return self._take(guesses)
        self._refit()
        if self._climb_batch is not None:
            n = min(n, self._climb_batch)
        out: list[Positions] = []
        while len(out) < n:
            if self._queue is None:
                here = self._current[0]
                moves = [q for q in w.neighbours(here, far=True) if w.fresh(q)]
                if self._pin is not None:
                    k = self._pin[0]
                    moves = [q for q in moves if q[k] == here[k]]
                if self._climb_batch is not None and self._fitted_at and moves:
                    moves = self._likely(here, moves)
                self._queue = self._rank(moves)
            move = None
            while self._queue:
                candidate = self._queue.pop(0)
                if w.fresh(candidate):
                    move = candidate
                    break
            if move is None and self._pinned_pairs and self._pin is not None and self._paired != self._current[0]:
                # A pinned climb's optimum where the best needs two parameters changed at once (W6600: block_size_y
                # and tile_size_y) is left by no single move: the model's best pairs are tried before the kick.
                self._paired = self._current[0]
                self._queue = self._pair_moves(self._paired)
                continue
            if move is None:
                move = self._kick_point()
                if move is None:
                    break
                self._kicked = move
            w.seen.add(move)
            self._mark(move)
            out.append(move)
            if move == self._kicked:
                break
        return [w.space.from_positions(p) for p in out]

    def _take(self, ps: list[Positions]) -> list[Config]:
        for p in ps:
            self._mark(p)
        return self._w.take(ps)

    def observe(self, config: Config, score: float | None) -> None:
        """Learn the score; move to an improvement, or to the kicked point."""
        self._observe(config, score, move=True)

    def learn(self, config: Config, score: float | None) -> None:
        """Learn the score of a point another strategy measured (a portfolio's), without moving the climb to it."""
        self._observe(config, score, move=False)

    def _observe(self, config: Config, score: float | None, *, move: bool) -> None:
        if self._initial_left > 0 and self._w.space.positions(config) not in self._w.seen:
            # A point it did not propose (an incumbent, a resumed search's logged trial) samples the
            # space as well as a random one, so it counts as one: else a search resumed from 15 logged trials
            # would draw 8 more at random.
            self._initial_left -= 1
        p = self._w.record(config, score)
        self._mark(p)
        if score is None:
            self._failed.append(p)
            if p == self._kicked:
                self._kicked = None
            return
        y = math.log(max(score, 1e-300))
        self._observed.append(p, y)
        for k, v in enumerate(p):
            self._value_counts[k][v] += 1
        for k, half in self._halves.items():
            half.add(p[k], y)
        new_best = score < self._best
        if score < self._best * (1.0 - self._gain):
            self._stale = 0
        self._best = min(self._best, score)
        if not move:
            return
        if p == self._kicked:
            self._kicked = None
            self._current = (p, score)
            self._queue = None
        elif self._current is None or score < self._current[1]:
            if self._restarted and p in self._guesses and not new_best:
                return
            self._current = (p, score)
            self._queue = None
