"""``tunekit cache`` commands on a damaged cache file: the reading ones report it and change nothing."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import tempfile
from pathlib import Path

import pytest
from _command import run
from _procs import drop_root, in_child

import tunekit as tk


def _damaged(cache_dir: Path, offset: int) -> Path:
    cache = tk.PersistentCache(cache_dir)
    for i in range(3):
        assert cache.put("dev", "t", f'{{"i":{i}}}', "c", tk.CacheValue(winner="a", ranking=["a"]))
    db = cache_dir / tk.PersistentCache.FILENAME
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.open("r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ 0xFF]))
    return db


@pytest.mark.parametrize("command", [("list",), ("show", "t", "--key", "i=1"), ("export",)])
@pytest.mark.parametrize("offset", [33, 47, 18])
def test_a_reading_command_changes_no_damaged_cache(
    isolated_settings: Path, command: tuple[str, ...], offset: int
) -> None:
    """Regression: `tunekit cache list` moved a damaged cache aside, as a tuning process does."""
    db = _damaged(isolated_settings, offset)
    before = db.read_bytes()
    if offset == 18:  # only writes fail: its rows read as ever, and verify reports the damage
        assert "a" in run("cache", *command).stdout
    else:
        done = run("cache", *command, check=1)
        assert "tunekit cache verify" in done.stderr and str(db) in done.stderr, done.stderr
    assert db.read_bytes() == before
    assert list(isolated_settings.glob("*.corrupt-*")) == []


def test_verify_reports_a_header_that_makes_the_cache_read_only(isolated_settings: Path) -> None:
    """Regression: `tunekit cache verify` said "0 problems", exit 0, for a cache every store failed on (byte 18)."""
    _damaged(isolated_settings, 18)
    done = run("cache", "verify", check=1)
    assert "header: file format versions" in done.stdout and "1 problem" in done.stdout, done.stdout


def test_verify_reports_a_failing_integrity_check(isolated_settings: Path) -> None:
    _damaged(isolated_settings, 33)
    done = run("cache", "verify", check=1)
    assert "database: " in done.stdout and "freelist" in done.stdout, done.stdout


@pytest.mark.subprocess
def test_verify_reads_a_cache_in_a_directory_this_process_may_not_write() -> None:
    """Regression: in a read-only cache directory (0555, a non-root process), `tunekit cache verify` said
    "not a readable tuning cache: attempt to write a readonly database", exit 1, for a sound cache that
    `cache list` and every tuning process read: SQLite cannot make the WAL's -shm file there."""
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)  # pytest's tmp_path is root's own (0700): the unprivileged child could not enter it
        seeded = Path(top) / "seeded"
        cache = tk.PersistentCache(seeded)
        for i in range(3):
            assert cache.put("dev", "t", f'{{"i":{i}}}', "c", tk.CacheValue(winner="a", ranking=["a"]))
        with sqlite3.connect(seeded / tk.PersistentCache.FILENAME) as raw:
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # As a process that exits leaves it: the file alone, without its -wal and -shm.
        cache_dir = Path(top) / "cache"
        cache_dir.mkdir()
        shutil.copyfile(seeded / tk.PersistentCache.FILENAME, cache_dir / tk.PersistentCache.FILENAME)
        os.chmod(cache_dir / tk.PersistentCache.FILENAME, 0o444)
        os.chmod(cache_dir, 0o555)

        def child() -> dict[str, object]:
            drop_root()
            done = run("cache", "verify", check=None, env={"TUNEKIT_CACHE_DIR": str(cache_dir)})
            return {"code": done.returncode, "out": done.stdout, "writable": os.access(cache_dir, os.W_OK)}

        got = in_child(child)
        after = sorted(p.name for p in cache_dir.iterdir())
    assert got["writable"] is False
    assert got["code"] == 0 and "3 rows checked, 0 problems" in str(got["out"]), got
    assert after == [tk.PersistentCache.FILENAME]  # nothing written beside it


def _killed_before_its_tables(db: Path) -> None:
    """A process that made the cache file, began creating its tables and was SIGKILLed before committing them."""
    db.parent.mkdir(parents=True, exist_ok=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        connection = sqlite3.connect(db, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("CREATE TABLE winners (tunekit_major INTEGER)")
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@pytest.mark.subprocess
@pytest.mark.parametrize("left", ["empty file", "killed mid-create"])
def test_a_cache_file_without_tables_reads_as_an_empty_cache_and_is_tuned_into(
    isolated_settings: Path, left: str
) -> None:
    """Regression: a process stopped before it created the cache's tables left a file that `verify` and `list`
    called "not a readable tuning cache: no such table: winners" (exit 1), though the next tuner used it fine."""
    db = isolated_settings / tk.PersistentCache.FILENAME
    if left == "empty file":
        db.parent.mkdir(parents=True)
        db.touch()
    else:
        _killed_before_its_tables(db)
    before = db.read_bytes()
    assert run("cache", "verify").stdout.endswith("0 rows checked, 0 problems\n")
    assert "no stored winners" in run("cache", "list").stderr
    assert '"entries": []' in run("cache", "export").stdout
    assert db.read_bytes() == before  # reading changes nothing

    cache = tk.PersistentCache(isolated_settings)
    assert cache.put("dev", "t", '{"n":1}', "c", tk.CacheValue(winner="a", ranking=["a"]))
    assert "1 row checked, 0 problems" in run("cache", "verify").stdout
    assert list(isolated_settings.glob("*.corrupt-*")) == []


def test_a_sqlite_file_of_other_tables_is_still_no_tuning_cache(isolated_settings: Path) -> None:
    isolated_settings.mkdir(parents=True)
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as other:
        other.execute("CREATE TABLE notes (text TEXT)")
    assert "not a readable tuning cache: no such table: winners" in run("cache", "verify", check=1).stdout
    run("cache", "list", check=1)
