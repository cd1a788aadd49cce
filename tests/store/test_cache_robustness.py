"""The persistent cache under bad files, bad rows, unwritable directories, busy writers, many processes and kills."""

from __future__ import annotations

import json
import logging
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _cache_keys import CLIENT, IKey, db as _db, tunables as _tunables
from _procs import drop_root, in_child, tunekit_messages
from hypothesis import HealthCheck, given, settings, strategies as st

import tunekit as tk
from tunekit._base.version import MAJOR
from tunekit._keys.key import key_to_json


def _tune_keys(name: str, keys: range) -> list[int]:
    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner(name)
    tunables = tuner.init(_tunables)
    return [tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,)) for i in keys]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- degraded environments ---------------------------------------------------------------


@pytest.mark.subprocess
def test_read_only_directory_is_read_and_new_winners_stay_in_memory_with_one_warning() -> None:
    """Regression: a read-only cache directory (0555, a non-root process) re-tuned every winner stored there."""
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        tk.configure(cache_dir=Path(top) / "seeded")
        _tune_keys("seed", range(3))
        with sqlite3.connect(_db(Path(top) / "seeded")) as raw:
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # A valid cache the unprivileged child may read but not write, as a process that exits leaves
        # it: without the -wal and -shm files, which SQLite cannot make in a read-only directory.
        cache_dir = Path(top) / "cache"
        cache_dir.mkdir()
        shutil.copyfile(_db(Path(top) / "seeded"), _db(cache_dir))
        before = {p.name: p.read_bytes() for p in cache_dir.iterdir() if p.is_file()}
        os.chmod(cache_dir, 0o555)
        for name in os.listdir(cache_dir):
            os.chmod(cache_dir / name, 0o444)

        def child() -> dict[str, object]:
            drop_root()
            caught = tunekit_messages()
            tk.configure(cache_dir=cache_dir)
            records: list[tk.AutotuneRecord] = []
            tk.add_record_sink(records.append)
            seeded = _tune_keys("seed", range(3))
            outputs = _tune_keys("ro", range(10)) + _tune_keys("ro2", range(10))
            return {
                "seeded": seeded,
                "outputs": outputs,
                "tuned": [(r.tuner, r.key["i"], r.stored) for r in records if r.decision == "tuned"],
                "warnings": caught,
                "writable": os.access(cache_dir, os.W_OK),
            }

        got = in_child(child)
        after = {p.name: p.read_bytes() for p in cache_dir.iterdir() if p.is_file()}
    assert got["writable"] is False
    assert got["seeded"] == [0, 2, 4]
    assert [t for t in got["tuned"] if t[0] == "seed"] == []  # read, not tuned again
    assert [t[2] for t in got["tuned"]] == [False] * 20  # no record claims a winner stored
    assert got["outputs"] == [2 * i for i in range(10)] * 2
    assert len(got["warnings"]) == 1 and "read-only" in got["warnings"][0], got["warnings"]
    assert after == before


