"""The PostgreSQL store as the tuner uses it: chosen by TUNEKIT_CACHE_URL, an outage, a lost race, a missing extra."""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from _cache_keys import CLIENT, IKey, key
from pg_server import PgServer

import tunekit as tk
from tunekit._store.pg_store import PostgresStore, redacted
from tunekit._values.cache_row import CacheValue

pytestmark = pytest.mark.usefixtures("own_fleet_stores")


def _tuner_with_store(url: str, monkeypatch: pytest.MonkeyPatch) -> tk.LocalTuner:
    monkeypatch.setenv("TUNEKIT_CACHE_URL", url)
    tk.configure()
    return tk.LocalTuner("pg-op")


def _stored(url: str) -> dict[int, str]:
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT key, value FROM tunekit_winners").fetchall()
    return {int(json.loads(k)["i"]): CacheValue.model_validate_json(v).winner for k, v in rows}


def _set(first: str = "double") -> tk.TunableSet[IKey, str]:
    names = [first, *(n for n in ("double", "twice", "thrice") if n != first)]
    return tk.TunableSet(key=key).with_tunables([tk.Tunable(n, lambda i, n=n: n) for n in names])


def test_a_url_of_another_scheme_is_refused_where_the_setting_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_CACHE_URL", "mysql://user:secret@db/tunekit")
    with pytest.raises(ValueError, match="no postgresql:// URL") as refused:
        tk.configure()
    assert "secret" not in str(refused.value) and "user:***@db/tunekit" in str(refused.value)  # messages reach logs
    monkeypatch.setenv("TUNEKIT_CACHE_URL", "mysql://user@/tunekit?host=/run/db&password=secret")
    with pytest.raises(ValueError, match="no postgresql:// URL") as refused:
        tk.configure()
    assert "secret" not in str(refused.value) and "host=/run/db&password=***" in str(refused.value)
    monkeypatch.setenv("TUNEKIT_CACHE_URL", "  ")
    assert tk.configure().cache_url is None


def test_a_password_is_left_out_of_what_the_store_says() -> None:
    assert redacted("postgresql://me:s3cret@db.example:5432/tk") == "postgresql://me:***@db.example:5432/tk"
    assert redacted("postgresql://me@db/tk") == "postgresql://me@db/tk"
    # libpq's query form, common with a unix socket: the listing header and the store's warnings showed it.
    assert (
        redacted("postgresql://me@/tk?host=/run/pg&password=s3cret&sslmode=disable")
        == "postgresql://me@/tk?host=/run/pg&password=***&sslmode=disable"
    )
    assert redacted("postgresql://me:a@/tk?password=b") == "postgresql://me:***@/tk?password=***"


def test_a_missing_postgres_extra_fails_at_the_first_tune_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what importing it does when it is not installed
    tuner = _tuner_with_store("postgresql://tunekit@/nowhere", monkeypatch)
    with pytest.raises(ImportError, match=r"pip install 'tunekit\[postgres\]'"):
        tuner.execute(CLIENT.device_id, CLIENT, _set(), (1,))


def test_with_the_cache_or_autotuning_off_the_store_is_not_even_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # opening the store would raise ImportError
    monkeypatch.setenv("TUNEKIT_CACHE", "0")
    tuner = _tuner_with_store("postgresql://tunekit@/nowhere", monkeypatch)
    assert tuner.execute(CLIENT.device_id, CLIENT, _set(), (1,)) in {"double", "twice", "thrice"}
    monkeypatch.setenv("TUNEKIT_CACHE", "1")
    monkeypatch.setenv("TUNEKIT_AUTOTUNE", "0")
    tk.configure()
    assert tk.LocalTuner("pg-op").execute(CLIENT.device_id, CLIENT, _set(), (2,)) == "double"  # the plan order


@pytest.mark.subprocess
def test_a_tuned_winner_is_stored_in_the_database_and_read_by_a_fresh_tuner(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tuner = _tuner_with_store(pg_url, monkeypatch)
    winner = tuner.execute(CLIENT.device_id, CLIENT, _set(), (1,))
    assert _stored(pg_url) == {1: winner}
    # Another host: its own (empty) cache directory, the same database: it reads, it does not tune.
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(tmp_path / "other-host"))
    tk.configure()
    records: list[tk.AutotuneRecord] = []
    other = tk.LocalTuner("pg-op", sinks=[records.append])
    assert other.execute(CLIENT.device_id, CLIENT, _set(), (1,)) == winner
    assert [r.decision for r in records] == []  # nothing tuned: the fleet's winner was used
    assert isinstance(tk.PersistentCache(tmp_path / "other-host").get(CLIENT.device_id, "pg-op", '{"i":1}'), tuple)


