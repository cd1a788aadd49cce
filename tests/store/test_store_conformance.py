"""One suite, every Store: the embedded SQLite cache and the PostgreSQL store answer the protocol alike."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunekit._store.cache import PersistentCache
from tunekit._store.pg_store import PostgresStore
from tunekit._store.sqlite_store import SqliteStore
from tunekit._store.store_protocol import Store
from tunekit._values.cache_row import CacheRow, CacheValue

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.subprocess)]
ROOT = Path(__file__).resolve().parents[2]


def _value(winner: str, *others: str) -> CacheValue:
    return CacheValue(winner=winner, ranking=[winner, *others])


def _open(kind: str, where: str) -> Store:
    return SqliteStore(PersistentCache(where)) if kind == "sqlite" else PostgresStore(where)


@pytest.fixture
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What a store of the test's kind is opened at: a cache directory, or a fresh database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "store")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(request: pytest.FixtureRequest, where: str) -> Iterator[Store]:
    opened = _open(request.node.callspec.params["where"], where)
    yield opened
    if isinstance(opened, PostgresStore):
        opened.close()


parametrize = pytest.mark.parametrize("where", KINDS, indirect=True)


@parametrize
def test_a_key_with_no_winner_reads_none_and_one_stored_reads_back_whole(store: Store) -> None:
    assert store.get("dev", "op", '{"n":1}') is None
    stored = store.put_if_absent("dev", "op", '{"n":1}', "sum1", _value("a", "b"))
    assert isinstance(stored, tuple)
    assert stored[0] == "sum1"
    assert (stored[1].winner, stored[1].ranking) == ("a", ["a", "b"])
    got = store.get("dev", "op", '{"n":1}')
    assert isinstance(got, tuple)
    assert got == stored
    assert store.get("dev", "op", '{"n":2}') is None
    assert store.get("other-dev", "op", '{"n":1}') is None
    assert store.available


@parametrize
def test_a_second_winner_of_the_same_set_is_refused_and_the_first_answered(store: Store) -> None:
    store.put_if_absent("dev", "op", "k", "sum1", _value("a", "b"))
    second = store.put_if_absent("dev", "op", "k", "sum1", _value("b", "a"))
    assert isinstance(second, tuple)
    assert second[1].winner == "a"  # the loser of the race adopts the first
    got = store.get("dev", "op", "k")
    assert isinstance(got, tuple)
    assert got[1].winner == "a"


@parametrize
def test_a_winner_of_a_changed_set_replaces_the_stale_row(store: Store) -> None:
    store.put_if_absent("dev", "op", "k", "old", _value("a"))
    replaced = store.put_if_absent("dev", "op", "k", "new", _value("c"))
    assert isinstance(replaced, tuple)
    assert replaced[0] == "new"
    assert replaced[1].winner == "c"


@parametrize
def test_rows_lists_every_winner_and_filters_by_device_and_tuner(store: Store) -> None:
    for device, tuner, key in [("d1", "op", "k1"), ("d1", "op", "k2"), ("d1", "mm", "k1"), ("d2", "op", "k1")]:
        store.put_if_absent(device, tuner, key, "sum", _value(f"{device}-{tuner}-{key}"))
    everything = list(store.rows())
    assert all(isinstance(row, CacheRow) for row in everything)
    assert sorted((r.device_id, r.tuner, r.key, r.value.winner) for r in everything if isinstance(r, CacheRow)) == [
        ("d1", "mm", "k1", "d1-mm-k1"),
        ("d1", "op", "k1", "d1-op-k1"),
        ("d1", "op", "k2", "d1-op-k2"),
        ("d2", "op", "k1", "d2-op-k1"),
    ]
    assert {(r.device_id, r.key) for r in store.rows(device_id="d1", tuner="op") if isinstance(r, CacheRow)} == {
        ("d1", "k1"),
        ("d1", "k2"),
    }
    assert len(list(store.rows(tuner="mm"))) == 1


@parametrize
def test_delete_removes_one_key_one_tuner_or_everything_and_counts_them(store: Store) -> None:
    for tuner, key in [("op", "k1"), ("op", "k2"), ("op", "k3"), ("mm", "k1")]:
        store.put_if_absent("dev", tuner, key, "sum", _value("a"))
    assert store.delete(tuner="op", key="k1") == 1
    assert store.get("dev", "op", "k1") is None
    assert store.get("dev", "mm", "k1") is not None
    assert store.delete(tuner="op") == 2
    assert store.delete() == 1
    assert list(store.rows()) == []
    assert store.delete() == 0


@parametrize
def test_a_held_tune_lock_keeps_another_taker_out_until_released(store: Store) -> None:
    taken: list[bool] = []

    def other(timeout_s: float) -> None:
        with store.lock("dev", "op", "k", timeout_s) as held:
            taken.append(held)

    with store.lock("dev", "op", "k", 30) as held:
        assert held
        waiter = threading.Thread(target=other, args=(0.3,))
        waiter.start()
        waiter.join()
        assert taken == [False]  # timed out: the key is being tuned
        with store.lock("dev", "op", "other-key", 1) as unrelated:
            assert unrelated  # another key's lock is free
        with store.lock("dev", "op", "k", 1) as nested:
            assert nested  # the tune holding it (code it runs) does not wait on itself
    waiter = threading.Thread(target=other, args=(5.0,))
    waiter.start()
    waiter.join()
    assert taken == [False, True]


_RACER = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, {tests!r})
    from test_store_conformance import _open, _value
    kind, where, name, go, tuned_log = sys.argv[1:6]
    store = _open(kind, where)
    while not os.path.exists(go):
        time.sleep(0.002)
    # One key under the lock, as the tuner does: look, tune when missing, store.
    with store.lock("dev", "op", "locked", 60) as held:
        assert held
        if store.get("dev", "op", "locked") is None:
            with open(tuned_log, "a") as log:
                log.write(name + "\\n")
            time.sleep(0.3)  # the tune
            store.put_if_absent("dev", "op", "locked", "sum", _value(name))
        locked = store.get("dev", "op", "locked")[1].winner
    # One key without it: both store at once, and both must read the same winner back.
    raced = store.put_if_absent("dev", "op", "raced", "sum", _value(name))[1].winner
    print(json.dumps({{"locked": locked, "raced": raced}}))
    """
)


