"""Processes that miss the same key at once: one tunes, the others wait and use its winner."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _command import run
from _procs import drop_root, in_child, tunekit_messages

import tunekit as tk
from tunekit._store import tune_lock as _tune_lock
from tunekit._store.cache import PersistentCache
from tunekit._store.tune_lock import _lock_opened, lock_path, tune_lock
from tunekit_backends.cpu import CpuClient

SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {tests!r})
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class Key:
        n: int

    def candidate(name, seconds):
        def run(n):
            if name == "fast" and os.environ.get("HANG_IN_TUNE") == "1":
                time.sleep(600)  # this process is killed while it tunes, holding the lock
            time.sleep(seconds)
            return name
        return tk.Tunable(name, run)

    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
        [candidate("slow", 0.03), candidate("fast", 0.01), candidate("medium", 0.02)]
    )
    go = sys.argv[1]
    while not os.path.exists(go):  # both processes start tuning at the same moment
        time.sleep(0.005)
    client = CpuClient()
    print("winner", tk.LocalTuner("lock-test").execute(client.device_id, client, tunables, (1,)))
    """
)


def _start(tmp_path: Path, name: str, **env: str) -> subprocess.Popen[str]:
    """A process tuning one key once go is touched. Each test ends its processes with communicate(), which closes
    their pipes (wait() leaves them to the garbage collector: a ResourceWarning in whichever test runs then)."""
    script = tmp_path / "tune_one.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).resolve().parents[1])))
    full_env = dict(
        os.environ,
        TUNEKIT_CACHE_DIR=str(tmp_path / "cache"),
        TUNEKIT_RECORD=str(tmp_path / f"{name}.jsonl"),
        TUNEKIT_PROGRESS="0",
        **env,
    )
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "go")],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _decisions(tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["decision"] for line in path.read_text().splitlines() if line.strip()]


def _lock_files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "cache" / "locks").glob("*"))


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-2000:]
    return out


@pytest.mark.subprocess
def test_two_processes_missing_one_key_tune_it_once_and_agree_on_the_winner(tmp_path: Path) -> None:
    first, second = _start(tmp_path, "first"), _start(tmp_path, "second")
    time.sleep(0.5)  # both are running and polling for the go file
    (tmp_path / "go").touch()
    outputs = [_finish(first), _finish(second)]
    decisions = _decisions(tmp_path, "first") + _decisions(tmp_path, "second")
    assert decisions == ["tuned"], decisions  # the waiter found the winner in the cache: no record of its own
    assert outputs[0] == outputs[1] == "winner fast\n"
    assert _lock_files(tmp_path) == []  # regression: one lock file per key ever tuned stayed behind


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_process_killed_while_it_tunes_leaves_the_key_to_the_waiter(tmp_path: Path) -> None:
    owner = _start(tmp_path, "owner", HANG_IN_TUNE="1")
    (tmp_path / "go").touch()
    time.sleep(1.0)  # the owner holds the lock, hanging inside its tune
    waiter = _start(tmp_path, "waiter")
    time.sleep(1.0)
    assert waiter.poll() is None, "the waiter should be waiting for the owner's lock"
    owner.send_signal(signal.SIGKILL)
    owner.communicate(timeout=30)
    assert _finish(waiter) == "winner fast\n"
    assert _decisions(tmp_path, "waiter") == ["tuned"]
    assert _lock_files(tmp_path) == []  # the waiter took over the dead owner's file and removed it


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_waiter_that_runs_out_of_patience_tunes_the_key_itself(tmp_path: Path) -> None:
    owner = _start(tmp_path, "owner", HANG_IN_TUNE="1")
    (tmp_path / "go").touch()
    time.sleep(1.0)
    try:
        waiter = _start(tmp_path, "waiter", TUNEKIT_TUNE_LOCK_TIMEOUT_S="0.5")
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err[-2000:]
        assert out == "winner fast\n"
        assert "waited 0 s for another process tuning key" in err or "waited 1 s" in err, err
        assert _decisions(tmp_path, "waiter") == ["tuned"]
    finally:
        owner.kill()
        owner.communicate(timeout=30)


@pytest.fixture(autouse=True)
def _no_leftover_go_file(tmp_path: Path) -> None:
    (tmp_path / "go").unlink(missing_ok=True)


