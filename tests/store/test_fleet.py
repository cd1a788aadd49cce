"""A fleet: 8 processes, each with its own cache directory, sharing one PostgreSQL store.

100 keys, of which 50 every process tunes and 50 are dealt out, each to one process. The candidates do
the same work, so which one wins is down to noise: processes that tuned a key each on its own
would disagree, and only the shared store makes them agree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

PROCESSES = 8
SHARED = 50
OWN = 50

WORKER = textwrap.dedent(
    """
    import json, os, random, sys, time
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class Key:
        n: int

    def candidate(name):
        def run(n):
            if n == int(os.environ.get("HANG_ON_KEY", "-1")):
                open(os.environ["HANG_MARK"], "w").close()
                time.sleep(600)  # killed here, holding the key's tune lock
            sum(range(200))  # the same work in every candidate: the winner is chosen by noise
            return name
        return tk.Tunable(name, run)

    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([candidate(c) for c in "abc"])
    index, go, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    keys = list(range({shared})) + [1000 + j for j in range({own}) if j % {processes} == index]
    random.Random(index).shuffle(keys)  # processes meet on the shared keys in different orders
    if "HANG_ON_KEY" in os.environ:
        keys.remove(int(os.environ["HANG_ON_KEY"]))
        keys.insert(0, int(os.environ["HANG_ON_KEY"]))
    while not os.path.exists(go):
        time.sleep(0.005)
    client = CpuClient()
    tuner = tk.LocalTuner("fleet")
    winners = {{}}
    for n in keys:
        winners[n] = tuner.execute(client.device_id, client, tunables, (n,))
    with open(out, "w") as f:
        json.dump(winners, f)
    """
)


def _start(tmp_path: Path, index: int, url: str, **env: str) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    if not script.exists():
        # Written once: rewritten for each process, it was empty for a moment, and a process started just
        # before read it so, ran nothing and exited 0 (its keys then "lost": the flake seen in CI).
        script.write_text(WORKER.format(shared=SHARED, own=OWN, processes=PROCESSES))
    return subprocess.Popen(
        [sys.executable, str(script), str(index), str(tmp_path / "go"), str(tmp_path / f"winners{index}.json")],
        env=dict(
            os.environ,
            TUNEKIT_CACHE_DIR=str(tmp_path / f"cache{index}"),
            TUNEKIT_CACHE_URL=url,
            TUNEKIT_RECORD=str(tmp_path / f"records{index}.jsonl"),
            TUNEKIT_SAMPLES="3",
            TUNEKIT_ADAPTIVE="0",
            TUNEKIT_WARMUP_MS="1",
            **env,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _tunes(tmp_path: Path) -> Counter[int]:
    """How many times each key was tuned, over every process's records."""
    tuned: Counter[int] = Counter()
    for path in tmp_path.glob("records*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["decision"] == "tuned":
                tuned[int(record["key"]["n"])] += 1
    return tuned


def _stored(url: str) -> dict[int, str]:
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT key, value FROM tunekit_winners WHERE tuner = 'fleet'").fetchall()
    return {int(json.loads(key)["n"]): json.loads(value)["winner"] for key, value in rows}


def _all_keys(processes: range) -> set[int]:
    return set(range(SHARED)) | {1000 + j for j in range(OWN) if j % PROCESSES in processes}


def _finish(process: subprocess.Popen[str]) -> str:
    """The process's log, once it has ended well."""
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return err


def _store_lines(logs: list[str]) -> str:
    """Each process's lines about the store (an outage it warned of): why a process shared no winner."""
    return "\n".join(
        f"process {index}: {line}" for index, log in enumerate(logs) for line in log.splitlines() if "store" in line
    )


@pytest.mark.subprocess
@pytest.mark.slow
def test_eight_processes_tune_each_key_once_and_agree_on_every_winner(pg_url: str, tmp_path: Path) -> None:
    processes = [_start(tmp_path, i, pg_url) for i in range(PROCESSES)]
    time.sleep(1.0)
    (tmp_path / "go").touch()
    logs = [_finish(process) for process in processes]
    keys = _all_keys(range(PROCESSES))
    stored = _stored(pg_url)
    assert set(stored) == keys, (sorted(keys - set(stored)), _store_lines(logs))  # 0 lost
    assert _tunes(tmp_path) == Counter(dict.fromkeys(keys, 1))  # each key tuned once, fleet-wide
    for i in range(PROCESSES):
        seen = {int(k): v for k, v in json.loads((tmp_path / f"winners{i}.json").read_text()).items()}
        assert seen == {k: stored[k] for k in seen}  # every process uses the stored winner
    # Each host's own cache holds what it used: it serves them when the database is away.
    assert len(list((tmp_path / "cache0").glob("*.sqlite3"))) == 1


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_process_killed_holding_a_key_lock_loses_nothing(pg_url: str, tmp_path: Path) -> None:
    hang_key, mark = 7, tmp_path / "hanging"
    victim = _start(tmp_path, 0, pg_url, HANG_ON_KEY=str(hang_key), HANG_MARK=str(mark))
    (tmp_path / "go").touch()
    deadline = time.monotonic() + 120
    while not mark.exists():
        assert victim.poll() is None, victim.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    others = [_start(tmp_path, i, pg_url) for i in range(1, PROCESSES)]
    time.sleep(3.0)  # the others are under way, some of them waiting for the victim's lock on key 7
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate(timeout=60)
    logs = ["", *(_finish(process) for process in others)]  # index i: process i (0, the victim, has none)
    keys = _all_keys(range(1, PROCESSES)) | set(range(SHARED))
    stored = _stored(pg_url)
    # 0 lost: the killed process's key was tuned by another. (Seen once in CI, not reproduced since: one
    # process's own keys all missing; the message says whether that process warned of a store outage.)
    assert keys <= set(stored), (sorted(keys - set(stored)), _store_lines(logs))
    tunes = _tunes(tmp_path)
    assert {k: tunes[k] for k in keys} == dict.fromkeys(keys, 1)  # the others tuned each key once between them
    for i in range(1, PROCESSES):
        seen = {int(k): v for k, v in json.loads((tmp_path / f"winners{i}.json").read_text()).items()}
        assert seen == {k: stored[k] for k in seen}
