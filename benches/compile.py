"""Serial against parallel compilation of the SGEMM space on the default OpenCL device.

Run: ``.venv/bin/python benches/compile.py`` (options: ``--size 256 --workers 2``).

Each mode tunes the 29-configuration SGEMM space in its own fresh process with an empty
``POCL_CACHE_DIR`` (cold: every variant compiles). "compile" is the prepare phase: build and
first launch of every variant (PoCL compiles the work-group function at the first launch).

- one program per variant, serial: what tunekit did before batching (one prepare at a time,
  ``TUNEKIT_COMPILE_WORKERS=1``, every variant its own program);
- one program, threads: the variants built as one program in this process, then the first
  launches on ``--workers`` threads (``compile_in="thread"``);
- one program, 1 worker process: the same with a single worker, to show how the compile divides
  among workers (the default is one per usable CPU);
- one program, processes: built and first-launched in ``--workers`` worker processes, handed
  back through PoCL's on-disk kernel cache (``compile_in="process"``, the default on PoCL).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sgemm_space as space
from vs_kernel_tuner import run_tool


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    options = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    workers = str(options.workers)
    modes = {
        "one program per variant, serial": (
            "tunekit-thread",
            {"TUNEKIT_COMPILE_WORKERS": "1", "BENCH_ONE_PROGRAM_PER_VARIANT": "1"},
        ),
        "one program, threads": ("tunekit-thread", {"TUNEKIT_COMPILE_WORKERS": workers}),
        "one program, 1 worker process": ("tunekit", {"BENCH_COMPILE_WORKERS": "1"}),
        "one program, processes": ("tunekit", {"TUNEKIT_COMPILE_WORKERS": workers, "BENCH_COMPILE_WORKERS": workers}),
    }
    runs: dict[str, list[dict[str, object]]] = {mode: [] for mode in modes}
    for round_ in range(options.rounds):
        for mode in modes if round_ % 2 == 0 else reversed(list(modes)):
            tool, env = modes[mode]
            runs[mode].append(run_tool(tool, options.size, **env))
            print(f"{mode}: compile {runs[mode][-1]['compile_s']:.1f} s", file=sys.stderr)
    serial = statistics.median(float(r["compile_s"]) for r in runs["one program per variant, serial"])  # type: ignore[arg-type]
    table = Table(title=f"Compiling {len(space.configs())} SGEMM variants ({options.size}^3), cold PoCL cache")
    for column in ("mode", "compile (prepare) s", "vs serial", "whole tune s", "winner"):
        table.add_column(column)
    for mode, results in runs.items():
        compile_s = statistics.median(float(r["compile_s"]) for r in results)  # type: ignore[arg-type]
        wall = statistics.median(float(r["wall_s"]) for r in results)  # type: ignore[arg-type]
        winner = results[-1]["winner"]
        assert isinstance(winner, dict)
        table.add_row(
            mode,
            f"{compile_s:.1f}",
            f"{compile_s / serial:.2f}x",
            f"{wall:.1f}",
            ",".join(f"{k}={v}" for k, v in winner.items()),
        )
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