def _inner(tuner: str) -> tuple[Any, Any, Any, Any]:
    """A key class, a CPU client, and the set and tuner that an outer tune of the same key reaches into."""

    @tk.autotune_key
    class Key:
        n: int

    inner_set = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
        [tk.Tunable("a", lambda n: n), tk.Tunable("b", lambda n: (time.sleep(0.001), n)[1])]
    )
    inner: tk.LocalTuner[Any, int] = tk.LocalTuner(tuner)
    return Key, CpuClient(), inner_set, inner


def test_a_tune_nested_in_a_tune_of_the_same_key_does_not_wait_on_itself(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: two sets of one tuner name and key, the inner tuned from an outer candidate, waited 600 s."""

    # Two sets may share a tuner name only when their candidates are the same (one checksum): two
    # objects built from the same definition, one reached from inside the other's candidate.
    key_class, client, inner_set, inner = _inner("ops")
    outer_set = tk.TunableSet(key=lambda n: key_class(n=n)).with_tunables(
        [
            tk.Tunable("a", lambda n: inner.execute(client.device_id, client, inner_set, (n,)) + 1),
            tk.Tunable("b", lambda n: (time.sleep(0.002), n + 1)[1]),
        ]
    )
    assert inner_set.checksum() == outer_set.checksum()
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    tk.configure(tune_lock_timeout_s=30)
    try:
        with caplog.at_level(logging.INFO, logger="tunekit.tuner"):
            assert tk.LocalTuner[Any, int]("ops").execute(client.device_id, client, outer_set, (7,)) == 8
    finally:
        tk.remove_record_sink(sink)
    assert "waiting for its winner" not in caplog.text and "waited" not in caplog.text
    assert len(records) == 2  # the inner tune, then the outer one, neither failing a candidate
    assert all(c.status == "measured" for r in records for c in r.candidates), records


def test_a_tune_nested_in_a_prepare_hook_of_a_tune_of_the_same_key_does_not_wait_on_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: the hook runs on a prepare thread, which did not know its tuning thread held the lock (30 s)."""

    key_class, client, inner_set, inner = _inner("ops-prepared")
    outer_set = tk.TunableSet(key=lambda n: key_class(n=n)).with_tunables(
        [
            tk.Tunable("a", lambda n: n, prepare=lambda n: inner.execute(client.device_id, client, inner_set, (n,))),
            tk.Tunable("b", lambda n: (time.sleep(0.002), n)[1]),
        ]
    )
    assert inner_set.checksum() == outer_set.checksum()
    tk.configure(tune_lock_timeout_s=30)
    with caplog.at_level(logging.INFO, logger="tunekit.tuner"):
        assert tk.LocalTuner[Any, int]("ops-prepared").execute(client.device_id, client, outer_set, (7,)) == 7
    assert "waiting for its winner" not in caplog.text and "waited" not in caplog.text


# Each process takes the lock of one key over and over; inside it, it creates a marker file that
# must not exist (O_EXCL), so two holders at once fail loudly. The lock file is removed at every
# release, so the processes keep racing on files being removed and created again.
HAMMER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from tunekit._store.cache import PersistentCache
    from tunekit._store.tune_lock import tune_lock

    cache_dir, marker, go, rounds = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    cache = PersistentCache(cache_dir)
    while not go.exists():
        time.sleep(0.005)
    for _ in range(rounds):
        with tune_lock(cache, "dev", "hammer", '{"n":1}', timeout_s=60) as held:
            assert held
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # FileExistsError: two holders
            time.sleep(0.001)
            os.close(fd)
            marker.unlink()
    print("done")
    """
)


@pytest.mark.subprocess
def test_processes_racing_on_removed_lock_files_never_hold_one_key_together(tmp_path: Path) -> None:
    script = tmp_path / "hammer.py"
    script.write_text(HAMMER)
    cache_dir, marker, go = tmp_path / "cache", tmp_path / "inside", tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), str(cache_dir), str(marker), str(go), "40"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    time.sleep(0.5)
    go.touch()
    assert [_finish(p) for p in processes] == ["done\n"] * 4
    assert _lock_files(tmp_path) == []


HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tunekit._store.cache import PersistentCache
    from tunekit._store.tune_lock import tune_lock

    with tune_lock(PersistentCache(Path(sys.argv[1])), "dev", "hold", sys.argv[2], timeout_s=60) as held:
        print("held" if held else "not held", flush=True)
        time.sleep(600)
    """
)


