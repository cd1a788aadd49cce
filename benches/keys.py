"""Cost of building an autotune key, which every ``execute`` does before it can look up a winner.

Run: ``.venv/bin/python benches/keys.py``. Each key is built 100,000 times per round, in 9
rounds interleaved over the keys; the table reports the median CPU time (``time.process_time_ns``:
waiting for a shared CPU is not counted) per key. Host CPU figures: key construction is pure Python.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Annotated

import numpy as np
from rich.console import Console
from rich.table import Table

import tunekit as tk


@tk.autotune_key
class Plain:
    n: int
    dtype: str


@tk.autotune_key
class Anchored:
    n: Annotated[int, tk.Anchor()]
    m: int


@tk.autotune_key
class Mixed:
    n: Annotated[int, tk.Anchor()]
    alpha: float
    dtype: str
    transpose: bool


@tk.autotune_key
class WithDtype:
    n: Annotated[int, tk.Anchor()]
    dtype: np.dtype


X = np.ones((2, 1000), np.float32)

CASES: dict[str, Callable[[], object]] = {
    "Plain(n=1000, dtype='f32')": lambda: Plain(n=1000, dtype="f32"),
    "Anchored(n=1000, m=7)": lambda: Anchored(n=1000, m=7),
    "Mixed(n, alpha, dtype, transpose)": lambda: Mixed(n=1000, alpha=1.0, dtype="f32", transpose=False),
    "Anchored(n=np.int64(1000), m=7)": lambda: Anchored(n=np.int64(1000), m=7),  # type: ignore[arg-type]
    "WithDtype(n=x.shape[1], dtype=x.dtype)": lambda: WithDtype(n=X.shape[1], dtype=X.dtype),
    "Plain(n=x.shape[1], dtype=str(x.dtype))": lambda: Plain(n=X.shape[1], dtype=str(X.dtype)),
}


def _ns_per_call(build: Callable[[], object], calls: int) -> float:
    start = time.process_time_ns()
    for _ in range(calls):
        build()
    return (time.process_time_ns() - start) / calls


def main() -> None:
    """Print the key-construction table."""
    tk.configure()
    calls, rounds = 100_000, 9
    timings: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, build in CASES.items():
            try:
                timings[name].append(_ns_per_call(build, calls))
            except TypeError:  # a version of tunekit that refuses this value
                timings[name].append(float("nan"))
    table = Table(title=f"building an autotune key (median of {rounds} rounds x {calls} keys)")
    table.add_column("key", justify="right")
    table.add_column("ns / key", justify="right")
    for name, samples in timings.items():
        table.add_row(name, f"{statistics.median(samples):.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
