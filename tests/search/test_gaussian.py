"""The Gaussian-process surrogate: exact posterior, expected improvement, and what it sees that pairs cannot."""

from __future__ import annotations

import itertools
import math

import numpy as np

from tunekit._search.strategies.gaussian import GaussianProcess
from tunekit._search.strategies.pairwise import PairwiseModel


def matern(a: np.ndarray, b: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The Matérn 5/2 kernel written out pair by pair."""
    d = np.sqrt((((a[:, None, :] - b[None, :, :]) / scales) ** 2).sum(axis=2))
    r = math.sqrt(5.0) * d
    return np.asarray((1.0 + r + r * r / 3.0) * np.exp(-r))


def test_expected_improvement_is_the_textbook_posterior_formula() -> None:
    widths = (4, 1, 3, 5)
    rng = np.random.default_rng(0)
    xs = np.stack([rng.integers(w, size=30) for w in widths], axis=1)
    ys = rng.normal(size=30)
    gp = GaussianProcess(widths, noise=0.03)
    gp.fit(xs, ys)
    grid = np.array(list(itertools.product(*(range(w) for w in widths))))
    x, g = gp.encode(xs), gp.encode(grid)
    assert x.shape[1] == 3, "a one-valued parameter is left out"
    scales = gp._scales
    y = (ys - ys.mean()) / ys.std()
    gram = matern(x, x, scales) + 0.03 * np.eye(len(x))
    cross = matern(g, x, scales)
    mean = cross @ np.linalg.solve(gram, y)
    sd = np.sqrt(np.maximum(1e-12, 1.0 - np.einsum("ij,ji->i", cross, np.linalg.solve(gram, cross.T))))
    z = (y.min() - mean) / sd
    cdf = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in z])
    expected = sd * (z * cdf + np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi))
    np.testing.assert_allclose(gp.expected_improvement(g), expected, rtol=1e-3, atol=1e-7)  # single-precision spread
    np.testing.assert_allclose(gp.similarity(g, g[5]), matern(g, g[5:6], scales)[:, 0], atol=1e-12)


def test_length_scales_grow_on_a_parameter_that_does_nothing() -> None:
    # Time depends on A alone: the evidence is highest when B's length scale is long (B ignored).
    widths = (6, 6)
    grid = np.array(list(itertools.product(range(6), range(6))))
    ys = np.log(1.0 + grid[:, 0].astype(float))
    gp = GaussianProcess(widths)
    gp.fit(grid, ys)
    assert gp._scales[1] > 0.5 >= gp._scales[0], gp._scales  # from 0.5 each: B's grew, A's did not


def three_way() -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """A plateau at 1.2x, slower elsewhere, and the best only where A, B and C are all 0 (a W6600 basin)."""
    widths = (4, 4, 4, 3)
    grid = np.array(list(itertools.product(*(range(w) for w in widths))))
    a, b, c, d = grid.T
    log_time = np.log(1.2) + 0.05 * d + 0.15 * ((a > 1) + (b > 1) + (c > 1))
    log_time = np.where((a == 0) & (b == 0) & (c == 0), 0.02 * d, log_time)
    return widths, grid, log_time


def test_the_process_ranks_a_three_way_basin_the_pairwise_model_cannot_see() -> None:
    widths, grid, log_time = three_way()
    best = np.flatnonzero((grid[:, 0] == 0) & (grid[:, 1] == 0) & (grid[:, 2] == 0))
    # Measured: every point but the basin's, and one basin neighbour on each axis pair (A=B=0, C=1 ...).
    rng = np.random.default_rng(3)
    rest = np.setdiff1d(np.arange(len(grid)), best)
    seen = np.sort(rng.choice(rest, size=60, replace=False))
    unseen = np.setdiff1d(np.arange(len(grid)), seen)
    gp = GaussianProcess(widths)
    gp.fit(grid[seen], log_time[seen])
    improvement = gp.expected_improvement(gp.encode(grid[unseen]))
    pairwise = PairwiseModel(widths)
    pairwise.fit(grid[seen], log_time[seen])
    predicted = pairwise.predict(grid[unseen])
    gp_top = set(unseen[np.argsort(-improvement, kind="stable")[:4]].tolist())
    pair_top = set(unseen[np.argsort(predicted, kind="stable")[:4]].tolist())
    assert gp_top & set(best.tolist()), "the process's best guesses miss the basin"
    assert not pair_top & set(best.tolist()), "the pairwise model sees this basin: the landscape tests nothing"
