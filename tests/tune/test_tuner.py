from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import _self_calling
import numpy as np
import pytest
from _tunables import sleeping as _slow

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit._values.records import Demoted
from tunekit_backends.cpu import CpuClient
from tunekit_backends.simulated import SimulatedClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


CLIENT = CpuClient()
T = TypeVar("T")


def _boom(n: int) -> int:
    raise RuntimeError("kernel exploded")


def _key(n: int) -> NKey:
    return NKey(n=n)


def test_fastest_candidate_wins_and_runs_on_real_inputs() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("fastest")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        # 8x and 20x apart: sleep overshoots by milliseconds on a loaded 2-core machine.
        tunables = tk.TunableSet(key=_key).with_tunables([_slow(0.02), _slow(0.001), _slow(0.008)])
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (37,)) == 37
    finally:
        tk.remove_record_sink(sink)
    assert records[0].winner == "sleep0.001"
    assert records[0].key == {"n": 64}
    assert {c.name: c.status for c in records[0].candidates} == dict.fromkeys(tunables.names, "measured")


def test_raising_candidate_is_disqualified_others_still_run() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("disqualify")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("boom", _boom)).with_tunable(_slow(0.001))
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,)) == 5
    finally:
        tk.remove_record_sink(sink)
    boom = next(c for c in records[0].candidates if c.name == "boom")
    assert boom.status == "failed"
    assert boom.error == "RuntimeError: kernel exploded"
    assert records[0].winner == "sleep0.001"


def test_all_fail_raises_no_valid_kernel_found_naming_each() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("allfail")

    def zero_div(n: int) -> int:
        return n // 0

    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("boom", _boom)).with_tunable(tk.Tunable("div", zero_div))
    with pytest.raises(tk.NoValidKernelFound) as info:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))
    message = str(info.value)
    assert "boom: RuntimeError: kernel exploded" in message
    assert "div: ZeroDivisionError" in message
    assert [name for name, _ in info.value.failures] == ["boom", "div"]


def test_every_candidate_failing_its_check_against_the_reference_points_at_the_reference() -> None:
    """The list of error figures read as "every candidate is wrong" when the reference was (off by one here)."""
    tuner: tk.LocalTuner[NKey, np.ndarray] = tk.LocalTuner("wrong_reference")

    def off_by_one(x: np.ndarray) -> np.ndarray:
        return np.cumsum(x) + 1

    tunables = (
        tk.TunableSet(key=lambda x: NKey(n=len(x)))
        .with_tunable(tk.Tunable("cumsum", np.cumsum))
        .with_tunable(tk.Tunable("accumulate", np.add.accumulate))
        .with_reference(off_by_one)
    )
    with pytest.raises(tk.NoValidKernelFound) as info:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(5),))
    assert info.value.__notes__ == [
        "tunekit: all 2 candidates failed the correctness check against the reference function "
        "test_every_candidate_failing_its_check_against_the_reference_points_at_the_reference.<locals>.off_by_one: "
        "where the candidates agree with each other, check the reference (its dtype, its output, "
        "with_reference(outputs=...)), or widen rtol/atol"
    ]
    # One that raised instead is no sign the reference is wrong: no note.
    mixed = tunables.with_tunable(tk.Tunable("boom", _boom))
    with pytest.raises(tk.NoValidKernelFound) as info:
        tk.LocalTuner("wrong_reference_mixed").execute(CLIENT.device_id, CLIENT, mixed, (np.ones(5),))
    assert not getattr(info.value, "__notes__", None)


def test_a_candidate_whose_parameters_cannot_take_the_inputs_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A typo in a candidate's parameters left it out of every tune, said only in the records."""

    def two_args(x: np.ndarray, y: np.ndarray) -> float:
        return float(x.sum() + y.sum())

    def raises_type_error(x: np.ndarray) -> float:
        raise TypeError("unsupported dtype")  # a TypeError of its own: a failure for this key, not a typo

    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("uncallable")
    tunables = (
        tk.TunableSet(key=lambda x: NKey(n=len(x)))
        .with_tunable(tk.Tunable("sum", lambda x: float(x.sum())))
        .with_tunable(tk.Tunable("two_args", two_args))
        .with_tunable(tk.Tunable("raises", raises_type_error))
    )
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(3),)) == 3.0
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(100),)) == 100.0  # another key
    (message,) = [r.getMessage() for r in caplog.records if r.name == "tunekit.tuner"]
    assert message == (
        "uncallable: candidate 'two_args' takes (x: 'np.ndarray', y: 'np.ndarray') -> 'float', which cannot be called "
        "with the 1 input(s) execute() passes (missing a required argument: 'y'); it fails in every tune: give it "
        "the operation's parameters, or remove it"
    )


