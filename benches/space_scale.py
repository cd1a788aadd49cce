"""Sampling and searching spaces too big to walk: time and memory, nothing materialised.

Run: ``.venv/bin/python benches/space_scale.py`` (``--strategies model_ils optuna_tpe`` adds the
slow ones on sparse spaces: tens of seconds each at 0.1 % valid). Prints one table: for each space
(Cartesian size, fraction of valid points), ``space.sample(n)`` and a 40-evaluation search per
strategy, with the wall time and the peak of memory Python allocated (tracemalloc) during it.
"""

from __future__ import annotations

import argparse
import functools
import time
import tracemalloc
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

import tunekit as tk

Restriction = Callable[[tk.Config], bool] | None

SPACES: list[tuple[str, dict[str, range], Restriction]] = [
    ("10^6, all valid", {"A": range(100), "B": range(100), "C": range(100)}, None),
    ("10^6, 1 % valid", {"A": range(100), "B": range(100), "C": range(100)}, lambda c: (c.A + c.B) % 100 == 0),
    ("10^12, all valid", {n: range(1000) for n in "ABCD"}, None),
    ("10^12, 1/3 valid", {n: range(1000) for n in "ABCD"}, lambda c: (c.A + c.B) % 3 == 0),
    (
        "10^12, 0.1 % valid",
        {n: range(1000) for n in "ABCD"},
        lambda c: c.A % 10 == 0 and c.B % 10 == 0 and c.C % 10 == 0,
    ),
]


class Cost:
    """A cheap deterministic objective, so the table shows the search's own cost."""

    def __init__(self, space: tk.Space) -> None:
        self.space = space

    def measure(self, config: tk.Config) -> tk.Outcome:
        return tk.Measured(tk.BenchmarkDurations((1000 + sum(int(v) for v in config.values_tuple) % 977,)))

    def remaining(self) -> int | None:
        return None


def measured(work: Callable[[], object]) -> tuple[float, float]:
    """Seconds and peak MiB allocated while ``work`` ran."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        work()
        return time.perf_counter() - t0, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000, help="points drawn by space.sample (default 1000)")
    parser.add_argument("--strategies", nargs="*", default=["random", "ils", "genetic"])
    args = parser.parse_args()
    table = Table(title="Spaces too big to walk (host CPU; tracemalloc peak)")
    for column in ("space", "work", "seconds", "peak MiB"):
        table.add_column(column, justify="right" if column in ("seconds", "peak MiB") else "left")
    for label, params, restrict in SPACES:
        space = tk.Space(restrict=restrict, **params)
        seconds, peak = measured(functools.partial(space.sample, args.samples, 0))
        table.add_row(label, f"sample({args.samples})", f"{seconds:.2f}", f"{peak:.1f}")
        for name in args.strategies:
            search = functools.partial(
                tk.tune_objective, Cost(space), tuner="scale", device_id="cpu", strategy=name, max_evals=40
            )
            seconds, peak = measured(search)
            table.add_row(label, f"{name}, 40 evaluations", f"{seconds:.2f}", f"{peak:.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
