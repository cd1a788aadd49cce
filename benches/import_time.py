"""Import time of ``tunekit`` and the names the README's first example uses.

Run: ``.venv/bin/python benches/import_time.py``. Each of 5 fresh interpreters runs the import
under ``python -X importtime``; the figure is the sum of the top-level imports the statement made
(what ``python -c pass`` imports at startup is left out), and the table reports the median over
interpreters and the modules that cost most in the median run. Host CPU figures.
"""

from __future__ import annotations

import subprocess
import sys

from rich.console import Console
from rich.table import Table

RUNS = 5
README_NAMES = "import tunekit as tk; tk.LocalTuner, tk.TunableSet, tk.Tunable, tk.autotune_key, tk.Anchor"


def _importtime(statement: str) -> list[tuple[str, int, int]]:
    """(module, self µs, cumulative µs) of each import, in the order ``-X importtime`` prints them."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True, check=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((name.rstrip()[1:], int(own), int(cumulative)))  # one space follows the bar
    return rows


def _top_level(rows: list[tuple[str, int, int]], startup: set[str]) -> list[tuple[str, int]]:
    """The imports the statement made itself (not nested in another), with their cumulative µs."""
    return [(n, c) for n, _, c in rows if not n.startswith(" ") and n not in startup]


def main() -> None:
    """Print the median import time and the costliest modules."""
    startup = {n.strip() for n, _, _ in _importtime("pass")}
    totals: list[tuple[int, list[tuple[str, int, int]]]] = []
    for _ in range(RUNS):
        rows = _importtime(README_NAMES)
        totals.append((sum(c for _, c in _top_level(rows, startup)), rows))
    totals.sort(key=lambda t: t[0])
    median_us, median_rows = totals[len(totals) // 2]
    heavy = {"numpy", "pydantic", "pydantic_settings", "rich", "tunekit._search", "tunekit_backends.opencl"}
    loaded = {n.strip() for n, _, _ in median_rows}
    table = Table(title=f"{README_NAMES!r}: median of {RUNS} fresh interpreters, host CPU")
    table.add_column("module (cumulative, top 12 by self time)")
    table.add_column("self ms", justify="right")
    table.add_column("cumulative ms", justify="right")
    for name, own, cumulative in sorted(median_rows, key=lambda r: -r[1])[:12]:
        table.add_row(name.strip(), f"{own / 1000:.1f}", f"{cumulative / 1000:.1f}")
    console = Console()
    console.print(table)
    runs = ", ".join(f"{t / 1000:.0f}" for t, _ in totals)
    console.print(f"import total: median {median_us / 1000:.1f} ms (runs, sorted: {runs} ms); target 150 ms")
    console.print(f"heavy packages loaded: {sorted(h for h in heavy if h in loaded) or 'none'}")
    console.print(f"modules loaded: {len(loaded)}")


if __name__ == "__main__":
    main()
