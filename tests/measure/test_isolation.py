"""Isolation: a candidate that crashes or hangs is disqualified, the tune goes on, the caller lives."""

from __future__ import annotations

import ctypes
import faulthandler
import math
import os
import threading
import time
from pathlib import Path
from typing import Annotated

import _self_calling
import numpy as np
import pytest

import tunekit as tk
from tunekit._candidates.isolation import Isolation
from tunekit._measure.worker import ProcessRunner, SpawnRecipe
from tunekit._observe.sinks import CallbackSink
from tunekit.backend import RunPolicy, SupportsForkCheck, current_run_policy
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


CLIENT = CpuClient()


def _key(n: int) -> NKey:
    return NKey(n=n)


def _sleeper(name: str, seconds: float) -> tk.Tunable[int]:
    def run(n: int) -> int:
        time.sleep(seconds)
        return n

    return tk.Tunable(name, run)


def _abort(n: int) -> int:
    faulthandler.disable()  # pytest's faulthandler would print the worker's stack on the terminal
    os.abort()


def _segfault(n: int) -> int:
    faulthandler.disable()
    return ctypes.c_char.from_address(8).value[0]  # an unmapped page: a real SIGSEGV


def _spin(n: int) -> int:
    while True:
        n += 1


def _raise(n: int) -> int:
    raise RuntimeError("kernel exploded")


def _tune(tunables: tk.TunableSet[NKey, int], name: str, n: int = 5) -> tuple[int, tk.AutotuneRecord]:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(name)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        output = tuner.execute(CLIENT.device_id, CLIENT, tunables, (n,))
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    return output, record


def _candidate(record: tk.AutotuneRecord, name: str) -> tk.CandidateRecord:
    return next(c for c in record.candidates if c.name == name)


def _children() -> frozenset[int] | None:
    """This process's child processes, or None where Linux's /proc does not list them.

    Not "no child at all": a store test run earlier by the same xdist worker leaves its PostgreSQL
    server, a child of the worker for the session, and these tests then failed in a CI run.
    """
    tasks = Path(f"/proc/{os.getpid()}/task")
    listed = [task / "children" for task in tasks.iterdir()] if tasks.is_dir() else []
    if not listed or not all(path.exists() for path in listed):
        return None
    return frozenset(int(pid) for path in listed for pid in path.read_text().split())


@pytest.fixture
def children_before() -> frozenset[int] | None:
    return _children()


def _no_children_left(before: frozenset[int] | None) -> bool:
    """No child process started during the test is left, reaped or not (every child, without /proc)."""
    if before is None:
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        return False
    now = _children()
    return now is not None and now <= before


@pytest.mark.subprocess
def test_abort_and_segfault_are_disqualified_and_the_tune_returns_the_right_winner(
    children_before: frozenset[int] | None,
) -> None:
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables(
            [
                tk.Tunable("abort", _abort),
                _sleeper("slow", 0.004),
                tk.Tunable("segfault", _segfault),
                _sleeper("fast", 0.0005),
            ]
        )
        .with_isolation("process")
    )
    output, record = _tune(tunables, "crashers")
    assert output == 5
    assert record.winner == "fast"
    abort = _candidate(record, "abort")
    assert (abort.status, abort.stage, abort.error) == ("failed", "crash", "crashed: signal 6 (SIGABRT)")
    segfault = _candidate(record, "segfault")
    assert (segfault.status, segfault.stage, segfault.error) == ("failed", "crash", "crashed: signal 11 (SIGSEGV)")
    assert _candidate(record, "slow").status == "measured"
    assert _no_children_left(children_before)


@pytest.mark.subprocess
def test_a_hang_times_out_and_a_fresh_worker_measures_the_rest(children_before: frozenset[int] | None) -> None:
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("spin", _spin), _sleeper("ok", 0.0005)])
        .with_isolation("process", timeout_s=0.3)
    )
    output, record = _tune(tunables, "hang")
    assert output == 5
    spin = _candidate(record, "spin")
    assert (spin.status, spin.stage, spin.error) == ("failed", "timeout", "timeout after 0.3 s")
    assert record.winner == "ok"
    assert _no_children_left(children_before)


@pytest.mark.subprocess
def test_an_error_in_the_worker_reads_as_it_would_in_process() -> None:
    tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("boom", _raise), _sleeper("ok", 0.0005)])
    _, isolated = _tune(tunables.with_isolation("process"), "error-isolated")
    _, local = _tune(tunables.with_isolation("none"), "error-local")
    for record in (isolated, local):
        boom = _candidate(record, "boom")
        assert (boom.stage, boom.error) == ("run", "RuntimeError: kernel exploded")


