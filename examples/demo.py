"""The demo `make demo` runs: tune the CPU and OpenCL examples, search a space, print tables, say where things went."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from rich.table import Table
from rich.text import Text

import tunekit as tk
from tunekit_backends.cpu import CpuClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_console import demo_console
from matmul import TUNER as MATMUL_TUNER, matmul
from row_sum import TUNER as ROW_SUM_TUNER, row_sum

sys.path.insert(0, str(Path(__file__).resolve().parent / "opencl"))
from demo_opencl import run_opencl_demo
from demo_search import SearchDemo, run_search_demo, serve_committed_record


def _demo_dir() -> tuple[Path, bool]:
    """Where the demo's files go, never the checkout, and whether that is a temporary directory.

    The cache directory, so a second run finds the record and the trial log there. With the
    cache off (TUNEKIT_CACHE=0) nothing is to be kept there: a new temporary directory instead,
    named at the end, so each run searches anew and the cache directory is left untouched.
    """
    settings = tk.settings()
    if not settings.cache:
        return Path(tempfile.mkdtemp(prefix="tunekit-demo-")), True
    return settings.cache_dir or tk.default_cache_dir(), False


def _default_records_path(directory: Path) -> Path:
    configured = tk.settings().record
    if configured and configured not in ("stdout", "stderr"):
        return Path(configured)
    return directory / "records.jsonl"


def _summary(candidates: Iterable[tuple[str, str, float | None]]) -> str:
    """Each candidate's median, or its status when it has none."""
    return ", ".join(
        f"{name} {tk.format_duration_ns(median)}" if median is not None else f"{name} {status}"
        for name, status, median in candidates
    )


def _winner_cell(winner: str, decision: tk.TuneDecision | None) -> str | Text:
    """The winner and how it won: its margin over the runner-up, the stage, and why beside a lower median."""
    if decision is None or decision.winner != winner:
        return winner
    if decision.runner_up is None:
        cell = f"{winner} ({decision.stage_text})"
    else:
        cell = f"{winner}: {decision.margin_text} over {decision.runner_up} ({decision.stage_text})"
    why = decision.why()
    doubt = () if decision.trusted else ((" not trusted: spread wider than the margin", "yellow"),)
    return Text.assemble(cell, *doubt, f"; {why}" if why else "")


def _serve_committed() -> int:
    """Autotuning off: serve what an earlier run committed, measuring nothing; exit code 2 when nothing can be.

    Only the search part commits its winner (a verified record in the demo directory); the
    other parts keep theirs in the persistent cache, which autotuning off does not read.
    """
    console = demo_console()
    served: SearchDemo | str
    if not tk.settings().cache:  # the demo then keeps nothing between runs, so no record is committed
        served = "the cache is off (TUNEKIT_CACHE=0), so the demo keeps no record between runs"
    else:
        served = serve_committed_record(console, _demo_dir()[0])
    if isinstance(served, str):
        # Every part of the demo measures: run on, it would measure nothing, print an empty table and
        # "5 tuned now", then stop at the OpenCL part with a RuntimeError traceback.
        print(
            "tunekit demo: autotuning is disabled by TUNEKIT_AUTOTUNE=0, and the demo measures and searches, with "
            f"nothing committed to serve instead: {served}. Run it without TUNEKIT_AUTOTUNE (or with "
            "TUNEKIT_AUTOTUNE=1)",
            file=sys.stderr,
        )
        return 2
    console.print(
        "Autotuning is disabled by TUNEKIT_AUTOTUNE=0: the search part was served from the committed record "
        f"{served.record_path}, nothing measured or written; the CPU and OpenCL examples, which tune, were skipped "
        "(run without TUNEKIT_AUTOTUNE to tune them)"
    )
    return 0


def main() -> int:
    """Tune every example on the CPU client, then the OpenCL ones, and report; returns the exit code."""
    if not tk.settings().autotune:
        return _serve_committed()
    console = demo_console()
    directory, temporary = _demo_dir()
    records_path = _default_records_path(directory)
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
    columns = ("tuner", "key", "candidates (median of all samples)", "winner: margin [95%] over", "served from")
    for column in columns:
        table.add_column(column)
    # Winners from the cache, and those tuned now from their records: with the cache off only the latter exist.
    shown: dict[tuple[str, str], tuple[str, str | Text, str]] = {}
    if cache is not None:
        for row in cache.rows(device_id=client.device_id):
            if not isinstance(row, str) and row.tuner in {ROW_SUM_TUNER.name, MATMUL_TUNER.name}:
                medians = _summary((r.name, r.status, r.median_ns) for r in row.value.results)
                winner = _winner_cell(row.value.winner, row.value.decision)
                shown[(row.tuner, row.key)] = (medians, winner, "persistent cache")
    for record in (r for r in tuned if r.decision == "tuned"):
        key = json.dumps(record.key, sort_keys=True, separators=(",", ":"))
        medians = _summary((c.name, c.status, c.stats.median_ns if c.stats else None) for c in record.candidates)
        winner = _winner_cell(record.winner, tk.decision_of(record)) if record.winner else "-"
        shown[(record.tuner, key)] = (medians, winner, "tuned now")
    for (tuner_name, key), (medians, winner, source) in sorted(shown.items()):
        shown_key = " ".join(f"{name}={value}" for name, value in json.loads(key).items())
        table.add_row(tuner_name, shown_key, medians, winner, source)
    console.print(table)
    served = sum(1 for _, source, _ in calls if source == "persistent cache")
    console.print(f"{len(calls)} calls: {len(calls) - served} tuned now, {served} served from the persistent cache")
    status = run_opencl_demo(console)
    run_search_demo(console, directory)
    # Where everything went, last, so it is what the terminal shows when the demo ends.
    console.print(f"cache:   {cache.path if cache is not None else 'memory only (TUNEKIT_CACHE=0)'}")
    if temporary:
        console.print(f"files:   {directory}  (temporary: the cache is off, so the next run starts afresh)")
    console.print(f"records: {records_path}")
    if records_path.exists():
        try:
            report = tk.write_report(records_path, records_path.with_name("report.html"))
        except ImportError as missing:  # the report's plots need the optional extra; the tuning is done
            console.print(f"report:  not written: {missing}")
        else:
            console.print(f"report:  {report}  (tunekit report {records_path} -o FILE)")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
