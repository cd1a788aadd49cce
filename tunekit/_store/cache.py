"""The persistent cache: winners in SQLite, JSON values validated by pydantic.

One file per cache root. Rows are namespaced by tunekit's major version, the device id
and the tuner name; the key is the anchored key's canonical JSON. A row carries the
checksum of the tunable set it was measured against, and the winner by *name*: nothing
read from disk is ever executed or unpickled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock
import platformdirs
from pydantic import ValidationError

from tunekit._base.group_share import describe_denied, permission_fix, share_with_group, unwritable
from tunekit._base.persisted import STORED, other_version
from tunekit._base.validation_text import validation_text
from tunekit._base.version import MAJOR
from tunekit._store.cache_file import (
    COLUMNS,
    code,
    damage,
    describe,
    has_no_tables,
    identity,
    is_corrupt,
    is_unwritable,
    quick_problem,
    salvage,
)
from tunekit._values.cache_row import CacheRow, CacheValue

__all__ = ["PersistentCache", "default_cache_dir"]

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
# A key whose tune found no valid candidate: the JSON of a tunekit._store.tune_failure.FailedTune, kept
# apart from the winners so that readers of winners (older versions included) never see one.
_FAILURES_SCHEMA = _SCHEMA.replace("winners", "failed_tunes", 1)
# The record of a winner, stored in the winner's transaction and removed once the record sinks have it: a
# process killed in between leaves it, and the next process of that tuner sends it on (Tuner.recover_records).
_PENDING_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending_records (
    tunekit_major INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    tuner TEXT NOT NULL,
    key TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tunekit_major, device_id, tuner, key)
)
"""


