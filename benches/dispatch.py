"""Cache-hit overhead of ``LocalTuner.execute`` against calling the winner directly.

Run: ``.venv/bin/python benches/dispatch.py`` (or ``make bench``). Both are timed in the same
run, interleaved in rounds, and the table reports medians over rounds. Figures are host CPU
figures: dispatch is pure Python, no device is involved.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Annotated

import numpy as np
from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class SmallKey:
    n: Annotated[int, tk.Anchor()]


TUNER: tk.LocalTuner[SmallKey, np.ndarray] = tk.LocalTuner("dispatch_bench")
CLIENT = CpuClient()
DEVICE = CLIENT.device_id


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def _copy(x: np.ndarray) -> np.ndarray:
    return x.copy()


def tuned(x: np.ndarray) -> np.ndarray:
    """The user-facing call: init + execute, exactly as user code writes it."""
    tunables = TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SmallKey(n=x.shape[0]))
            .with_tunable(tk.Tunable("identity", _identity))
            .with_tunable(tk.Tunable("copy", _copy))
        )
    )
    return TUNER.execute(DEVICE, CLIENT, tunables, (x,))


def _per_call_ns(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter_ns() - start) / calls


def main() -> None:
    """Print the overhead table."""
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["TUNEKIT_CACHE_DIR"] = cache_dir
        tk.configure()
        x = np.ones(100, dtype=np.float32)
        tuned(x)  # tune once; every later call is a cache hit
        winner = {"identity": _identity, "copy": _copy}[TUNER.tuner(DEVICE).winners_names()[0]]
        calls, rounds = 20_000, 15
        direct: list[float] = []
        through: list[float] = []
        for _ in range(rounds):
            direct.append(_per_call_ns(winner, x, calls))
            through.append(_per_call_ns(tuned, x, calls))
        direct_ns, through_ns = statistics.median(direct), statistics.median(through)
        table = Table(title=f"cache-hit dispatch on {DEVICE} (median of {rounds} rounds x {calls} calls)")
        for column in ("path", "ns / call", "overhead ns / call", "ratio"):
            table.add_column(column, justify="right")
        table.add_row("winner called directly", f"{direct_ns:.0f}", "-", "1.00x")
        table.add_row(
            "TUNER.init + TUNER.execute",
            f"{through_ns:.0f}",
            f"{through_ns - direct_ns:.0f}",
            f"{through_ns / direct_ns:.2f}x",
        )
        Console().print(table)


if __name__ == "__main__":
    main()
