"""Import time of ``tunekit`` and the names the README's first example uses.

Run: ``.venv/bin/python benches/import_time.py``. Each of 5 fresh interpreters runs the import
under ``python -X importtime``; the figure is the sum of the top-level imports the statement made
(what ``python -c pass`` imports at startup is left out), and the table reports the median over
interpreters and the modules that cost most in the median run. numpy is imported first, as the
README does, and left out; the cold figure keeps it. Five more interpreters give the import's CPU
time (``time.process_time``), which a loaded machine inflates less, and five more that of the
README's first example up to its first call (the CPU client, the key class, the tuner, its set).
Host CPU figures.
"""

from __future__ import annotations

import subprocess
import sys

from rich.console import Console
from rich.table import Table

RUNS = 5
README_NAMES = "import tunekit as tk; tk.LocalTuner, tk.TunableSet, tk.Tunable, tk.autotune_key, tk.Anchor"
# The README's first example up to its first call: its imports (the CPU client too), the key class,
# the tuner, the set built by init, and the client. The first execute is a miss and loads the rest.
README_EXAMPLE = """
from typing import Annotated
import tunekit as tk
from tunekit_backends.cpu import CpuClient

@tk.autotune_key
class SumKey:
    n: Annotated[int, tk.Anchor()]
    dtype: np.dtype

TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("row_sum")
tunables = TUNER.init(
    lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
    .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
    .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)))
)
client = CpuClient()
"""


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


def _measure(statement: str, startup: set[str], exclude: set[str]) -> tuple[int, list[tuple[str, int, int]]]:
    """The median run's total µs of the statement's top-level imports (less ``exclude``), and its rows."""
    totals = []
    for _ in range(RUNS):
        rows = _importtime(statement)
        totals.append((sum(c for n, c in _top_level(rows, startup) if n not in exclude), rows))
    totals.sort(key=lambda t: t[0])
    return totals[len(totals) // 2]


def _cpu_ms(statement: str, before: str) -> float:
    """The CPU time (``time.process_time``) a fresh interpreter spends on ``statement``, after ``before``.

    Unlike ``-X importtime``'s wall time, it does not count time spent waiting for a shared CPU.
    """
    probe = f"{before}\nimport time\nt = time.process_time()\n{statement}\nprint(time.process_time() - t)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return float(done.stdout) * 1000


def main() -> None:
    """Print the median import time and the costliest modules."""
    startup = {n.strip() for n, _, _ in _importtime("pass")}
    cold_us, _ = _measure(README_NAMES, startup, set())
    # The README imports numpy before tunekit: what tunekit adds to a program that uses numpy anyway.
    median_us, median_rows = _measure("import numpy; " + README_NAMES, startup, {"numpy"})
    heavy = {"pydantic", "pydantic_settings", "rich", "asyncio", "tunekit._search", "tunekit_backends.opencl"}
    heavy |= {"pyopencl", "optuna", "opentelemetry"}
    loaded = {n.strip() for n, _, _ in median_rows}
    table = Table(title=f"{README_NAMES!r} after numpy: the median of {RUNS} fresh interpreters, host CPU")
    table.add_column("module (top 12 by self time)")
    table.add_column("self ms", justify="right")
    table.add_column("cumulative ms", justify="right")
    for name, own, cumulative in sorted(median_rows, key=lambda r: -r[1])[:12]:
        table.add_row(name.strip(), f"{own / 1000:.1f}", f"{cumulative / 1000:.1f}")
    console = Console(width=120)
    console.print(table)
    console.print(f"tunekit after numpy (the README's order): median {median_us / 1000:.1f} ms; target 150 ms")
    console.print(f"tunekit with numpy, cold: median {cold_us / 1000:.1f} ms")
    cpu = sorted(_cpu_ms(README_NAMES, "import numpy") for _ in range(RUNS))
    runs = ", ".join(f"{c:.0f}" for c in cpu)
    console.print(f"tunekit after numpy, CPU time: median {cpu[len(cpu) // 2]:.1f} ms (runs: {runs})")
    example = sorted(_cpu_ms(README_EXAMPLE, "import numpy as np") for _ in range(RUNS))
    runs = ", ".join(f"{c:.0f}" for c in example)
    median = example[RUNS // 2]
    console.print(f"the README's first example up to its first call, CPU time: median {median:.1f} ms (runs: {runs})")
    console.print(f"heavy packages loaded: {sorted(h for h in heavy if h in loaded) or 'none'}")
    console.print(f"modules loaded: {len(loaded)}")


if __name__ == "__main__":
    main()
