"""Cost of opening the persistent cache (its quick_check once per process and file) and of a store.

Run: ``.venv/bin/python benches/cache_open.py``. For caches of 100 and 10,000 winners, a fresh
``PersistentCache`` is opened 15 times (as a new process would: a connection, the schema, a
``PRAGMA quick_check``), and 300 winners are stored one by one (one transaction each, the file's
identity checked before and after), then 300 with their record kept until sent (the winner's
transaction plus the later removal). The table reports medians. Host CPU, real files under /tmp.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tunekit as tk

VALUE = tk.CacheValue(winner="w" * 50, ranking=["w" * 50, *(f"other-{j:03d}-" * 5 for j in range(10))])


def _filled(directory: Path, rows: int) -> tk.PersistentCache:
    cache = tk.PersistentCache(directory)
    with sqlite3.connect(cache.path) as raw:
        raw.executemany(
            "INSERT INTO winners VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(1, "dev", "t", f"k{i}", "c", VALUE.model_dump_json(), 0.0) for i in range(rows)],
        )
    return cache


def _median_ms(run: object, times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def _row(top: str, rows: int) -> tuple[str, ...]:
    cache = _filled(Path(top), rows)
    size = sum(p.stat().st_size for p in Path(top).glob("tunekit-cache.sqlite3*"))
    opened = _median_ms(lambda: tk.PersistentCache(top), 15)
    connection = cache._connection()
    check = _median_ms(lambda: connection.execute("PRAGMA quick_check(1)").fetchone(), 15)
    count = iter(range(10**9))
    put = _median_ms(lambda: cache.put("dev", "t", f"p{next(count)}", "c", VALUE), 300)

    def with_record() -> None:
        key = f"r{next(count)}"
        cache.put("dev", "t", key, "c", VALUE, record="{}")
        cache.record_sent("dev", "t", key)

    recorded = _median_ms(with_record, 300)
    return (
        f"{rows:,}",
        f"{size / 1e6:.1f}",
        f"{opened:.2f}",
        f"{check:.2f}",
        f"{put * 1e3:.0f}",
        f"{recorded * 1e3:.0f}",
    )


def main() -> None:
    table = Table(title="persistent cache: open and store (medians)")
    for column in ("winners", "file MB", "open ms", "quick_check ms", "put µs", "put + record µs"):
        table.add_column(column, justify="right")
    for rows in (100, 10_000):
        with tempfile.TemporaryDirectory() as top:
            table.add_row(*_row(top, rows))
    Console().print(table)


if __name__ == "__main__":
    main()
