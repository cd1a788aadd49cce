"""A PostgreSQL server for the store tests: one per pytest process (each xdist worker), a fresh database per test.

One server per worker, not one shared: no worker waits on another's start or outlives the server
it uses, and each test's database is its own (advisory locks are per database), so tests never
meet. Without a server (no PostgreSQL installed, none startable) the tests are skipped, with the
reason; under CI (``CI=true``) they fail instead: CI installs PostgreSQL (``.ci/run``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from pg_server import PgServer, ServerUnavailable

from tunekit._store import fleet as _fleet
from tunekit._store.pg_store import PostgresStore


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"no PostgreSQL server for the store tests under CI: {reason}")
    pytest.skip(f"no PostgreSQL server: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        server = PgServer.start()
    except (ServerUnavailable, OSError) as exc:
        _unavailable(str(exc))
        raise  # not reached: _unavailable skips or fails
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of the test's own, to stop and start again."""
    try:
        server = PgServer.start()
    except (ServerUnavailable, OSError) as exc:
        _unavailable(str(exc))
        raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database on the worker's server."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture
def own_fleet_stores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fleet stores a test opens are its own (not another test's, at another URL), closed after it."""
    opened: dict[str, object] = {}
    monkeypatch.setattr(_fleet, "_opened", opened)
    yield
    for store in opened.values():
        if isinstance(store, PostgresStore):
            store.close()