@pytest.mark.subprocess
def test_candidates_run_in_another_process_only_when_isolated() -> None:
    pids: list[int] = []

    def where(n: int) -> int:
        pids.append(os.getpid())
        return n

    base = tk.TunableSet(key=_key).with_tunable(tk.Tunable("where", where))
    tk.configure(isolation="process")
    _tune(base, "global-process")
    assert pids == [os.getpid()], "only the winner's real run may happen here; tuning runs happen in the worker"
    pids.clear()
    _tune(base.with_isolation("none"), "override-none")
    assert set(pids) == {os.getpid()} and len(pids) >= 2  # tuning runs and the real run, all here


def test_in_process_watchdog_interrupts_python_code() -> None:
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("spin", _spin), _sleeper("ok", 0.0005)])
        .with_isolation("none", timeout_s=0.2)
    )
    output, record = _tune(tunables, "watchdog")
    assert output == 5
    spin = _candidate(record, "spin")
    assert (spin.stage, spin.error) == ("timeout", "timeout after 0.2 s")
    assert record.winner == "ok"


def test_in_process_run_blocked_in_c_is_disqualified_when_it_returns() -> None:
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([_sleeper("sleepy", 0.3), _sleeper("ok", 0.0005)])
        .with_isolation("none", timeout_s=0.1)
    )
    _, record = _tune(tunables, "blocked")
    sleepy = _candidate(record, "sleepy")
    assert (sleepy.stage, sleepy.error) == ("timeout", "timeout after 0.1 s")


def test_watchdog_never_fires_into_runs_that_finish_in_time() -> None:
    # Regression guard for the async-exception hand-off: an interrupt must never land outside a candidate.
    tk.configure(samples=200, warmup=0, adaptive=False)  # 200 runs of one candidate
    quick = tk.TunableSet(key=_key).with_tunable(tk.Tunable("quick", lambda n: n))
    tunables = quick.with_isolation("none", timeout_s=5)
    _, record = _tune(tunables, "quick")
    assert _candidate(record, "quick").status == "measured"


def test_isolation_policy_is_validated_when_the_set_is_built() -> None:
    base = tk.TunableSet(key=_key)
    with pytest.raises(ValueError, match="'none' or 'process'"):
        base.with_isolation("thread")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s must be a number > 0"):
        base.with_isolation("process", timeout_s=0)
    # "5" failed as "'>' not supported between instances of 'str' and 'int'"; True was one second.
    for bad in ("5", True):
        with pytest.raises(ValueError, match=rf"timeout_s must be a number > 0 .*got {bad!r}"):
            base.with_isolation("process", timeout_s=bad)  # type: ignore[arg-type]
    assert base.with_isolation("process", timeout_s=math.inf).isolation == Isolation("process", math.inf)
    assert base.isolation is None


def test_isolation_leaves_the_checksum_alone() -> None:
    base = tk.TunableSet(key=_key).with_tunable(_sleeper("a", 0))
    assert base.with_isolation("process").checksum() == base.checksum()


@pytest.mark.subprocess
def test_concurrent_isolated_tunes_each_see_their_own_crash(children_before: frozenset[int] | None) -> None:
    # Each thread forks its own workers; a crash must read as a crash (not a timeout) and reach only its own tune.
    results: dict[int, tk.AutotuneRecord] = {}
    errors: list[BaseException] = []

    def tune(n: int) -> None:
        tunables = (
            tk.TunableSet(key=_key)
            .with_tunables([tk.Tunable("abort", _abort), _sleeper("ok", 0.0005)])
            .with_isolation("process", timeout_s=20)
        )
        records: list[tk.AutotuneRecord] = []
        tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(f"concurrent-{n}", sinks=[CallbackSink(records.append)])
        try:
            assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (n,)) == n
            (results[n],) = records
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=tune, args=(n,)) for n in (3, 5, 9, 17)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for record in results.values():
        assert _candidate(record, "abort").error == "crashed: signal 6 (SIGABRT)"
        assert record.winner == "ok"
    assert _no_children_left(children_before)


def _times(factor: int) -> tk.Tunable[np.ndarray]:
    return tk.Tunable(f"times{factor}", lambda x: x * factor)


def _abort_array(x: np.ndarray) -> np.ndarray:
    faulthandler.disable()
    os.abort()


def _spin_array(x: np.ndarray) -> np.ndarray:
    while True:
        x = x + 0


@tk.autotune_key
class LenKey:
    n: int


