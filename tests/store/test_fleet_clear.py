"""``tunekit cache clear`` (or ``LocalTuner.clear(stored=True)``) on the fleet's store makes the fleet tune the
cleared keys again, once.

Two cache directories stand for two hosts sharing one database; each new ``LocalTuner`` stands for a
new process (nothing in memory). A host keeps a copy of every winner it used, and offers it to the
store when it misses a key the store lacks: a clear is recorded, and a copy tuned before it is
refused, so the host tunes the key instead of bringing the cleared winner back.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import psycopg
import pytest
from _cache_keys import CLIENT, key
from _command import run
from pg_server import PgServer

import tunekit as tk
from tunekit._store.pg_store import PostgresStore
from tunekit._store.pg_tables import SCHEMA

pytestmark = pytest.mark.usefixtures("own_fleet_stores")

TUNER = "fleet_clear"


def _tunables() -> tk.TunableSet:
    return tk.TunableSet(key=key).with_tunables([tk.Tunable(n, lambda i, n=n: n) for n in ("double", "twice")])


class _Hosts:
    """Processes started on one of two hosts, every record they emit in one list."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path, self.monkeypatch = tmp_path, monkeypatch
        self.records: list[tk.AutotuneRecord] = []

    def process(self, host: str, tuner: str = TUNER) -> tk.LocalTuner:
        """A new process on ``host``: its tuner, to call before another host's process starts (settings are global)."""
        self.monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(self.tmp_path / host))
        tk.configure()
        return tk.LocalTuner(tuner, sinks=[self.records.append])

    def tuned(self) -> list[tuple[str, int]]:
        """(tuner, key) of every tune since the last call."""
        tuned = [(r.tuner, int(r.key["i"])) for r in self.records if r.decision == "tuned"]
        self.records.clear()
        return tuned

    def copies(self, host: str, tuner: str = TUNER) -> dict[str, str]:
        return {r.key: r.value.winner for r in tk.PersistentCache(self.tmp_path / host).rows(tuner=tuner)}


def _fleet(url: str) -> dict[tuple[str, str], str]:
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT tuner, key, value::json->>'winner' FROM tunekit_winners").fetchall()
    return {(t, k): w for t, k, w in rows}


