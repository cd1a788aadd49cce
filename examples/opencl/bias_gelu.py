"""Fused bias + GELU: one kernel loads each element once, adds the bias, applies GELU, stores once.

The space is VEC (floats per work-item, one vector load) x BLOCK (work-group size); the
reference is the eager numpy chain. Reported in GB/s of input read plus output written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl.array as cla

import tunekit as tk
from tunekit_backends.opencl import ElementwiseKey, OpenCLClient, fuse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import ExampleResult, print_result, summarize, time_host

CHAIN = fuse(["bias_add", "gelu"])
TUNER: tk.LocalTuner[ElementwiseKey, Any] = tk.LocalTuner("opencl_bias_gelu")


def bias_gelu(client: OpenCLClient, x: Any, bias: Any, out: Any) -> Any:
    """``out = gelu(x + bias)`` on the device by the fastest variant; returns the launch's event."""
    tunables = TUNER.init(lambda: CHAIN.tunable_set(client))
    rows, cols = x.shape
    return TUNER.execute(client.device_id, client, tunables, (x, bias, out, np.int32(cols), np.int32(rows * cols)))


def run(client: OpenCLClient, rows: int = 1024, cols: int = 1024) -> ExampleResult:
    """Tune (or reuse) the fused kernel for ``rows x cols`` and report it against numpy."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    bias = rng.standard_normal(cols, dtype=np.float32)
    x_d, bias_d = cla.to_device(client.queue, x), cla.to_device(client.queue, bias)
    out_d = cla.empty(client.queue, (rows, cols), np.float32)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        bias_gelu(client, x_d, bias_d, out_d).wait()
    finally:
        tk.remove_record_sink(sink)
    expected = CHAIN.reference(x, bias, None, cols, rows * cols)
    np.testing.assert_allclose(out_d.get(), expected, rtol=1e-4, atol=1e-5)
    key = ElementwiseKey(rows=rows, cols=cols)
    numpy = time_host(lambda: CHAIN.reference(x, bias, None, cols, rows * cols))
    return summarize("bias+GELU", TUNER, client.device_id, key, f"{rows}x{cols}", numpy, 2 * x.nbytes, "GB/s", records)


if __name__ == "__main__":
    print_result(run(OpenCLClient()))