def _array_tune(tunables: tk.TunableSet[LenKey, np.ndarray], name: str) -> tk.AutotuneRecord:
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[LenKey, np.ndarray] = tk.LocalTuner(name, sinks=[CallbackSink(records.append)])
    out = tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.arange(8.0),))
    assert np.array_equal(out, np.arange(8.0) * 2)
    (record,) = records
    return record


@pytest.mark.subprocess
def test_the_correctness_check_runs_in_the_worker_so_a_crash_there_is_contained() -> None:
    tunables = (
        tk.TunableSet(key=lambda x: LenKey(n=len(x)))
        .with_tunables([tk.Tunable("abort", _abort_array), tk.Tunable("spin", _spin_array), _times(3), _times(2)])
        .with_reference(lambda x: x * 2)
        .with_isolation("process", timeout_s=0.5)
    )
    record = _array_tune(tunables, "checked-isolated")
    outcome = {c.name: (c.stage, c.error) for c in record.candidates}
    assert outcome["abort"] == ("crash", "crashed: signal 6 (SIGABRT)")
    assert outcome["spin"] == ("timeout", "timeout after 0.5 s")
    assert outcome["times3"][0] == "check"
    assert record.winner == "times2"


@pytest.mark.subprocess
def test_a_baseline_from_a_worker_survives_the_workers_crash() -> None:
    # Without a reference the first candidate is the baseline; it lives on in the caller, so the
    # worker forked after abort()'s crash still rejects times3 instead of taking it as a new baseline.
    tunables = (
        tk.TunableSet(key=lambda x: LenKey(n=len(x)))
        .with_tunables([_times(2), tk.Tunable("abort", _abort_array), _times(3), tk.Tunable("also2", lambda x: x + x)])
        .with_reference()
        .with_isolation("process")
    )
    record = _array_tune(tunables, "baseline-isolated")
    outcome = {c.name: (c.status, c.stage) for c in record.candidates}
    assert outcome == {
        "times2": ("measured", None),
        "abort": ("failed", "crash"),
        "times3": ("failed", "check"),
        "also2": ("measured", None),
    }


def test_the_in_process_time_limit_applies_to_the_correctness_check() -> None:
    tunables = (
        tk.TunableSet(key=lambda x: LenKey(n=len(x)))
        .with_tunables([tk.Tunable("spin", _spin_array), _times(2)])
        .with_reference(lambda x: x * 2)
        .with_isolation("none", timeout_s=0.3)
    )
    record = _array_tune(tunables, "checked-watchdog")
    assert {c.name: (c.stage, c.error) for c in record.candidates}["spin"] == ("timeout", "timeout after 0.3 s")


@pytest.mark.subprocess
@pytest.mark.parametrize("spawned", [False, True], ids=["forked", "spawned"])
def test_a_worker_started_by_a_thread_that_ends_lives_on_with_the_process(spawned: bool) -> None:
    """Regression: PR_SET_PDEATHSIG killed the worker when the thread that started it ended (the next run 'crashed')."""

    recipe = SpawnRecipe("_self_calling:build", {"n": 3}) if spawned else None
    runner = ProcessRunner(_self_calling.CLIENT, _self_calling.SET, (3,), timeout_s=60, recipe=recipe)
    plain = _self_calling.SET.index_of("plain")
    assert plain is not None
    try:
        starter = threading.Thread(target=runner.warmup, args=(plain,))  # a short-lived thread starts the worker
        starter.start()
        starter.join()
        while os.path.exists(f"/proc/self/task/{starter.native_id}"):  # until the kernel has ended the thread
            time.sleep(0.01)
        time.sleep(0.2)  # the signal, had there been one, has been delivered by now
        assert runner.sample(plain) > 0  # the same worker: before, 'crashed: signal 9 (SIGKILL)'
    finally:
        runner.close()


def _closed(n: int) -> int:
    raise tk.ClientClosed("the worker's client was closed")


@pytest.mark.subprocess
@pytest.mark.parametrize("stage", ["run", "check"])
def test_a_client_closed_in_the_worker_stops_the_tune_and_stores_nothing(stage: str, isolated_settings: object) -> None:
    """Regression: ClientClosed raised in an isolated worker came back as that candidate's failure, and the other
    candidate's winner was stored."""
    tunables = tk.TunableSet(key=_key).with_tunables([_sleeper("fine", 0.0005), tk.Tunable("closed", _closed)])
    if stage == "check":
        tunables = tunables.with_reference(lambda n: n)
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(f"closed-in-worker-{stage}")
    with pytest.raises(tk.ClientClosed, match="in the isolated worker process: the worker's client was closed"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables.with_isolation("process"), (5,))
    cache = tk.PersistentCache(isolated_settings)  # type: ignore[arg-type]
    assert list(cache.rows()) == [] and cache.failed_keys() == []


