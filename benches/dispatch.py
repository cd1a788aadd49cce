"""Cache-hit overhead of ``TUNER.init`` + ``TUNER.execute`` against calling the winner directly.

Run: ``.venv/bin/python benches/dispatch.py`` (or ``make bench``). Two operations are timed,
written as user code writes them: the README's first example (``SumKey``: an anchored size and
the array's dtype, ``dtype=x.dtype``) and a three-field key (two anchored sizes and the dtype);
a third runs the first on a tuner with the hit counter on (``count_hits``; the others run with
it off, its default). Their candidates return the input, so the winner costs what a no-op Python call costs and the
overhead is plain to see. Each path runs ``CALLS`` calls per round, the paths interleaved, over
``ROUNDS`` rounds; the table reports medians over rounds of the process's CPU time per call
(``time.process_time_ns``: time spent waiting for a shared CPU is not counted). The overhead is
also given as a multiple of a no-op Python call measured in the same rounds, a ratio that moves
less than nanoseconds with the machine's load. Figures are host CPU figures: dispatch is pure
Python, no device is involved.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CALLS = 20_000
ROUNDS = 15


@tk.autotune_key
class SumKey:
    n: Annotated[int, tk.Anchor()]  # 1000 -> 1024: nearby sizes share one winner
    dtype: np.dtype  # x.dtype as it is: stored by name ("float32")


@tk.autotune_key
class RowsKey:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(max=4096)]
    dtype: np.dtype


TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench")
ROWS_TUNER: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("dispatch_bench_rows")
COUNTED_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_counted")


def _first(x: np.ndarray) -> np.ndarray:
    return x


def _second(x: np.ndarray) -> np.ndarray:
    return x


def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's first example, with candidates that cost a no-op call."""
    tunables = TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return TUNER.execute(client.device_id, client, tunables, (x,))


def rows_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """A three-field key: two anchored sizes and the dtype."""
    tunables = ROWS_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: RowsKey(n=x.shape[1], rows=x.shape[0], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return ROWS_TUNER.execute(client.device_id, client, tunables, (x,))


def counted_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's first example on a tuner that counts its hits (``count_hits`` on at its first call)."""
    tunables = COUNTED_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return COUNTED_TUNER.execute(client.device_id, client, tunables, (x,))


def _noop(client: CpuClient, x: np.ndarray) -> np.ndarray:
    return x


def _winner(client: CpuClient, x: np.ndarray) -> np.ndarray:
    return _first(x)


def _per_call_ns(fn: Callable[[CpuClient, np.ndarray], Any], client: CpuClient, x: np.ndarray, calls: int) -> float:
    start = time.process_time_ns()
    for _ in range(calls):
        fn(client, x)
    return (time.process_time_ns() - start) / calls


def main() -> None:
    """Print the overhead table."""
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else CALLS
    client = CpuClient()
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["TUNEKIT_CACHE_DIR"] = cache_dir
        tk.configure()
        x = np.ones((64, 1000), dtype=np.float32)
        row_sum(client, x)  # tune once; every later call is a cache hit
        rows_op(client, x)
        # The hit counter is chosen when a tuner first runs on a device: on for this tuner alone.
        tk.configure(count_hits=True)
        counted_sum(client, x)
        tk.configure()
        paths: dict[str, Callable[[CpuClient, np.ndarray], Any]] = {
            "no-op Python call": _noop,
            "winner called directly": _winner,
            "README example (SumKey: n, dtype)": row_sum,
            "three-field key (n, rows, dtype)": rows_op,
            "README example, count_hits on": counted_sum,
        }
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(ROUNDS):
            for name, fn in paths.items():
                times[name].append(_per_call_ns(fn, client, x, calls))
        median = {name: statistics.median(t) for name, t in times.items()}
        noop, direct = median["no-op Python call"], median["winner called directly"]
        table = Table(
            title=f"cache-hit dispatch on {client.device_id}: median of {ROUNDS} rounds x {calls} calls, CPU time"
        )
        for column in ("path", "ns / call", "overhead ns / call", "overhead in no-op calls"):
            table.add_column(column, justify="right")
        for name, ns in median.items():
            through = name not in ("no-op Python call", "winner called directly")
            overhead = ns - direct
            table.add_row(
                name, f"{ns:.0f}", f"{overhead:.0f}" if through else "-", f"{overhead / noop:.1f}x" if through else "-"
            )
        Console(width=120).print(table)


if __name__ == "__main__":
    main()