def test_fallback_tier_runs_only_when_first_batch_all_failed() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("fallback")
    group = tk.TuneGroup("g", lambda key: 1)
    calls: list[str] = []

    def tracked(name: str, fail: bool) -> tk.Tunable[int]:
        def run(n: int) -> int:
            calls.append(name)
            if fail:
                raise ValueError(name)
            return n

        return tk.Tunable(name, run)

    tunables = (
        tk.TunableSet(key=_key)
        .with_tunable(tracked("top", fail=True).group(group, lambda key: 2))
        .with_tunable(tracked("fallback", fail=False).group(group, lambda key: 1))
        .with_tunable(tracked("last", fail=False).group(group, lambda key: 0))
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (9,)) == 9
    finally:
        tk.remove_record_sink(sink)
    assert "last" not in calls
    assert records[0].winner == "fallback"
    assert [e.kind for e in records[0].events if e.kind == "fallback"] == ["fallback"]


def test_caller_inputs_are_not_clobbered_by_tuning() -> None:
    tuner: tk.LocalTuner[NKey, np.ndarray] = tk.LocalTuner("clobber")

    def in_place(x: np.ndarray) -> np.ndarray:
        x += 1
        return x

    tunables = tk.TunableSet(key=lambda x: NKey(n=x.size)).with_tunable(tk.Tunable("inplace", in_place))
    x = np.zeros(8)
    out = tuner.execute(CLIENT.device_id, CLIENT, tunables, (x,))
    # tuning ran on deep copies (warm-up + samples); only the final real call touched x
    np.testing.assert_array_equal(out, np.ones(8))
    np.testing.assert_array_equal(x, np.ones(8))


