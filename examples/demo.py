"""The demo `make demo` runs: tune the CPU and OpenCL examples, search a space, print tables, say where things went."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.cpu import CpuClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from matmul import TUNER as MATMUL_TUNER
from matmul import matmul
from row_sum import TUNER as ROW_SUM_TUNER
from row_sum import row_sum

sys.path.insert(0, str(Path(__file__).resolve().parent / "opencl"))
from demo_opencl import run_opencl_demo
from demo_search import run_search_demo


def _demo_dir() -> Path:
    """Where the demo's files go: the cache directory, never the checkout."""
    return tk.settings().cache_dir or tk.default_cache_dir()


def _default_records_path() -> Path:
    configured = tk.settings().record
    if configured and configured not in ("stdout", "stderr"):
        return Path(configured)
    return _demo_dir() / "records.jsonl"


def main() -> int:
    """Tune every example on the CPU client, then the OpenCL ones, and report; returns the exit code."""
    console = Console()
    records_path = _default_records_path()
    if not tk.settings().record:
        os.environ["TUNEKIT_RECORD"] = str(records_path)
    # The demo's tunes take a fraction of a second each, under the one-second delay after which
    # a library user sees progress; show it from the start here, so the demo shows what it looks like.
    os.environ.setdefault("TUNEKIT_PROGRESS_DELAY_S", "0")
    tk.configure()
    client = CpuClient()
    tuned: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(tuned.append)
    rng = np.random.default_rng(0)
    calls: list[tuple[str, str, object]] = []
    try:
        for rows, cols in ((64, 1000), (512, 4096), (2000, 300)):
            x = rng.random((rows, cols)).astype(np.float32)
            before = len(tuned)
            out = row_sum(client, x)
            np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-3)
            calls.append(("row_sum", "tuned now" if len(tuned) > before else "persistent cache", x.shape))
        for m, n, k in ((128, 128, 128), (256, 64, 512)):
            a, b = rng.random((m, k)), rng.random((k, n))
            before = len(tuned)
            np.testing.assert_allclose(matmul(client, a, b), a @ b, rtol=1e-9)
            calls.append(("matmul", "tuned now" if len(tuned) > before else "persistent cache", (m, n, k)))
    finally:
        tk.remove_record_sink(sink)

    cache = tk.persistent_cache()
    table = Table(title=f"tunekit demo on {client.device_id}")
    for column in ("tuner", "key", "candidates (median)", "winner", "served from"):
        table.add_column(column)
    rows_by_key: dict[tuple[str, str], tk.CacheRow] = {}
    if cache is not None:
        for row in cache.rows(device_id=client.device_id):
            if not isinstance(row, str):
                rows_by_key[(row.tuner, row.key)] = row
    for (tuner_name, key), row in sorted(rows_by_key.items()):
        if tuner_name not in {ROW_SUM_TUNER.name, MATMUL_TUNER.name}:
            continue
        medians = ", ".join(
            f"{r.name} {r.median_ns / 1e3:.1f}us" if r.median_ns is not None else f"{r.name} {r.status}"
            for r in row.value.results
        )
        tuned_now = any(
            r.tuner == tuner_name and json.dumps(r.key, sort_keys=True, separators=(",", ":")) == key for r in tuned
        )
        shown_key = " ".join(f"{name}={value}" for name, value in json.loads(key).items())
        table.add_row(
            tuner_name, shown_key, medians, row.value.winner, "tuned now" if tuned_now else "persistent cache"
        )
    console.print(table)
    served = sum(1 for _, source, _ in calls if source == "persistent cache")
    console.print(f"{len(calls)} calls: {len(calls) - served} tuned now, {served} served from the persistent cache")
    status = run_opencl_demo(console)
    run_search_demo(console, _demo_dir())
    # Where everything went, last, so it is what the terminal shows when the demo ends.
    console.print(f"cache:   {cache.path if cache is not None else 'memory only (TUNEKIT_CACHE=0)'}")
    console.print(f"records: {records_path}")
    if records_path.exists():
        report = tk.write_report(records_path, records_path.with_name("report.html"))
        console.print(f"report:  {report}  (tunekit report {records_path} -o FILE)")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
