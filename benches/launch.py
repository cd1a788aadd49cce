"""Host cost of a template variant's launch: the launch shape checked at every launch, or once per key.

Run: ``.venv/bin/python benches/launch.py``. A variant's ``__call__`` needs the launch shape
of its arguments' key. It used to call the geometry and validate its answer at every launch;
then a small per-variant table remembered the checked shape (and the checked argument dtypes)
per key, which let a later call at that key pass arrays of another dtype unchecked; now the
arguments' dtypes are also compared at every launch with those the table last checked. The
three paths, alone and as a whole launch (enqueued on the device's queue, not waited for), are
timed in the same run, interleaved in rounds; the table reports medians over rounds. Figures
are host CPU figures on the OpenCL device this process picks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import pyopencl.array as cla
from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.opencl._buffers import kernel_arg

SOURCE = """
__kernel void scale(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i];
}
"""


@tk.autotune_key
class Key:
    n: Annotated[int, tk.Anchor()]


def _per_call_ns(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls


def main(calls: int = 2_000, rounds: int = 15) -> None:
    """Print the per-launch table."""
    client = OpenCLClient(compile_in="thread")
    template = KernelTemplate(
        SOURCE, "scale", {"BLOCK": [64]}, geometry=lambda c, key: (((key.n + 63) // 64 * 64,), (c.BLOCK,))
    )
    tunables = template.tunable_set(client, key=lambda x, y, a, n: Key(n=int(n)))
    variant: Any = tunables.tunables[0].fn
    n = 1024
    args = (
        cla.to_device(client.queue, np.ones(n, np.float32)),
        cla.empty(client.queue, n, np.float32),
        np.float32(2),
        np.int32(n),
    )
    variant(*args)
    client.queue.finish()

    def old_call() -> object:
        """The launch as it was: the geometry called and its answer validated at every launch."""
        kernel = variant.kernel()
        global_size, local_size = variant.shape(args)
        launch_args = [kernel_arg(a) for a in args]
        with variant._lock:
            return kernel(client.queue, global_size, local_size, *launch_args)

    def once_shape() -> Any:
        """The table as it was: the dtypes checked at a key's first launch only."""
        return variant._checked[variant.key(*args)][0]

    def once_call() -> object:
        global_size, local_size = once_shape()
        kernel = variant.kernel()
        launch_args = [kernel_arg(a) for a in args]
        with variant._lock:
            return kernel(client.queue, global_size, local_size, *launch_args)

    paths: dict[str, Callable[[], object]] = {
        "key": lambda: variant.key(*args),
        "shape before": lambda: variant.shape(args),
        "shape once": once_shape,
        "shape after": lambda: variant._checked_shape(args),
        "launch before": old_call,
        "launch once": once_call,
        "launch after": lambda: variant(*args),
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, fn in paths.items():
            times[name].append(_per_call_ns(fn, calls))
            client.queue.finish()
    median = {name: statistics.median(values) for name, values in times.items()}
    table = Table(title=f"per launch on {client.device.name}, median of {rounds} rounds x {calls} calls (ns)")
    columns = (
        "path",
        "every launch (before)",
        "table, dtypes once",
        "table, dtypes compared (after)",
        "after / before",
        "after / dtypes once",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for what, label in (("shape", "launch shape (key included)"), ("launch", "whole launch (enqueue, no wait)")):
        before, once, after = (median[f"{what} {path}"] for path in ("before", "once", "after"))
        table.add_row(
            label, f"{before:.0f}", f"{once:.0f}", f"{after:.0f}", f"{after / before:.2f}x", f"{after / once:.2f}x"
        )
    key = f"{median['key']:.0f}"
    table.add_row("the key alone (all build it)", key, key, key, "-", "-")
    Console(width=150).print(table)  # its six columns wrapped at a pipe's 80
    client.close()


if __name__ == "__main__":
    main()