@pytest.mark.subprocess
def test_full_disk_degrades_to_memory_only_with_one_warning(isolated_settings: Path) -> None:
    def child() -> dict[str, object]:
        caught = tunekit_messages()
        _tune_keys("before", range(2))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, as on a full disk
        size = _db(isolated_settings).stat().st_size + Path(str(_db(isolated_settings)) + "-wal").stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        outputs = _tune_keys("full", range(300))
        return {"outputs": outputs, "warnings": caught}

    got = in_child(child)
    assert got["outputs"] == [2 * i for i in range(300)]
    assert len(got["warnings"]) == 1 and "memory-only" in got["warnings"][0]
    cache = tk.PersistentCache(isolated_settings)
    assert [r for r in cache.rows() if isinstance(r, str)] == []


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: b"this is not a database at all" * 100, id="garbage"),
        pytest.param(lambda raw: raw[: len(raw) // 2], id="truncated"),
        pytest.param(lambda raw: raw[:100] + b"\xff" * 4000 + raw[4100:], id="overwritten-pages"),
    ],
)
def test_corrupt_file_is_moved_aside_and_tuning_goes_on(
    isolated_settings: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    db = _db(isolated_settings)
    cache = tk.PersistentCache(isolated_settings)
    for i in range(200):
        cache.put("dev", "t", f"k{i}", "c", tk.CacheValue(winner="w" * 100, ranking=["w" * 100]))
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    del cache
    db.write_bytes(damage(db.read_bytes()))  # type: ignore[operator]
    assert _tune_keys("after", range(5)) == [0, 2, 4, 6, 8]
    assert len([p for p in isolated_settings.glob("*.corrupt-*") if p.name[-4:] not in ("-wal", "-shm")]) == 1
    assert any("unreadable" in w and "moved to" in w for w in _warnings(caplog))
    fresh = tk.PersistentCache(isolated_settings)
    assert [r for r in fresh.rows() if isinstance(r, str)] == []
    assert isinstance(fresh.get(CLIENT.device_id, "after", key_to_json(IKey(i=1))), tuple)


def test_a_busy_database_is_never_mistaken_for_a_corrupt_one(isolated_settings: Path) -> None:
    # Only SQLite's own corruption codes may move a cache aside; a lock held elsewhere is no reason.
    cache = tk.PersistentCache(isolated_settings)
    assert cache.put("dev", "t", "k", "c", tk.CacheValue(winner="a", ranking=["a"]))
    holder = sqlite3.connect(_db(isolated_settings), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        impatient = tk.PersistentCache.__new__(tk.PersistentCache)
        impatient.BUSY_TIMEOUT_S = 0.2
        impatient.__init__(isolated_settings)  # type: ignore[misc]
        assert impatient.put("dev", "t", "k2", "c", tk.CacheValue(winner="b", ranking=["b"])) is False
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not list(isolated_settings.glob("*.corrupt-*"))
    got = tk.PersistentCache(isolated_settings).get("dev", "t", "k")
    assert isinstance(got, tuple) and got[1].winner == "a"


# -- hostile rows --------------------------------------------------------------------------------


def _plant(cache_dir: Path, device: object, tuner: object, key: object, checksum: object, value: object) -> None:
    """Write a row by hand, as an editor or an attacker would, bypassing every check."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(_db(cache_dir)) as raw:
        raw.execute(
            "CREATE TABLE IF NOT EXISTS winners (tunekit_major, device_id, tuner, key, checksum, value, updated)"
        )
        raw.execute("INSERT INTO winners VALUES (?, ?, ?, ?, ?, ?, 0)", (MAJOR, device, tuner, key, checksum, value))


def _valid_value(winner: str = "double") -> str:
    return tk.CacheValue(winner=winner, ranking=[winner]).model_dump_json()


HOSTILE = {
    "wrong-types": json.dumps({"schema_version": 1, "winner": 5, "ranking": "double"}),
    "future-schema": json.dumps({"schema_version": 99, "winner": "double", "ranking": ["double"]}),
    "deep-nesting": '{"schema_version": 1, "winner": "double", "ranking": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "huge-list": json.dumps({"schema_version": 1, "winner": "double", "ranking": ["x"] * 200_000}),
    "not-json": "{'winner': 'double'",
    "non-utf8": b'{"winner": "\xff\xfe"}',
    "integer-value": 12345,
    "null-value": None,
    "blob-value": b"\x00\x01\x02",
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_row_is_rejected_with_a_warning_and_retuned(
    isolated_settings: Path, value: object, caplog: pytest.LogCaptureFixture
) -> None:
    checksum = _tunables().checksum()
    _plant(isolated_settings, CLIENT.device_id, "hostile", key_to_json(IKey(i=3)), checksum, value)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert _tune_keys("hostile", range(3, 4)) == [6]
    finally:
        tk.remove_record_sink(sink)
    assert records[0].decision == "tuned"
    assert any("invalid and will be re-tuned" in w for w in _warnings(caplog))
    rows = list(tk.PersistentCache(isolated_settings).rows())
    assert any(isinstance(r, str) for r in rows), "the planted row is reported, not hidden"


def test_an_unknown_field_is_kept_as_inert_data(isolated_settings: Path) -> None:
    """Fields a newer tunekit may add within schema_version 1 are read, never acted on (they were refused before)."""
    value = json.dumps({"schema_version": 1, "winner": "twice", "ranking": ["twice"], "exec": "rm -rf /"})
    _plant(isolated_settings, CLIENT.device_id, "inert", key_to_json(IKey(i=3)), _tunables().checksum(), value)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert _tune_keys("inert", range(3, 4)) == [6]
    finally:
        tk.remove_record_sink(sink)
    assert records == []  # the stored winner was used
    (row,) = tk.PersistentCache(isolated_settings).rows()
    assert isinstance(row, tk.CacheRow) and row.value.winner == "twice"
    assert row.value.model_extra == {"exec": "rm -rf /"}


def test_oversized_value_is_refused_unread(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tk.PersistentCache, "MAX_VALUE_BYTES", 1000)
    value = tk.CacheValue(winner="double", ranking=["double"] * 500).model_dump_json()
    _plant(isolated_settings, CLIENT.device_id, "big", key_to_json(IKey(i=1)), _tunables().checksum(), value)
    got = tk.PersistentCache(isolated_settings).get(CLIENT.device_id, "big", key_to_json(IKey(i=1)))
    assert isinstance(got, str) and "larger than 1000 bytes" in got


def test_unknown_winner_name_is_retuned_never_looked_up_as_code(isolated_settings: Path) -> None:
    _plant(
        isolated_settings,
        CLIENT.device_id,
        "unknown",
        key_to_json(IKey(i=2)),
        _tunables().checksum(),
        _valid_value("__import__('os').system('false')"),
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert _tune_keys("unknown", range(2, 3)) == [4]
    finally:
        tk.remove_record_sink(sink)
    assert records[0].decision == "tuned" and records[0].winner in ("double", "twice")


def test_other_devices_rows_are_never_used(isolated_settings: Path) -> None:
    _plant(isolated_settings, "cpu:someone-else", "other", key_to_json(IKey(i=4)), _tunables().checksum(), "{")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        _tune_keys("other", range(4, 5))
    finally:
        tk.remove_record_sink(sink)
    assert not [e for e in records[0].events if e.kind == "cache_recovered"]  # the other device's row was not read


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
near_valid = st.fixed_dictionaries(
    {"schema_version": st.sampled_from([1, 2, "1", None]), "winner": json_values, "ranking": json_values},
    optional={"results": json_values, "tuned_at": json_values, "tunekit_version": json_values, "x": json_values},
)
cell = (
    st.none()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=50)
    | st.binary(max_size=50)
    | json_values.map(json.dumps)
    | near_valid.map(json.dumps)
    | near_valid.map(lambda d: json.dumps(d).encode()[: len(json.dumps(d)) // 2])
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(checksum=cell, value=cell, device=st.sampled_from([CLIENT.device_id, None, b"\xff", 7]))
def test_property_malformed_rows_produce_only_warnings(
    isolated_settings: Path, checksum: object, value: object, device: object
) -> None:
    with tempfile.TemporaryDirectory() as top:
        cache_dir = Path(top)
        key_json = key_to_json(IKey(i=5))
        _plant(cache_dir, device, "prop", key_json, checksum, value)
        cache = tk.PersistentCache(cache_dir)
        got = cache.get(CLIENT.device_id, "prop", key_json)
        assert got is None or isinstance(got, str) or isinstance(got[1], tk.CacheValue)
        for row in cache.rows():
            assert isinstance(row, str | tk.CacheRow)
        tk.configure(cache_dir=cache_dir)
        assert _tune_keys("prop", range(5, 6)) == [10]


# -- many processes, and kills -------------------------------------------------------------------


def _shared_tunables() -> tk.TunableSet[IKey, int]:
    return tk.TunableSet(key=lambda i: IKey(i=i)).with_tunables(
        [tk.Tunable("double", lambda i: 2 * i), tk.Tunable("twice", lambda i: i + i)]
    )


def _assert_complete(cache_dir: Path, keys: set[int]) -> None:
    """Every key in ``keys`` is stored whole with a valid winner, and the file passes SQLite's integrity check."""
    if not _db(cache_dir).exists():  # a child killed before its first tune opened the cache (a loaded machine)
        assert not keys, f"{len(keys)} committed keys but no cache file"
        return
    with sqlite3.connect(_db(cache_dir)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    cache = tk.PersistentCache(cache_dir)
    rows = list(cache.rows(tuner="shared"))
    assert [r for r in rows if isinstance(r, str)] == []
    checksum = _shared_tunables().checksum()
    stored = {json.loads(r.key)["i"]: r for r in rows if isinstance(r, tk.CacheRow) and r.device_id == CLIENT.device_id}
    missing = keys - stored.keys()
    assert not missing, f"{len(missing)} committed keys lost, e.g. {sorted(missing)[:5]}"
    for i in keys:
        assert stored[i].checksum == checksum and stored[i].value.winner in ("double", "twice")


@pytest.mark.slow
@pytest.mark.subprocess
def test_eight_processes_two_hundred_keys_each_lose_nothing(isolated_settings: Path) -> None:
    worker = Path(__file__).resolve().parents[1] / "_cache_worker.py"
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(isolated_settings), str(p * 100), "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(8)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert err == "", err  # a half-written or unreadable row would have been reported here
        reports.append(json.loads(out))
    assert all(r["wrong"] == [] for r in reports)
    assert sum(r["stored"] for r in reports) == sum(r["tuned"] for r in reports) >= 900
    _assert_complete(isolated_settings, set(range(900)))


def _tune_until_killed(report_fd: int, start: int) -> None:
    """Child of the kill test: tune fresh keys forever, reporting each one once it is committed."""
    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner("shared")
    tunables = tuner.init(_shared_tunables)
    os.write(report_fd, b"ready\n")
    i = start
    while True:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,))
        os.write(report_fd, f"{i}\n".encode())
        i += 1


@pytest.mark.slow
@pytest.mark.subprocess
def test_thirty_kills_at_random_moments_leave_every_committed_entry(isolated_settings: Path) -> None:
    tk.configure(samples=1, warmup=0, adaptive=False)  # fast tunes: many commits between kills
    rng = random.Random(7)
    committed: set[int] = set()
    for round_ in range(30):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read_end)
            try:
                _tune_until_killed(write_end, round_ * 1_000_000)
            finally:
                os._exit(1)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reports:
            assert reports.readline() == b"ready\n"
            # Every other round from its first commit: on a loaded machine, a kill timed from the start
            # may land while the cache is still being opened (and unsent records sent), and never after
            # a commit. The rounds timed from the start still kill there.
            first = reports.readline() if round_ % 2 else b""
            time.sleep(rng.uniform(0.0, 0.05))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            lines = [first, *reports.read().split(b"\n")]
        committed |= {int(line) for line in lines if line}
        _assert_complete(isolated_settings, committed)
    assert len(committed) > 30
