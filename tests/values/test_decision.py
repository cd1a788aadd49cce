"""The decision of a record: the figures that decided it, the stage, the margin's interval, when it is in doubt."""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction

import pytest

import tunekit as tk
from tunekit._values.decision import median_interval, ratio_interval
from tunekit._values.records import Demoted, Round, SamplingStopped, SearchEnded, ShortCircuit


def _measured(name: str, *samples: int) -> tk.CandidateRecord:
    return tk.CandidateRecord.of(name, 0, tk.Measured(tk.BenchmarkDurations(samples)))


def _record(candidates: list[tk.CandidateRecord], winner: str, events: list[object] | None = None) -> tk.AutotuneRecord:
    return tk.AutotuneRecord.model_validate(
        {
            "tuner": "t",
            "device_id": "d",
            "key": {"n": 1},
            "checksum": "c",
            "decision": "tuned",
            "winner": winner,
            "stored": False,
            "wall_time_s": 0.1,
            "candidates": candidates,
            "events": events or [],
        }
    )


def test_a_runoff_decides_with_its_own_pairs_and_says_why_a_lower_median_lost() -> None:
    """Regression: the winner einsum was shown at 5.66 ms above matvec at 5.13 ms, with no word of the runoff."""
    pairs = [(5_600 + i % 3, 5_700 + i % 5) for i in range(20)]  # (einsum, matvec): einsum ahead in every pair
    runoff = tk.Runoff(finalists=["einsum", "matvec"], pairs_ns=pairs, ratio=0.98, margin=0.02, winner="einsum")
    record = _record([_measured("einsum", 5_660, 5_650, 5_700), _measured("matvec", 5_130, 5_140, 5_900)], "einsum")
    decision = tk.decision_of(record.model_copy(update={"events": [runoff]}))
    assert decision is not None
    assert (decision.stage, decision.winner, decision.runner_up, decision.samples) == ("runoff", "einsum", "matvec", 20)
    assert decision.winner_ns == statistics.median(a for a, _ in pairs)
    ratio = statistics.median(b / a for a, b in pairs)
    assert decision.runner_up_ns == pytest.approx(decision.winner_ns * ratio)  # as the pairs put it
    assert decision.margin == pytest.approx(ratio - 1)
    assert decision.margin is not None and decision.margin_low is not None and decision.margin_high is not None
    assert 0 < decision.margin_low <= decision.margin <= decision.margin_high
    assert (decision.faster, decision.faster_ns, decision.faster_compared) == ("matvec", 5_140, True)
    why = decision.why()
    assert why is not None and "paired runoff" in why and "matvec's median 5.14 µs" in why
    assert decision.text().endswith(why)  # on the same line as the figures
    assert decision.trusted and decision.warning() is None


def test_rounds_decide_by_medians_with_a_paired_interval_the_same_every_time() -> None:
    rounds = [Round(number=i + 1, samples_ns={"a": 100 + i % 4, "b": 110 + i % 3}) for i in range(8)]
    record = _record(
        [_measured("a", *(100 + i % 4 for i in range(8))), _measured("b", *(110 + i % 3 for i in range(8)))],
        "a",
        [*rounds, SamplingStopped(reason="max_samples", rounds=8, survivors=["a", "b"])],
    )
    first, again = tk.decision_of(record), tk.decision_of(record)
    assert first == again and first is not None
    assert (first.stage, first.runner_up, first.samples) == ("rounds", "b", 8)
    assert first.margin == pytest.approx(111 / 101.5 - 1)
    assert first.margin_low is not None and first.margin_high is not None
    assert first.margin_low <= first.margin <= first.margin_high
    assert first.why() is None and "interleaved rounds, 8 samples" in first.text()


def test_a_short_circuit_explains_a_winner_beside_a_lower_median() -> None:
    events = [
        Round(number=1, samples_ns={"a": 90, "b": 100}),
        ShortCircuit(name="b", limit_ns=120.0, samples_ns=[100, 101], skipped=["c"]),
    ]
    record = _record([_measured("a", 90), _measured("b", 100, 101)], "b", events)
    decision = tk.decision_of(record)
    assert decision is not None and decision.stage == "short_circuit"
    assert decision.margin is not None and decision.margin < 0  # a negative margin, explained
    assert "roofline limit" in (decision.why() or "")


def test_a_demoted_winner_is_said_to_be_one() -> None:
    record = _record([_measured("a", 100), _measured("b", 200), _measured("c", 300)], "a")
    demoted = tk.decision_of(record, winner="b", demoted={"a"})
    assert demoted is not None and (demoted.stage, demoted.winner, demoted.runner_up) == ("demoted", "b", "c")
    assert "failed on real inputs" in (demoted.why() or "")
    events = [Demoted(name="a", error="x", replacement="b")]
    later = tk.decision_of(record.model_copy(update={"decision": "demoted", "winner": "b", "events": events}))
    assert later is not None and later.stage == "demoted"


