"""Campaign wall time on a local Ray cluster with 1 and 2 workers of the device kind, and the ratio.

Run: ``.venv/bin/python benches/fleet.py [--jobs 16] [--repeats 3]`` (needs ``tunekit[ray]``).
For each worker count a one-node cluster is started on this machine (``ray start --head``,
2 CPUs, the resource ``cpu-numpy`` declared as 1 or 2 units: how many jobs run at once), and a
campaign of ``--jobs`` numpy row-sum tunes (``benches/_fleet_targets.py``) runs on it, each
run on keys no earlier run tuned, so every job measures. A first, untimed campaign starts the
workers (a Ray worker process imports numpy and tunekit once, then runs job after job, for as
long as its driver lives): its wall time is shown apart. The others' wall time is the driver's,
from ``Campaign.run`` to its return: every tune, merging records. Medians. Host CPU.

Rows from ``benches/_fleet_store.py``, when that module is there, follow: its ``rows()``
returns ``(what, figure)`` pairs (the store-latency rows of a PostgreSQL-backed cache).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import ray
from rich.console import Console
from rich.table import Table

import tunekit as tk

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _cluster(workers: int) -> Iterator[str]:
    """A one-node Ray cluster declaring ``workers`` units of ``cpu-numpy``; its address."""
    temp = Path(tempfile.mkdtemp(prefix="tkfleet", dir="/tmp"))
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(HERE))
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--disable-usage-stats"]
    command += ["--include-dashboard=false", "--num-cpus", "2", "--temp-dir", str(temp), "--port", str(port)]
    command += ["--resources", json.dumps({"cpu-numpy": workers})]
    for option in ("--dashboard-agent-listen-port", "--metrics-export-port"):
        command += [option, str(_free_port())]
    log = temp / "head.log"
    with log.open("wb") as out:
        head = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        while b"Ray runtime started" not in log.read_bytes():
            if head.poll() is not None:
                raise SystemExit(f"ray start failed:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)
        head.wait(60)
        shutil.rmtree(temp, ignore_errors=True)


def _jobs(count: int, run: int) -> list[tk.CampaignJob]:
    """``count`` jobs of keys of their own for the ``run``-th campaign (n differs by a few columns)."""
    shapes = [{"rows": rows, "n": n + run} for n in (2048, 3072, 4096, 6144, 8192) for rows in (64, 128, 256, 512)]
    if count > len(shapes):
        raise SystemExit(f"--jobs at most {len(shapes)}")
    return [tk.CampaignJob(target="_fleet_targets:ROW_SUM", device="cpu-numpy", shape=s) for s in shapes[:count]]


def _wall(address: str, jobs: list[tk.CampaignJob], top: Path) -> tuple[float, float]:
    """The campaign's wall time and the median of its jobs' times on their workers."""
    # One environment for every run on a cluster: Ray starts workers per environment, and keeps them.
    env = {"TUNEKIT_CACHE_DIR": f"{top}/cache", "TUNEKIT_PROGRESS": "0", "PYTHONPATH": str(HERE)}
    with tempfile.TemporaryDirectory(prefix="tkfleet-run") as records:
        campaign = tk.Campaign(jobs=jobs, records=Path(records), env=env)
        started = time.perf_counter()
        result = campaign.run(address=address, progress=False)
        wall = time.perf_counter() - started
    if result.failed or result.tuned != len(jobs):
        raise SystemExit(f"the campaign did not tune every job: {result.failed}")
    return wall, statistics.median(r.seconds for r in result.finished)


def _store_rows() -> list[tuple[str, str]]:
    """The pgstore rows, from benches/_fleet_store.py when it is there."""
    if not (HERE / "_fleet_store.py").exists():
        return []
    import _fleet_store

    return [
        (f"{path}: SQLite vs PostgreSQL", f"{lite} vs {pg} ({ratio})") for path, lite, pg, ratio in _fleet_store.rows()
    ]


def _measure(workers: int, jobs: int, repeats: int) -> tuple[float, list[float], list[float]]:
    """On a fresh cluster of ``workers``: the first campaign's wall (it starts the workers), then the warm ones'
    walls and their jobs' median times."""
    walls: list[float] = []
    per_job: list[float] = []
    with _cluster(workers) as address, tempfile.TemporaryDirectory(prefix="tkfleet") as top:
        # One driver for every run: Ray keeps a driver's workers between its tasks (a new driver starts new ones).
        ray.init(address=address, log_to_driver=False)
        try:
            cold, _ = _wall(address, _jobs(jobs, 0), Path(top))
            for run in range(1, repeats + 1):
                wall, job = _wall(address, _jobs(jobs, run), Path(top))
                walls.append(wall)
                per_job.append(job)
        finally:
            ray.shutdown()
    return cold, walls, per_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    measured = {workers: _measure(workers, args.jobs, args.repeats) for workers in (1, 2)}
    table = Table(title=f"campaign of {args.jobs} CPU jobs on a local Ray cluster (host CPU, 2 cores)")
    table.add_column("what")
    table.add_column("figure", justify="right")
    for workers, (cold, walls, per_job) in measured.items():
        name = f"{workers} worker{'s' * (workers > 1)}"
        table.add_row(f"first campaign (starts the workers), {name}", f"{cold:.2f} s")
        spread = f" ({min(walls):.2f}-{max(walls):.2f})" if len(walls) > 1 else ""
        table.add_row(f"campaign wall time, {name}", f"{statistics.median(walls):.2f} s{spread}")
        table.add_row(f"one job on its worker, {name}", f"{statistics.median(per_job):.3f} s")
    ratio = statistics.median(measured[1][1]) / statistics.median(measured[2][1])
    table.add_row("speed-up, 2 workers over 1", f"{ratio:.2f}x")
    for what, figure in _store_rows():
        table.add_row(what, figure)
    Console().print(table)


if __name__ == "__main__":
    main()