@pytest.mark.subprocess
def test_the_loser_of_a_race_for_a_key_adopts_the_winner_stored_first(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, isolated_settings: Path
) -> None:
    """A process whose lock wait timed out tunes too: the winner it measured yields to the one stored first."""
    first_store = PostgresStore(pg_url)
    tunables = _set()
    checksum = tunables.checksum()

    def tune_with_a_rival(i: int) -> str:
        # While this process tunes, another stores its winner of the key.
        first_store.put_if_absent(
            CLIENT.device_id, "pg-op", '{"i":7}', checksum, CacheValue(winner="thrice", ranking=["thrice", "double"])
        )
        return "double"

    rigged = tk.TunableSet(key=key).with_tunables(
        [
            tk.Tunable("double", tune_with_a_rival),
            tk.Tunable("twice", lambda i: "twice"),
            tk.Tunable("thrice", lambda i: "thrice"),
        ]
    )
    assert rigged.checksum() == checksum
    tuner = _tuner_with_store(pg_url, monkeypatch)
    try:
        assert tuner.execute(CLIENT.device_id, CLIENT, rigged, (7,)) == "thrice"
    finally:
        first_store.close()
    assert _stored(pg_url) == {7: "thrice"}
    local = tk.PersistentCache(isolated_settings).get(CLIENT.device_id, "pg-op", '{"i":7}')
    assert isinstance(local, tuple)
    assert local[1].winner == "thrice"  # this host's copy agrees with the fleet


@pytest.mark.subprocess
def test_a_database_that_goes_away_leaves_one_warning_and_is_used_again_once_back(
    own_server: PgServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url = own_server.url()
    monkeypatch.setattr(PostgresStore, "FIRST_RETRY_S", 0.2)
    monkeypatch.setattr(PostgresStore, "LAST_RETRY_S", 0.2)
    tuner = _tuner_with_store(url, monkeypatch)
    tunables = _set()
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (1,))
    own_server.kill()
    caplog.set_level(logging.INFO, logger="tunekit")
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (1,))  # in memory: the store is not read on a hit
    assert [r for r in caplog.records if r.name == "tunekit.cache"] == []
    for i in (2, 3, 4):  # tuned here, each one stored in this host's cache only
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,))
    warnings = [r for r in caplog.records if r.name == "tunekit.cache" and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "serves the winners it has" in warnings[0].getMessage()
    assert url in warnings[0].getMessage()
    own_server.restart()
    time.sleep(0.3)  # past the backoff
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,))
    assert "answers again" in caplog.text
    assert set(_stored(url)) == {1, 2, 3, 4, 5}  # the winners tuned meanwhile were offered once it answered
    assert len([r for r in caplog.records if r.name == "tunekit.cache" and r.levelno >= logging.WARNING]) == 1


@pytest.mark.subprocess
def test_a_user_that_may_only_read_and_write_rows_uses_a_table_made_before(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """CREATE TABLE IF NOT EXISTS needs the right to create even when the table exists: it is not asked for."""
    owner = PostgresStore(pg_url)
    assert owner.get("dev", "op", "k") is None  # the table is made by a user that may
    owner.close()
    role = f"rw_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON tunekit_winners TO {role}")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE ON tunekit_clears TO {role}")  # what fleets.md says to grant
        admin.execute(f"CREATE ROLE no_{role} LOGIN")
    writer = PostgresStore(pg_url.replace("tunekit@", f"{role}@"))
    stored = writer.put_if_absent("dev", "op", "k", "sum", CacheValue(winner="a", ranking=["a"]))
    writer.close()
    assert isinstance(stored, tuple)
    assert stored[1].winner == "a"
    # One that may not even read them: the tune goes on without the store, told once.
    outsider = PostgresStore(pg_url.replace("tunekit@", f"no_{role}@"))
    first, second = outsider.get("dev", "op", "k"), outsider.get("dev", "op", "k")
    outsider.close()
    assert isinstance(first, str)
    assert "permission denied" in first
    assert isinstance(second, str)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "tunekit.cache"]) == 1