def _hold(tmp_path: Path, key_json: str, script_name: str = "hold.py") -> subprocess.Popen[str]:
    script = tmp_path / script_name
    script.write_text(HOLD)
    process = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "cache"), key_json],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n", process.stderr
    return process


@pytest.mark.subprocess
def test_cache_clear_removes_the_lock_file_of_a_killed_tune_and_keeps_a_held_one(tmp_path: Path) -> None:
    killed = _hold(tmp_path, '{"n":1}')
    killed.kill()
    killed.communicate(timeout=30)
    assert len(_lock_files(tmp_path)) == 1  # SIGKILL: the file stays behind
    running = _hold(tmp_path, '{"n":2}')
    try:
        assert len(_lock_files(tmp_path)) == 2
        done = run("cache", "clear", env={"TUNEKIT_CACHE_DIR": str(tmp_path / "cache")})
        assert "removed 1 lock file left by killed processes" in done.stdout, done.stdout
        assert len(_lock_files(tmp_path)) == 1
        # The running tune still holds its key: this process cannot take it.
        cache = PersistentCache(tmp_path / "cache")
        with tune_lock(cache, "dev", "hold", '{"n":2}', timeout_s=0.2) as held:
            assert not held
        with tune_lock(cache, "dev", "hold", '{"n":1}', timeout_s=0.2) as held:
            assert held
    finally:
        running.kill()
        running.communicate(timeout=30)


RELEASE_ON_ENTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tunekit._store.cache import PersistentCache
    from tunekit._store.tune_lock import tune_lock

    with tune_lock(PersistentCache(Path(sys.argv[1])), "dev", "hold", sys.argv[2], timeout_s=60) as held:
        print("held" if held else "not held", flush=True)
        sys.stdin.readline()
    """
)


@pytest.mark.subprocess
def test_a_process_that_opened_the_file_before_its_holder_removed_it_does_not_take_the_lock(tmp_path: Path) -> None:
    """The race that makes filelock keep its Unix lock files (tox-dev/filelock#574), played step by step."""

    script = tmp_path / "release_on_enter.py"
    script.write_text(RELEASE_ON_ENTER)
    first = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "cache"), '{"n":1}'],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None and first.stdin is not None
    assert first.stdout.readline() == "held\n"
    [path] = (tmp_path / "cache" / "locks").glob("*.lock")
    late = os.open(path, os.O_RDWR)  # this process opened the file while the first held it ...
    first.stdin.write("\n")
    first.stdin.flush()
    first.communicate(timeout=30)
    assert first.returncode == 0  # ... the first removed it as it released it ...
    second = _hold(tmp_path, '{"n":1}', script_name="hold_second.py")  # ... and a third made a new one and holds it
    try:
        assert _lock_opened(path, late) == "removed"  # locking the removed file must not count as holding the key
        probe = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the lock at the path is the second holder's
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    finally:
        second.kill()
        second.communicate(timeout=30)


@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX flock protocol")
def test_a_lock_whose_identity_check_fails_is_released_or_given_up_not_held_or_spun_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected stat error left the key locked for the process's life; stat and fstat disagreeing spun forever.

    Neither file-system condition happens here, so the check after locking is replaced for this test.
    """

    path = tmp_path / "k.lock"

    def failing(path: Path, fd: int) -> bool:
        raise PermissionError(13, "stat refused", str(path))

    monkeypatch.setattr(_tune_lock, "_names", failing)
    with pytest.raises(PermissionError):
        _tune_lock._try_lock(path)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # would raise had the failed attempt kept its lock
    finally:
        os.close(fd)
    checks: list[int] = []
    monkeypatch.setattr(_tune_lock, "_names", lambda path, fd: checks.append(fd) or False)
    assert _tune_lock._try_lock(path) is None
    assert len(checks) == _tune_lock._REOPENS


def _umask() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the umask from /proc")
def test_a_cache_directory_a_group_shares_gets_lock_files_the_group_can_lock(tmp_path: Path) -> None:
    """Regression: lock files were 0644 in a group-writable cache, so the group's other users tuned without the lock."""

    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir()
    shared.chmod(0o2775)  # what a team sets up for a cache its members share
    private.mkdir()
    private.chmod(0o755)
    for directory, group in ((shared, 0o060), (private, 0)):
        with tune_lock(PersistentCache(directory), "dev", "t", '{"n":1}', timeout_s=1) as held:
            assert held
            [path] = (directory / "locks").glob("*.lock")
            locks_mode, file_mode = ((directory / "locks").stat().st_mode, path.stat().st_mode)
        assert bool(locks_mode & 0o020) == bool(group), oct(locks_mode)
        assert file_mode & 0o777 == (0o666 & ~_umask()) | group, oct(file_mode)  # the umask decides the rest


