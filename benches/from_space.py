"""Building ``TunableSet.from_space`` over large spaces: one Tunable per valid configuration.

Run: ``.venv/bin/python benches/from_space.py`` (``--points 5000000`` for a larger space; the
enumerable limit is 10^7 walk points). Prints one table: for a space of that many Cartesian points,
all valid and a third valid (a restriction), the seconds ``from_space`` took and how many tunables
it made. Each row runs once: a 10^6-point set takes seconds, and the spread between runs on a
shared VM is larger than between repeats.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

import tunekit as tk


def _build(config: tk.Config) -> Callable[[], None]:
    return lambda: None


@tk.autotune_key
class Key:
    n: int


def _key() -> Key:
    return Key(1)


def _third(c: tk.Config) -> bool:
    return bool((c.A + c.B) % 3 == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="Cartesian points, a multiple of 10^4")
    args = parser.parse_args()
    table = Table(title=f"TunableSet.from_space over {args.points:,} points (host CPU)")
    for column in ("space", "tunables", "seconds"):
        table.add_column(column, justify="left" if column == "space" else "right")
    for label, restrict in (("all valid", None), ("1/3 valid", _third)):
        space = tk.Space(A=range(args.points // 10_000), B=range(100), C=range(100), restrict=restrict)
        started = time.perf_counter()
        tunables = tk.TunableSet.from_space(space, _build, key=_key)
        seconds = time.perf_counter() - started
        table.add_row(label, f"{len(tunables.tunables):,}", f"{seconds:.2f}")
        del tunables
    Console().print(table)


if __name__ == "__main__":
    main()
