"""The persistent cache when its file is removed, replaced, moved aside by another process or damaged in its header."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from _cache_keys import CLIENT, IKey, db as _db, tunables as _tunables
from _procs import in_child, tunekit_messages

import tunekit as tk
from tunekit._keys.key import key_to_json


def _value(others: int = 0) -> tk.CacheValue:
    return tk.CacheValue(winner="w" * 100, ranking=["w" * 100, *(f"other-{j:03d}-" * 10 for j in range(others))])


def _stored_keys(cache_dir: Path, tuner: str) -> set[int]:
    """The keys of ``tuner`` a fresh connection finds at the cache's path."""
    cache = tk.PersistentCache(cache_dir)
    return {json.loads(r.key)["i"] for r in cache.rows(tuner=tuner) if isinstance(r, tk.CacheRow)}


def _moved_aside(cache_dir: Path) -> list[Path]:
    return [p for p in cache_dir.glob("*.corrupt-*") if p.name[-4:] not in ("-wal", "-shm")]


# -- the file removed or replaced under a running process --------------------------------


@pytest.mark.subprocess
def test_a_cache_directory_removed_mid_run_is_made_again_and_later_winners_reach_it(isolated_settings: Path) -> None:
    """Regression: after `rm -rf` of the cache directory, winners went into the unlinked file, `stored: true`."""

    def child() -> dict[str, object]:
        caught = tunekit_messages(logging.WARNING)
        records: list[tk.AutotuneRecord] = []
        tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner("moved", sinks=[records.append])
        tunables = tuner.init(_tunables)
        for i in range(10):
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,))
        shutil.rmtree(isolated_settings)
        for i in range(10, 60):
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,))
        return {"stored": [r.key["i"] for r in records if r.stored], "warnings": caught}

    got = in_child(child)
    later = set(range(10, 60))
    assert later <= set(got["stored"])
    assert _stored_keys(isolated_settings, "moved") == later  # what a next process finds
    assert len(got["warnings"]) == 1 and "removed or replaced" in got["warnings"][0], got["warnings"]


def test_a_file_replaced_under_an_open_cache_is_followed_and_nothing_claimed_stored_is_lost(
    isolated_settings: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tk.PersistentCache(isolated_settings)
    assert cache.put("dev", "t", "before", "c", _value())
    _db(isolated_settings).rename(isolated_settings / "elsewhere.sqlite3")
    for suffix in ("-wal", "-shm"):
        Path(f"{_db(isolated_settings)}{suffix}").rename(isolated_settings / f"elsewhere.sqlite3{suffix}")
    assert all(cache.put("dev", "t", f"k{i}", "c", _value()) for i in range(20))
    fresh = tk.PersistentCache(isolated_settings)
    assert all(isinstance(fresh.get("dev", "t", f"k{i}"), tuple) for i in range(20))
    moved = [r.getMessage() for r in caplog.records if "removed or replaced" in r.getMessage()]
    assert len(moved) == 1 and str(_db(isolated_settings)) in moved[0]


@pytest.mark.subprocess
def test_a_quarantine_by_another_process_is_followed(isolated_settings: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Regression: a process kept storing into the file another had moved aside (`stored: true`), lost to all."""
    live = tk.PersistentCache(isolated_settings)
    assert all(live.put("dev", "t", f"a{i}", "c", _value()) for i in range(5))
    with sqlite3.connect(_db(isolated_settings)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _flip(_db(isolated_settings), 33)  # a freelist page number out of range: integrity check fails, reads work

    def other() -> dict[str, object]:
        caught = tunekit_messages(logging.WARNING)
        cache = tk.PersistentCache(isolated_settings)
        return {"warnings": caught, "available": cache.available, "a0": isinstance(cache.get("dev", "t", "a0"), tuple)}

    got = in_child(other)
    assert got["available"] and got["a0"], got
    assert len(got["warnings"]) == 1 and "moved to" in got["warnings"][0], got["warnings"]
    assert len(_moved_aside(isolated_settings)) == 1
    assert all(live.put("dev", "t", f"b{i}", "c", _value()) for i in range(20))
    fresh = tk.PersistentCache(isolated_settings)
    for key in [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(20)]:
        assert isinstance(fresh.get("dev", "t", key), tuple), key


# -- damaged headers ----------------------------------------------------------------------


def _flip(path: Path, offset: int) -> None:
    with path.open("r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ 0xFF]))


def _checkpointed_cache(cache_dir: Path, keys: int) -> None:
    cache = tk.PersistentCache(cache_dir)
    assert all(cache.put("dev", "t", f"k{i}", "c", _value()) for i in range(keys))
    with sqlite3.connect(_db(cache_dir)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# One byte of each kind of damage runs in the fast tier, the whole header in the slow one.
_FAST_OFFSETS = {0, 18, 20, 28, 33, 36, 47, 52, 59, 64}


@pytest.mark.parametrize(
    "offset", [pytest.param(b, marks=() if b in _FAST_OFFSETS else pytest.mark.slow) for b in range(100)]
)
def test_each_header_byte_flipped_keeps_every_winner_and_the_cache_writable(
    tmp_path: Path, offset: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: some header bytes made the cache memory-only, read-only, or lost every winner at its first growth."""
    cache_dir = tmp_path / "cache"
    _checkpointed_cache(cache_dir, 40)
    _flip(_db(cache_dir), offset)
    caplog.clear()
    cache = tk.PersistentCache(cache_dir)  # as the next process opens it
    assert cache.write_refused is None
    assert all(isinstance(cache.get("dev", "t", f"k{i}"), tuple) for i in range(40))
    # enough to grow the file by many pages: damage that shows only at growth shows here
    assert all(cache.put("dev", "t", f"n{i}", "c", _value(20)) for i in range(60))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    moved = _moved_aside(cache_dir)
    assert len(warnings) == len(moved) <= 1, warnings
    if moved:
        assert str(moved[0]) in warnings[0] and "40 winners" in warnings[0], warnings
    after = tk.PersistentCache(cache_dir)
    assert len([r for r in after.rows() if isinstance(r, tk.CacheRow)]) == 100
    with sqlite3.connect(_db(cache_dir)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_damaged_cache_is_reported_by_a_fresh_process_with_no_traceback(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    _checkpointed_cache(cache_dir, 3)
    _flip(_db(cache_dir), 47)  # schema format: "unsupported file format"
    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner("damaged")
    tk.configure(cache_dir=cache_dir)
    try:
        tunables = tuner.init(_tunables)
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 8
    finally:
        tk.configure()
    assert isinstance(tk.PersistentCache(cache_dir).get(CLIENT.device_id, "damaged", key_to_json(IKey(i=4))), tuple)
    assert os.path.exists(_db(cache_dir))
