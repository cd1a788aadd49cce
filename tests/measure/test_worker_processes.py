"""The worker's own processes: one that cannot be started blames no candidate, and a candidate's helpers die with it.

Both with real processes: fork really fails (RLIMIT_NPROC, as an unprivileged user), and the
helper a candidate starts is a real ``sleep 600``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _procs import in_child

import tunekit as tk
from tunekit._measure import worker
from tunekit._measure.worker import ProcessRunner, SpawnRecipe
from tunekit.backend import CandidateFailed
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: int


def _key(n: int) -> NKey:
    return NKey(n=n)


def _quick(n: int) -> int:
    time.sleep(0.0005)
    return n


def _quicker(n: int) -> int:
    time.sleep(0.0002)
    return n


SET = tk.TunableSet(key=_key).with_tunables([tk.Tunable("quick", _quick), tk.Tunable("quicker", _quicker)])


def build_quick(key: dict[str, Any]) -> tuple[CpuClient, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """A spawned worker's factory for ``SET``."""
    return CpuClient(), SET, (key["n"],)


def build(key: dict[str, Any]) -> tuple[CpuClient, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """A spawned worker's factory: the set whose candidate leaves a helper behind (see ``_helper_then``)."""
    return CpuClient(), _helper_set(key["how"], Path(key["pid_file"])), (key["n"],)


# -- a worker that cannot be started --------------------------------------------------------


@pytest.fixture
def shared_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache directory an unprivileged user can write (pytest's tmp_path is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="tunekit-nproc-"))
    root.chmod(0o777)
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(root / "cache"))
    tk.configure()
    yield root / "cache"
    shutil.rmtree(root, ignore_errors=True)


def _unprivileged_user() -> pwd.struct_passwd:
    """The user the starved child runs as: root ignores RLIMIT_NPROC, so fork would not fail."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root without a 'nobody' user: RLIMIT_NPROC cannot be made to apply")


def _starve(user: pwd.struct_passwd) -> None:
    """From now on this process can start neither a process nor a thread (RLIMIT_NPROC at what it has)."""
    worker._from_lasting_thread(lambda: None)  # the worker's starter thread exists already, as in a process that forked
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))


@pytest.mark.subprocess
@pytest.mark.parametrize("spawned", [False, True], ids=["forked", "spawned"])
def test_a_worker_that_cannot_be_forked_is_no_candidates_failure_and_is_not_remembered(
    spawned: bool, shared_cache: Path
) -> None:
    """Regression: fork() failing (EAGAIN) failed every candidate, the tune went into the failure memory, and another
    process that could fork got NoValidKernelFound for the key for 60 s."""
    user = _unprivileged_user()
    tunables = SET.with_isolation("process", worker=build_quick if spawned else None)
    name = f"cannot-start-{'spawned' if spawned else 'forked'}"

    def starved() -> list[str]:
        _starve(user)
        with contextlib.suppress(BlockingIOError):
            pid = os.fork()  # the premise: this process really cannot fork
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            return ["fork still works: the limit did not apply"]
        tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(name)
        seen = []
        for _ in range(2):  # the second call must not be answered from a remembered failure
            try:
                tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,))
            except Exception as exc:
                seen.append(f"{type(exc).__name__}: {exc}")
        return seen

    # The interpreter's own modules may be unreadable to that user (a Python under /root): import them all first.
    warm: tk.LocalTuner[NKey, int] = tk.LocalTuner("imports-everything")
    assert warm.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
    seen = in_child(starved)
    assert len(seen) == 2, seen
    for line in seen:
        assert line.startswith("WorkerStartFailed: "), line
        assert "could not start the isolated worker process" in line and "Resource temporarily unavailable" in line
    cache = tk.PersistentCache(shared_cache)
    assert cache.failed_keys() == []
    # This process can fork: it tunes the key, not repeating another process's failure.
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(name)
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,)) == 5
    assert any(not isinstance(row, str) and row.tuner == name for row in cache.rows()), "the winner is stored"


def test_worker_start_failed_is_exported() -> None:
    assert issubclass(tk.WorkerStartFailed, tk.TunekitError)
    assert tk.WorkerStartFailed.__module__ == "tunekit._base.errors"


# -- a candidate's own helpers ----------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaps has ended: PID 1 in a container may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _helper_then(how: str, pid_file: Path) -> tk.Tunable[int]:
    """A candidate that starts a helper (``sleep 600``) and then hangs, crashes or returns."""

    def run(n: int) -> int:
        helper = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)  # inherits the caller's stdout
        pid_file.write_text(str(helper.pid))
        if how == "hang":
            time.sleep(600)
        elif how == "crash":
            os._exit(3)
        return n

    return tk.Tunable("helper", run)


def _helper_set(how: str, pid_file: Path) -> tk.TunableSet[NKey, int]:
    return tk.TunableSet(key=_key).with_tunables([_helper_then(how, pid_file), tk.Tunable("quick", _quick)])


@pytest.mark.subprocess
@pytest.mark.parametrize("how", ["hang", "crash", "return"])
@pytest.mark.parametrize("spawned", [False, True], ids=["forked", "spawned"])
def test_a_candidates_helper_process_dies_with_the_worker(how: str, spawned: bool, tmp_path: Path) -> None:
    """Regression: the worker was killed by PID, so a helper its candidate started outlived it (under PID 1),
    holding the caller's stdout open."""
    pid_file = tmp_path / "helper.pid"
    tunables = _helper_set(how, pid_file)
    recipe = SpawnRecipe(f"{__name__}:build", {"how": how, "pid_file": str(pid_file), "n": 5}) if spawned else None
    # Only "hang" waits out the limit, so only it is kept short; it still must let the candidate start its
    # helper first on a loaded machine. A crash or a return ends the request at once, whatever the limit.
    runner = ProcessRunner(CLIENT, tunables, (5,), timeout_s=5.0 if how == "hang" else 60.0, recipe=recipe)
    helper = tunables.index_of("helper")
    assert helper is not None
    try:
        try:
            runner.warmup(helper)
        except CandidateFailed as exc:
            assert how != "return", exc
            assert exc.stage == ("timeout" if how == "hang" else "crash")
        pid = int(pid_file.read_text())
        if how == "return":
            assert _alive(pid)  # its worker lives on, and so does the helper, until the runner closes
    finally:
        runner.close()
    try:
        # A ceiling for a hang, not a speed: the wait ends as soon as the helper is gone.
        assert _gone_within(pid, 60.0), f"the candidate's helper {pid} outlived its worker"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