@pytest.mark.subprocess
def test_prepare_hooks_see_the_policy_of_the_tune_they_work_for() -> None:
    """Regression: a third-party backend's prepare hook reached the policy only through a private module."""
    tk.configure(candidate_timeout_s=30)
    seen: list[RunPolicy] = []
    prepared = tk.Tunable("prepared", lambda n: n, prepare=lambda n: seen.append(current_run_policy()))
    base = tk.TunableSet(key=_key).with_tunable(prepared)
    _tune(base.with_isolation("none", timeout_s=3), "policy-none", n=1)
    _tune(base.with_isolation("process", timeout_s=math.inf), "policy-process", n=2)
    _tune(base.with_isolation("process"), "policy-mode-only", n=3)
    _tune(base, "policy-settings", n=4)
    assert seen == [
        RunPolicy("none", 3),
        RunPolicy("process", None),
        RunPolicy("process", 30),  # the set's mode, the settings' limit
        RunPolicy("none", 30),
    ]
    assert seen[1].isolated and not seen[0].isolated
    tk.configure(isolation="process", candidate_timeout_s=7)
    assert current_run_policy() == RunPolicy("process", 7)  # outside a tune: the settings'
    tk.configure(isolation="none", candidate_timeout_s=math.inf)
    assert current_run_policy() == RunPolicy("none", None)  # no limit reads as None, as inside a tune


class _UnforkableCpu(CpuClient):
    """A real CPU client that says a forked worker cannot use it, as an OpenCL or CUDA client does."""

    def __init__(self, hazard: str | None) -> None:
        super().__init__()
        self.hazard = hazard

    @property
    def fork_hazard(self) -> str | None:
        return self.hazard


@pytest.mark.subprocess
def test_a_client_that_cannot_be_forked_is_refused_before_anything_is_prepared_or_run(
    children_before: frozenset[int] | None,
) -> None:
    """Regression: process isolation forked a client that names a fork hazard; each candidate hung to its limit."""
    prepared: list[int] = []
    ran: list[int] = []

    def run(n: int) -> int:
        ran.append(n)
        return n

    base = tk.TunableSet(key=_key).with_tunable(tk.Tunable("only", run, prepare=prepared.append))
    client = _UnforkableCpu("its handle does not survive fork()")
    assert isinstance(client, SupportsForkCheck) and not isinstance(CLIENT, SupportsForkCheck)
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("unforkable")
    own = r"tuner 'unforkable': the set's with_isolation\('process'\) has no worker factory, so it forks this process"
    with pytest.raises(tk.TunekitError, match=own + r".*its handle does not survive fork\(\).*worker=build"):
        tuner.execute(client.device_id, client, base.with_isolation("process"), (5,))
    tk.configure(isolation="process")
    setting = r"isolation='process' \(TUNEKIT_ISOLATION or tk.configure\) forks this process.*TUNEKIT_ISOLATION=none"
    with pytest.raises(tk.TunekitError, match=setting):
        tuner.execute(client.device_id, client, base, (5,))
    assert prepared == [] and ran == []
    assert tuner.execute(client.device_id, client, base.with_isolation("none"), (5,)) == 5  # in-process: fine
    safe = _UnforkableCpu(None)  # a client that says it survives fork() is forked as before
    assert tk.LocalTuner[NKey, int]("forkable").execute(safe.device_id, safe, base, (6,)) == 6
    assert _no_children_left(children_before)


def test_tk_search_refuses_a_client_that_cannot_be_forked_before_the_trial_log_is_written(tmp_path: Path) -> None:
    """Regression: tk.search under process isolation forked such a client, and it cannot take a worker factory.

    The refusal offered only timing in this process; it names the search a tuner runs with a worker factory too.
    """
    tk.configure(isolation="process")
    client = _UnforkableCpu("its handle does not survive fork()")
    log = tmp_path / "trials.jsonl"
    fixes = (
        r"To tune on it, search inside a tuner, which takes a worker factory: .*\.with_search\(\.\.\.\)"
        r"\.with_isolation\('process', worker=factory\), run through TUNER\.execute.*; "
        r"or time the candidates in this process: TUNEKIT_ISOLATION=none or tk.configure"
    )
    with pytest.raises(tk.TunekitError, match=r"tk.search\(tuner='s'\): isolation='process'.*" + fixes):
        tk.search(tk.Space(X=[1, 2]), lambda c: lambda: c.X, client, (), tuner="s", log=log)
    assert not log.exists()
