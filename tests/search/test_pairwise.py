"""The pairwise surrogate: exact ridge regression on values and value pairs, and why the search needs it."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np

from tunekit._search.strategies.additive import AdditiveModel
from tunekit._search.strategies.pairwise import PairwiseModel


def features(positions: np.ndarray, widths: tuple[int, ...]) -> np.ndarray:
    """The primal design matrix: a constant, one-hot values, one-hot value pairs."""
    cols = [np.ones(len(positions))]
    active = [k for k, w in enumerate(widths) if w > 1]
    for k in active:
        cols += [positions[:, k] == v for v in range(widths[k])]
    for i, j in itertools.combinations(active, 2):
        cols += [(positions[:, i] == a) & (positions[:, j] == b) for a in range(widths[i]) for b in range(widths[j])]
    return np.array(cols, dtype=float).T


def test_the_dual_fit_predicts_what_primal_ridge_regression_does() -> None:
    widths = (4, 1, 3, 5)
    rng = np.random.default_rng(0)
    xs = np.stack([rng.integers(w, size=40) for w in widths], axis=1)
    ys = rng.normal(size=40)
    model = PairwiseModel(widths, ridge=0.5)
    model.fit(xs, ys)
    x = features(xs, widths)
    # Ridge on the centred targets with an unpenalised mean, as the dual form solves it.
    weights = np.linalg.solve(x.T @ x + 0.5 * np.eye(x.shape[1]), x.T @ (ys - ys.mean()))
    grid = np.array(list(itertools.product(*(range(w) for w in widths))))
    np.testing.assert_allclose(model.predict(grid), ys.mean() + features(grid, widths) @ weights, atol=1e-9)


def test_an_interaction_the_additive_model_averages_away_is_learned() -> None:
    # Shared memory off (S=0) is 100x slower unless the block is a power of two, where it is best.
    widths = (6, 2, 4)
    grid = np.array(list(itertools.product(*(range(w) for w in widths))))

    def log_time(p: np.ndarray) -> np.ndarray:
        off, pow2 = p[:, 1] == 0, p[:, 0] < 2
        return np.where(off & ~pow2, np.log(100.0), np.where(off, 0.0, np.log(1.5))) + 0.1 * p[:, 2]

    best = int(np.argmin(log_time(grid)))
    train = np.delete(grid, best, axis=0)
    pairwise = PairwiseModel(widths, ridge=0.1)
    pairwise.fit(train, log_time(train))
    additive = AdditiveModel(widths, ridge=0.1)
    additive.fit(train, log_time(train))
    shmem_on_pow2 = np.array([[0, 1, 0]])
    assert pairwise.predict(grid[best : best + 1])[0] < pairwise.predict(shmem_on_pow2)[0]
    assert additive.predict(grid[best : best + 1])[0] > additive.predict(shmem_on_pow2)[0]


def test_wide_domains_count_agreements_without_a_one_hot_product() -> None:
    """The one-hot product cost 14 ms a fit on four parameters of 1000 values (0.5 ms comparing rows)."""
    rng = np.random.default_rng(1)
    for widths in [(40, 3, 50), (4, 1, 3, 5)]:
        xs = np.stack([rng.integers(w, size=30) for w in widths], axis=1)
        expected = (xs[:, None, :] == xs[None, :, :]).sum(axis=2) - sum(w == 1 for w in widths)
        np.testing.assert_array_equal(PairwiseModel(widths)._agreements(xs), expected)


def test_a_fit_writes_its_tables_into_the_one_weight_array_it_predicts_from() -> None:
    """On four parameters of 1000 values the pair tables are 48 MB; a fit made them twice (peak 140 MiB)."""
    widths = (300, 300, 300, 300)
    rng = np.random.default_rng(2)
    xs = np.stack([rng.integers(w, size=40) for w in widths], axis=1)
    model = PairwiseModel(widths)
    tracemalloc.start()
    try:
        model.fit(xs, rng.normal(size=40))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(np.shares_memory(table, model._weights) for table in model._tables.values())
    assert peak < model._weights.nbytes / 2, (peak, model._weights.nbytes)
    np.testing.assert_allclose(model.predict(xs), model.predict_encoded(model.encode(xs)), rtol=1e-12, atol=1e-12)