def _tuned_on_two_hosts(pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[_Hosts, tk.TunableSet]:
    """Host a tunes keys 1 and 2 (and another tuner's key 1); host b reads both from the store and keeps copies."""
    monkeypatch.setenv("TUNEKIT_CACHE_URL", pg_url)
    hosts, tunables = _Hosts(tmp_path, monkeypatch), _tunables()
    a = hosts.process("host-a")
    for i in (1, 2):
        a.execute(CLIENT.device_id, CLIENT, tunables, (i,))
    b = hosts.process("host-b")
    for i in (1, 2):
        b.execute(CLIENT.device_id, CLIENT, tunables, (i,))  # read from the store, kept as host b's copies
    hosts.process("host-a", "other_op").execute(CLIENT.device_id, CLIENT, tunables, (1,))
    assert hosts.tuned() == [(TUNER, 1), (TUNER, 2), ("other_op", 1)]
    return hosts, tunables


@pytest.mark.subprocess
def test_after_a_fleet_clear_each_cleared_key_is_tuned_once_and_no_host_offers_its_old_copy(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hosts, tunables = _tuned_on_two_hosts(pg_url, monkeypatch, tmp_path)
    assert len(hosts.copies("host-b")) == 2

    cleared = run("cache", "clear", "--yes", "--tuner", TUNER).stdout
    assert "removed 2 stored winners of tuner 'fleet_clear'" in cleared, cleared
    assert "the fleet tunes these keys again" in cleared and "not offered back" in cleared, cleared
    assert set(_fleet(pg_url)) == {("other_op", '{"i":1}')}
    assert len(hosts.copies("host-a")) == len(hosts.copies("host-b")) == 2  # the hosts still hold their copies

    # Each host's next process: a key it misses is tuned, once for the fleet, not brought back from its copy.
    hosts.process("host-a").execute(CLIENT.device_id, CLIENT, tunables, (1,))
    b = hosts.process("host-b")
    for i in (1, 2):
        b.execute(CLIENT.device_id, CLIENT, tunables, (i,))
    hosts.process("host-a").execute(CLIENT.device_id, CLIENT, tunables, (2,))
    assert hosts.tuned() == [(TUNER, 1), (TUNER, 2)]  # key 1 by host a, key 2 by host b; each once
    fleet = _fleet(pg_url)
    assert hosts.copies("host-a") == hosts.copies("host-b") == {k: w for (t, k), w in fleet.items() if t == TUNER}
    # A winner tuned after the clear is a winner like any: a third host reads it and tunes nothing.
    hosts.process("host-c").execute(CLIENT.device_id, CLIENT, tunables, (1,))
    assert hosts.tuned() == []


@pytest.mark.subprocess
def test_a_clear_covers_what_it_removed_only(pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TUNEKIT_CACHE_URL", pg_url)
    hosts, tunables = _Hosts(tmp_path, monkeypatch), _tunables()
    a = hosts.process("host-a")
    for i in (1, 2):
        a.execute(CLIENT.device_id, CLIENT, tunables, (i,))
    other = hosts.process("host-a", "other_op")
    other.execute(CLIENT.device_id, CLIENT, tunables, (1,))
    hosts.tuned()
    cleared = run("cache", "clear", "--yes", "--tuner", TUNER, "--key", "i=1").stdout
    assert "removed 1 stored winner of tuner 'fleet_clear' with i=1" in cleared, cleared
    # Rows gone without a clear (the other tuner's, key 2 of this one, removed by hand): the copies come back.
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("DELETE FROM tunekit_winners")
    for tuner, i in ((TUNER, 1), (TUNER, 2), ("other_op", 1)):
        hosts.process("host-a", tuner).execute(CLIENT.device_id, CLIENT, tunables, (i,))
    assert hosts.tuned() == [(TUNER, 1)]  # only the cleared key is tuned again
    assert set(_fleet(pg_url)) == {(TUNER, '{"i":1}'), (TUNER, '{"i":2}'), ("other_op", '{"i":1}')}


@pytest.mark.subprocess
def test_a_database_without_the_table_of_clears_still_serves_and_the_clear_says_what_it_cannot_do(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A database set up by a tunekit that kept no clears, used by a role that may not create tables."""
    role = f"rows_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(SCHEMA)
        connection.execute(f"CREATE ROLE {role} LOGIN")
        connection.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON tunekit_winners TO {role}")
        connection.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    monkeypatch.setenv("TUNEKIT_CACHE_URL", pg_url.replace("tunekit@", f"{role}@"))
    hosts = _Hosts(tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="tunekit.cache"):
        for i in (1, 2):
            hosts.process("host-a").execute(CLIENT.device_id, CLIENT, _tunables(), (i,))
    assert len(_fleet(pg_url)) == 2  # winners are shared as ever
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "tunekit.cache"]
    assert len(warnings) == 1 and "cannot create the table tunekit_clears" in warnings[0], warnings
    cleared = run("cache", "clear", "--yes").stdout
    assert "removed 2 stored winners" in cleared and "no table tunekit_clears" in cleared, cleared
    assert "--store local" in cleared
    store = PostgresStore(pg_url.replace("tunekit@", f"{role}@"))
    try:
        assert store.get(CLIENT.device_id, TUNER, '{"i":1}') is None and not store.clears_recorded
    finally:
        store.close()


@pytest.mark.subprocess
def test_a_tuners_clear_stored_clears_the_fleets_store_and_this_hosts_copies_and_no_host_offers_its_copy_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hosts, tunables = _tuned_on_two_hosts(pg_url, monkeypatch, tmp_path)

    assert hosts.process("host-a").clear(stored=True) is None
    assert set(_fleet(pg_url)) == {("other_op", '{"i":1}')}
    assert hosts.copies("host-a") == {} and len(hosts.copies("host-a", "other_op")) == 1
    assert len(hosts.copies("host-b")) == 2  # another host's copies are its own: the recorded clear outweighs them

    b = hosts.process("host-b")
    for i in (1, 2):
        b.execute(CLIENT.device_id, CLIENT, tunables, (i,))
    a = hosts.process("host-a")
    for i in (1, 2):
        a.execute(CLIENT.device_id, CLIENT, tunables, (i,))
    assert hosts.tuned() == [(TUNER, 1), (TUNER, 2)]  # by host b, once for the fleet; host a reads them
    assert (
        hosts.copies("host-a") == hosts.copies("host-b") == {k: w for (t, k), w in _fleet(pg_url).items() if t == TUNER}
    )


@pytest.mark.subprocess
def test_clear_stored_while_the_fleets_database_is_away_raises_naming_it_and_still_clears_this_hosts_copies(
    own_server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fleet's winners would be served again once it answers: the caller is told, not left to find out."""
    url = own_server.url()
    monkeypatch.setenv("TUNEKIT_CACHE_URL", url)
    hosts, tunables = _Hosts(tmp_path, monkeypatch), _tunables()
    a = hosts.process("host-a")
    a.execute(CLIENT.device_id, CLIENT, tunables, (1,))
    own_server.kill()
    with pytest.raises(
        OSError, match=r"tuner 'fleet_clear' from the fleet store postgresql://.*did not answer"
    ) as raised:
        hosts.process("host-a").clear(stored=True)
    assert "nor from" not in str(raised.value)  # this host's copies were removed
    assert hosts.copies("host-a") == {}
    own_server.restart()
    assert set(_fleet(url)) == {(TUNER, '{"i":1}')}
