"""Tiled SGEMM: TS x TS tiles in local memory, WPT rows and VEC columns (one vector) per work-item.

``C = A @ B`` for row-major float32 matrices whose sides are multiples of the tile; a variant
whose tile does not divide the shape is skipped for that shape. Reported in GFLOP/s.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl.array as cla

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.opencl._vector import VECTOR_PREAMBLE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import ExampleResult, print_result, summarize, time_host

KERNEL = """
__kernel void sgemm(const int M, const int N, const int K,
                    __global const float* restrict A, __global const float* restrict B, __global float* restrict C) {
    __local float As[TS][TS];
    __local float Bs[TS][TS];
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int row0 = get_group_id(1) * TS;
    const int col0 = get_group_id(0) * TS;
    const int lid = ty * CTS + tx;
    vt acc[WPT];
    for (int w = 0; w < WPT; ++w) acc[w] = (vt)(0.0f);
    for (int t = 0; t < K; t += TS) {
        for (int l = lid; l < TS * TS; l += RTS * CTS) {
            const int r = l / TS, c = l % TS;
            As[r][c] = A[(row0 + r) * K + t + c];
            Bs[r][c] = B[(t + r) * N + col0 + c];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k) {
            const vt b = LOADV(tx, &Bs[k][0]);
            for (int w = 0; w < WPT; ++w) acc[w] += As[ty + w * RTS][k] * b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int w = 0; w < WPT; ++w) STOREV(acc[w], 0, &C[(row0 + ty + w * RTS) * N + col0 + tx * VEC]);
}
"""
"""The kernel body; it expects TS, WPT, VEC, RTS (rows of work-items) and CTS (columns) defined."""

SOURCE = VECTOR_PREAMBLE + "#define RTS (TS / WPT)\n#define CTS (TS / VEC)\n" + KERNEL


@tk.autotune_key
class SgemmKey:
    """Exact sides: the launch grid and which tiles divide the shape depend on them."""

    m: int
    n: int
    k: int


def _geometry(config: tk.Config, key: SgemmKey) -> tuple[tuple[int, int], tuple[int, int]]:
    ts, wpt, vec = int(config.TS), int(config.WPT), int(config.VEC)
    return (key.n // vec, key.m // wpt), (ts // vec, ts // wpt)


def template(ts: list[int], wpt: list[int], vec: list[int]) -> KernelTemplate[SgemmKey]:
    """The SGEMM template over the given tile sizes, rows per work-item and vector widths."""
    return KernelTemplate(
        SOURCE,
        "sgemm",
        {"TS": ts, "WPT": wpt, "VEC": vec},
        restrict=lambda c: c.WPT <= c.TS and c.VEC <= c.TS and (c.TS // c.VEC) * (c.TS // c.WPT) <= 1024,
        geometry=_geometry,
        applies=lambda c, key: key.m % c.TS == 0 and key.n % c.TS == 0 and key.k % c.TS == 0,
    )


TEMPLATE = template([16, 32], [2, 8], [1, 4])
TUNER: tk.LocalTuner[SgemmKey, Any] = tk.LocalTuner("opencl_sgemm")


def reference(m: Any, n: Any, k: Any, a: np.ndarray, b: np.ndarray, c: Any) -> np.ndarray:
    """``a @ b`` in float64, rounded to float32: the exact answer the kernels approximate."""
    out: np.ndarray = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    return out


def key_of(m: np.int32, n: np.int32, k: np.int32, *buffers: Any) -> SgemmKey:
    """The key of a launch's arguments."""
    return SgemmKey(m=int(m), n=int(n), k=int(k))


def tunable_set(client: OpenCLClient, tpl: KernelTemplate[SgemmKey] = TEMPLATE) -> tk.TunableSet[SgemmKey, Any]:
    """Every variant of ``tpl``, checked against the float64 product before timing."""

    def inputs(key: SgemmKey, *caller: Any) -> tuple[Any, ...]:
        rng = np.random.default_rng(0)
        a = cla.to_device(client.queue, rng.random((key.m, key.k), dtype=np.float32))
        b = cla.to_device(client.queue, rng.random((key.k, key.n), dtype=np.float32))
        c = cla.empty(client.queue, (key.m, key.n), np.float32)
        return np.int32(key.m), np.int32(key.n), np.int32(key.k), a, b, c

    return tpl.tunable_set(client, key=key_of, inputs=inputs, reference=reference, outputs=[5])


def sgemm(client: OpenCLClient, a: Any, b: Any, c: Any) -> Any:
    """``c = a @ b`` on the device by the fastest variant; returns the launch's event."""
    tunables = TUNER.init(lambda: tunable_set(client))
    (m, k), (_, n) = a.shape, b.shape
    return TUNER.execute(client.device_id, client, tunables, (np.int32(m), np.int32(n), np.int32(k), a, b, c))


def run(client: OpenCLClient, m: int = 256, n: int = 256, k: int = 256) -> ExampleResult:
    """Tune (or reuse) SGEMM for ``m x n x k`` and report it against numpy's BLAS."""
    rng = np.random.default_rng(1)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    c_d = cla.empty(client.queue, (m, n), np.float32)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        sgemm(client, cla.to_device(client.queue, a), cla.to_device(client.queue, b), c_d).wait()
    finally:
        tk.remove_record_sink(sink)
    np.testing.assert_allclose(c_d.get(), a @ b, rtol=1e-4)
    numpy = time_host(lambda: a @ b)
    key = SgemmKey(m=m, n=n, k=k)
    return summarize("sgemm", TUNER, client.device_id, key, f"{m}x{n}x{k}", numpy, 2.0 * m * n * k, "GFLOP/s", records)


if __name__ == "__main__":
    print_result(run(OpenCLClient()))
