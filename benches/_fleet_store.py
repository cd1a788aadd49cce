"""Cache-hit latency through the PostgreSQL store against the SQLite cache, and the in-memory hit with each.

Run: ``.venv/bin/python benches/_fleet_store.py`` (starts its own PostgreSQL server from the
distribution's packages, ``scripts/pg_server.py``, on a unix socket, and stops it after). ``KEYS``
winners are tuned once, into a SQLite cache and the database. Then, over ``ROUNDS`` rounds:

- *miss path*: a fresh ``LocalTuner`` (nothing in memory, as in a new process) executes every key
  once; each call reads the stored winner: from the SQLite cache, or (``TUNEKIT_CACHE_URL`` set, an
  empty cache directory: a new host) from the database, then keeps a copy in that host's cache;
- *store read*: ``Store.get`` of every key, through each store (the protocol call alone);
- *in-memory hit*: ``CALLS`` executes of a key already in memory, with and without
  ``TUNEKIT_CACHE_URL``: a store is read on a miss only, so the two must match.

Medians over rounds of wall time per call (``perf_counter``: a database answer is waited for, not
computed). Host CPU figures; the database is a local server on the same machine, so a network
round trip to a real fleet database adds its latency to the miss path only.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit._store.cache import PersistentCache
from tunekit._store.pg_store import PostgresStore
from tunekit._store.sqlite_store import SqliteStore
from tunekit._store.store_protocol import Store
from tunekit_backends.cpu import CpuClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from pg_server import PgServer

KEYS = 200
ROUNDS = 7
CALLS = 20_000
CLIENT = CpuClient()


@tk.autotune_key
class Key:
    n: int


def _first(n: int) -> int:
    return n


def _second(n: int) -> int:
    return n


def _set() -> tk.TunableSet[Key, int]:
    return tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
        [tk.Tunable("first", _first), tk.Tunable("second", _second)]
    )


def _per_call_us(run: Callable[[], None], calls: int) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) / calls * 1e6


def _miss_path_us(tunables: tk.TunableSet[Key, int]) -> float:
    tuner: tk.LocalTuner[Key, int] = tk.LocalTuner("fleet_bench")  # nothing in memory: every key is read

    def run() -> None:
        for n in range(KEYS):
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (n,))

    return _per_call_us(run, KEYS)


def _hit_us(tunables: tk.TunableSet[Key, int]) -> float:
    tuner: tk.LocalTuner[Key, int] = tk.LocalTuner("fleet_bench")
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (0,))

    def run() -> None:
        for _ in range(CALLS):
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (0,))

    return _per_call_us(run, CALLS)


def _get_us(store: Store) -> float:
    def run() -> None:
        for n in range(KEYS):
            store.get(CLIENT.device_id, "fleet_bench", f'{{"n":{n}}}')

    return _per_call_us(run, KEYS)


def rows() -> list[tuple[str, str, str, str]]:
    """(path, SQLite µs, PostgreSQL µs, PostgreSQL / SQLite): medians over ``ROUNDS``."""
    server = PgServer.start()
    root = Path(tempfile.mkdtemp(prefix="tunekit-fleet-bench-"))
    url = server.url()
    tunables = _set()
    try:
        tk.configure(cache_dir=root / "sqlite", cache_url=url, progress=False, samples=3, warmup_ms=1)
        for n in range(KEYS):  # tuned once: into this host's cache and the database
            tk.LocalTuner("fleet_bench").execute(CLIENT.device_id, CLIENT, tunables, (n,))
        figures: dict[str, tuple[list[float], list[float]]] = {
            name: ([], []) for name in ("miss path (fresh tuner)", "store read (Store.get)", "in-memory hit")
        }
        sqlite_store = SqliteStore(PersistentCache(root / "sqlite"))
        pg_store = PostgresStore(url)
        for round_ in range(ROUNDS):
            tk.configure(cache_dir=root / "sqlite", progress=False)
            figures["miss path (fresh tuner)"][0].append(_miss_path_us(tunables))
            figures["in-memory hit"][0].append(_hit_us(tunables))
            figures["store read (Store.get)"][0].append(_get_us(sqlite_store))
            tk.configure(cache_dir=root / f"new-host-{round_}", cache_url=url, progress=False)
            figures["miss path (fresh tuner)"][1].append(_miss_path_us(tunables))
            figures["in-memory hit"][1].append(_hit_us(tunables))
            figures["store read (Store.get)"][1].append(_get_us(pg_store))
        pg_store.close()
    finally:
        tk.configure()
        server.stop()
    table = []
    for name, (sqlite_us, pg_us) in figures.items():
        lite, pg = statistics.median(sqlite_us), statistics.median(pg_us)
        unit = "µs"
        table.append((name, f"{lite:.2f} {unit}", f"{pg:.2f} {unit}", f"{pg / lite:.2f}x"))
    return table


def main() -> None:
    table = Table(title=f"Winner lookups: SQLite cache vs PostgreSQL store ({KEYS} keys, median of {ROUNDS} rounds)")
    for column in ("path", "SQLite", "PostgreSQL", "PostgreSQL / SQLite"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for row in rows():
        table.add_row(*row)
    Console().print(table)


if __name__ == "__main__":
    main()
