"""A cache directory a group shares: every member stores winners, and one who cannot is told how to fix it."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _procs import drop_root, in_child, tunekit_messages

from tunekit._store.cache import PersistentCache
from tunekit._values.cache_row import CacheValue

pytestmark = [pytest.mark.subprocess, pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")]

_NOBODY = 65534  # the user and group drop_root switches to


def _value(winner: str) -> CacheValue:
    return CacheValue(winner=winner, ranking=[winner])


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which new files are writable by their creator alone."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _files(directory: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mode & 0o777 for path in directory.iterdir()}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to act as two users")
@pytest.mark.usefixtures("umask_022")
def test_a_member_of_the_group_stores_winners_in_a_cache_another_member_made() -> None:
    """Regression: the database and its WAL files were 0644 in a group-writable cache: other members stored nothing."""

    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        shared, private = Path(top) / "shared", Path(top) / "private"
        shared.mkdir()
        os.chown(shared, 0, _NOBODY)  # the team's group; the second user below is a member of it
        shared.chmod(0o2775)  # what a team sets up for a cache its members share
        private.mkdir()
        cache = PersistentCache(shared)
        assert cache.put("dev", "t", "made by the first", "c", _value("a"))
        PersistentCache(private).put("dev", "t", "k", "c", _value("a"))
        made_while_open = _files(shared)  # the first user's connection is open: its -wal and -shm are there
        assert set(made_while_open) >= {"tunekit-cache.sqlite3", "tunekit-cache.sqlite3-wal"}, made_while_open
        assert all(mode & 0o060 == 0o060 for mode in made_while_open.values()), made_while_open
        assert all(mode & 0o060 == 0o040 for mode in _files(private).values()), _files(private)  # the umask's

        def second_user(directory: Path, key: str) -> dict[str, object]:
            drop_root()
            caught = tunekit_messages(logging.WARNING)
            theirs = PersistentCache(directory)
            return {
                "read": isinstance(theirs.get("dev", "t", "made by the first"), tuple),
                "stored": theirs.put("dev", "t", key, "c", _value("b")),
                "failure recorded": theirs.put_failure("dev", "t", key + " failed", "c", "{}"),
                "warnings": caught,
                "files": _files(directory),
            }

        ok = {"read": True, "stored": True, "failure recorded": True, "warnings": []}
        got = in_child(lambda: second_user(shared, "made by the second"))
        assert {name: got[name] for name in ok} == ok
        cache._reset_connection()  # the WAL files go with the last connection; the second user makes new ones
        got = in_child(lambda: second_user(shared, "made by the second, alone"))
        assert {name: got[name] for name in ok} == ok
        assert all(mode & 0o060 == 0o060 for mode in got["files"].values()), got["files"]
        assert isinstance(PersistentCache(shared).get("dev", "t", "made by the second, alone"), tuple)


def test_a_user_who_cannot_write_the_cache_reads_it_and_is_told_the_fix_once() -> None:
    """Regression: a database another user made 0644 turned every later process memory-only: a bare warning, then
    even the stored winners were re-tuned."""

    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        shared = Path(top) / "cache"
        shared.mkdir()
        shared.chmod(0o777)  # everyone may create files here: only the database's own mode keeps the second user out
        PersistentCache(shared).put("dev", "t", "stored", "c", _value("a"))
        database = shared / PersistentCache.FILENAME
        database.chmod(0o444)  # another user's database from before tunekit shared it (read-only even for its owner)

        def second_user() -> dict[str, object]:
            drop_root()
            caught = tunekit_messages(logging.WARNING)
            theirs = PersistentCache(shared)
            stored = [theirs.put("dev", "t", f"new {n}", "c", _value("b")) for n in range(2)]
            recorded = theirs.put_failure("dev", "t", "failed", "c", "{}")
            return {
                "stored": stored,
                "recorded": recorded,
                "still read": isinstance(theirs.get("dev", "t", "stored"), tuple),
                "cleared": theirs.delete(),
                "warnings": caught,
            }

        got = in_child(second_user)
    assert {name: got[name] for name in ("stored", "recorded", "still read", "cleared")} == {
        "stored": [False, False],
        "recorded": False,
        "still read": True,
        "cleared": None,
    }
    [warning] = got["warnings"]  # once, not once per winner
    assert str(database) in warning and f"chmod -R g+rwX {shared}" in warning, warning
