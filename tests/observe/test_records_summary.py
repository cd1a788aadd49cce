"""Summaries of records: winner, runner-up and margin per key, across re-tunes and demotions."""

from __future__ import annotations

import tunekit as tk
from tunekit._observe.event_text import describe_events
from tunekit._observe.summary import summarise
from tunekit._values.records import Demoted, Eliminated, Round, Runoff, SamplingStopped


def _measured(name: str, *samples: int) -> tk.CandidateRecord:
    return tk.CandidateRecord.of(name, 0, tk.Measured(tk.BenchmarkDurations(samples)))


def _tuned(
    key: dict[str, int], candidates: list[tk.CandidateRecord], winner: str, **extra: object
) -> tk.AutotuneRecord:
    return tk.AutotuneRecord(
        tuner="summary",
        device_id="cpu:test",
        key=key,
        checksum="c",
        decision="tuned",
        winner=winner,
        stored=True,
        wall_time_s=0.5,
        candidates=candidates,
        **extra,  # type: ignore[arg-type]
    )


def test_runner_up_and_median_margin() -> None:
    (summary,) = summarise([_tuned({"n": 8}, [_measured("a", 100, 110), _measured("b", 150, 160)], "a")])
    assert (summary.winner, summary.runner_up, summary.decided_by) == ("a", "b", "medians")
    assert summary.margin is not None and abs(summary.margin - (155 / 105 - 1)) < 1e-9
    assert summary.samples == 4 and summary.tuning_time_s == 0.5


def test_a_paired_runoff_decides_the_margin() -> None:
    runoff = Runoff(finalists=["a", "b"], pairs_ns=[(100, 102), (101, 103)], ratio=0.98, margin=0.02, winner="a")
    record = _tuned({"n": 8}, [_measured("a", 100, 104), _measured("b", 101, 102)], "a", events=[runoff])
    (summary,) = summarise([record])
    # The runoff's own figures: the median of the runner-up's over the winner's time in each pair.
    assert summary.decided_by == "runoff"
    assert summary.margin is not None and abs(summary.margin - (103 / 101 + 102 / 100 - 2) / 2) < 1e-12
    assert summary.winner_median_ns == 100.5
    assert summary.runner_up_median_ns == 100.5 * (1 + summary.margin)  # as the pairs put it, so the figures agree


def test_a_demotion_moves_the_lead_to_the_measured_runner_up() -> None:
    tuned = _tuned({"n": 8}, [_measured("a", 100), _measured("b", 200), _measured("c", 300)], "a")
    demoted = tuned.model_copy(
        update={
            "decision": "demoted",
            "winner": "b",
            "candidates": [],
            "wall_time_s": 0.0,
            "events": [Demoted(name="a", error="RuntimeError: x", replacement="b")],
        }
    )
    (summary,) = summarise([tuned, demoted])
    assert (summary.winner, summary.winner_median_ns, summary.runner_up) == ("b", 200.0, "c")
    assert summary.decisions == 2


def test_skipped_candidates_are_kept_apart_from_the_failures() -> None:
    """A candidate skipped by design (a short circuit, a key it does not apply to) was summarised as a failure."""
    candidates = [
        _measured("a", 100),
        tk.CandidateRecord.of("b", 0, tk.Failed("RuntimeError: x", "run")),
        tk.CandidateRecord.of("c", 0, tk.Skipped("short circuit: a met the roofline limit")),
    ]
    (summary,) = summarise([_tuned({"n": 8}, candidates, "a")])
    assert [(f.name, f.status, f.stage, f.reason) for f in summary.failures] == [
        ("b", "failed", "run", "RuntimeError: x")
    ]
    assert [(s.name, s.reason) for s in summary.skipped] == [("c", "short circuit: a met the roofline limit")]
    assert summary.as_dict()["skipped"] == [{"name": "c", "reason": "short circuit: a met the roofline limit"}]


def test_keys_sort_naturally() -> None:
    records = [_tuned({"n": n}, [_measured("a", 1)], "a") for n in (128, 4, 16)]
    assert [s.key["n"] for s in summarise(records)] == [4, 16, 128]


def test_rounds_are_counted_and_decisive_events_spelled_out() -> None:
    events = [
        Round(number=1, samples_ns={"a": 100, "b": 300}),
        Round(number=2, samples_ns={"a": 101, "b": 310}),
        Eliminated(
            name="b", round=2, reason="slower", median_ns=305, leader="a", leader_best_ns=100, leader_median_ns=100.5
        ),
        SamplingStopped(reason="one_left", rounds=2, survivors=["a"]),
    ]
    lines = describe_events(events)
    assert lines == [
        "b eliminated in round 2 (slower): median 305 ns against a's 100 ns",
        "sampling stopped after 2 rounds (one_left); left: a",
    ]
