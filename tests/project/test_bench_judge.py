"""benches/_judge.py's intervals: the seed bootstrap of the strategy benches and the exact miss-rate bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bench_module import load_bench

_judge = load_bench("_judge.py")


@pytest.mark.parametrize(
    ("misses", "runs", "low", "high"),
    [
        # Clopper-Pearson bounds as published tables and scipy.stats.beta give them.
        (2, 60, 0.004063, 0.115281),
        (11, 400, 0.013806, 0.048672),
        (1, 20, 0.001265, 0.248733),
        (30, 60, 0.368062, 0.631938),
    ],
)
def test_the_miss_rate_interval_is_the_exact_clopper_pearson_one(
    misses: int, runs: int, low: float, high: float
) -> None:
    got = _judge.miss_interval(misses, runs)
    assert got == pytest.approx((low, high), abs=2e-6)


def test_with_no_miss_the_interval_starts_at_zero_and_99_percent_needs_368_seeds() -> None:
    assert _judge.miss_interval(0, 60) == (0.0, pytest.approx(1 - 0.025 ** (1 / 60), abs=1e-8))
    assert _judge.miss_interval(60, 60) == (pytest.approx(0.025 ** (1 / 60), abs=1e-8), 1.0)
    n = _judge.seeds_to_show(0.99)
    assert n == 368
    assert _judge.miss_interval(0, n)[1] < 0.01 <= _judge.miss_interval(0, n - 1)[1]


@pytest.mark.parametrize(("misses", "runs"), [(-1, 10), (11, 10), (0, 0)])
def test_a_miss_count_that_cannot_be_is_refused(misses: int, runs: int) -> None:
    with pytest.raises(ValueError, match="misses of"):
        _judge.miss_interval(misses, runs)


def test_the_bootstrap_draws_the_same_seeds_for_every_strategy() -> None:
    """Paired: a strategy against a copy of itself is 1.0x in every resample, not a noisy ratio around 1."""
    rng = np.random.default_rng(5)
    files = [list(rng.integers(1, 400, size=30).astype(float)) for _ in range(4)]
    draws = _judge.bootstrap_medians({"a": files, "b": [list(f) for f in files]}, resamples=300)
    assert draws["a"].shape == (300, 4)
    assert np.array_equal(_judge.geo_rows(draws["a"]), _judge.geo_rows(draws["b"]))
    again = _judge.bootstrap_medians({"a": files, "b": files}, resamples=300)
    assert np.array_equal(again["a"], draws["a"]), "the same seed gives the same intervals on a rerun"


def test_the_bootstrap_interval_holds_the_figure_and_narrows_with_more_seeds() -> None:
    rng = np.random.default_rng(7)
    few = [list(rng.lognormal(4, 1, size=20)) for _ in range(3)]
    many = [list(rng.lognormal(4, 1, size=400)) for _ in range(3)]
    spans = []
    for files in (few, many):
        geo = _judge.geo_rows(_judge.bootstrap_medians({"s": files}, resamples=500)["s"])
        low, high = _judge.interval(geo)
        figure = _judge.geo([float(np.median(f)) for f in files])
        assert low <= figure <= high
        spans.append(math.log(high / low))
    assert spans[1] < spans[0] / 2


def test_a_file_a_strategy_ran_fewer_seeds_on_is_drawn_from_the_seeds_both_ran() -> None:
    draws = _judge.bootstrap_medians({"a": [[1.0, 2.0, 3.0, 1000.0]], "b": [[5.0, 5.0, 5.0]]}, resamples=200)
    assert draws["a"].max() <= 3.0, "the fourth seed, which b lacks, is not drawn"
    with pytest.raises(ValueError, match="no seeds"):
        _judge.bootstrap_medians({"a": [[1.0]], "b": [[]]})