def test_sixteen_threads_on_one_new_key_tune_once() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("threads")
    runs: list[int] = []
    lock = threading.Lock()

    def counted(n: int) -> int:
        with lock:
            runs.append(n)
        time.sleep(0.001)
        return n

    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("counted", counted)).with_tunable(_slow(0.02))
    barrier = threading.Barrier(16)
    results: list[int] = []

    def call() -> None:
        barrier.wait()
        results.append(tuner.execute(CLIENT.device_id, CLIENT, tunables, (100,)))

    threads = [threading.Thread(target=call) for _ in range(16)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        tk.remove_record_sink(sink)
    assert results == [100] * 16
    assert len([r for r in records if r.decision == "tuned"]) == 1
    settings = tk.settings()
    counted = next(c for c in records[0].candidates if c.name == "counted")
    runoff_runs = sum(len(e.pairs_ns) for e in records[0].events if e.kind == "runoff")
    tune_runs = max(settings.warmup - 1, 0) + len(counted.samples_ns) + len(counted.discarded_ns) + runoff_runs
    # one tune (untimed warm-up runs, the timed first run, samples, any runoff) plus the 16 real calls
    assert len(runs) == tune_runs + 16


def test_cached_winner_that_fails_is_demoted_and_runner_up_runs() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("demote")
    state = {"broken": False}

    def fragile(n: int) -> int:
        if state["broken"]:
            raise MemoryError("out of shared memory")
        return n

    def steady(n: int) -> int:
        time.sleep(0.002)
        return n

    tunables = (
        tk.TunableSet(key=_key).with_tunable(tk.Tunable("fragile", fragile)).with_tunable(tk.Tunable("steady", steady))
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
        assert records[-1].winner == "fragile"
        state["broken"] = True
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
    finally:
        tk.remove_record_sink(sink)
    assert records[-1].decision == "demoted"
    assert records[-1].winner == "steady"
    assert records[-1].events[0].kind == "demoted"
    cache = tk.persistent_cache()
    assert cache is not None
    stored = cache.get(CLIENT.device_id, "demote", key_to_json(NKey(n=4)))
    assert isinstance(stored, tuple)
    assert stored[1].winner == "steady"


def test_a_cached_winner_raising_input_type_error_is_not_demoted_and_no_other_candidate_runs() -> None:
    """Regression: a caller's wrong input type made recover run the next candidates and demote the winner on disk."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("input_type")
    state = {"wrong": False}
    steady_runs: list[int] = []

    def picky(n: int) -> int:
        if state["wrong"]:
            raise tk.InputTypeError("picky: argument 0 is float64, the kernel declares float")
        return n

    def steady(n: int) -> int:
        steady_runs.append(n)
        time.sleep(0.002)
        return n

    tunables = (
        tk.TunableSet(key=_key).with_tunable(tk.Tunable("picky", picky)).with_tunable(tk.Tunable("steady", steady))
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
        assert records[-1].winner == "picky"
        tuned_records, steady_runs[:] = len(records), []
        state["wrong"] = True
        with pytest.raises(tk.InputTypeError, match="declares float"):
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,))
        assert steady_runs == [] and len(records) == tuned_records  # no other candidate tried, nothing demoted
        state["wrong"] = False
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
    finally:
        tk.remove_record_sink(sink)
    assert steady_runs == []
    cache = tk.persistent_cache()
    assert cache is not None
    stored = cache.get(CLIENT.device_id, "input_type", key_to_json(NKey(n=4)))
    assert isinstance(stored, tuple) and stored[1].winner == "picky"


def test_inputs_that_break_every_candidate_raise_and_keep_ranking() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("badinputs")

    def checked(n: int) -> int:
        if n < 0:
            raise ValueError("negative size")
        return n

    tunables = tk.TunableSet(key=lambda n: NKey(n=abs(n) or 1)).with_tunables(
        [tk.Tunable("a", checked), tk.Tunable("b", checked)]
    )
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
    with pytest.raises(ValueError, match="negative size"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (-4,))
    assert tuner.tuner(CLIENT.device_id).state(tunables, NKey(n=4)) == tk.Hit((0, 1)) or isinstance(
        tuner.tuner(CLIENT.device_id).state(tunables, NKey(n=4)), tk.Hit
    )


def test_init_builds_once_per_call_site() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("init")
    built: list[int] = []

    def site() -> tk.TunableSet[NKey, int]:
        return tuner.init(lambda: built.append(1) or tk.TunableSet(key=_key).with_tunable(_slow(0.0)))  # type: ignore[func-returns-value]

    first = site()
    assert all(site() is first for _ in range(100))
    assert built == [1]


def test_a_set_built_per_call_is_not_kept_once_dropped() -> None:
    # Regression: winners were keyed by the set itself, so a set built per call (not once, with init)
    # stayed alive in the tuner for good: memory grew by one set per call.
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("per_call")
    device = tuner.tuner(CLIENT.device_id)
    probe: list[weakref.ref[tk.TunableSet[NKey, int]]] = []
    for _ in range(5):
        tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("twice", lambda n: 2 * n)])
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 8
        assert device.winners_names() == ["twice"]
        probe.append(weakref.ref(tunables))
        del tunables
        gc.collect()
    assert all(ref() is None for ref in probe)
    assert not device.winners and device.winners_names() == []
    kept = tk.TunableSet(key=_key).with_tunables([tk.Tunable("twice", lambda n: 2 * n)])
    assert tuner.execute(CLIENT.device_id, CLIENT, kept, (4,)) == 8
    assert list(device.winners[kept]) == [NKey(n=4)] and list(device.winners) == [kept]


def test_a_set_run_again_after_clear_is_still_forgotten_once_dropped() -> None:
    """clear() drops the weak reference that watched the set: running it again must watch it anew."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("per_call_cleared")
    device = tuner.tuner(CLIENT.device_id)
    tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("twice", lambda n: 2 * n)])
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 8
    device.clear()
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 8
    assert device.winners_names() == ["twice"]
    del tunables
    gc.collect()
    assert not device.winners and device.winners_names() == []


def test_init_given_the_set_itself_says_to_pass_a_function() -> None:
    # TUNER.init(tunable_set) failed as "'TunableSet' object is not callable", naming neither the tuner nor the fix.
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("init_set")
    tunables = tk.TunableSet(key=_key).with_tunable(_slow(0.0))
    with pytest.raises(TypeError, match=r"tuner .init_set.: init\(\) takes a function that builds the set"):
        tuner.init(tunables)  # type: ignore[arg-type]


