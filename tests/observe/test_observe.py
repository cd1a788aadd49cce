"""Tune observers see a real tune as it happens, and never break it."""

from __future__ import annotations

import logging
from typing import Annotated

import pytest
from _tunables import sleeping as _sleep

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _boom(n: int) -> int:
    raise RuntimeError("kernel exploded")


class Collect:
    def __init__(self) -> None:
        self.events: list[tk.TuneEvent] = []

    def observe(self, event: tk.TuneEvent) -> None:
        self.events.append(event)


@pytest.fixture
def seen() -> Collect:
    observer = Collect()
    tk.add_observer(observer)
    yield observer
    tk.remove_observer(observer)


def _set() -> tk.TunableSet[NKey, int]:
    return tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [_sleep(0.002), _sleep(0.0005), tk.Tunable("boom", _boom)]
    )


def test_a_tune_reports_start_batches_each_sample_outcomes_and_decision(seen: Collect) -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("observed")
    tunables = _set()
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,)) == 3
    kinds = [type(e).__name__ for e in seen.events]
    assert kinds[0] == "CacheLookup" and kinds[1] == "TuneStarted" and kinds[2] == "BatchStarted"
    assert kinds[-1] == "TuneFinished"
    lookup, started = seen.events[0], seen.events[1]
    assert isinstance(lookup, tk.CacheLookup) and lookup.result == "miss" and lookup.key == {"n": 4}
    assert isinstance(started, tk.TuneStarted) and started.candidates == tunables.names
    progress = [e for e in seen.events if isinstance(e, tk.CandidateProgress)]
    assert all(e.tune_id == started.tune_id for e in progress)
    samples = [e for e in progress if e.stage == "sample"]
    finished = seen.events[-1]
    assert isinstance(finished, tk.TuneFinished) and finished.record is not None
    record = finished.record
    runoff_runs = sum(2 * len(e.pairs_ns) for e in record.events if isinstance(e, tk.Runoff))
    assert len(samples) == sum(len(c.samples_ns) + len(c.discarded_ns) for c in record.candidates) + runoff_runs
    assert all(e.duration_ns is not None and e.duration_ns > 0 for e in samples)
    outcomes = {e.name: e for e in progress if e.stage in ("measured", "failed", "skipped")}
    assert outcomes["boom"].stage == "failed" and outcomes["boom"].detail == "RuntimeError: kernel exploded"
    assert outcomes["sleep0.0005"].stage == "measured" and outcomes["sleep0.0005"].duration_ns is not None
    assert {e.name for e in progress if e.stage == "compiled"} == {"sleep0.002", "sleep0.0005"}
    assert finished.tune_id == started.tune_id
    # Paired comparisons decide the winner, not the lowest median (the two can differ on a busy machine):
    # the record's winner is the one the batch's verdict and the decision name, and a measured candidate.
    verdicts = [e for e in record.events if isinstance(e, tk.Verdict)]
    decision = tk.decision_of(record)
    assert verdicts and verdicts[-1].winner == record.winner and outcomes[record.winner].stage == "measured"
    assert decision is not None and decision.winner == record.winner
    measured = {e.name for e in outcomes.values() if e.stage == "measured"}
    assert verdicts[-1].runner_up in measured - {record.winner}


def test_cache_lookups_say_hit_and_stale(seen: Collect) -> None:
    tk.LocalTuner[NKey, int]("looked_up").execute(CLIENT.device_id, CLIENT, _set(), (3,))
    tk.LocalTuner[NKey, int]("looked_up").execute(CLIENT.device_id, CLIENT, _set(), (3,))
    changed = _set().with_tunable(_sleep(0.001))
    tk.LocalTuner[NKey, int]("looked_up").execute(CLIENT.device_id, CLIENT, changed, (3,))
    lookups = [e.result for e in seen.events if isinstance(e, tk.CacheLookup)]
    assert lookups == ["miss", "hit", "stale"]
    assert sum(isinstance(e, tk.TuneStarted) for e in seen.events) == 2


def test_a_tune_that_raises_still_finishes_its_observation(seen: Collect) -> None:
    def bad_inputs(key: NKey, n: int) -> tuple[int]:
        raise ValueError("no inputs today")

    tunables = tk.TunableSet(key=lambda n: NKey(n=n), inputs=bad_inputs).with_tunable(_sleep(0.0001))
    with pytest.raises(tk.TunekitError, match="no inputs today"):
        tk.LocalTuner[NKey, int]("raising").execute(CLIENT.device_id, CLIENT, tunables, (3,))
    finished = seen.events[-1]
    assert isinstance(finished, tk.TuneFinished) and finished.record is None
    assert finished.error is not None and "no inputs today" in finished.error


def test_a_failing_observer_is_logged_and_the_tune_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def observe(self, event: tk.TuneEvent) -> None:
            raise RuntimeError("observer bug")

    broken = tk.add_observer(Broken())
    try:
        with caplog.at_level(logging.ERROR, logger="tunekit.observe"):
            assert tk.LocalTuner[NKey, int]("broken").execute(CLIENT.device_id, CLIENT, _set(), (3,)) == 3
            assert tk.LocalTuner[NKey, int]("broken_too").execute(CLIENT.device_id, CLIENT, _set(), (4,)) == 4
    finally:
        tk.remove_observer(broken)
    assert "observer bug" in caplog.text
    # Regression: it raised on every event, and each was an ERROR with its traceback (26 for one small tune),
    # chained to the KeyError of the cache miss the tuner was handling when it notified.
    (logged,) = [r for r in caplog.records if r.name == "tunekit.observe" and r.levelno >= logging.ERROR]
    assert "its later failures are logged at DEBUG" in logged.getMessage()
    assert "KeyError" not in caplog.text


def test_add_observer_refuses_an_object_without_observe() -> None:
    with pytest.raises(TypeError, match="observe"):
        tk.add_observer(object())  # type: ignore[arg-type]


def test_decisions_without_a_tune_are_reported(seen: Collect) -> None:
    tk.configure(autotune=False)
    tk.LocalTuner[NKey, int]("untuned").execute(CLIENT.device_id, CLIENT, _set(), (3,))
    finished = [e for e in seen.events if isinstance(e, tk.TuneFinished)]
    assert len(finished) == 1 and finished[0].tune_id is None
    assert finished[0].record is not None and finished[0].record.decision == "disabled"


def test_prepare_hooks_and_the_correctness_gate_report_compiled_and_checked(seen: Collect) -> None:
    def compile_error(n: int) -> None:
        raise RuntimeError("build failed: syntax error")

    tunables = (
        tk.TunableSet(key=lambda n: NKey(n=n))
        .with_tunable(tk.Tunable("right", lambda n: n * 2, prepare=lambda n: None))
        .with_tunable(tk.Tunable("wrong", lambda n: n * 3))
        .with_tunable(tk.Tunable("unbuildable", lambda n: n * 2, prepare=compile_error))
        .with_reference(lambda n: n * 2)
    )
    assert tk.LocalTuner[NKey, int]("gated").execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 8
    stages = [(e.name, e.stage) for e in seen.events if isinstance(e, tk.CandidateProgress) and e.stage != "sample"]
    assert stages[:2] == [("right", "compiled"), ("right", "checked")]  # compiled by its hook, before any run
    assert ("wrong", "checked") not in stages and ("wrong", "failed") in stages
    assert ("unbuildable", "compiled") not in stages and ("unbuildable", "failed") in stages
