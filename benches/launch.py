"""Host cost of a template variant's launch shape: checked at every launch, or once per key.

Run: ``.venv/bin/python benches/launch.py``. A variant's ``__call__`` needs the launch shape
of its arguments' key. It used to call the geometry and validate its answer at every launch;
now a small per-variant table remembers the checked shape (and the checked argument dtypes)
per key. Both paths are timed in the same run, interleaved in rounds, and the table reports
medians over rounds; the whole call (key, shape, enqueue on the device's queue, no wait) is
shown for scale. Figures are host CPU figures on the OpenCL device this process picks.
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


def main() -> None:
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
    paths: dict[str, Callable[[], object]] = {
        "the key alone (both paths build it)": lambda: variant.key(*args),
        "shape checked at every launch (before)": lambda: variant.shape(args),
        "shape from the per-key table (after)": lambda: variant._checked_shape(args),
        "whole launch, enqueue included (after)": lambda: variant(*args),
    }
    calls, rounds = 2_000, 15
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, fn in paths.items():
            times[name].append(_per_call_ns(fn, calls))
            client.queue.finish()
    medians = {name: statistics.median(values) for name, values in times.items()}
    before = medians["shape checked at every launch (before)"]
    key_ns = medians["the key alone (both paths build it)"]
    table = Table(title=f"launch shape per call on {client.device.name} (median of {rounds} rounds x {calls} calls)")
    for column in ("path", "ns / call", "beyond the key", "vs before"):
        table.add_column(column, justify="right")
    for name, ns in medians.items():
        table.add_row(name, f"{ns:.0f}", f"{ns - key_ns:.0f}", f"{ns / before:.2f}x")
    Console().print(table)
    client.close()


if __name__ == "__main__":
    main()