def _empty_cache() -> sqlite3.Connection:
    """An in-memory database with the cache's tables and no row: what a file without tables reads as."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    for schema in (_SCHEMA, _FAILURES_SCHEMA, _PENDING_SCHEMA):
        connection.execute(schema)
    return connection


def default_cache_dir() -> Path:
    """The user cache directory of the platform (``~/.cache/tunekit`` on Linux)."""
    return Path(platformdirs.user_cache_dir("tunekit", appauthor=False))


class PersistentCache:
    """SQLite-backed winners, safe for many threads and processes.

    Every write is one transaction: a reader sees a row whole or not at all, and a
    process killed mid-write leaves the previous committed state (WAL journal). Writers wait for
    each other (busy timeout) instead of failing. Each connection remembers the file it opened: one
    removed, moved or replaced under it (a deleted cache directory, a quarantine by another process)
    is noticed at the next use or right after a write, and the write made again in the file at the
    path. Errors are told apart by their SQLite code (``cache_file``): a damaged file (so reported,
    or failing the ``quick_check`` made when a process first opens it) is moved aside under a file
    lock, after a fresh look confirms it so that concurrent processes agree, and a fresh one started
    with the rows still readable from it; a directory or disk that cannot be written (full, no
    permission) degrades to memory-only with one warning; a database this process may read but not
    write (a read-only directory, another user's file in a shared cache) is still read, and the one
    warning names the file and the ``chmod`` that fixes it; a busy database is never mistaken for a
    broken one. ``read_only=True`` (the reading ``tunekit cache`` commands) writes, creates and
    moves nothing: a damaged file makes it unavailable, with the reason. In a group-writable
    directory the database, its WAL files and the quarantine lock are made group-writable
    (``tunekit._base.group_share``), so every member of the group can store winners. Each row is
    validated on its own: a bad row is reported and re-tuned, the others stay usable.
    """

    FILENAME = "tunekit-cache.sqlite3"
    MAX_VALUE_BYTES = 64 * 1024 * 1024
    """A stored value larger than this is refused unread (a hand-edited file must not exhaust memory)."""
    BUSY_TIMEOUT_S = 30.0
    """How long a reader or writer waits for another process's write before giving up on this one."""

    def __init__(self, directory: Path | str, *, read_only: bool = False) -> None:
        # A str is what most callers have at hand: `directory / FILENAME` would fail on it as "unsupported operand".
        directory = Path(directory)
        self.directory = directory
        self.path = directory / self.FILENAME
        self._local = threading.local()
        self._disabled_reason: str | None = None
        self._read_only_reason: str | None = "opened read-only" if read_only else None
        self._read_only = read_only
        self._warned = False
        self._warned_moved = False
        self._reported_rows: set[str] = set()
        """Unreadable rows already warned about: a tune reads its key's row before and after taking its lock."""
        self._checked: tuple[int, int] | None = None
        """The (device, inode) of the last file found sound: each file is checked once, as it is first opened."""
        try:
            self._connection()
        except OSError as exc:
            self._disable(f"cannot open {self.path}: {exc}{self._permission_advice()}")
        except sqlite3.Error as exc:
            self._disable(f"cannot open {self.path}: {describe(exc)}{self._permission_advice()}")

    @property
    def available(self) -> bool:
        """False once the cache fell back to memory-only."""
        return self._disabled_reason is None

    @property
    def write_refused(self) -> str | None:
        """Why this process stores nothing here (memory-only, or a database it may only read); None when it does."""
        return self._disabled_reason or self._read_only_reason

    def _files(self) -> list[Path]:
        """The database and its WAL files: what every user of the cache must be able to write."""
        return [self.path, *(Path(f"{self.path}{suffix}") for suffix in ("-wal", "-shm"))]

    def _permission_advice(self) -> str:
        """How to fix a cache file or directory this process may not write; empty when permissions are not the cause."""
        denied = unwritable(self._files())
        if denied is None:
            return ""
        return (
            f". This user cannot write {describe_denied(denied)}: every user of a shared cache must be able to "
            f"write it and its files, which the files' owner grants with: {permission_fix(self.directory)} "
            "(tunekit keeps the files it makes in a group-writable cache directory group-writable)"
        )

    def _refuse_writes(self, reason: str) -> None:
        """Keep reading a database this process may not write, and stop trying to write it."""
        self._read_only_reason = reason
        if not self._warned:
            self._warned = True
            _log.warning(
                "tuning cache is read-only for this process: the winners stored there are used, the ones it tunes "
                "are memory-only (other processes tune them again): %s",
                reason,
            )

    def _disable(self, reason: str) -> None:
        self._disabled_reason = reason
        if not self._warned and not self._read_only:  # a read-only command reports why itself
            self._warned = True
            _log.warning(
                "tuning cache is memory-only for this process: %s; the next process tunes its winners again "
                "(TUNEKIT_CACHE_DIR names a directory to keep them in; TUNEKIT_CACHE=0 keeps them in memory unwarned)",
                reason,
            )

    def _connect(self) -> sqlite3.Connection:
        patience = self.BUSY_TIMEOUT_S
        connection = sqlite3.connect(self.path, timeout=patience, isolation_level=None, check_same_thread=False)
        try:
            # Before WAL mode is set: SQLite gives the -wal and -shm files it creates the database's mode.
            share_with_group(self.path)
            # Switching to WAL takes a lock that the busy handler does not wait for when many
            # processes create the cache at once; retry like the busy handler would.
            _retry_busy(lambda: connection.execute("PRAGMA journal_mode = WAL").fetchone(), patience_s=patience)
            connection.execute("PRAGMA synchronous = NORMAL")
            _retry_busy(lambda: connection.execute(_SCHEMA), patience_s=patience)
            _retry_busy(lambda: connection.execute(_FAILURES_SCHEMA), patience_s=patience)
            _retry_busy(lambda: connection.execute(_PENDING_SCHEMA), patience_s=patience)
            connection.execute(f"SELECT {COLUMNS} FROM winners LIMIT 0").fetchall()
        except BaseException:
            connection.close()
            raise
        # made by this user without group access (an older tunekit), or by another process of ours
        for path in self._files():
            share_with_group(path)
        return connection

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that writes nothing: for read-only commands, and a cache this process may not write.

        A WAL database is read through its ``-shm`` file, which SQLite cannot make in a directory this
        process may not write (a read-only mount, another user's cache): with none there, the file is
        read as it is on disk (``immutable``), since no process can be writing it either.
        """
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        try:
            return self._checked_read_only(uri)
        except sqlite3.OperationalError as exc:
            if is_corrupt(exc, self.path) or not is_unwritable(exc):
                raise
            return self._checked_read_only(f"{uri}&immutable=1")

    def _checked_read_only(self, uri: str) -> sqlite3.Connection:
        connection = sqlite3.connect(uri, uri=True, timeout=self.BUSY_TIMEOUT_S, check_same_thread=False)
        try:
            connection.execute(f"SELECT {COLUMNS} FROM winners LIMIT 0").fetchall()
        except sqlite3.OperationalError:
            empty = has_no_tables(connection)
            connection.close()
            if not empty:
                raise
            # A file whose tables were never committed is an empty cache: read as one, since this
            # connection may not create them.
            return _empty_cache()
        except BaseException:
            connection.close()
            raise
        return connection

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection to the file now at ``self.path``."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        # A connection must not cross fork(): a child opens its own (the inherited one is
        # dropped, not closed, since closing it could release the parent's locks).
        if connection is not None and self._local.pid == os.getpid():
            if self._at_path():
                return connection
            self._file_moved()
            self._reset_connection()
            return self._open_or_refuse(after_move=True)
        return self._open_or_refuse()

    def _open_or_refuse(self, *, after_move: bool = False) -> sqlite3.Connection:
        """:meth:`_open`, its directory's errors raised as SQLite's own, which every caller handles."""
        try:
            return self._open(after_move=after_move)
        except OSError as exc:  # the directory cannot be made again, or the quarantine lock not taken
            error = sqlite3.OperationalError(f"cannot open the cache directory {self.directory}: {exc}")
            error.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN
            error.sqlite_errorname = "SQLITE_CANTOPEN"
            raise error from exc

    def _at_path(self) -> bool:
        """Whether this thread's connection still has the file at the path open (not removed, moved or replaced).

        Checked before each use and after each write, so that a winner is never reported stored while it
        went into a file no other process will open: one deleted with its directory, or moved aside as
        damaged by another process.
        """
        opened: tuple[int, int] | None = self._local.identity[0]
        try:
            return identity(self.path) == opened
        except OSError:
            return False

    def _wrote_at_path(self) -> bool:
        """Whether a write just made is in the file at the path: :meth:`_at_path`, and its WAL not moved away.

        A quarantine moves the WAL before the database: a write committed in between went into the
        moved WAL while the database was still at the path. A WAL that changed is judged under the
        quarantine lock, once no quarantine is moving files: SQLite also removes and makes WAL files
        of its own accord as connections come and go.
        """
        if not self._at_path():
            return False
        opened_wal = self._local.identity[1]
        if opened_wal is None or identity(f"{self.path}-wal") == opened_wal:
            return True
        with contextlib.suppress(OSError), self._quarantine_lock():
            pass
        if not self._at_path():
            return False
        self._local.identity = (self._local.identity[0], identity(f"{self.path}-wal"))
        return True

    def _file_moved(self) -> None:
        message = (
            "tuning cache %s was removed or replaced while this process used it (deleted, moved, or moved aside "
            "as damaged by another process); this process now stores its winners in the file at that path"
        )
        level = logging.INFO if self._warned_moved else logging.WARNING
        self._warned_moved = True
        _log.log(level, message, self.path)

    def _open(self, *, after_move: bool = False) -> sqlite3.Connection:
        """A connection to the file at the path, found sound (a damaged file is moved aside first)."""
        if self._read_only:
            connection = self._connect_read_only()
            problem = self._problem(connection)
            if problem is not None:
                connection.close()
                raise sqlite3.DatabaseError(f"the file is damaged ({problem})")
        else:
            if after_move:  # the quarantine that moved it may still be moving its files: wait for it
                self.directory.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(OSError), self._quarantine_lock():
                    pass
            try:
                connection = self._connect_checked()
            except sqlite3.DatabaseError as exc:
                if is_corrupt(exc, self.path) or not is_unwritable(exc):
                    raise
                # A cache this process may not write (a read-only directory or mount) is still read.
                try:
                    connection = self._connect_read_only()
                except sqlite3.Error:
                    raise exc from None
                self._refuse_writes(f"cannot write {self.path}: {describe(exc)}{self._permission_advice()}")
        self._local.connection = connection
        self._local.pid = os.getpid()
        wal = identity(f"{self.path}-wal")
        self._local.identity = (identity(self.path), wal)
        return connection

    def _connect_checked(self) -> sqlite3.Connection:
        """A read-write connection to a sound file: a damaged one is moved aside and its rows salvaged."""
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            connection = self._connect()
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc, self.path):
                raise
            return self._quarantine(describe(exc)) or self._connect()
        problem = self._problem(connection)
        if problem is None:
            return connection
        connection.close()
        return self._quarantine(problem) or self._connect()

    def _problem(self, connection: sqlite3.Connection) -> str | None:
        """What is wrong with the file ``connection`` has open, checked once per file; None when sound."""
        opened = identity(self.path)
        if opened is not None and opened == self._checked:
            return None
        try:
            problem = quick_problem(connection)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc, self.path):
                raise
            problem = describe(exc)
        if problem is None:
            self._checked = opened
        return problem

    def _quarantine_lock(self) -> filelock.FileLock:
        return filelock.FileLock(Path(f"{self.path}.lock"), timeout=60)

    def _quarantine(self, reason: str) -> sqlite3.Connection | None:
        """Move a damaged database aside and start a fresh one holding what rows could be read from it.

        Under a file lock, after a fresh look confirms the damage, so that processes finding it
        damaged together move it once. The fresh file's connection; None when another process
        already replaced the file (or the error did not come from it).
        """
        lock = self._quarantine_lock()
        with lock:
            share_with_group(Path(lock.lock_file))  # the next member of the group to find it damaged takes it too
            found = damage(self.path)
            if found is None:
                return None
            stamp = time.strftime("%Y%m%d-%H%M%S")
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
            # The journal first: a WAL left beside a fresh file would be replayed into it.
            for suffix in ("-wal", "-shm", ""):
                source = Path(str(self.path) + suffix)
                if source.exists():
                    source.replace(Path(str(target) + suffix))
            fresh = self._connect()
            try:
                salvaged = salvage(target, fresh)
            except (sqlite3.Error, OSError) as exc:
                salvaged = 0
                _log.info("tuning cache: reading rows back from %s failed: %s", target, exc)
            self._checked = identity(self.path)
            _log.warning(
                "tuning cache %s is damaged or unreadable (%s); moved to %s and started afresh with the "
                "%d winners salvaged from it",
                self.path,
                reason if reason == found else f"{reason}; {found}",
                target,
                salvaged,
            )
            return fresh

    def _reset_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None and getattr(self._local, "pid", None) == os.getpid():
            with contextlib.suppress(sqlite3.Error):
                connection.close()
        self._local.connection = None

    def _failed(self, exc: sqlite3.Error, doing: str) -> str:
        """Handle an error of ``doing``: quarantine, degrade or just report; the one-line reason."""
        detail = f"tuning cache {self.path}: {doing} failed ({describe(exc)})"
        if self._read_only:
            self._disable(detail)
            return detail
        if is_corrupt(exc, self.path):
            self._reset_connection()
            try:
                fresh = self._quarantine(describe(exc))
                if fresh is not None:
                    fresh.close()
                self._connection()
            except (OSError, sqlite3.Error) as again:
                self._disable(f"{detail}; recovery failed: {again}")
            return detail + "; recovered"
        if code(exc) == sqlite3.SQLITE_READONLY and (advice := self._permission_advice()):
            self._refuse_writes(detail + advice)
        elif is_unwritable(exc):
            self._disable(detail + self._permission_advice())
        else:
            _log.warning(detail)
        return detail

    def _write_or_recover(self, doing: str, *statements: tuple[str, tuple[object, ...]]) -> int | None:
        """:meth:`_write`, made again once on the fresh file when it failed on a damaged one; None when not written."""
        for attempt in range(2):
            try:
                return self._write(*statements)
            except sqlite3.Error as exc:
                damaged = is_corrupt(exc, self.path)
                self._failed(exc, doing)
                if attempt or not damaged or self.write_refused is not None:
                    return None
        return None

    def _write(self, *statements: tuple[str, tuple[object, ...]]) -> int:
        """Run writing statements in one transaction on the file at the path; the rows the first changed.

        Written again when the file was moved or replaced while they ran: what this returns for
        is in the file every other process opens.
        """
        for _ in range(_WRITE_TRIES):
            connection = self._connection()
            if len(statements) == 1:
                changed = int(connection.execute(*statements[0]).rowcount)
            else:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    changed = int(connection.execute(*statements[0]).rowcount)
                    for statement in statements[1:]:
                        connection.execute(*statement)
                    connection.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        connection.execute("ROLLBACK")
                    raise
            if self._wrote_at_path():
                return changed
        raise sqlite3.OperationalError(f"the file kept being removed or replaced ({_WRITE_TRIES} tries)")

    def _row(self, table: str, device_id: str, tuner: str, key: str) -> Any:
        """The raw (checksum, value) of one key in ``table`` (``winners`` or ``failed_tunes``), or None."""
        return (
            self._connection()
            .execute(
                f"SELECT {_RAW_CHECKSUM}, {_RAW_VALUE} FROM {table} "
                "WHERE tunekit_major=? AND device_id=? AND tuner=? AND key=?",
                (self.MAX_VALUE_BYTES, MAJOR, device_id, tuner, key),
            )
            .fetchone()
        )

    def get(self, device_id: str, tuner: str, key: str) -> tuple[str, CacheValue] | str | None:
        """The stored (checksum, value); a reason string when the row is unreadable; None when absent."""
        if not self.available:
            return None
        try:
            row = self._row("winners", device_id, tuner, key)
        except sqlite3.Error as exc:
            return self._failed(exc, "reading a winner")
        if row is None:
            return None
        try:
            checksum, value = _parse(row[0], row[1])
        except _BadRow as exc:
            detail = f"cache row for {tuner}/{key} is invalid and will be re-tuned: {exc}"
            _log.log(logging.DEBUG if detail in self._reported_rows else logging.WARNING, detail)
            self._reported_rows.add(detail)
            return detail
        return checksum, value

    def put(
        self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue, *, record: str | None = None
    ) -> bool:
        """Store a winner atomically (one transaction); False when the cache is memory-only, read-only or busy.

        ``record``, the JSON of the tune's record, is kept in the same transaction until
        :meth:`record_sent` says the record sinks have it.
        """
        if self.write_refused is not None:
            return False
        row: tuple[object, ...] = (MAJOR, device_id, tuner, key, checksum, value.model_dump_json(), time.time())
        statements = [(f"INSERT OR REPLACE INTO winners ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", row)]
        if record is not None:
            kept: tuple[object, ...] = (MAJOR, device_id, tuner, key, record)
            statements.append(
                (f"INSERT OR REPLACE INTO pending_records ({_PENDING_COLUMNS}) VALUES (?, ?, ?, ?, ?)", kept)
            )
        return self._write_or_recover("storing a winner", *statements) is not None

    def put_if_absent(
        self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue
    ) -> tuple[str, CacheValue] | str | None:
        """Store a winner unless the key has one of the same checksum (one transaction); the row the key has now.

        A row of another checksum (a set since changed) is replaced. None when nothing could be
        written or read back (``write_refused`` says why).
        """
        if self.write_refused is not None:
            return None
        row: tuple[object, ...] = (MAJOR, device_id, tuner, key, checksum, value.model_dump_json(), time.time())
        statement = (
            f"INSERT INTO winners ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tunekit_major, device_id, tuner, key) "
            "DO UPDATE SET checksum = excluded.checksum, value = excluded.value, updated = excluded.updated "
            "WHERE winners.checksum <> excluded.checksum",
            row,
        )
        if self._write_or_recover("storing a winner", statement) is None:
            return None
        return self.get(device_id, tuner, key)

    def record_sent(self, device_id: str, tuner: str, key: str) -> None:
        """Forget the record kept with a winner: the record sinks have it."""
        if self.write_refused is not None:
            return
        self._write_or_recover(
            "forgetting a sent record",
            (
                "DELETE FROM pending_records WHERE tunekit_major=? AND device_id=? AND tuner=? AND key=?",
                (MAJOR, device_id, tuner, key),
            ),
        )

    def pending_records(self, device_id: str, tuner: str, key: str | None = None) -> list[tuple[str, str]]:
        """The (key, record JSON) kept with winners whose record was never sent (its process was killed)."""
        if not self.available:
            return []
        query = "SELECT key, record FROM pending_records WHERE tunekit_major=? AND device_id=? AND tuner=?"
        params: tuple[object, ...] = (MAJOR, device_id, tuner)
        if key is not None:
            query, params = query + " AND key=?", (*params, key)
        try:
            fetched = self._connection().execute(query, params).fetchall()
        except sqlite3.OperationalError as exc:
            if str(exc).startswith("no such table"):  # a file no process that keeps records has written
                return []
            self._failed(exc, "reading unsent records")
            return []
        except sqlite3.Error as exc:
            self._failed(exc, "reading unsent records")
            return []
        return [(str(k), str(r)) for k, r in fetched if isinstance(k, str) and isinstance(r, str)]

    def get_failure(self, device_id: str, tuner: str, key: str) -> tuple[str, str] | None:
        """The (checksum, JSON) of the key's recorded failed tune; None when absent or unreadable."""
        if not self.available:
            return None
        try:
            row = self._row("failed_tunes", device_id, tuner, key)
        except sqlite3.Error as exc:
            self._failed(exc, "reading a failed tune")
            return None
        if row is None or not isinstance(row[0], bytes) or not isinstance(row[1], bytes):
            return None
        return row[0].decode("utf-8", errors="replace"), row[1].decode("utf-8", errors="replace")

    def put_failure(self, device_id: str, tuner: str, key: str, checksum: str, payload: str | None) -> bool:
        """Record a failed tune of the key (one transaction), or forget it when ``payload`` is None."""
        if self.write_refused is not None:
            return False
        if payload is None:
            statement: tuple[str, tuple[object, ...]] = (
                "DELETE FROM failed_tunes WHERE tunekit_major=? AND device_id=? AND tuner=? AND key=?",
                (MAJOR, device_id, tuner, key),
            )
        else:
            statement = (
                f"INSERT OR REPLACE INTO failed_tunes ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (MAJOR, device_id, tuner, key, checksum, payload, time.time()),
            )
        return self._write_or_recover("recording a failed tune", statement) is not None

    def failed_keys(self, device_id: str | None = None, tuner: str | None = None) -> list[tuple[str, str, str]]:
        """The (device id, tuner, key) of every recorded failed tune of this major version."""
        if not self.available:
            return []
        clauses, params = self._filters(device_id, tuner)
        try:
            fetched = (
                self._connection()
                .execute(
                    "SELECT CAST(device_id AS BLOB), CAST(tuner AS BLOB), CAST(key AS BLOB) FROM failed_tunes "
                    f"WHERE {clauses} ORDER BY tuner, key",
                    params,
                )
                .fetchall()
            )
        except sqlite3.Error as exc:
            self._failed(exc, "listing failed tunes")
            return []
        return [(_text(device, "?"), _text(name, "?"), _text(key, "?")) for device, name, key in fetched]

    def delete(self, device_id: str | None = None, tuner: str | None = None, key: str | None = None) -> int | None:
        """Remove rows of this major version, optionally only one device's, one tuner's or one key's.

        Recorded failed tunes go too, so their keys are tuned again at the next call; the
        count is of winners. None when nothing could be removed (``write_refused`` says why).
        """
        if self.write_refused is not None:
            return None
        clauses, params = self._filters(device_id, tuner, key)
        return self._write_or_recover(
            "removing winners",
            (f"DELETE FROM winners WHERE {clauses}", params),
            (f"DELETE FROM failed_tunes WHERE {clauses}", params),
            (f"DELETE FROM pending_records WHERE {clauses}", params),
        )

    def delete_winners(
        self, tuner: str | None = None, key: str | None = None, *, device_id: str | None = None
    ) -> int | None:
        """Remove the stored winners of one tuner, of one key (its stored JSON text), or of both; all without either.

        As :meth:`delete`: their recorded failed tunes go too, the count is of winners, None when
        nothing could be removed (``write_refused`` says why).
        """
        if self.write_refused is not None:
            return None
        clauses, params = self._filters(device_id, tuner)
        if key is not None:
            clauses, params = f"{clauses} AND key = ?", (*params, key)
        return self._write_or_recover(
            "removing winners",
            (f"DELETE FROM winners WHERE {clauses}", params),
            (f"DELETE FROM failed_tunes WHERE {clauses}", params),
            (f"DELETE FROM pending_records WHERE {clauses}", params),
        )

    def rows(self, device_id: str | None = None, tuner: str | None = None) -> Iterator[CacheRow | str]:
        """Every row of this major version; an unreadable row yields its reason instead."""
        if not self.available:
            return
        clauses, params = self._filters(device_id, tuner)
        query = (
            "SELECT CAST(device_id AS BLOB), CAST(tuner AS BLOB), CAST(key AS BLOB), "
            f"{_RAW_CHECKSUM}, {_RAW_VALUE} FROM winners WHERE {clauses} ORDER BY tuner, key"
        )
        try:
            fetched = self._connection().execute(query, (self.MAX_VALUE_BYTES, *params)).fetchall()
        except sqlite3.Error as exc:
            yield self._failed(exc, "listing winners")
            return
        for raw_device, raw_tuner, raw_key, raw_checksum, raw_value in fetched:
            name, key = _text(raw_tuner, "?"), _text(raw_key, "?")
            try:
                checksum, value = _parse(raw_checksum, raw_value)
                yield CacheRow(_decode(raw_device, "device_id"), _decode(raw_tuner, "tuner"), key, checksum, value)
            except _BadRow as exc:
                yield f"{name}/{key}: {exc}"

    def owners(self) -> set[tuple[str, str]]:
        """(device id, tuner) of every row of this major version, readable or not (for tools naming what is there)."""
        if not self.available:
            return set()
        query = "SELECT DISTINCT CAST(device_id AS BLOB), CAST(tuner AS BLOB) FROM winners WHERE tunekit_major = ?"
        try:
            fetched = self._connection().execute(query, (MAJOR,)).fetchall()
        except sqlite3.Error as exc:
            self._failed(exc, "listing winners")
            return set()
        return {(_text(device, "?"), _text(tuner, "?")) for device, tuner in fetched}

    @staticmethod
    def _filters(device_id: str | None, tuner: str | None, key: str | None = None) -> tuple[str, tuple[object, ...]]:
        clauses = ["tunekit_major = ?"]
        params: list[object] = [MAJOR]
        if key is not None:
            clauses.append("key = ?")
            params.append(key)
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


class _BadRow(Exception):
    """One stored row that cannot be used; the message says why."""


def _decode(raw: object, column: str) -> str:
    if not isinstance(raw, bytes):
        raise _BadRow(f"{column} is missing")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadRow(f"{column} is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _text(raw: object, default: str) -> str:
    """A column for a message: decoded leniently, shortened."""
    if not isinstance(raw, bytes):
        return default
    text = raw.decode("utf-8", errors="replace")
    return text if len(text) <= 200 else text[:200] + "..."


def _parse(raw_checksum: object, raw_value: object) -> tuple[str, CacheValue]:
    """A row's (checksum, value), validated; raises _BadRow naming what is wrong."""
    checksum = _decode(raw_checksum, "checksum")
    if raw_value is None:
        raise _BadRow(f"value is missing or larger than {PersistentCache.MAX_VALUE_BYTES} bytes")
    text = _decode(raw_value, "value")
    try:
        return checksum, CacheValue.model_validate_json(text, context=STORED)
    except ValidationError as exc:  # its first line is only "1 validation error for CacheValue"
        raise _BadRow(other_version(text, CacheValue) or validation_text(exc, whole="value")) from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise _BadRow(_first_line(exc)) from None


# Every column is read as bytes, so a non-UTF-8 or non-text value fails its own row, not the query.
_RAW_CHECKSUM = "CAST(checksum AS BLOB)"
_RAW_VALUE = "CASE WHEN length(CAST(value AS BLOB)) <= ? THEN CAST(value AS BLOB) END"
_WRITE_TRIES = 3
# Inserts name their columns: a later tunekit of this major version may add a column (with a default),
# and a positional VALUES list would then fail every store of the older processes sharing the file.
_PENDING_COLUMNS = "tunekit_major, device_id, tuner, key, record"


def _retry_busy(run: Callable[[], object], *, patience_s: float) -> None:
    deadline = time.monotonic() + patience_s
    delay = 0.001
    while True:
        try:
            run()
            return
        except sqlite3.OperationalError as exc:
            if code(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