def test_definition_time_errors() -> None:
    with pytest.raises(ValueError, match="duplicate tunable name 'a'"):
        tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", _boom)).with_tunable(tk.Tunable("a", _boom))
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("empty")
    with pytest.raises(ValueError, match="no tunables"):
        tuner.init(lambda: tk.TunableSet(key=_key))

    class NotAKey:
        pass

    def make_not_a_key(n: int) -> NotAKey:
        return NotAKey()

    with pytest.raises(TypeError, match="not an @tk.autotune_key"):
        tk.TunableSet(key=make_not_a_key)

    @dataclasses.dataclass(frozen=True)
    class PlainKey:
        n: int

    # The class itself as the generator: refused here, not at the first call as "returned PlainKey"
    with pytest.raises(TypeError, match=r"TunableSet\(key=PlainKey\): PlainKey is not an @tk.autotune_key class"):
        tk.TunableSet(key=PlainKey)
    assert tk.TunableSet(key=NKey).with_tunable(tk.Tunable("a", _boom)).key is NKey


def test_key_generator_returning_non_key_is_refused_at_first_call() -> None:
    tuner: tk.LocalTuner[object, int] = tk.LocalTuner("notkey")
    tunables = tk.TunableSet(key=lambda n: (n,)).with_tunable(_slow(0.0))
    with pytest.raises(TypeError, match="not an @tk.autotune_key instance"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))  # type: ignore[arg-type]


def test_set_is_never_mutated_by_with_tunable() -> None:
    base = tk.TunableSet(key=_key).with_tunable(_slow(0.0))
    extended = base.with_tunable(_slow(0.001))
    assert base.names == ("sleep0.0",)
    assert extended.names == ("sleep0.0", "sleep0.001")
    assert base.checksum() != extended.checksum()


def test_autotune_disabled_takes_plan_order_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, isolated_settings: Path
) -> None:
    monkeypatch.setenv("TUNEKIT_AUTOTUNE", "0")
    tk.configure()
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("disabled")
    calls: list[str] = []

    def first(n: int) -> int:
        calls.append("first")
        return n

    group = tk.TuneGroup("g", lambda key: 1)
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunable(tk.Tunable("later", _boom).group(group, lambda key: 0))
        .with_tunable(tk.Tunable("first", first).group(group, lambda key: 5))
    )
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == 2
    assert calls == ["first"]
    cache = tk.persistent_cache()
    assert cache is not None
    assert list(cache.rows()) == []


def test_a_demotion_with_autotune_off_creates_no_cache_file(isolated_settings: Path) -> None:
    """With TUNEKIT_AUTOTUNE=0, demoting a winner that raised at launch created an empty cache file (SQLite)."""
    tk.configure(autotune=False)
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("demote_untuned", sinks=[records.append])
    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("boom", _boom)).with_tunable(_slow(0.0))
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,)) == 3
    assert [(r.decision, r.winner, r.stored) for r in records] == [
        ("disabled", "boom", False),
        ("demoted", "sleep0.0", False),
    ]
    assert not isolated_settings.exists()


def test_asking_a_keys_state_creates_no_cache_file(isolated_settings: Path) -> None:
    """Tuner.state() opened the persistent cache, creating an empty SQLite file (autotune off, or before a tune)."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("state_look")
    tunables = tk.TunableSet(key=_key).with_tunable(_slow(0.0))
    device = tuner.tuner(CLIENT.device_id)
    for autotune in (False, True):
        tk.configure(autotune=autotune)
        assert device.state(tunables, NKey(n=4)) == tk.Miss()
        assert not isolated_settings.exists()
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))  # a tune stores its winner: now there is a file
    tuner.clear()
    assert isinstance(tuner.tuner(CLIENT.device_id).state(tunables, NKey(n=4)), tk.Unchecked)


def test_an_equal_set_is_tuned_after_autotune_is_switched_back_on() -> None:
    """The plan order used while autotune was off was shared with equal sets: once back on, they were never tuned."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("untuned_shared")
    ran: list[str] = []

    def make() -> tk.TunableSet[NKey, int]:
        def run(name: str) -> Callable[[int], int]:
            return lambda n: (ran.append(name), n)[1]

        return tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", run("a"))).with_tunable(tk.Tunable("b", run("b")))

    tk.configure(autotune=False)
    tuner.execute(CLIENT.device_id, CLIENT, make(), (2,))
    assert ran == ["a"]
    tk.configure(autotune=True)
    ran.clear()
    tuner.execute(CLIENT.device_id, CLIENT, make(), (2,))
    assert "b" in ran  # measured: the new set was tuned
    cache = tk.persistent_cache()
    assert cache is not None and len(list(cache.rows())) == 1