@pytest.mark.subprocess
@parametrize
def test_two_processes_racing_for_one_key_tune_it_once_and_read_the_same_winner(
    request: pytest.FixtureRequest, where: str, tmp_path: Path
) -> None:
    kind = request.node.callspec.params["where"]
    made = _open(kind, where)  # made before the race: the race is for the key, not for creating the store
    made.get("dev", "op", "locked")
    if isinstance(made, PostgresStore):
        made.close()
    script = tmp_path / "racer.py"
    script.write_text(_RACER.format(tests=str(Path(__file__).parent)))
    go, tuned_log = tmp_path / "go", tmp_path / "tuned.log"
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), kind, where, name, str(go), str(tuned_log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    ]
    time.sleep(0.5)
    go.touch()
    answers = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err[-2000:]
        answers.append(json.loads(out.strip().splitlines()[-1]))
    assert len(tuned_log.read_text().split()) == 1  # tuned once
    assert answers[0] == answers[1]
    assert answers[0]["locked"] == tuned_log.read_text().strip()


_HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_store_conformance import _open
    store = _open(sys.argv[1], sys.argv[2])
    with store.lock("dev", "op", "k", 10) as held:
        print("held" if held else "not held", flush=True)
        time.sleep(600)
    """
)


@pytest.mark.subprocess
@parametrize
def test_a_process_killed_holding_a_tune_lock_releases_it(
    request: pytest.FixtureRequest, where: str, store: Store, tmp_path: Path
) -> None:
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER.format(tests=str(Path(__file__).parent)))
    kind = request.node.callspec.params["where"]
    holder = subprocess.Popen(
        [sys.executable, str(script), kind, where], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with store.lock("dev", "op", "k", 0.3) as held:
            assert not held
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=60)
    started = time.monotonic()
    with store.lock("dev", "op", "k", 30) as held:
        assert held
    assert time.monotonic() - started < 30
