"""The persistent cache: winners in SQLite, JSON values validated by pydantic.

One file per cache root. Rows are namespaced by tunekit's major version, the device id
and the tuner name; the key is the anchored key's canonical JSON. A row carries the
checksum of the tunable set it was measured against, and the winner by *name*: nothing
read from disk is ever executed or unpickled.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import filelock
import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tunekit._version import MAJOR, __version__

__all__ = ["CacheRow", "CacheValue", "CandidateResult", "PersistentCache", "default_cache_dir"]

_log = logging.getLogger("tunekit.cache")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS winners (
    tunekit_major INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    tuner TEXT NOT NULL,
    key TEXT NOT NULL,
    checksum TEXT NOT NULL,
    value TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (tunekit_major, device_id, tuner, key)
)
"""


class CandidateResult(BaseModel):
    """What was measured for one candidate, kept for reports and demotion."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=1000)
    status: Literal["measured", "failed", "skipped"]
    median_ns: float | None = Field(None, ge=0)
    samples: int = Field(0, ge=0)
    error: str | None = Field(None, max_length=10_000)


class CacheValue(BaseModel):
    """The JSON stored per key.

    ``ranking`` lists the measured candidates fastest first, so a winner that fails at
    launch can be replaced by the runner-up without re-tuning. ``results`` is never read
    back by the tuner; it is kept so ``tunekit cache show`` can say why a winner won.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    winner: str = Field(max_length=1000)
    ranking: list[str] = Field(max_length=100_000)
    results: list[CandidateResult] = Field(default_factory=list, max_length=100_000)
    tunekit_version: str = __version__
    tuned_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True, slots=True)
class CacheRow:
    """One stored winner with its namespace."""

    device_id: str
    tuner: str
    key: str
    checksum: str
    value: CacheValue


def default_cache_dir() -> Path:
    """The user cache directory of the platform (``~/.cache/tunekit`` on Linux)."""
    return Path(platformdirs.user_cache_dir("tunekit", appauthor=False))


class PersistentCache:
    """SQLite-backed winners, safe for many threads and processes.

    WAL lets readers proceed while one process writes; the busy timeout makes writers wait
    instead of failing. A corrupt file is moved aside (under a file lock, so concurrent
    processes agree) and a fresh one started; a directory that cannot be written
    degrades to memory-only with one warning.
    """

    FILENAME = "tunekit-cache.sqlite3"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / self.FILENAME
        self._local = threading.local()
        self._disabled_reason: str | None = None
        self._warned = False
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._connection()
        except (OSError, sqlite3.Error) as exc:
            self._disable(f"cannot open {self.path}: {exc}")

    @property
    def available(self) -> bool:
        """False once the cache fell back to memory-only."""
        return self._disabled_reason is None

    def _disable(self, reason: str) -> None:
        self._disabled_reason = reason
        if not self._warned:
            self._warned = True
            _log.warning("tuning cache is memory-only for this process: %s", reason)

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA busy_timeout = 30000")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(_SCHEMA)
        connection.execute("SELECT count(*) FROM winners").fetchone()
        return connection

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            try:
                connection = self._connect()
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                    raise
                self._quarantine(f"{exc}")
                connection = self._connect()
            self._local.connection = connection
        return connection

    def _quarantine(self, reason: str) -> None:
        """Move a corrupt database aside so the next connection starts a fresh one."""
        lock = filelock.FileLock(str(self.path) + ".lock", timeout=60)
        with lock:
            try:
                probe = sqlite3.connect(self.path, timeout=30.0)
                try:
                    probe.execute("SELECT count(*) FROM winners").fetchone()
                    return  # another process already replaced it
                finally:
                    probe.close()
            except sqlite3.DatabaseError:
                pass
            stamp = time.strftime("%Y%m%d-%H%M%S")
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            _log.warning(
                "tuning cache %s is unreadable (%s); moved to %s and starting afresh", self.path, reason, target
            )
            for suffix in ("", "-wal", "-shm"):
                source = Path(str(self.path) + suffix)
                if source.exists():
                    source.replace(Path(str(target) + suffix))

    def _reset_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()
        self._local.connection = None

    def get(self, device_id: str, tuner: str, key: str) -> tuple[str, CacheValue] | str | None:
        """The stored (checksum, value); a reason string when the row is unreadable; None when absent."""
        if not self.available:
            return None
        try:
            row = (
                self._connection()
                .execute(
                    "SELECT checksum, value FROM winners WHERE tunekit_major=? AND device_id=? AND tuner=? AND key=?",
                    (MAJOR, device_id, tuner, key),
                )
                .fetchone()
            )
        except sqlite3.DatabaseError as exc:
            return self._recover(exc)
        if row is None:
            return None
        checksum, raw = row
        try:
            return str(checksum), CacheValue.model_validate_json(raw)
        except (ValidationError, ValueError, TypeError) as exc:
            detail = f"cache row for {tuner}/{key} is invalid and will be re-tuned: {_first_line(exc)}"
            _log.warning(detail)
            return detail

    def _recover(self, exc: sqlite3.DatabaseError) -> str:
        detail = f"tuning cache {self.path} failed ({exc}); recovered"
        self._reset_connection()
        try:
            self._quarantine(str(exc))
            self._connection()
        except (OSError, sqlite3.Error) as again:
            self._disable(f"{exc}; recovery failed: {again}")
        return detail

    def put(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> bool:
        """Store a winner atomically (one transaction); False when the cache is memory-only."""
        if not self.available:
            return False
        payload = value.model_dump_json()
        try:
            self._connection().execute(
                "INSERT OR REPLACE INTO winners VALUES (?, ?, ?, ?, ?, ?, ?)",
                (MAJOR, device_id, tuner, key, checksum, payload, time.time()),
            )
            return True
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "disk" in str(exc) or "full" in str(exc):
                self._disable(str(exc))
                return False
            _log.warning("cannot store a winner in %s: %s", self.path, exc)
            return False
        except sqlite3.DatabaseError as exc:
            self._recover(exc)
            return False

    def delete(self, device_id: str | None = None, tuner: str | None = None) -> int:
        """Remove rows of this major version, optionally only one device's or one tuner's."""
        if not self.available:
            return 0
        clauses, params = self._filters(device_id, tuner)
        cursor = self._connection().execute(f"DELETE FROM winners WHERE {clauses}", params)
        return int(cursor.rowcount)

    def rows(self, device_id: str | None = None, tuner: str | None = None) -> Iterator[CacheRow | str]:
        """Every row of this major version; an unreadable row yields its reason instead."""
        if not self.available:
            return
        clauses, params = self._filters(device_id, tuner)
        query = f"SELECT device_id, tuner, key, checksum, value FROM winners WHERE {clauses} ORDER BY tuner, key"
        for dev, name, key, checksum, raw in self._connection().execute(query, params).fetchall():
            try:
                yield CacheRow(str(dev), str(name), str(key), str(checksum), CacheValue.model_validate_json(raw))
            except (ValidationError, ValueError, TypeError) as exc:
                yield f"{name}/{key}: {_first_line(exc)}"

    @staticmethod
    def _filters(device_id: str | None, tuner: str | None) -> tuple[str, tuple[object, ...]]:
        clauses = ["tunekit_major = ?"]
        params: list[object] = [MAJOR]
        if device_id is not None:
            clauses.append("device_id = ?")
            params.append(device_id)
        if tuner is not None:
            clauses.append("tuner = ?")
            params.append(tuner)
        return " AND ".join(clauses), tuple(params)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
