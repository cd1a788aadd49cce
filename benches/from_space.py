"""Building ``TunableSet.from_space`` over large spaces, and the first ``execute`` of a searched one.

Run: ``.venv/bin/python benches/from_space.py`` (``--points 100000 1000000`` for other sizes; the
enumerable limit is 10^7 walk points). Each measurement runs in a fresh interpreter, so its peak
memory is its own: for a space of that many Cartesian points, all valid and a third valid (a
restriction reading two parameters), the seconds ``from_space`` took and how much it raised the
process's peak resident memory; with ``--execute``, the same for the set's first
``TUNER.execute`` under ``.with_search(strategy="random", max_evals=8)`` (checksum, plan, eight
candidates measured on the host CPU). ``--tree LABEL=DIR`` (repeatable) runs each measurement
against the tunekit checked out at DIR, alternated with the others in each of ``--repeats``
rounds, e.g. the code before a change next to it::

    git worktree add --detach /tmp/before main
    .venv/bin/python benches/from_space.py --tree before=/tmp/before --tree after=. --execute

The table shows medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

# One measurement, in its own interpreter: argv is points, restricted (0/1), execute (0/1).
_CHILD = r"""
import json, resource, sys, time
from collections.abc import Callable

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class Key:
    n: int


def key(x: np.ndarray) -> Key:
    return Key(n=int(x.shape[0]))


def build(config: tk.Config) -> Callable[[np.ndarray], None]:
    return lambda x: None


def third(c: tk.Config) -> bool:
    return bool((c.A + c.B) % 3 == 0)


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


points, restricted, execute = (int(a) for a in sys.argv[1:4])
space = tk.Space(A=range(points // 10_000), B=range(100), C=range(100), restrict=third if restricted else None)
before = peak_mib()
started = time.perf_counter()
tunables = tk.TunableSet.from_space(space, build, key=key)
seconds = time.perf_counter() - started
out = {"tunekit": tk.__file__, "tunables": len(tunables.tunables), "build_s": seconds, "build_mib": peak_mib() - before}
if execute:
    client = CpuClient()
    searched = tunables.with_search(strategy="random", max_evals=8, seed=0)
    before = peak_mib()
    started = time.perf_counter()
    tk.LocalTuner("from_space_bench").execute(client.device_id, client, searched, (np.ones(4),))
    out.update(execute_s=time.perf_counter() - started, execute_mib=peak_mib() - before)
print(json.dumps(out))
"""


def _measure(tree: Path, points: int, restricted: bool, execute: bool, cache: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree), TUNEKIT_CACHE_DIR=cache)
    args = [sys.executable, "-c", _CHILD, str(points), str(int(restricted)), str(int(execute))]
    # cwd: `python -c` puts it first on sys.path, before PYTHONPATH.
    done = subprocess.run(args, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {points} points failed:\n{done.stderr}")
    result = json.loads(done.stdout.splitlines()[-1])
    if not Path(result.pop("tunekit")).is_relative_to(tree):  # the venv's editable install won instead
        raise SystemExit(f"{tree}: the measurement imported another tunekit")
    return {k: float(v) for k, v in result.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[1_000_000], help="Cartesian points, 10^4 multiples")
    parser.add_argument("--tree", action="append", default=[], help="LABEL=DIR: a tunekit checkout to measure")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the table shows medians")
    parser.add_argument("--execute", action="store_true", help="also time the first execute of a searched set")
    args = parser.parse_args()
    trees = [tuple(t.split("=", 1)) for t in args.tree] or [("this", str(Path(__file__).parent.parent))]
    columns = ["build s", "build MiB"] + (["execute s", "execute MiB"] if args.execute else [])
    table = Table(title=f"TunableSet.from_space, medians of {args.repeats} (host CPU)")
    for column in ("space", "tunables", "tree", *columns):
        table.add_column(column, justify="left" if column in ("space", "tree") else "right")
    for points in args.points:
        for label, restricted in (("all valid", False), ("1/3 valid", True)):
            runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
            for _ in range(args.repeats):
                for name, tree in trees:
                    with tempfile.TemporaryDirectory() as cache:  # a first execute: nothing cached
                        runs[name].append(_measure(Path(tree).resolve(), points, restricted, args.execute, cache))
            for name, _ in trees:
                median = {k: statistics.median(r[k] for r in runs[name]) for k in runs[name][0]}
                cells = [f"{median['build_s']:.2f}", f"{median['build_mib']:.0f}"]
                if args.execute:
                    cells += [f"{median['execute_s']:.2f}", f"{median['execute_mib']:.0f}"]
                table.add_row(f"{label}, {points:,}", f"{int(median['tunables']):,}", name, *cells)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
