"""Counts in words: a count of one takes the singular (``campaign: 1 jobs finished`` was printed)."""

from __future__ import annotations

import tunekit as tk
from tunekit._base.counted import counted, plural
from tunekit._observe.event_text import describe_events


def test_one_takes_the_singular_and_any_other_count_the_plural() -> None:
    assert [counted(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert counted(1, "hit summary") == "1 hit summary" and counted(3, "hit summary") == "3 hit summaries"
    assert counted(2, "key") == "2 keys"  # a vowel before the y: not "keies"
    assert plural(2, "child", "children") == "children" and plural(1, "child", "children") == "child"
    assert counted(1024, "sample", thousands=True) == "1,024 samples"


def test_a_decision_and_its_events_count_one_sample_and_one_round_in_the_singular() -> None:
    decision = tk.TuneDecision(
        stage="rounds", winner="a", winner_ns=1.0, runner_up="b", runner_up_ns=2.0, samples=1, margin=1.0
    )
    assert decision.stage_text.endswith(", 1 sample")
    lines = describe_events([tk.SamplingStopped(reason="decided", rounds=1, survivors=["a"])])
    assert lines == ["sampling stopped after 1 round (decided); left: a"]
