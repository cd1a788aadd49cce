"""The OpenCL part of ``make demo``: tune the three OpenCL examples, winner vs worst vs numpy."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import NOISY_HOST, ExampleResult

from tunekit_backends.opencl import OpenCLClient


def run_opencl_demo(console: Console) -> int:
    """Tune bias+GELU, softmax and SGEMM on the default OpenCL device and print one table."""
    try:
        client = OpenCLClient()
    except (ImportError, RuntimeError) as exc:
        console.print(Text.assemble(("OpenCL examples skipped:", "yellow"), f" {exc}"))
        return 0
    # Imported once the device is known to work: they import pyopencl, the optional opencl extra.
    import bias_gelu  # noqa: PLC0415
    import sgemm  # noqa: PLC0415
    import softmax  # noqa: PLC0415

    started = time.perf_counter()
    results: list[ExampleResult] = [bias_gelu.run(client), softmax.run(client), sgemm.run(client)]
    platform = client.device.platform.version.split()
    table = Table(title=f"OpenCL examples on {client.device.name} ({' '.join(platform[2:4])})")
    for column in ("example", "n", "winner config", "winner", "worst", "numpy", "unit", "from"):
        table.add_column(column, overflow="fold", no_wrap=column not in ("example", "winner config"))
    for r in results:
        table.add_row(
            f"{r.example} {r.shape}",
            f"{r.candidates}-{r.failed}" if r.failed else str(r.candidates),
            r.winner.partition("[")[2].rstrip("]") or r.winner,
            f"{r.rate(r.winner_ns):.1f}",
            f"{r.rate(r.worst_ns):.1f}",
            f"{r.rate(r.numpy_ns):.1f}",
            r.unit,
            "tuned" if r.tuned_now else "cache",
        )
    console.print(table)
    for r in results:  # how each winner was decided, where the table alone would mislead
        if r.decision is not None and (note := r.decision.warning(r.tuner) or r.decision.why()):
            console.print(Text.assemble((f"{r.example}:", "yellow"), f" {note}"))
        if r.numpy_spread > NOISY_HOST:
            console.print(
                f"{r.example}: numpy's time spread {r.numpy_spread:.0%} (interquartile range over the median) "
                "over 9 runs: the host is busy, so its figure is unreliable; rerun when the machine is quiet",
                style="yellow",
            )
    console.print(
        f"OpenCL part: {time.perf_counter() - started:.1f} s. Throughput of the winner, the slowest variant and "
        "numpy on the host (n: variants); every variant was compiled (build + first launch) before any timing "
        "and checked against numpy before it was timed."
    )
    return 0