@pytest.mark.parametrize("switch", ["configure", "environment"])
def test_the_same_set_is_tuned_after_autotune_is_switched_back_on(switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the set object run while autotune was off kept its plan order from memory, and was never tuned."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(f"untuned_same_{switch}")
    ran: list[str] = []
    records: list[tk.AutotuneRecord] = []

    def run(name: str) -> Callable[[int], int]:
        return lambda n: (ran.append(name), n)[1]

    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", run("a"))).with_tunable(tk.Tunable("b", run("b")))
    if switch == "configure":
        tk.configure(autotune=False)
    else:
        monkeypatch.setenv("TUNEKIT_AUTOTUNE", "0")
        tk.configure()
    sink = tk.add_record_sink(records.append)
    try:
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == 2
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == 2
        assert ran == ["a", "a"]
        if switch == "configure":
            tk.configure(autotune=True)
        else:
            monkeypatch.delenv("TUNEKIT_AUTOTUNE")
            tk.configure()
        ran.clear()
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,))
        assert "b" in ran  # measured: the key was tuned
        ran.clear()
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,))
        assert len(ran) == 1  # and its winner is now answered from memory
    finally:
        tk.remove_record_sink(sink)
    assert [r.decision for r in records] == ["disabled", "tuned"]
    cache = tk.persistent_cache()
    assert cache is not None and len(list(cache.rows())) == 1


def test_a_plan_order_demoted_while_autotune_is_off_is_tuned_once_it_is_back_on() -> None:
    """Regression: demoting the plan order's failing first candidate stored the rest as a tuned ranking."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("untuned_demoted")
    records: list[tk.AutotuneRecord] = []
    fast, slow = _slow(0.0), _slow(0.02)  # far apart: a loaded machine adds milliseconds
    tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("boom", _boom), slow, fast])
    tk.configure(autotune=False)
    sink = tk.add_record_sink(records.append)
    try:
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == 2  # boom raised: demoted for the next
        tk.configure(autotune=True)
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == 2
        twin = tk.TunableSet(key=_key).with_tunables([tk.Tunable("boom", _boom), slow, fast])
        assert tuner.execute(CLIENT.device_id, CLIENT, twin, (2,)) == 2  # an equal set takes the tuned ranking
    finally:
        tk.remove_record_sink(sink)
    assert [r.decision for r in records] == ["disabled", "demoted", "tuned"]
    assert records[-1].winner == fast.name


def test_input_generator_errors_name_the_tuner() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("badgen")

    def broken(key: NKey, n: int) -> tuple[int]:
        raise KeyError("no such dtype")

    tunables = tk.TunableSet(key=_key, inputs=broken).with_tunable(_slow(0.0))
    with pytest.raises(tk.TunekitError, match="tuner 'badgen': the input generator raised KeyError"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))
    not_tuple = tk.TunableSet(key=_key, inputs=lambda key, n: [n]).with_tunable(_slow(0.0))
    with pytest.raises(tk.TunekitError, match="must return a tuple"):
        tuner.execute(CLIENT.device_id, CLIENT, not_tuple, (3,))


def test_inputs_must_be_a_tuple() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("notuple")
    tunables = tk.TunableSet(key=_key).with_tunable(_slow(0.0))
    with pytest.raises(TypeError, match=r"as a tuple, e.g. \(x,\)"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, 3)  # type: ignore[arg-type]


# -- a candidate that executes its own operation for the key being tuned -----------------------


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread: a regression that hangs fails this test instead of the whole suite."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: the call waits on itself"
    if errors:
        raise errors[0]
    return box[0]


def _self_calling_set(
    tuner: tk.LocalTuner[NKey, int],
    raised: list[BaseException],
    *,
    plain: bool,
    isolation: Literal["none", "process"] = "none",
) -> tk.TunableSet[NKey, int]:
    """A set whose candidate "selfish" executes the set's own operation for its key; "sleep0.001" does not."""
    own: list[tk.TunableSet[NKey, int]] = []

    def selfish(n: int) -> int:
        try:
            return tuner.execute(CLIENT.device_id, CLIENT, own[0], (n,))
        except BaseException as exc:
            raised.append(exc)
            raise

    candidates = [tk.Tunable("selfish", selfish), *([_slow(0.001)] if plain else [])]
    own.append(tk.TunableSet(key=_key).with_tunables(candidates).with_isolation(isolation, timeout_s=30))
    return own[0]


