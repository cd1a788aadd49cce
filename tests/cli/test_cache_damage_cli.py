"""``tunekit cache`` commands on a damaged cache file: the reading ones report it and change nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _command import run

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
