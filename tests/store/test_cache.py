from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from _command import run

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


CLIENT = CpuClient()

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from typing import Annotated
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class NKey:
        n: Annotated[int, tk.Anchor()]

    def fast(n):
        return n

    def slow(n):
        time.sleep(0.002)
        return n

    names = sys.argv[1].split(",")
    fns = {"fast": fast, "slow": slow, "other": fast}
    records = []
    tk.add_record_sink(records.append)
    tuner = tk.LocalTuner("persist")
    client = CpuClient()
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables([tk.Tunable(n, fns[n]) for n in names])
    out = tuner.execute(client.device_id, client, tunables, (int(sys.argv[2]),))
    print(json.dumps({"out": out, "tuned": [r.decision for r in records], "winners": [r.winner for r in records]}))
    """
)


def _run(names: str, n: int = 5, env: dict[str, str] | None = None) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, names, str(n)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return dict(json.loads(result.stdout))


@pytest.mark.subprocess
def test_winner_survives_a_new_process() -> None:
    first = _run("slow,fast")
    assert first == {"out": 5, "tuned": ["tuned"], "winners": ["fast"]}
    second = _run("slow,fast", n=7)  # 7 anchors to 8, 5 to 8: same bucket
    assert second == {"out": 7, "tuned": [], "winners": []}


@pytest.mark.subprocess
def test_changed_set_is_retuned() -> None:
    _run("slow,fast")
    assert _run("slow,fast,other")["tuned"] == ["tuned"]


@pytest.mark.subprocess
def test_removed_winner_is_retuned() -> None:
    _run("slow,fast")
    cache = tk.persistent_cache()
    assert cache is not None
    # Same checksum cannot hold when a member is removed, so forge the case where only the
    # winner's name is gone: a row whose checksum matches but whose winner is unknown.
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [tk.Tunable("slow", lambda n: n), tk.Tunable("fast", lambda n: n)]
    )
    key = key_to_json(NKey(n=5))
    got = cache.get(CLIENT.device_id, "persist", key)
    assert isinstance(got, tuple)
    checksum, value = got
    assert checksum == tunables.checksum()
    cache.put(
        CLIENT.device_id, "persist", key, checksum, value.model_copy(update={"winner": "gone", "ranking": ["gone"]})
    )
    assert _run("slow,fast")["tuned"] == ["tuned"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_cache_disabled_keeps_nothing_on_disk(isolated_settings: Path) -> None:
    assert _run("slow,fast", env={"TUNEKIT_CACHE": "0"})["tuned"] == ["tuned"]
    assert _run("slow,fast", env={"TUNEKIT_CACHE": "0"})["tuned"] == ["tuned"]
    assert not (isolated_settings / tk.PersistentCache.FILENAME).exists()


@pytest.mark.slow
@pytest.mark.subprocess
def test_corrupted_cache_file_is_recovered(isolated_settings: Path) -> None:
    _run("slow,fast")
    path = isolated_settings / tk.PersistentCache.FILENAME
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, "slow,fast", "5"], capture_output=True, text=True, check=True, env=os.environ
    )
    assert json.loads(result.stdout)["tuned"] == ["tuned"]
    assert "unreadable" in result.stderr
    assert list(isolated_settings.glob("*.corrupt-*"))
    assert _run("slow,fast")["tuned"] == []


@pytest.mark.subprocess
def test_corrupt_row_is_retuned_not_raised(isolated_settings: Path) -> None:
    _run("slow,fast")
    path = isolated_settings / tk.PersistentCache.FILENAME
    with sqlite3.connect(path) as db:
        db.execute("UPDATE winners SET value = ?", ('{"winner": 5, "ranking": "x"}',))
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("persist")
        tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
            [tk.Tunable("slow", lambda n: n), tk.Tunable("fast", lambda n: n)]
        )
        assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,)) == 5
    finally:
        tk.remove_record_sink(sink)
    assert records[0].decision == "tuned"
    assert records[0].events[0].kind == "cache_recovered"


def test_rows_are_namespaced_by_device_and_tuner() -> None:
    cache = tk.persistent_cache()
    assert cache is not None
    value = tk.CacheValue(winner="a", ranking=["a"])
    cache.put("dev-1", "t", "{}", "c", value)
    cache.put("dev-2", "t", "{}", "c", value.model_copy(update={"winner": "b", "ranking": ["b"]}))
    got1, got2 = cache.get("dev-1", "t", "{}"), cache.get("dev-2", "t", "{}")
    assert isinstance(got1, tuple)
    assert isinstance(got2, tuple)
    assert (got1[1].winner, got2[1].winner) == ("a", "b")
    assert cache.get("dev-1", "other", "{}") is None
    assert cache.delete(device_id="dev-1") == 1


def test_state_is_explicit_and_matchable() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("states")
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunable(tk.Tunable("a", lambda n: n))
    device = tuner.tuner(CLIENT.device_id)

    def describe(state: tk.CacheState) -> str:
        match state:
            case tk.Hit(ranking):
                return f"hit {ranking}"
            case tk.Miss(reason):
                return f"miss {reason}"
            case tk.Unchecked(checksum, _):
                return f"unchecked {checksum == tunables.checksum()}"
            case tk.Pending():
                return "pending"

    assert describe(device.state(tunables, NKey(n=3))) == "miss None"
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))
    assert describe(device.state(tunables, NKey(n=3))) == "hit (0,)"
    tuner.clear()
    assert describe(tuner.tuner(CLIENT.device_id).state(tunables, NKey(n=3))) == "unchecked True"


def test_unusable_dir_degrades_to_memory_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    cache = tk.PersistentCache(blocker / "cache")
    assert not cache.available
    assert cache.get("d", "t", "{}") is None
    assert not cache.put("d", "t", "{}", "c", tk.CacheValue(winner="a", ranking=["a"]))
    assert "memory-only" in caplog.text
    # what it costs and what to do, where the reason alone ("Not a directory") said neither
    assert "the next process tunes its winners again (TUNEKIT_CACHE_DIR names a directory" in caplog.text


def _rewrite_row(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the JSON of the (only) stored winner, as another tunekit version would have written it."""
    with sqlite3.connect(path) as db:
        (raw,) = db.execute("SELECT value FROM winners").fetchone()
        value = json.loads(raw)
        change(value)
        db.execute("UPDATE winners SET value = ?", (json.dumps(value),))