def _tune_recorded(tuner: tk.LocalTuner[NKey, int], tunables: tk.TunableSet[NKey, int]) -> list[tk.AutotuneRecord]:
    """Execute key n=5 (it must return 5, within a minute) and return the records it emitted."""
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert _within(60, lambda: tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,))) == 5
    finally:
        tk.remove_record_sink(sink)
    return records


def test_a_candidate_executing_its_own_key_fails_and_the_tune_goes_on() -> None:
    """Regression: a candidate calling execute() on its own set for the key being tuned hung forever."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("self-call")
    raised: list[BaseException] = []
    tunables = _self_calling_set(tuner, raised, plain=True)
    records = _tune_recorded(tuner, tunables)
    assert raised and all(isinstance(exc, tk.TuneRecursionError) for exc in raised), raised
    assert isinstance(raised[0], RuntimeError)
    message = str(raised[0])
    assert "'self-call'" in message and "NKey(n=8)" in message, message  # the tuner, and the (anchored) key
    assert "must not execute its own operation for the key being tuned" in message
    assert "call the kernel directly" in message
    (record,) = records
    assert record.winner == "sleep0.001"
    selfish = next(c for c in record.candidates if c.name == "selfish")
    assert selfish.status == "failed"
    assert selfish.error is not None and selfish.error.startswith("TuneRecursionError: tuner 'self-call'")
    # Once tuned, the same call from a candidate's position is an ordinary cache hit.
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,)) == 5


def test_when_every_candidate_executes_its_own_key_the_tune_fails_saying_why() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("self-call-only")
    tunables = _self_calling_set(tuner, [], plain=False)
    with pytest.raises(tk.NoValidKernelFound, match="must not execute its own operation") as caught:
        _within(60, lambda: tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,)))
    assert [name for name, _ in caught.value.failures] == ["selfish"]


@pytest.mark.subprocess
def test_a_candidate_executing_its_own_key_in_a_forked_worker_fails_the_same_way() -> None:
    """Regression: under process isolation the forked worker waited on its copy of the tune until its timeout."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("self-call-worker")
    tunables = _self_calling_set(tuner, [], plain=True, isolation="process")
    records = _tune_recorded(tuner, tunables)
    selfish = next(c for c in records[0].candidates if c.name == "selfish")
    assert selfish.status == "failed" and selfish.stage == "run", selfish
    assert selfish.error is not None and selfish.error.startswith("TuneRecursionError:"), selfish.error


@pytest.mark.subprocess
def test_a_candidate_executing_its_own_key_in_a_spawned_worker_fails_at_once_naming_the_self_call() -> None:
    """Regression: the spawned worker waited on its parent's tune lock until the candidate timeout (a 'timeout')."""

    isolated = _self_calling.SET.with_isolation("process", timeout_s=20, worker=_self_calling.build)
    (record,) = _tune_recorded(_self_calling.TUNER, isolated)
    assert record.winner == "plain"
    selfish = next(c for c in record.candidates if c.name == "selfish")
    assert selfish.status == "failed" and selfish.stage == "run", selfish
    error = selfish.error or ""
    assert error.startswith("TuneRecursionError: tuner 'self-call-spawned'"), error
    assert "by the process that started this worker" in error and "NKey(n=5)" in error, error


def test_a_prepare_hook_executing_its_own_key_fails_its_candidate_instead_of_deadlocking() -> None:
    """Regression: the hook, on a prepare thread, waited on the tune that was waiting for the hook."""

    (record,) = _tune_recorded(_self_calling.PREPARE_TUNER, _self_calling.PREPARE_SET)
    assert record.winner == "plain"
    hooked = next(c for c in record.candidates if c.name == "prepares-selfishly")
    assert hooked.status == "failed" and hooked.stage == "compile", hooked
    assert (hooked.error or "").startswith("TuneRecursionError: tuner 'self-call-prepare'"), hooked.error


