"""The fleet's store: winners in one PostgreSQL database that every host of a fleet reads and writes.

Chosen by ``TUNEKIT_CACHE_URL=postgresql://...`` (the optional extra ``tunekit[postgres]``, psycopg 3).
Each key is tuned once across the fleet: its tune lock is a session-level advisory lock
(``pg_advisory_lock``) taken on a connection of its own, so a tuner that crashes or is killed
while it holds one loses its connection, and the database releases the lock. Every process gets
the same winner: a winner is stored with ``INSERT ... ON CONFLICT DO NOTHING`` (for rows of the
same checksum) and read back, so the loser of a race adopts the row that was first.

A database that goes away is warned about once: the process goes on with what it has (the
winners in memory and in its own cache), then tries again after a backoff that grows from one
second to half a minute, and carries on once it answers. The winners it could not store meanwhile
are kept in memory and offered once the database answers (a timer retries while there are some,
so a process that misses no more keys shares them too), by the rule of any store: a key the
database has a winner of the same set for keeps that one.

A delete is a clear the fleet remembers (``tunekit._store.pg_tables``): a winner tuned before it,
which a host offers from its own cache, is refused, and the key is tuned again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from tunekit._base.extras import import_extra
from tunekit._base.persisted import STORED, other_version
from tunekit._base.self_call import locked_by_parent
from tunekit._base.url_text import redacted
from tunekit._base.validation_text import validation_text
from tunekit._base.version import MAJOR
from tunekit._store.pg_tables import (
    CLEAR_RECORD,
    CLEARS,
    CLEARS_SCHEMA,
    GET,
    PUT,
    PUT_UNLESS_CLEARED,
    REPLACE,
    SCHEMA,
    WINNERS,
    filters,
    lock_id,
)
from tunekit._store.store_protocol import StoredWinner
from tunekit._values.cache_row import CacheRow, CacheValue

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore", "redacted"]

_log = logging.getLogger("tunekit.cache")

_T = TypeVar("_T")

_TABLES_FOUND = (
    "SELECT to_regclass(%s), to_regclass(%s), CASE WHEN to_regclass(%s) IS NULL THEN false ELSE "
    "has_table_privilege(%s, 'SELECT') AND has_table_privilege(%s, 'INSERT') AND has_table_privilege(%s, 'UPDATE') "
    "END"
)
_GRANT = f"GRANT SELECT, INSERT, UPDATE, DELETE ON {WINNERS} TO ...; GRANT SELECT, INSERT, UPDATE ON {CLEARS} TO ..."

_held: ContextVar[frozenset[int]] = ContextVar("tunekit_held_pg_locks", default=frozenset())
"""Advisory lock ids the running code's tunes hold: a nested tune of the same key goes on instead of waiting on
itself (each lock has a connection of its own, which the database would make wait on the other)."""


class _Down(Exception):
    """The database cannot be reached now; the message says why."""


class PostgresStore:
    """Winners in a PostgreSQL database, one tune per key across every process connected to it.

    Thread-safe: reads and writes share one connection under a lock (they run on a miss only, never
    on the cache-hit path); each held tune lock has a connection of its own. A process forked from
    this one opens its own connections.
    """

    MAX_VALUE_BYTES = 64 * 1024 * 1024
    """A stored value larger than this is refused unread, as in the SQLite cache."""
    CONNECT_TIMEOUT_S = 5
    FIRST_RETRY_S = 1.0
    LAST_RETRY_S = 30.0

    def __init__(self, url: str) -> None:
        self._psycopg: Any = import_extra("psycopg", "postgres", f"the tuning store {redacted(url)}")
        self.url = url
        self.where = redacted(url)
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Any] | None = None
        self._pid = os.getpid()
        self._retry_at = 0.0
        self._backoff_s = self.FIRST_RETRY_S
        self._down_reason: str | None = None
        self._warned = False
        self._unshared: dict[tuple[str, str, str], tuple[str, CacheValue]] = {}
        """Winners the database could not take when they were tuned, by (device id, tuner, key): offered once it
        answers. Held in memory only: a process that exits first leaves them in its host's cache, whose next
        process offers each when it misses the key."""
        self._timer: threading.Timer | None = None
        self._clears = True
        self._clears_missing: str | None = None
        self._warned_clears = False
        """Whether the database has the table of clears (a user that may not create it, where no one has, works
        without: its clears are not recorded, and hosts' copies are offered back as before there was one)."""

    @property
    def available(self) -> bool:
        return self._down_reason is None or time.monotonic() >= self._retry_at

    @property
    def unshared(self) -> int:
        """How many winners tuned while the database was away wait to be offered to it."""
        return len(self._unshared)

    def close(self) -> None:
        """Close the shared connection (held tune locks keep theirs) and stop retrying; the next use opens it again.

        Winners still unshared stay: the next use that reaches the database offers them.
        """
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._drop()

    # -- connection and outages --------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        connection: psycopg.Connection[Any] = self._psycopg.connect(
            self.url, autocommit=True, connect_timeout=self.CONNECT_TIMEOUT_S, application_name="tunekit"
        )
        return connection

    def _forked(self) -> None:
        """In a process forked from the one that opened the store: drop the parent's connection (unclosed), its
        timer (which did not cross the fork) and its unshared winners (the parent offers them); under ``_lock``."""
        if self._pid != os.getpid():
            self._connection, self._pid, self._timer = None, os.getpid(), None
            self._unshared = {}

    def _shared(self) -> psycopg.Connection[Any]:
        """The connection reads and writes share, made (with the tables) when there is none; under ``_lock``."""
        self._forked()
        if self._connection is None or self._connection.closed:
            connection = self._connect()
            try:
                self._clears = self._tables(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _tables(self, connection: psycopg.Connection[Any]) -> bool:
        """Make the tables that are missing; whether clears can be read and recorded (warned about once when not).

        Looked up first: CREATE TABLE IF NOT EXISTS needs the right to create tables even when the
        table is there, which a user that only reads and writes rows lacks. Such a user, on a
        database made by a tunekit that kept no clears, or not granted the table of clears, goes on
        without them: winners are shared as ever, and a clear is not held against hosts' copies.
        """
        found = connection.execute(_TABLES_FOUND, (WINNERS, CLEARS, CLEARS, CLEARS, CLEARS, CLEARS)).fetchone()
        winners, clears, granted = (None, None, False) if found is None else found
        missing = None
        if winners is None or clears is None:
            with connection.transaction():
                # Processes that create the tables at once would collide in the catalog: one at a time.
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id("", "", "schema"),))
                if winners is None:
                    connection.execute(SCHEMA)
                if clears is None:
                    try:
                        with connection.transaction():  # a savepoint: the winners' table stays made
                            connection.execute(CLEARS_SCHEMA)
                        granted = True
                    except self._psycopg.errors.InsufficientPrivilege as exc:
                        missing = f"cannot create the table {CLEARS} ({_first_line(exc)})"
        elif not granted:
            missing = f"this user may not read and write the table {CLEARS}"
        self._clears_missing = missing
        return missing is None

    def _warn_clears_missing(self) -> None:
        """Say once, after the database answered, that clears are not kept here: before, an outage says enough."""
        if self._clears_missing is not None and not self._warned_clears:
            self._warned_clears = True
            _log.warning(
                "tuning store %s: %s: a `tunekit cache clear` of the fleet's winners is not held against hosts' "
                "copies here, so this process offers its copies of cleared keys back instead of tuning them again. "
                "Connect once as a user that may create tables, and grant the others: %s",
                self.where,
                self._clears_missing,
                _GRANT,
            )

    def _use(self, doing: str, run: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``run`` on the shared connection; raises _Down (having warned) when the database cannot be reached."""
        with self._lock:
            self._forked()
            if self._down_reason is not None and time.monotonic() < self._retry_at:
                raise _Down(self._down_reason)
            try:
                connection = self._shared()
                self._share_kept(connection)
                result = run(connection)
            except self._psycopg.Error as exc:  # unreachable, or refused (no such database, no permission)
                self._drop()
                raise _Down(self._went_down(doing, exc)) from None
            self._came_back()
            self._warn_clears_missing()
            return result

    # -- winners tuned while the database was away -----------------------------------------------------------

    def _keep(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> None:
        """Keep a winner the database could not take, to offer it once it answers."""
        with self._lock:
            self._forked()
            self._unshared[(device_id, tuner, key)] = (checksum, value)
            self._schedule()

    def _schedule(self) -> None:
        """Retry the database when its backoff ends, while winners wait for it; under ``_lock``."""
        if self._timer is not None or not self._unshared:
            return
        self._timer = threading.Timer(max(0.0, self._retry_at - time.monotonic()), self._retry)
        self._timer.daemon = True  # a process exits without waiting: its host's cache keeps the winners
        self._timer.start()

    def _retry(self) -> None:
        """The timer's try: offer the kept winners, or note the outage goes on and try again later."""
        with self._lock:
            if self._timer is not threading.current_thread():
                return  # cancelled by close(), or this is a forked child's copy
            self._timer = None
            try:
                self._share_kept(self._shared())
            except self._psycopg.Error as exc:
                self._drop()
                self._went_down("sharing the winners tuned while it was away", exc)
            else:
                self._came_back()
            self._schedule()

    def _share_kept(self, connection: psycopg.Connection[Any]) -> None:
        """Offer the database the winners kept while it was away, each as a tuned winner is offered; under ``_lock``.

        A key the database has a winner of the same set for keeps that one: this process goes on
        using its own, in memory, and its host's next process adopts the database's.
        """
        if not self._unshared:
            return
        shared = kept = cleared = 0
        for (device_id, tuner, key), (checksum, value) in list(self._unshared.items()):
            stored = self._put(connection, (device_id, tuner, key), checksum, value)
            del self._unshared[(device_id, tuner, key)]
            if stored is None:
                cleared += 1
            elif stored[0] == checksum and stored[1] == value.model_dump_json():
                shared += 1
            else:
                kept += 1
        _log.info(
            "tuning store %s: offered the %d winners tuned while it was away: %d stored, %d yielded to the winner "
            "another process stored first, %d refused (the fleet was cleared of their keys since)",
            self.where,
            shared + kept + cleared,
            shared,
            kept,
            cleared,
        )

    def _put(
        self, connection: psycopg.Connection[Any], where: tuple[str, str, str], checksum: str, value: CacheValue
    ) -> Any:
        """Store ``value`` unless the key has a winner of ``checksum`` or was cleared since ``value`` was tuned.

        The key's raw (checksum, value) row after; None when it has none. Under ``_lock``.
        """
        row = (MAJOR, *where, checksum, value.model_dump_json(), time.time())
        with connection.transaction():
            if self._clears:
                connection.execute(PUT_UNLESS_CLEARED, (*row, MAJOR, *where, value.tuned_at.timestamp()))
            else:
                connection.execute(PUT, row)
            return connection.execute(GET, (self.MAX_VALUE_BYTES, MAJOR, *where)).fetchone()

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with suppress(self._psycopg.Error):
                connection.close()

    def _went_down(self, doing: str, exc: BaseException) -> str:
        """Note an outage, warned about once per process; the one-line reason."""
        reason = f"tuning store {self.where}: {doing} failed ({_first_line(exc)})"
        if self._down_reason is None:
            self._backoff_s = self.FIRST_RETRY_S
        else:
            self._backoff_s = min(self._backoff_s * 2, self.LAST_RETRY_S)
        self._down_reason = reason
        self._retry_at = time.monotonic() + self._backoff_s
        level = logging.INFO if self._warned else logging.WARNING
        self._warned = True
        _log.log(
            level,
            "%s; this process serves the winners it has (in memory and in its own cache) and keeps those it tunes "
            "to share them once the database answers again (next try in %g s)",
            reason,
            self._backoff_s,
        )
        return reason

    def _came_back(self) -> None:
        if self._down_reason is not None:
            _log.info("tuning store %s answers again: winners are shared from now on", self.where)
            self._down_reason = None
            self._backoff_s = self.FIRST_RETRY_S

    # -- the protocol --------------------------------------------------------------------------------------

    def get(self, device_id: str, tuner: str, key: str) -> StoredWinner:
        params = (self.MAX_VALUE_BYTES, MAJOR, device_id, tuner, key)
        try:
            row = self._use("reading a winner", lambda c: c.execute(GET, params).fetchone())
        except _Down as exc:
            return str(exc)
        return None if row is None else _parsed(tuner, key, row)

    def put_if_absent(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> StoredWinner:
        """As the protocol says; None when the fleet was cleared (of this key) after ``value`` was tuned.

        Such a value is a host's copy of a winner the fleet chose to forget: the caller tunes the
        key again. A winner the database cannot take now is kept, and offered once it answers.
        """
        try:
            stored = self._use("storing a winner", lambda c: self._put(c, (device_id, tuner, key), checksum, value))
        except _Down as exc:
            self._keep(device_id, tuner, key, checksum, value)
            return str(exc)
        return None if stored is None else _parsed(tuner, key, stored)

    def put(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> bool:
        """Store ``value`` whatever the key has (an import the user asked for); whether the database took it."""
        row = (MAJOR, device_id, tuner, key, checksum, value.model_dump_json(), time.time())
        try:
            self._use("storing a winner", lambda c: c.execute(REPLACE, row))
        except _Down:
            return False
        return True

    @property
    def clears_recorded(self) -> bool:
        """Whether a delete is recorded as a clear that hosts' older copies yield to (the table is there)."""
        return self._clears

    def rows(self, device_id: str | None = None, tuner: str | None = None) -> Iterator[CacheRow | str]:
        clauses, params = filters(device_id, tuner, None)
        query = (
            f"SELECT device_id, tuner, key, checksum, CASE WHEN octet_length(value) <= %s THEN value END "
            f"FROM {WINNERS} WHERE {clauses} ORDER BY tuner, key"
        )
        try:
            fetched = self._use(
                "listing winners", lambda c: c.execute(query, (self.MAX_VALUE_BYTES, *params)).fetchall()
            )
        except _Down as exc:
            yield str(exc)
            return
        for device, name, key, checksum, value in fetched:
            parsed = _parsed(name, key, (checksum, value))
            yield parsed if isinstance(parsed, str) else CacheRow(device, name, key, *parsed)

    def owners(self) -> set[tuple[str, str]]:
        """(device id, tuner) of every row of this major version, readable or not (for tools naming what is there)."""
        query = f"SELECT DISTINCT device_id, tuner FROM {WINNERS} WHERE tunekit_major = %s"
        try:
            fetched = self._use("listing winners", lambda c: c.execute(query, (MAJOR,)).fetchall())
        except _Down:
            return set()
        return {(str(device), str(tuner)) for device, tuner in fetched}

    def problem(self) -> str | None:
        """Why the database cannot be used now (unreachable, refused), or None: asked by a command, not warned about.

        A tuning process carries on without the database; a command that was asked to show or clear
        its winners cannot, and says why instead of warning and showing nothing.
        """
        with self._lock:
            try:
                self._shared()
            except self._psycopg.Error as exc:
                self._drop()
                return _first_line(exc)
        return None

    def delete(self, device_id: str | None = None, tuner: str | None = None, key: str | None = None) -> int | None:
        """Remove winners, and record the clear: a host's copy tuned before it is refused, and its key tuned again.

        The count is of winners removed; None when the database did not answer.
        """
        clauses, params = filters(device_id, tuner, key)
        scope = (MAJOR, device_id or "", tuner or "", key or "")

        def clear(connection: psycopg.Connection[Any]) -> int:
            with connection.transaction():
                removed = int(connection.execute(f"DELETE FROM {WINNERS} WHERE {clauses}", params).rowcount)
                if self._clears:
                    connection.execute(CLEAR_RECORD, scope)
            return removed

        try:
            return self._use("removing winners", clear)
        except _Down:
            return None

    @contextmanager
    def lock(self, device_id: str, tuner: str, key: str, timeout_s: float) -> Iterator[bool]:
        ident = lock_id(device_id, tuner, key)
        if ident in _held.get() or locked_by_parent(device_id, tuner, key):
            yield True  # code run for the tune that holds it: waiting would be waiting on itself
            return
        connection = self._locked(ident, timeout_s)
        if connection is None:
            yield False
            return
        token = _held.set(_held.get() | {ident})
        try:
            yield True
        finally:
            _held.reset(token)
            # Closing the session releases its advisory locks (and a dead process's session is closed for it).
            with suppress(self._psycopg.Error):
                connection.close()

    def _locked(self, ident: int, timeout_s: float) -> psycopg.Connection[Any] | None:
        """A connection of its own holding the advisory lock ``ident``; None after ``timeout_s``, or when down."""
        with self._lock:
            if self._down_reason is not None and time.monotonic() < self._retry_at:
                return None
        try:
            connection = self._connect()
        except self._psycopg.Error as exc:
            with self._lock:
                self._went_down("taking a tune lock", exc)
            return None
        try:
            if timeout_s <= 0:
                answer = connection.execute("SELECT pg_try_advisory_lock(%s)", (ident,)).fetchone()
                held = answer is not None and bool(answer[0])
            else:
                # lock_timeout 0 waits for ever; more than INT_MAX milliseconds is refused.
                wait_ms = max(1, min(int(timeout_s * 1000), 2**31 - 1))
                connection.execute(f"SET lock_timeout = {wait_ms}")
                try:
                    connection.execute("SELECT pg_advisory_lock(%s)", (ident,))
                    held = True
                except self._psycopg.errors.LockNotAvailable:
                    held = False
        except self._psycopg.Error as exc:
            connection.close()
            with self._lock:
                self._went_down("taking a tune lock", exc)
            return None
        except BaseException:
            connection.close()
            raise
        if not held:
            connection.close()
            return None
        with self._lock:
            self._came_back()
        return connection


def _parsed(tuner: str, key: str, row: Any) -> tuple[str, CacheValue] | str:
    """A row's (checksum, value), validated; a reason (warned about) when it cannot be used."""
    checksum, text = row[0], row[1]
    if text is None:
        detail = f"value is larger than {PostgresStore.MAX_VALUE_BYTES} bytes"
    else:
        try:
            return str(checksum), CacheValue.model_validate_json(text, context=STORED)
        except ValidationError as exc:
            detail = other_version(text, CacheValue) or validation_text(exc, whole="value")
        except (ValueError, TypeError, RecursionError) as exc:
            detail = _first_line(exc)
    reason = f"stored row for {tuner}/{key} is invalid and will be re-tuned: {detail}"
    _log.warning(reason)
    return reason


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
