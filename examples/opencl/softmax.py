"""Row softmax: TPR work-items share a row (tree reductions in local memory), RPG rows per group.

Few threads per row suit short rows; long rows need many. Reported in GB/s of input read
plus output written.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pyopencl.array as cla

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import ExampleResult, print_result, summarize, time_host

SOURCE = """
__kernel void softmax(__global const float* restrict x, __global float* restrict y, const int rows, const int cols) {
    __local float scratch[RPG][TPR];
    const int t = get_local_id(0);
    const int r = get_local_id(1);
    const int row = get_group_id(1) * RPG + r;
    const bool live = row < rows;             /* no early return: every work-item reaches the barriers */
    __global const float* xr = x + (size_t)row * cols;
    float m = -INFINITY;
    if (live) for (int c = t; c < cols; c += TPR) m = fmax(m, xr[c]);
    scratch[r][t] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = TPR / 2; s > 0; s >>= 1) {
        if (t < s) scratch[r][t] = fmax(scratch[r][t], scratch[r][t + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = scratch[r][0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    if (live) for (int c = t; c < cols; c += TPR) sum += exp(xr[c] - m);
    scratch[r][t] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = TPR / 2; s > 0; s >>= 1) {
        if (t < s) scratch[r][t] += scratch[r][t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / scratch[r][0];
    if (live) for (int c = t; c < cols; c += TPR) y[(size_t)row * cols + c] = exp(xr[c] - m) * inv;
}
"""


@tk.autotune_key
class SoftmaxKey:
    rows: Annotated[int, tk.Anchor()]
    cols: Annotated[int, tk.Anchor()]


def _geometry(config: tk.Config, key: SoftmaxKey) -> tuple[tuple[int, int], tuple[int, int]]:
    tpr, rpg = int(config.TPR), int(config.RPG)
    return (tpr, math.ceil(key.rows / rpg) * rpg), (tpr, rpg)


TEMPLATE = KernelTemplate(
    SOURCE,
    "softmax",
    {"TPR": [4, 16, 64], "RPG": [1, 4]},
    restrict=lambda c: c.TPR * c.RPG <= 256,
    geometry=_geometry,
)
TUNER: tk.LocalTuner[SoftmaxKey, Any] = tk.LocalTuner("opencl_softmax")


def reference(x: np.ndarray, y: Any, rows: Any, cols: Any) -> np.ndarray:
    """Numerically stable softmax along each row."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    out: np.ndarray = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def _key(x: Any, y: Any, rows: np.int32, cols: np.int32) -> SoftmaxKey:
    return SoftmaxKey(rows=int(rows), cols=int(cols))


def softmax(client: OpenCLClient, x: Any, y: Any) -> Any:
    """``y = softmax(x)`` along rows on the device; returns the launch's event."""

    def inputs(key: SoftmaxKey, *caller: Any) -> tuple[Any, ...]:
        data = np.random.default_rng(0).standard_normal((key.rows, key.cols), dtype=np.float32)
        out = cla.empty(client.queue, data.shape, np.float32)
        return cla.to_device(client.queue, data), out, np.int32(key.rows), np.int32(key.cols)

    tunables = TUNER.init(
        lambda: TEMPLATE.tunable_set(client, key=_key, inputs=inputs, reference=reference, outputs=[1])
    )
    rows, cols = x.shape
    return TUNER.execute(client.device_id, client, tunables, (x, y, np.int32(rows), np.int32(cols)))


def run(client: OpenCLClient, rows: int = 1024, cols: int = 1024) -> ExampleResult:
    """Tune (or reuse) softmax for ``rows x cols`` and report it against numpy."""
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    x_d = cla.to_device(client.queue, x)
    y_d = cla.empty(client.queue, x.shape, np.float32)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        softmax(client, x_d, y_d).wait()
    finally:
        tk.remove_record_sink(sink)
    np.testing.assert_allclose(y_d.get(), reference(x, None, rows, cols), rtol=1e-4, atol=1e-7)
    numpy = time_host(lambda: reference(x, None, rows, cols))
    key = _key(None, None, np.int32(rows), np.int32(cols))
    return summarize("softmax", TUNER, client.device_id, key, f"{rows}x{cols}", numpy, 2 * x.nbytes, "GB/s", records)


if __name__ == "__main__":
    print_result(run(OpenCLClient()))
