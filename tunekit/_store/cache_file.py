"""The SQLite file under the persistent cache: its errors classed, its damage found, its readable rows salvaged.

SQLite reports a damaged file in more ways than ``SQLITE_CORRUPT``: a flipped schema-format
byte reads as "unsupported file format", a flipped write-version byte as a read-only database
(on a file this process may write), and a bad freelist or vacuum field passes every query until
the file grows, then fails. So a file is judged by ``PRAGMA quick_check`` and by whether SQLite
lets it be written, not only by the errors its queries raise. A damaged file is moved aside
whole; :func:`salvage` then reads back what rows it can, from the file as it is or, when SQLite
cannot open that, from a copy whose header is rewritten with the values a tunekit cache always has.

A process that has the database open through SQLite never opens the file itself: closing any
descriptor of a file drops every POSIX lock the process holds on it, SQLite's too, and another
process could then remove the WAL that this one is still writing into. Only
:func:`header_problem`, for ``tunekit cache verify``, reads it directly.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from pydantic import ValidationError

from tunekit._base.persisted import STORED
from tunekit._values.cache_row import CacheValue

__all__ = [
    "COLUMNS",
    "code",
    "damage",
    "describe",
    "has_no_tables",
    "header_problem",
    "identity",
    "is_corrupt",
    "is_unwritable",
    "quick_problem",
    "salvage",
]

COLUMNS = "tunekit_major, device_id, tuner, key, checksum, value, updated"
"""The columns of both tables, in order."""

_MAGIC = b"SQLite format 3\x00"
_HEADER = 100
_TABLES = ("winners", "failed_tunes")


def code(exc: sqlite3.Error) -> int:
    """The primary SQLite result code of ``exc`` (-1 when it carries none)."""
    return int(getattr(exc, "sqlite_errorcode", -1)) & 0xFF


def describe(exc: sqlite3.Error) -> str:
    """``exc`` with its SQLite code name: ``SQLITE_CORRUPT: database disk image is malformed``."""
    name = getattr(exc, "sqlite_errorname", None)
    return f"{name}: {exc}" if name else str(exc)


def is_corrupt(exc: sqlite3.Error, path: Path) -> bool:
    """Whether ``exc`` means the file at ``path`` is damaged, not that the environment refused or was busy."""
    if code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return True
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and text.startswith("no such column"):
        return True  # laid out as no tunekit cache is
    if text.startswith(("unsupported file format", "malformed database schema")):
        return True
    return _read_only_by_header(exc, path)


def _read_only_by_header(exc: sqlite3.Error, path: Path) -> bool:
    """Whether SQLite refuses to write a file this process may write: a write-version byte it does not know.

    Only the plain code: its extended ones (a WAL it cannot recover, a directory it cannot
    write, a file moved) have other causes. A read-only mount or file mode shows in ``os.access``.
    """
    extended = int(getattr(exc, "sqlite_errorcode", -1))
    return extended == sqlite3.SQLITE_READONLY and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def is_unwritable(exc: sqlite3.Error) -> bool:
    """The environment refuses: read-only, full, no permission, cannot create the journal, I/O error."""
    return code(exc) in (
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_AUTH,
    )


def header_problem(path: Path) -> str | None:
    """What is wrong with the header of the database at ``path``; None when it is sound, short (new) or unreadable.

    Opens the file: not for a process that has it open through SQLite (see the module's docstring).
    """
    try:
        with path.open("rb") as file:
            head = file.read(_HEADER)
    except OSError:
        return None  # proves nothing: opening the database says what is wrong
    if len(head) < _HEADER:
        return None  # a database being created, or an empty file SQLite makes one of
    return _header_fault(head)


def _header_fault(head: bytes) -> str | None:
    if head[:16] != _MAGIC:
        return "header: not an SQLite 3 file"
    page_size = int.from_bytes(head[16:18], "big")
    if not (page_size == 1 or (512 <= page_size <= 32768 and page_size & (page_size - 1) == 0)):
        return f"header: page size {page_size}"
    if head[18] not in (1, 2) or head[19] not in (1, 2):
        return f"header: file format versions {head[18]}, {head[19]} (1 or 2)"
    if head[20] != 0:  # no tunekit cache reserves bytes at the end of a page
        return f"header: {head[20]} reserved bytes per page"
    if tuple(head[21:24]) != (64, 32, 32):
        return f"header: payload fractions {tuple(head[21:24])} (64, 32, 32)"
    # Both are 0 in a database that has no table yet (one another process is creating).
    if not 0 <= int.from_bytes(head[44:48], "big") <= 4:
        return f"header: schema format {int.from_bytes(head[44:48], 'big')}"
    if not 0 <= int.from_bytes(head[56:60], "big") <= 3:
        return f"header: text encoding {int.from_bytes(head[56:60], 'big')}"
    return None


def has_no_tables(connection: sqlite3.Connection) -> bool:
    """Whether the database holds no table at all: an empty cache, not a damaged or foreign file.

    A process stopped between SQLite making the file and committing its tables (killed, or a
    daemon thread cut off at interpreter exit) leaves such a file, 0 bytes or a bare header; the
    next tuning process creates the tables in it.
    """
    return bool(connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)


def quick_problem(connection: sqlite3.Connection) -> str | None:
    """The first problem ``PRAGMA quick_check`` finds through ``connection``; None when it finds none."""
    result = connection.execute("PRAGMA quick_check(1)").fetchone()
    if result and result[0] == "ok":
        return None
    return "quick_check: " + " ".join(str(result[0] if result else "no answer").split())[:200]


def damage(path: Path) -> str | None:
    """What is wrong with the database at ``path``; None when nothing is shown to be (a busy file proves nothing)."""
    if not path.exists():
        return None
    try:
        probe = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    except sqlite3.Error as exc:
        return describe(exc) if is_corrupt(exc, path) else None
    try:
        if problem := quick_problem(probe):
            return problem
        for table in _TABLES:
            probe.execute(f"SELECT {COLUMNS} FROM {table} LIMIT 0").fetchall()
        _try_write(probe)
    except sqlite3.Error as exc:
        return describe(exc) if is_corrupt(exc, path) else None
    finally:
        probe.close()
    return None


def _try_write(probe: sqlite3.Connection) -> None:
    """Write page 1 in a transaction rolled back: a write-version byte SQLite does not know refuses it."""
    probe.execute("BEGIN IMMEDIATE")
    try:
        version = int(probe.execute("PRAGMA user_version").fetchone()[0])
        probe.execute(f"PRAGMA user_version = {version}")
    finally:
        with contextlib.suppress(sqlite3.Error):
            probe.execute("ROLLBACK")


Row = tuple[object, ...]


def salvage(source: Path, into: sqlite3.Connection) -> int:
    """Copy the readable, valid rows of the damaged database ``source`` into ``into``; how many winners.

    A row already in ``into`` is kept (a process sharing the cache may have stored a newer
    one there since the move). A winner whose value does not validate is left behind: it
    would only be re-tuned.
    """
    found: dict[str, dict[tuple[object, ...], Row]] = {table: {} for table in _TABLES}
    complete = _read(f"{source.absolute().as_uri()}?mode=ro", found)
    if not complete:
        for page_size in _page_sizes(source):
            copy = source.with_name(source.name + ".salvage")
            try:
                copy.write_bytes(_repaired(source.read_bytes(), page_size))
                if _read(f"{copy.absolute().as_uri()}?mode=ro&immutable=1", found):
                    break
            except OSError:
                break
            finally:
                with contextlib.suppress(OSError):
                    copy.unlink()
    winners = 0
    for table, rows in found.items():
        for row in rows.values():
            if table == "winners" and not _valid_winner(row):
                continue
            cursor = into.execute(f"INSERT OR IGNORE INTO {table} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            winners += cursor.rowcount if table == "winners" else 0
    return winners


def _read(uri: str, found: dict[str, dict[tuple[object, ...], Row]]) -> bool:
    """Add the rows SQLite can read through ``uri`` to ``found``; whether every table was read to its end."""
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=5.0)
    except sqlite3.Error:
        return False
    complete = True
    try:
        for table in _TABLES:
            try:
                cursor = connection.execute(f"SELECT {COLUMNS} FROM {table}")
                # row by row: a bad page ends the read, not the rows read before it
                while (row := cursor.fetchone()) is not None:
                    found[table].setdefault(tuple(row[:4]), tuple(row))
            except (sqlite3.Error, OverflowError, UnicodeDecodeError, MemoryError):
                complete = False
    finally:
        connection.close()
    return complete


def _page_sizes(source: Path) -> list[int]:
    """The page sizes the database may have: the one its header names first, then SQLite's default, then the rest."""
    try:
        size = source.stat().st_size
        with source.open("rb") as file:
            head = file.read(_HEADER)
    except OSError:
        return []
    named = int.from_bytes(head[16:18], "big") if len(head) >= 18 else 0
    named = 65536 if named == 1 else named
    candidates = [named, 4096, *(1 << bits for bits in range(9, 17))]
    seen: list[int] = []
    for page_size in candidates:
        if page_size >= 512 and page_size & (page_size - 1) == 0 and size % page_size == 0 and page_size not in seen:
            seen.append(page_size)
    return seen


def _repaired(data: bytes, page_size: int) -> bytes:
    """``data`` with a header SQLite can open: the fields a tunekit cache always has, the size and freelist dropped."""
    head = bytearray(data[:_HEADER].ljust(_HEADER, b"\x00"))
    head[:16] = _MAGIC
    head[16:18] = (1 if page_size == 65536 else page_size).to_bytes(2, "big")
    head[18:24] = bytes((1, 1, 0, 64, 32, 32))  # rollback journal: the copy is opened immutable, its WAL unread
    head[28:40] = bytes(12)  # size from the file's length; no freelist (reading needs none)
    head[44:48] = (4).to_bytes(4, "big")
    head[52:60] = bytes((0, 0, 0, 0, 0, 0, 0, 1))  # no auto-vacuum; UTF-8, as Python's sqlite3 creates it
    head[64:68] = bytes(4)
    return bytes(head) + data[_HEADER:]


def _valid_winner(row: Row) -> bool:
    value = row[5]
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else value
        if not isinstance(text, str):
            return False
        CacheValue.model_validate_json(text, context=STORED)
    except (ValidationError, ValueError, TypeError, RecursionError):
        return False
    return True


def identity(path: Path | str) -> tuple[int, int] | None:
    """The (device, inode) of the file at ``path``; None when there is none."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_dev, info.st_ino)
