"""Winners tuned while the fleet's database was away are offered to it once it answers again.

A process that tunes keys during an outage keeps the winners the database could not take, retries it
on a timer (not only at its next miss: a service with every key in memory misses nothing more) and
offers them by the rule of any store: a key the database has a winner of the same set for keeps it,
and a key the fleet was cleared of since is not brought back.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from _cache_keys import CLIENT, key
from pg_server import PgServer

import tunekit as tk
from tunekit._base.settings import current
from tunekit._store.fleet import fleet_store
from tunekit._store.pg_store import PostgresStore
from tunekit._values.cache_row import CacheValue

pytestmark = pytest.mark.usefixtures("own_fleet_stores")

WORKER = textwrap.dedent(
    """
    import os, sys, time
    import tunekit as tk
    from tunekit._store.pg_store import PostgresStore
    from tunekit_backends.cpu import CpuClient

    PostgresStore.FIRST_RETRY_S = PostgresStore.LAST_RETRY_S = 0.2  # the test waits seconds, not half a minute

    @tk.autotune_key
    class Key:
        n: int

    def candidate(name):
        def run(n):
            sum(range(200))  # the same work in every candidate: the winner is chosen by noise
            return name
        return tk.Tunable(name, run)

    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([candidate(c) for c in "abc"])
    client = CpuClient()
    tuner = tk.LocalTuner("outage")
    for n in map(int, sys.argv[1].split(",")):
        print(n, tuner.execute(client.device_id, client, tunables, (n,)), flush=True)
    if len(sys.argv) > 2:  # a long-running service: every key in memory, it misses nothing more
        deadline = time.monotonic() + 120
        while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
            time.sleep(0.02)
    """
)


def _start(tmp_path: Path, name: str, url: str, keys: str, *wait: str) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    if not script.exists():
        script.write_text(WORKER)
    return subprocess.Popen(
        [sys.executable, str(script), keys, *wait],
        env=dict(
            os.environ,
            TUNEKIT_CACHE_DIR=str(tmp_path / f"cache-{name}"),
            TUNEKIT_CACHE_URL=url,
            TUNEKIT_RECORD=str(tmp_path / f"records-{name}.jsonl"),
            TUNEKIT_SAMPLES="3",
            TUNEKIT_ADAPTIVE="0",
            TUNEKIT_WARMUP_MS="1",
            TUNEKIT_PROGRESS="0",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _winners_printed(process: subprocess.Popen[str], count: int) -> dict[int, str]:
    assert process.stdout is not None
    winners: dict[int, str] = {}
    for _ in range(count):
        line = process.stdout.readline()
        assert line, process.communicate(timeout=60)[1][-3000:]
        n, winner = line.split()
        winners[int(n)] = winner
    return winners


def _stored(url: str, tuner: str) -> dict[int, str]:
    with psycopg.connect(url) as connection:
        if connection.execute("SELECT to_regclass('tunekit_winners')").fetchone() == (None,):
            return {}  # no process has reached the database yet
        rows = connection.execute("SELECT key, value FROM tunekit_winners WHERE tuner = %s", (tuner,)).fetchall()
    return {int(next(iter(json.loads(k).values()))): CacheValue.model_validate_json(v).winner for k, v in rows}


def _tuned(records: Path) -> list[int]:
    if not records.exists():
        return []
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    return [int(r["key"]["n"]) for r in lines if r["decision"] == "tuned"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_winners_tuned_during_an_outage_reach_the_store_once_it_answers_and_another_host_tunes_nothing(
    own_server: PgServer, tmp_path: Path
) -> None:
    url = own_server.url()
    own_server.kill()  # the database is away when the service starts
    service = _start(tmp_path, "a", url, "1,2", str(tmp_path / "done"))
    try:
        tuned_alone = _winners_printed(service, 2)
        assert _tuned(tmp_path / "records-a.jsonl") == [1, 2]
        own_server.restart()
        deadline = time.monotonic() + 60
        while set(_stored(url, "outage")) != {1, 2}:  # the service misses no key: its retry timer shares them
            assert service.poll() is None, service.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the service never shared the winners it tuned alone"
            time.sleep(0.1)
        assert _stored(url, "outage") == tuned_alone
    finally:
        (tmp_path / "done").touch()
        _, log = service.communicate(timeout=60)
    assert service.returncode == 0, log[-3000:]
    assert len([line for line in log.splitlines() if "tuning store" in line]) == 1, log  # warned once, at INFO after
    # Another host (its own empty cache): both winners come from the store, nothing is tuned.
    other = _start(tmp_path, "b", url, "1,2")
    assert _winners_printed(other, 2) == tuned_alone
    _, log = other.communicate(timeout=60)
    assert other.returncode == 0, log[-3000:]
    assert _tuned(tmp_path / "records-b.jsonl") == []


def _names(first: str) -> tk.TunableSet:
    names = [first, *(n for n in ("double", "twice", "thrice") if n != first)]
    return tk.TunableSet(key=key).with_tunables([tk.Tunable(n, lambda i, n=n: n) for n in names])


@pytest.mark.subprocess
def test_a_kept_winner_yields_to_the_stores_and_the_process_keeps_its_own_in_memory(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, isolated_settings: Path
) -> None:
    """The outage is this process's own (its role loses its rights), so a rival can store first meanwhile."""
    admin = PostgresStore(pg_url)
    assert admin.get("dev", "op", "k") is None  # the table exists, to grant on
    role = f"host_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN")
        connection.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON tunekit_winners TO {role}")
        connection.execute(f"GRANT SELECT, INSERT, UPDATE ON tunekit_clears TO {role}")
    monkeypatch.setattr(PostgresStore, "FIRST_RETRY_S", 0.1)
    monkeypatch.setattr(PostgresStore, "LAST_RETRY_S", 0.1)
    monkeypatch.setenv("TUNEKIT_CACHE_URL", pg_url.replace("tunekit@", f"{role}@"))
    tk.configure()
    tunables = _names("double")
    tuner: tk.LocalTuner = tk.LocalTuner("outage")
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f"REVOKE ALL ON tunekit_winners FROM {role}")
    caplog.set_level(logging.INFO, logger="tunekit.cache")
    own = {i: tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,)) for i in (2, 3, 4)}
    store = fleet_store(current())
    assert isinstance(store, PostgresStore)
    assert store.unshared == 3
    # Meanwhile another host, which reaches the database, stores its own winner of key 2 first.
    rival = next(n for n in ("double", "twice", "thrice") if n != own[2])
    stored = admin.put_if_absent(
        CLIENT.device_id, "outage", '{"i":2}', tunables.checksum(), CacheValue(winner=rival, ranking=[rival])
    )
    assert isinstance(stored, tuple)
    # ... and an operator clears key 4 from the fleet: the winner tuned before that is not brought back.
    assert admin.delete(CLIENT.device_id, "outage", '{"i":4}') == 0
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON tunekit_winners TO {role}")
    deadline = time.monotonic() + 30
    while store.unshared:  # no call misses: the retry timer offers them
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.05)
    admin.close()
    assert _stored(pg_url, "outage") == {2: rival, 3: own[3]}  # key 2 kept the winner stored first
    assert "offered the 3 winners tuned while it was away: 1 stored, 1 yielded to the winner" in caplog.text
    assert "1 refused (the fleet was cleared of their keys since)" in caplog.text
    # This process goes on with the winner it measured; its host's next process uses the store's.
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == own[2]
    records: list[tk.AutotuneRecord] = []
    next_process: tk.LocalTuner = tk.LocalTuner("outage", sinks=[records.append])
    assert next_process.execute(CLIENT.device_id, CLIENT, tunables, (2,)) == rival
    assert records == []
    local = tk.PersistentCache(isolated_settings).get(CLIENT.device_id, "outage", '{"i":2}')
    assert isinstance(local, tuple)
    assert local[1].winner == rival  # the host's copy now agrees with the fleet
