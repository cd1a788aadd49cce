"""Processes that miss the same key at once: one tunes, the others wait and use its winner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

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
    script = tmp_path / "tune_one.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent)))
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


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-2000:]
    return out


def test_two_processes_missing_one_key_tune_it_once_and_agree_on_the_winner(tmp_path: Path) -> None:
    first, second = _start(tmp_path, "first"), _start(tmp_path, "second")
    time.sleep(0.5)  # both are running and polling for the go file
    (tmp_path / "go").touch()
    outputs = [_finish(first), _finish(second)]
    decisions = _decisions(tmp_path, "first") + _decisions(tmp_path, "second")
    assert decisions == ["tuned"], decisions  # the waiter found the winner in the cache: no record of its own
    assert outputs[0] == outputs[1] == "winner fast\n"


def test_a_process_killed_while_it_tunes_leaves_the_key_to_the_waiter(tmp_path: Path) -> None:
    owner = _start(tmp_path, "owner", HANG_IN_TUNE="1")
    (tmp_path / "go").touch()
    time.sleep(1.0)  # the owner holds the lock, hanging inside its tune
    waiter = _start(tmp_path, "waiter")
    time.sleep(1.0)
    assert waiter.poll() is None, "the waiter should be waiting for the owner's lock"
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    assert _finish(waiter) == "winner fast\n"
    assert _decisions(tmp_path, "waiter") == ["tuned"]


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
        owner.wait(timeout=30)


@pytest.fixture(autouse=True)
def _no_leftover_go_file(tmp_path: Path) -> None:
    (tmp_path / "go").unlink(missing_ok=True)


def test_a_tune_nested_in_a_tune_of_the_same_key_does_not_wait_on_itself(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: two sets of one tuner name and key, the inner tuned from an outer candidate, waited 600 s."""
    import logging

    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class Key:
        n: int

    client = CpuClient()
    # Two sets may share a tuner name only when their candidates are the same (one checksum): two
    # objects built from the same definition, one reached from inside the other's candidate.
    inner_set = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
        [tk.Tunable("a", lambda n: n), tk.Tunable("b", lambda n: (time.sleep(0.001), n)[1])]
    )
    inner: tk.LocalTuner[Key, int] = tk.LocalTuner("ops")
    outer_set = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
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
            assert tk.LocalTuner[Key, int]("ops").execute(client.device_id, client, outer_set, (7,)) == 8
    finally:
        tk.remove_record_sink(sink)
    assert "waiting for its winner" not in caplog.text and "waited" not in caplog.text
    assert len(records) == 2  # the inner tune, then the outer one, neither failing a candidate
    assert all(c.status == "measured" for r in records for c in r.candidates), records