def test_a_search_phase_median_below_the_finalists_is_explained() -> None:
    """Regression: a search's summary showed the winner at 37.2 ms, the runner-up at 36.2 ms, "margin -2.7%"."""
    ended = SearchEnded(
        strategy="random",
        seed=0,
        space_hash="h",
        evaluations=3,
        resumed=0,
        stopped_by="max_evals",
        strategy_seconds=0.0,
    )
    final = [
        Round(number=1, samples_ns={"w": 37_200, "r": 38_000}),
        Round(number=2, samples_ns={"w": 37_100, "r": 38_100}),
    ]
    record = _record(
        [_measured("w", 37_200, 37_100), _measured("r", 38_000, 38_100), _measured("early", 36_200)],
        "w",
        [ended, *final],
    )
    decision = tk.decision_of(record)
    assert decision is not None and decision.search and decision.runner_up == "r"
    assert decision.margin is not None and decision.margin > 0  # among the finalists, never negative
    assert (decision.faster, decision.faster_compared) == ("early", False)
    assert "in the search, apart from the finalists" in (decision.why() or "")
    assert decision.stage_text.startswith("search finalists")


def test_a_spread_wider_than_the_margin_is_not_trusted() -> None:
    noisy = _record([_measured("a", 100, 180, 60, 140, 90), _measured("b", 104, 70, 200, 95, 130)], "a")
    decision = tk.decision_of(noisy)
    assert decision is not None and decision.margin is not None and decision.spread > decision.margin
    assert not decision.trusted
    warning = decision.warning("mytuner")
    assert warning is not None and "tunekit cache clear --tuner mytuner" in warning and "busy" in warning
    quiet = tk.decision_of(_record([_measured("a", 100, 101, 100, 99, 100), _measured("b", 150, 151, 149, 150)], "a"))
    assert quiet is not None and quiet.trusted and quiet.warning() is None


def test_no_decision_without_a_measured_winner() -> None:
    assert tk.decision_of(_record([], "a").model_copy(update={"decision": "disabled"})) is None
    only = tk.decision_of(_record([_measured("a", 5, 6)], "a"))
    assert only is not None and only.stage == "only" and only.runner_up is None and only.margin_text == "-"


def test_the_median_interval_is_the_binomial_order_statistics() -> None:
    assert median_interval(list(range(1, 11))) == (2, 9)  # n=10: the 2nd and 9th of ten, 97.9% coverage
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few for 95%: the whole range
    # Coverage: the true median 0 of a symmetric distribution falls inside about 95% of the time, or more.
    rng = random.Random(1)
    inside = 0
    for _ in range(2000):
        low, high = median_interval([rng.gauss(0, 1) for _ in range(25)])
        inside += low <= 0 <= high
    assert inside / 2000 >= 0.93


def _rank_by_comb(n: int, confidence: float) -> int:
    """The interval's rank computed apart from the code under test: math.comb sums against an exact fraction."""
    limit = Fraction(1 - Fraction(confidence), 2) * 2**n
    below = 0
    for j in range(n):
        below += math.comb(n, j)
        if below > limit:
            return j
    return n


@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_the_median_interval_is_exact_up_to_two_thousand_values(confidence: float) -> None:
    for n in [*range(1, 120), 511, 1000, 1023, 1024, 1025, 1500, 2000]:
        values = list(range(n))
        j = _rank_by_comb(n, confidence)
        expected = (values[0], values[-1]) if j == 0 else (values[j - 1], values[n - j])
        assert median_interval(values, confidence) == expected, n


def test_the_median_interval_takes_any_number_of_values() -> None:
    # 2.0**n overflowed above 1023 values; the interval stays within the samples and narrows as n grows.
    widths = []
    for n in (1024, 1100, 5000, 100_000):
        values = list(range(n))
        low, high = median_interval(values)
        assert 0 <= low < (n - 1) / 2 < high <= n - 1 and low + high == n - 1
        widths.append((high - low) / n)
    assert widths == sorted(widths, reverse=True)


@pytest.mark.parametrize("n", [2001, 2062, 2109, 2500, 2925, 3001])
def test_above_two_thousand_the_normal_approximation_is_exact_or_one_wider(n: int) -> None:
    # Never narrower than the exact interval, so its coverage is never below the confidence asked for.
    low, high = median_interval(list(range(n)))
    j = _rank_by_comb(n, 0.95)
    assert (low, high) in ((j - 1, n - j), (j - 2, n - j + 1))


def test_the_bootstrap_interval_holds_the_ratio_of_medians() -> None:
    winner, runner = [100, 102, 98, 101, 99, 100], [110, 112, 108, 111, 109, 110]
    for paired in (True, False):
        low, high = ratio_interval(winner, runner, paired=paired)
        assert low <= 110 / 100 - 1 <= high and low > 0