def _shared_cache(top: str) -> tuple[Path, Path]:
    """A cache directory every user may write (the second user here is nobody) and the lock file of one key."""

    os.chmod(top, 0o755)
    cache_dir = Path(top) / "cache"
    (cache_dir / "locks").mkdir(parents=True)
    for directory in (cache_dir, cache_dir / "locks"):
        directory.chmod(0o777)
    path = lock_path(cache_dir, "dev", "t", '{"n":1}')
    path.touch()
    return cache_dir, path


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_lock_file_this_user_may_only_read_still_locks_the_key() -> None:
    """Regression: a lock file that could not be opened read-write meant tuning without the lock, silently."""

    with tempfile.TemporaryDirectory() as top:
        cache_dir, path = _shared_cache(top)
        # Stands for another user's lock file in a shared cache (0644, made before lock files were
        # group-writable): the child, a second user when this runs as root, may read it, not write it.
        path.chmod(0o444)

        def child() -> dict[str, object]:
            drop_root()
            writable = os.access(path, os.W_OK)
            with tune_lock(PersistentCache(cache_dir), "dev", "t", '{"n":1}', timeout_s=0.2) as held:
                probe = os.open(path, os.O_RDONLY)  # another open file: contends like another process
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    locked = False
                except BlockingIOError:
                    locked = True
                finally:
                    os.close(probe)
            return {"writable": writable, "held": held, "locked": locked}

        assert in_child(child) == {"writable": False, "held": True, "locked": True}


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_lock_file_this_user_cannot_open_is_a_warning_naming_it_and_the_fix() -> None:
    """Regression: a lock file that could not be opened at all meant tuning without the lock, said only at INFO."""

    with tempfile.TemporaryDirectory() as top:
        cache_dir, path = _shared_cache(top)
        path.chmod(0o000)  # another user's private file: the child (nobody, when this runs as root) cannot open it

        def child() -> dict[str, object]:
            drop_root()
            caught = tunekit_messages(logging.WARNING)
            for _ in range(2):
                with tune_lock(PersistentCache(cache_dir), "dev", "t", '{"n":1}', timeout_s=0.2) as held:
                    pass
            return {"held": held, "warnings": caught}

        got = in_child(child)
    assert got["held"] is False
    [warning] = got["warnings"]  # once, not once per tune
    assert str(path) in warning and f"chmod -R g+rwX {cache_dir}" in warning, warning


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_locks_directory_made_before_lock_files_were_shared_is_shared_by_its_owner(tmp_path: Path) -> None:
    """Regression: a 0755 locks/ made by an earlier tunekit stayed so in a shared cache: the group locked nothing."""

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    (shared / "locks").mkdir()
    (shared / "locks").chmod(0o755)
    with tune_lock(PersistentCache(shared), "dev", "t", '{"n":1}', timeout_s=1) as held:
        assert held
    assert (shared / "locks").stat().st_mode & 0o070 == 0o070


@tk.autotune_key
class _IKey:
    i: int


def _doubling() -> tk.TunableSet[_IKey, int]:
    return tk.TunableSet(key=lambda i: _IKey(i=i)).with_tunables(
        [tk.Tunable("double", lambda i: 2 * i), tk.Tunable("twice", lambda i: i + i)]
    )


def _killed_once_stored(cache_dir: Path, tuner_name: str, i: int) -> None:
    """In a child: tune ``i`` and be killed (SIGKILL) once the winner is stored, still holding the tune lock."""

    def die(record: tk.AutotuneRecord) -> None:
        if record.stored:
            os.kill(os.getpid(), signal.SIGKILL)

    tk.configure(cache_dir=cache_dir, samples=1, warmup=0, adaptive=False)
    tuner: tk.LocalTuner[_IKey, int] = tk.LocalTuner(tuner_name, sinks=[die])
    client = CpuClient()
    tuner.execute(client.device_id, client, tuner.init(_doubling), (i,))


