"""Paired evidence: the estimates the schedule decides by, on samples whose answer is known."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tunekit._measure.evidence import centred_scores, gap, t_quantile, trimmed_mean


def test_a_trimmed_mean_is_the_mean_of_clean_samples_and_shrugs_off_spikes() -> None:
    rng = random.Random(0)
    clean = [rng.gauss(0.0, 0.02) for _ in range(50)]
    centre, se, freedom = trimmed_mean(clean)
    assert centre == pytest.approx(statistics.fmean(clean), abs=0.005)
    assert se == pytest.approx(0.02 / math.sqrt(50), rel=0.35) and freedom == 50 - 2 * 10 - 1
    spiked = [*clean[:45], 3.0, 5.0, 8.0, 2.0, 4.0]  # a tenth of the samples hit by huge spikes
    centre, se, _ = trimmed_mean(spiked)
    assert abs(centre) < 0.01 and se < 0.01  # neither the estimate nor its uncertainty blown up


def test_a_gap_pairs_samples_by_round_so_what_the_device_did_in_a_round_cancels() -> None:
    rng = random.Random(1)
    # Each round the device runs at a different speed (0.8x to 1.2x): far more than the 3% gap.
    speed = {r: rng.uniform(0.8, 1.2) for r in range(40)}
    fast = {r: round(1e6 * s * math.exp(rng.gauss(0, 0.01))) for r, s in speed.items()}
    slow = {r: round(1.03e6 * s * math.exp(rng.gauss(0, 0.01))) for r, s in speed.items()}
    g = gap(slow, fast)
    assert g.estimate == pytest.approx(math.log(1.03), abs=0.01) and g.pairs == 40
    assert g.beyond(3.0) and not gap(fast, slow).beyond(3.0)
    # Rounds only one of them was sampled in pair with nothing.
    assert gap({**slow, 99: 1}, fast).pairs == 40
    assert gap({}, fast).pairs == 0 and not gap({}, fast).beyond(0.0)


def test_centred_scores_rank_candidates_whatever_the_device_did_in_each_round() -> None:
    speed = {1: 1.0, 2: 1.5, 3: 0.7}  # the device's speed in each round
    rounds = {i: {r: round(t * s) for r, s in speed.items()} for i, t in ((0, 100), (1, 200), (2, 110))}
    scores = centred_scores(rounds, [0, 1, 2])
    assert sorted(scores, key=scores.__getitem__) == [0, 2, 1]


def test_no_decision_rests_on_fewer_than_three_samples() -> None:
    assert t_quantile(3.0, 1) == math.inf
    assert t_quantile(3.0, 1000) == pytest.approx(3.0, rel=0.01)
    assert t_quantile(2.5, 9) > t_quantile(2.5, 30) > 2.5