def _threads_waiting_on_tunes(tuner: tk.LocalTuner[Any, Any]) -> int:
    """Threads blocked on a tune in flight.

    Read from the futures' conditions: walking another running thread's frames (the way this was
    first checked) can crash CPython with a segmentation fault.
    """
    futures = list(tuner.tuner(CLIENT.device_id).tune_cache._pending.values())
    return sum(len(f._condition._waiters) for f in futures)  # type: ignore[attr-defined]


def test_another_thread_asking_for_a_key_being_tuned_waits_for_the_winner() -> None:
    """Only the tuning thread's own call is refused: any other thread still waits for the tune."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("self-call-other-thread")
    started, release = threading.Event(), threading.Event()

    def held(n: int) -> int:
        started.set()
        release.wait(30)  # the tune stays in flight until the second thread is waiting on it
        return n

    tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("held", held), _slow(0.005)])
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    results: dict[str, int] = {}
    errors: list[BaseException] = []

    def call(name: str) -> None:
        try:
            results[name] = tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,))
        except BaseException as exc:
            errors.append(exc)

    tuning = threading.Thread(target=call, args=("tuning",), daemon=True)
    waiting = threading.Thread(target=call, args=("waiting",), daemon=True)
    try:
        tuning.start()
        assert started.wait(30)
        waiting.start()
        deadline = time.monotonic() + 30
        while not _threads_waiting_on_tunes(tuner) and waiting.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _threads_waiting_on_tunes(tuner) == 1, errors
        release.set()
        tuning.join(60)
        waiting.join(60)
    finally:
        release.set()
        tk.remove_record_sink(sink)
    assert not tuning.is_alive() and not waiting.is_alive()
    assert not errors, errors
    assert results == {"tuning": 5, "waiting": 5}
    assert [r.decision for r in records] == ["tuned"]


@pytest.mark.parametrize(("device_id", "error"), [(5, TypeError), ("", ValueError), (None, TypeError)])
def test_a_device_id_that_is_not_a_non_empty_str_is_refused_at_execute(device_id: Any, error: type[Exception]) -> None:
    # An int device id failed deep in the tune lock ("sequence item 0: expected str"); "" was stored
    # as a cache row that `tunekit cache verify` flagged and `cache export` crashed on.
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("bad_device")
    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("same", lambda n: n))
    with pytest.raises(error, match=r"tuner 'bad_device': the device id must be a non-empty str.*client\.device_id"):
        tuner.execute(device_id, CLIENT, tunables, (4,))
    cache = tk.persistent_cache()
    assert cache is not None and not list(cache.rows())


class _SurrogateClient(CpuClient):
    """A client whose device id was decoded from bytes with errors="surrogateescape"."""

    @property
    def device_id(self) -> str:
        return b"gpu\xff".decode("utf-8", errors="surrogateescape")


def test_a_device_id_with_a_lone_surrogate_is_refused_at_execute_naming_it(isolated_settings: Path) -> None:
    """Regression: a device id with a lone surrogate raised UnicodeEncodeError from inside the cache."""
    client = _SurrogateClient()
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("surrogate_device")
    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("same", lambda n: n))
    with pytest.raises(ValueError, match=r"tuner 'surrogate_device': the device id 'gpu\\udcff' holds a lone surrog"):
        tuner.execute(client.device_id, client, tunables, (4,))
    with pytest.raises(ValueError, match=r"LocalTuner name 'bad\\udcff' holds a lone surrogate"):
        tk.LocalTuner("bad\udcff")


@pytest.mark.subprocess
def test_a_candidate_tuning_its_key_with_another_set_in_a_spawned_worker_goes_on_as_in_process() -> None:
    """Regression: the spawned worker refused any tune of the key its parent was tuning, also by another set that
    only shared the tuner name (in process that tune goes on at once)."""

    isolated = _self_calling.SHARING_SET.with_isolation("process", timeout_s=60, worker=_self_calling.build_sharing)
    record, *demoted = _tune_recorded(_self_calling.TUNER, isolated)
    other = next(c for c in record.candidates if c.name == "tunes-another-set")
    assert other.status == "measured", other.error
    # It and "plain" both sleep 1 ms, so either may win. Run as the winner in this process, where the tuner
    # now holds SHARING_SET for the key, its execute() of OTHER_SET is the two-sets-one-name mistake and is
    # refused: that winner is demoted in favour of "plain" (a second record). Which one wins is noise, not
    # the regression; the worker's measuring it is.
    if record.winner == "tunes-another-set":
        (demotion,) = demoted
        (event,) = demotion.events
        assert isinstance(event, Demoted) and event.name == "tunes-another-set" and event.replacement == "plain"
        assert "already runs key" in event.error and "with another tunable set" in event.error
    else:
        assert record.winner == "plain" and not demoted


def test_a_cached_winner_whose_client_was_closed_is_not_demoted(isolated_settings: Path) -> None:
    """Regression: a winner that raised ClientClosed at launch was demoted (in memory and in the cache) in favour of a
    runner-up that happened not to use the client."""
    closed = threading.Event()

    def on_device(n: int) -> int:
        if closed.is_set():
            raise tk.ClientClosed("the test's CPU client was closed")
        return n

    host = tk.Tunable("host", lambda n: n)
    tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("device", on_device), host])
    cache = tk.PersistentCache(isolated_settings)
    stored = tk.CacheValue(winner="device", ranking=["device", "host"])
    assert cache.put(CLIENT.device_id, "closed-winner", key_to_json(NKey(n=3)), tunables.checksum(), stored)
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("closed-winner")
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,)) == 3  # the stored winner, not tuned
    closed.set()  # another thread closed the client
    with pytest.raises(tk.ClientClosed):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))
    got = cache.get(CLIENT.device_id, "closed-winner", key_to_json(NKey(n=3)))
    assert isinstance(got, tuple) and got[1].ranking == ["device", "host"]
    closed.clear()
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,)) == 3
    assert tuner.tuner(CLIENT.device_id).winners[tunables][NKey(n=3)] is on_device


def test_a_device_id_other_than_the_clients_is_refused_before_anything_runs_or_is_cached() -> None:
    # Regression: execute("gpu:0", <the gpu:1 client>, ...) timed on gpu:1, then cached and recorded it as gpu:0's.
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("wrong_device")
    gpu1 = SimulatedClient(device_id="gpu:1")
    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("kernel", gpu1.kernel(1_000)))
    with pytest.raises(
        ValueError, match=r"given the device id 'gpu:0', but the client's is 'gpu:1'.*client\.device_id"
    ):
        tuner.execute("gpu:0", gpu1, tunables, (4,))
    assert gpu1.busy_ns == 0
    cache = tk.persistent_cache()
    assert cache is not None and not list(cache.rows())
    tuner.execute(gpu1.device_id, gpu1, tunables, (4,))
    assert [row if isinstance(row, str) else row.device_id for row in cache.rows()] == ["gpu:1"]


def test_an_equal_set_finds_the_known_winner_in_memory_even_with_the_cache_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Regression: with the cache off, every equal set (one per client of a device, one built per call) tuned again.
    monkeypatch.setenv("TUNEKIT_CACHE", "0")
    tk.configure()
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("equal_sets")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    ran: list[str] = []

    def candidate(name: str, *, fails_on: int | None = None) -> tk.Tunable[int]:
        def run(n: int) -> int:
            if n == fails_on:
                raise RuntimeError(f"{name} cannot take {n}")
            ran.append(name)
            if name == "second":
                time.sleep(0.002)  # far slower than "first": "first" wins
            return n

        return tk.Tunable(name, run)

    def equal_set() -> tk.TunableSet[NKey, int]:
        return tk.TunableSet(key=_key).with_tunables([candidate("first", fails_on=3), candidate("second")])

    try:
        for _ in range(3):
            assert tuner.execute(CLIENT.device_id, CLIENT, equal_set(), (4,)) == 4
        assert [r.decision for r in records] == ["tuned"]
        # state() says so too: it said Miss (the cache is off) for a key the next execute would not tune.
        assert tuner.tuner(CLIENT.device_id).state(equal_set(), NKey(n=4)) == tk.Hit((0, 1))
        assert records[0].winner == "first"
        # The winner fails on these real inputs and is demoted: an equal set must not get it back.
        demoting = equal_set()
        assert tuner.execute(CLIENT.device_id, CLIENT, demoting, (3,)) == 3
        ran.clear()
        assert tuner.execute(CLIENT.device_id, CLIENT, equal_set(), (4,)) == 4
        assert ran == ["second"]
        assert [r.decision for r in records] == ["tuned", "demoted"]
    finally:
        tk.remove_record_sink(sink)