@pytest.mark.subprocess
def test_a_lock_file_left_for_a_stored_key_is_removed_by_the_next_process_reading_it(isolated_settings: Path) -> None:
    """Regression: a process killed between storing and releasing left a lock file only `cache clear` removed."""
    client = CpuClient()
    path = lock_path(isolated_settings, client.device_id, "killed", json.dumps({"i": 5}, separators=(",", ":")))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _killed_once_stored(isolated_settings, "killed", 5)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert path.exists()
    cache = PersistentCache(isolated_settings)
    stored = [r for r in cache.rows(tuner="killed") if isinstance(r, tk.CacheRow)]

    def next_process() -> int:
        tuner: tk.LocalTuner[_IKey, int] = tk.LocalTuner("killed")
        return tuner.execute(client.device_id, client, tuner.init(_doubling), (5,))

    assert in_child(next_process) == 10
    assert not path.exists()
    assert [r for r in cache.rows(tuner="killed") if isinstance(r, tk.CacheRow)] == stored  # read, not tuned again


def _killed_between_storing_and_recording(client: CpuClient, cache_dir: Path, records: Path, i: int) -> None:
    """Tune key ``i`` of tuner "unrecorded" in a forked child, killed once its winner is stored, before its record."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            tk.configure(cache_dir=cache_dir, samples=1, warmup=0, adaptive=False)

            def die(record: tk.AutotuneRecord) -> None:
                if record.stored:  # a sink before the file's: the kill lands before the line is appended
                    os.kill(os.getpid(), signal.SIGKILL)

            tuner: tk.LocalTuner[_IKey, int] = tk.LocalTuner("unrecorded", sinks=[die, tk.JsonlSink(records)])
            tuner.execute(client.device_id, client, tuner.init(_doubling), (i,))
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@pytest.mark.subprocess
def test_a_kill_between_storing_a_winner_and_appending_its_record_leaves_the_record_for_the_next_process(
    isolated_settings: Path, tmp_path: Path
) -> None:
    """Regression: a process killed after committing its winner, before writing its record line, lost the record."""
    client = CpuClient()
    records = tmp_path / "records.jsonl"
    _killed_between_storing_and_recording(client, isolated_settings, records, 7)
    assert not records.exists() or records.read_text() == ""

    def next_process() -> list[object]:
        tuner: tk.LocalTuner[_IKey, int] = tk.LocalTuner("unrecorded", sinks=[tk.JsonlSink(records)])
        return [tuner.execute(client.device_id, client, tuner.init(_doubling), (i,)) for i in (7, 8)]

    assert in_child(next_process) == [14, 16]
    lines = [line.record for line in tk.read_records(records) if isinstance(line, tk.RecordLine)]
    assert sorted((r.key["i"], r.decision, r.stored) for r in lines) == [(7, "tuned", True), (8, "tuned", True)]
    assert in_child(next_process) == [14, 16]  # sent once, not again by each later process
    assert len(list(tk.read_records(records))) == 2


@pytest.mark.subprocess
def test_a_record_left_unsent_after_a_process_looked_for_unsent_ones_is_sent_when_it_reads_that_winner(
    isolated_settings: Path, tmp_path: Path
) -> None:
    """Regression: a process looks for unsent records once, at its first read of the cache. A campaign worker
    that had done so, then retried the job of a worker killed between storing its winner and sending its
    record, read the winner and never sent the record (a flake of tests/campaign/test_campaign_ray.py)."""
    client = CpuClient()
    records = tmp_path / "records.jsonl"

    def survivor() -> list[object]:
        tuner: tk.LocalTuner[_IKey, int] = tk.LocalTuner("unrecorded", sinks=[tk.JsonlSink(records)])
        first = tuner.execute(client.device_id, client, tuner.init(_doubling), (8,))  # its one look for unsent records
        _killed_between_storing_and_recording(client, isolated_settings, records, 7)
        return [first, tuner.execute(client.device_id, client, tuner.init(_doubling), (7,))]

    assert in_child(survivor) == [16, 14]
    lines = [line.record for line in tk.read_records(records) if isinstance(line, tk.RecordLine)]
    assert sorted((r.key["i"], r.decision, r.stored) for r in lines) == [(7, "tuned", True), (8, "tuned", True)]
    cache = PersistentCache(isolated_settings)
    assert cache.pending_records(client.device_id, "unrecorded") == [], "sent once: no later process sends it again"
