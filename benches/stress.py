"""Throughput of the cache and of tuning when many threads and processes share one cache.

Run: ``.venv/bin/python benches/stress.py [--seconds 1.0] [--rounds 3]``. Every configuration
runs for a fixed wall time and counts completed operations; configurations are interleaved
over rounds and the table reports the median over rounds, with the ratio to one worker. All
figures are host-CPU figures (candidates are trivial Python functions): what is measured is
tunekit's own overhead, the SQLite cache and the operating system, not a device.

- memory hit: ``LocalTuner.execute`` on a key tuned before (the dispatch hot path);
- disk hit: ``PersistentCache.get`` of a stored winner (what a fresh process does per key);
- tune: a new key tuned and stored (2 candidates, the fixed schedule: 1 warm-up + 3 samples, so
  the figure is tunekit's and the cache's cost, not the adaptive schedule's device warm-up), all
  workers on one cache file; ``isolation=process`` adds a forked worker per tune.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()
KEYS = 1000


@tk.autotune_key
class IKey:
    i: int


def _tunables() -> tk.TunableSet[IKey, int]:
    return tk.TunableSet(key=lambda i: IKey(i=i)).with_tunables(
        [tk.Tunable("double", lambda i: 2 * i), tk.Tunable("twice", lambda i: i + i)]
    )


TUNER: tk.LocalTuner[IKey, int] = tk.LocalTuner("stress")
SETTINGS: dict[str, object] = {"samples": 3, "warmup": 1, "adaptive": False, "progress": False}
_fresh_keys = iter(range(1, 10**6))


def _memory_hits(worker: int) -> Callable[[], int]:
    tunables = TUNER.init(_tunables)
    keys = iter(range(10**9))

    def op() -> int:
        return TUNER.execute(CLIENT.device_id, CLIENT, tunables, (next(keys) % KEYS,))

    return op


def _disk_hits(worker: int) -> Callable[[], object]:
    cache = tk.PersistentCache(tk.settings().cache_dir or tk.default_cache_dir())
    keys = [key_to_json(IKey(i=i)) for i in range(KEYS)]
    counter = iter(range(10**9))

    def op() -> object:
        got = cache.get(CLIENT.device_id, "stress", keys[next(counter) % KEYS])
        assert isinstance(got, tuple)
        return got

    return op


def _tunes(worker: int) -> Callable[[], int]:
    # A tuner per worker and fresh keys per worker: every call is a miss, measured and stored.
    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner("stress-tune")
    tunables = tuner.init(_tunables)
    first = next(_fresh_keys) * 10**8 + worker * 10**7
    keys = iter(range(first, first + 10**7))

    def op() -> int:
        return tuner.execute(CLIENT.device_id, CLIENT, tunables, (next(keys),))

    return op


def _run_until(op: Callable[[], object], start: float, stop: float) -> int:
    while time.time() < start:
        time.sleep(0.0005)
    count = 0
    while time.time() < stop:
        op()
        count += 1
    return count


def in_threads(make: Callable[[int], Callable[[], object]], threads: int, seconds: float) -> float:
    """Operations per second of ``threads`` threads together."""
    ops = [make(t) for t in range(threads)]
    counts = [0] * threads
    start = time.time() + 0.05
    stop = start + seconds

    def work(t: int) -> None:
        counts[t] = _run_until(ops[t], start, stop)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(counts) / seconds


def in_processes(make: Callable[[int], Callable[[], object]], processes: int, seconds: float) -> float:
    """Operations per second of ``processes`` forked processes together."""
    start = time.time() + 0.1
    stop = start + seconds
    children = []
    for p in range(processes):
        op = make(p)  # here, so that fresh keys are drawn from the parent's counter
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: count, report, leave without running the parent's cleanup
            os.close(read_end)
            count = -1
            try:
                count = _run_until(op, start, stop)
            finally:
                os.write(write_end, json.dumps(count).encode())
                os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))
    total = 0
    for pid, read_end in children:
        with os.fdopen(read_end) as got:
            count = json.loads(got.read())
        os.waitpid(pid, 0)
        if count < 0:
            raise RuntimeError("a worker process failed")
        total += count
    return total / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="wall time per configuration and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache_dir:
        SETTINGS["cache_dir"] = Path(cache_dir)
        tk.configure(**SETTINGS)
        tunables = TUNER.init(_tunables)
        for i in range(KEYS):  # tune once: every later lookup is a hit
            TUNER.execute(CLIENT.device_id, CLIENT, tunables, (i,))
        configs: list[tuple[str, str, int, Callable[[], float]]] = []
        for n in (1, 2, 4, 8):
            configs.append(("memory hit", "threads", n, lambda n=n: in_threads(_memory_hits, n, args.seconds)))
        for n in (1, 2, 4, 8):
            configs.append(("disk hit", "threads", n, lambda n=n: in_threads(_disk_hits, n, args.seconds)))
        for n in (1, 2, 4):
            configs.append(("disk hit", "processes", n, lambda n=n: in_processes(_disk_hits, n, args.seconds)))
        for n in (1, 2, 4):
            configs.append(("tune", "processes", n, lambda n=n: in_processes(_tunes, n, args.seconds)))
        configs.append(("tune, isolation=process", "processes", 1, lambda: _isolated_tunes(args.seconds)))
        results: dict[int, list[float]] = {i: [] for i in range(len(configs))}
        for _ in range(args.rounds):
            for i, (*_, run) in enumerate(configs):
                results[i].append(run())
        rows_left = tk.PersistentCache(Path(cache_dir)).rows()
        bad = [r for r in rows_left if isinstance(r, str)]
    title = f"tunekit stress: {os.cpu_count()} CPUs ({CLIENT.device_id.split(':')[1]}), medians of {args.rounds}"
    table = Table(title=title)
    for column in ("operation", "workers", "ops / s", "vs 1 worker"):
        table.add_column(column, justify="right")
    baseline: dict[tuple[str, str], float] = {}
    for i, (operation, kind, n, _) in enumerate(configs):
        median = statistics.median(results[i])
        base = baseline.setdefault((operation.split(",")[0], kind), median)  # isolated tunes vs plain tunes
        table.add_row(operation, f"{n} {kind}", f"{median:,.0f}", f"{median / base:.2f}x")
    Console().print(table)
    print(f"unreadable rows after the run: {len(bad)}")


def _isolated_tunes(seconds: float) -> float:
    tk.configure(**SETTINGS, isolation="process")
    try:
        return in_processes(_tunes, 1, seconds)
    finally:
        tk.configure(**SETTINGS)


if __name__ == "__main__":
    main()
