"""What ``strategy="auto"`` costs to decide on a restricted space, and what the decision buys.

``auto`` counts a restricted space's valid configurations, walking it only until
``max_evals + 1`` are found, to pick ``exhaustive`` when the budget covers them all. Each
scenario is a fresh space of 10^6 Cartesian points (10^6 x 2 for the last, past the counting
limit) with one restriction. Columns: what auto picks, the median time of that decision over
interleaved rounds (a fresh space each round: a count is remembered), and the wall time and
evaluations of the whole search with an instant objective (no measurement cost at all, so the
search's own overhead is all there is), auto against ``model_ils`` named explicitly (what auto
picked before it counted past 50,000 points). Host CPU, pure Python.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benches/auto_choice.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit._search.choose import budget_covers


@dataclass(frozen=True)
class Scenario:
    label: str
    space: Callable[[], tk.Space]
    max_evals: int


def _cube(restrict: Callable[[tk.Config], bool], c: int = 100) -> Callable[[], tk.Space]:
    return lambda: tk.Space(A=range(100), B=range(100), C=range(c), restrict=restrict)


SCENARIOS = [
    Scenario("7.7% valid, budget 500", _cube(lambda c: c.A * c.B * c.C % 7 == 0), 500),
    Scenario("100 valid, budget 200", _cube(lambda c: c.A == c.B == c.C), 200),
    Scenario("100 valid, budget 50", _cube(lambda c: c.A == c.B == c.C), 50),
    Scenario("2*10^6 points, 200 valid, budget 200", _cube(lambda c: c.A == c.B == c.C // 2, 200), 200),
]


class Instant:
    """An objective whose measurement costs nothing: a configuration's cost is a sum of its values."""

    def __init__(self, space: tk.Space) -> None:
        self.space = space

    def measure(self, config: tk.Config) -> tk.Outcome:
        return tk.Measured(tk.BenchmarkDurations((1000 + 7 * config.A + 3 * config.B + config.C,)))

    def remaining(self) -> int | None:
        return None


def _search(scenario: Scenario, strategy: str) -> tuple[float, int, str]:
    started = time.perf_counter()
    result = tk.tune_objective(
        Instant(scenario.space()),
        tuner="bench",
        device_id="cpu",
        strategy=strategy,
        max_evals=scenario.max_evals,
    )
    return time.perf_counter() - started, result.evaluations, result.strategy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    decide: dict[str, list[float]] = {s.label: [] for s in SCENARIOS}
    picks: dict[str, bool] = {}
    for _ in range(args.rounds):
        for scenario in SCENARIOS:
            space = scenario.space()
            started = time.perf_counter()
            picks[scenario.label] = budget_covers(space, scenario.max_evals, None)
            decide[scenario.label].append(time.perf_counter() - started)
    table = Table(title=f"strategy='auto' on restricted spaces: decision median of {args.rounds} rounds; host CPU")
    for column in ("scenario", "auto picks", "decision ms", "auto search s (evals)", "model_ils search s (evals)"):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for scenario in SCENARIOS:
        auto_s, auto_n, picked = _search(scenario, "auto")
        ils_s, ils_n, _ = _search(scenario, "model_ils")
        assert picked == ("exhaustive" if picks[scenario.label] else "model_ils")
        table.add_row(
            scenario.label,
            picked,
            f"{statistics.median(decide[scenario.label]) * 1000:.0f}",
            f"{auto_s:.2f} ({auto_n})",
            f"{ils_s:.2f} ({ils_n})",
        )
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