def _stored_value(path: Path) -> dict[str, Any]:
    with sqlite3.connect(path) as db:
        return dict(json.loads(db.execute("SELECT value FROM winners").fetchone()[0]))


def _newer(value: dict[str, Any]) -> None:
    """Fields a later tunekit might add within schema_version 1, at the top and in nested models."""
    value["confidence"] = 0.97
    value["results"][0]["p99_ns"] = 1234.5
    value["origin"]["source"] = "ops/matmul.py"


@pytest.mark.subprocess
def test_a_row_with_fields_of_a_newer_tunekit_is_reused_not_retuned(isolated_settings: Path) -> None:
    """Regression: a row with a field this version does not know (as `origin` once was) was refused and re-tuned."""
    _run("slow,fast")
    path = isolated_settings / tk.PersistentCache.FILENAME
    _rewrite_row(path, _newer)
    assert _run("slow,fast") == {"out": 5, "tuned": [], "winners": []}
    stored = _stored_value(path)
    assert stored["confidence"] == 0.97 and stored["origin"]["source"] == "ops/matmul.py"
    assert "0 problems" in run("cache", "verify").stdout


@pytest.mark.subprocess
def test_rewriting_a_row_keeps_the_fields_of_a_newer_tunekit(isolated_settings: Path) -> None:
    """A demotion writes the row back (model_copy of what was read): the newer version's fields must survive it."""
    _run("slow,fast")
    path = isolated_settings / tk.PersistentCache.FILENAME
    _rewrite_row(path, _newer)
    cache = tk.PersistentCache(isolated_settings)
    key = key_to_json(NKey(n=5))
    got = cache.get(CLIENT.device_id, "persist", key)
    assert isinstance(got, tuple)
    checksum, value = got
    assert cache.put(CLIENT.device_id, "persist", key, checksum, value.model_copy(update={"ranking": ["fast"]}))
    stored = _stored_value(path)
    assert stored["ranking"] == ["fast"]
    assert stored["confidence"] == 0.97 and stored["results"][0]["p99_ns"] == 1234.5
    assert stored["origin"]["source"] == "ops/matmul.py"


@pytest.mark.subprocess
def test_a_row_of_another_schema_version_is_still_retuned(isolated_settings: Path) -> None:
    _run("slow,fast")
    _rewrite_row(isolated_settings / tk.PersistentCache.FILENAME, lambda v: v.update(schema_version=2))
    assert _run("slow,fast")["tuned"] == ["tuned"]


@pytest.mark.subprocess
def test_a_row_of_another_schema_version_is_named_another_tunekits_once(
    isolated_settings: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """pydantic's "schema_version: Input should be 1" read as a damaged row, and a tune warned twice about it."""
    _run("slow,fast")
    _rewrite_row(isolated_settings / tk.PersistentCache.FILENAME, lambda v: v.update(schema_version=2))
    cache = tk.PersistentCache(isolated_settings)
    key = key_to_json(NKey(n=5))
    with caplog.at_level("DEBUG", logger="tunekit.cache"):
        first = cache.get(CLIENT.device_id, "persist", key)
        again = cache.get(CLIENT.device_id, "persist", key)  # a tune reads it again once it holds the key's lock
    assert isinstance(first, str) and first == again
    assert first.endswith(
        f"it was written by another tunekit version (schema_version 2; tunekit {tk.__version__} reads 1)"
    )
    assert [r.levelname for r in caplog.records if r.getMessage() == first] == ["WARNING", "DEBUG"]


@pytest.mark.subprocess
def test_a_column_a_later_tunekit_added_does_not_stop_this_one_storing_winners(isolated_settings: Path) -> None:
    """Inserts listed values by position: "table winners has 8 columns but 7 values were supplied" at every store."""
    _run("slow,fast")
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as db:
        for table in ("winners", "failed_tunes", "pending_records"):
            db.execute(f"ALTER TABLE {table} ADD COLUMN host TEXT DEFAULT NULL")
    assert _run("slow,fast", n=100)["tuned"] == ["tuned"]
    assert _run("slow,fast", n=100)["tuned"] == []  # stored: the next process reads it
    with sqlite3.connect(isolated_settings / tk.PersistentCache.FILENAME) as db:
        assert db.execute("SELECT count(*) FROM winners").fetchone() == (2,)


@pytest.mark.subprocess
def test_a_cache_opened_by_a_str_path_reads_what_a_tune_stored(isolated_settings: Path) -> None:
    """Regression: tk.PersistentCache("dir") failed with "unsupported operand type(s) for /: 'str' and 'str'"."""
    assert _run("slow,fast")["winners"] == ["fast"]
    cache = tk.PersistentCache(str(isolated_settings))
    assert cache.path == isolated_settings / tk.PersistentCache.FILENAME
    rows = [row for row in cache.rows() if not isinstance(row, str)]
    assert len(rows) == 1
