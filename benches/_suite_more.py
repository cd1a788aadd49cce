"""Three more OpenCL kernels for ``benches/vs_kernel_tuner_suite.py --more``: checks beyond the five of the suite.

Written after the suite's figures were in, to see whether they hold on kernels the schedule was
not looked at on; kept apart from the suite so its figures stay comparable from run to run.

- ``axpy``: z = a x + y over 4M floats, memory-bound 1D, each item doing ITEMS elements.
- ``stencil3d``: a 7-point Jacobi step on a 128^3 grid, each item walking a column in z.
- ``nbody``: all-pairs gravity of 4096 bodies through a local-memory tile, compute-bound, about
  25 ms a launch on PoCL here (50 ms with another job on the second core): a tune whose measuring,
  not its compiling, sets its time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _suite import SuiteKernel

__all__ = ["KERNELS"]

AXPY = """
__kernel void axpy(const int n, const float a, __global const float* restrict x, __global const float* restrict y,
                   __global float* restrict z) {
    const int base = get_group_id(0) * block_size_x * ITEMS + get_local_id(0);
    for (int k = 0; k < ITEMS; k++) {
        const int i = base + k * block_size_x;
        if (i < n) z[i] = a * x[i] + y[i];
    }
}
"""

STENCIL3D = """
__kernel void stencil3d(const int N, __global const float* restrict src, __global float* restrict dst) {
    const int x = get_global_id(0), y = get_global_id(1);
    if (x >= N || y >= N) return;
    for (int z = 0; z < N; z++) {
        const int i = (z * N + y) * N + x;
        if (x == 0 || y == 0 || z == 0 || x == N - 1 || y == N - 1 || z == N - 1) {
            dst[i] = src[i];
        } else {
            dst[i] = (src[i] + src[i - 1] + src[i + 1] + src[i - N] + src[i + N] + src[i - N * N] + src[i + N * N])
                     / 7.0f;
        }
    }
}
"""

NBODY = """
__kernel void nbody(const int n, __global const float4* restrict pos, __global float4* restrict acc) {
    __local float4 tile[block_size_x];
    const int i = get_global_id(0);
    const float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int t = 0; t < n; t += block_size_x) {
        tile[get_local_id(0)] = pos[t + get_local_id(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < block_size_x; j += UNROLL) {
            for (int u = 0; u < UNROLL; u++) {
                const float4 q = tile[j + u];
                const float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
                const float r2 = dx * dx + dy * dy + dz * dz + 0.01f;
                const float inv = 1.0f / sqrt(r2);
                const float s = q.w * inv * inv * inv;
                ax += s * dx;
                ay += s * dy;
                az += s * dz;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    acc[i] = (float4)(ax, ay, az, 0.0f);
}
"""


def _rng() -> np.random.Generator:
    return np.random.default_rng(1)


def _axpy_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    rng = _rng()
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    expected = (1.5 * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
    return [np.int32(n), np.float32(1.5), x, y, np.zeros_like(x)], 4, expected


def _stencil3d_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    src = _rng().random((n, n, n), dtype=np.float32)
    s = src.astype(np.float64)
    e = s.copy()
    e[1:-1, 1:-1, 1:-1] = (
        s[1:-1, 1:-1, 1:-1]
        + s[1:-1, 1:-1, :-2]
        + s[1:-1, 1:-1, 2:]
        + s[1:-1, :-2, 1:-1]
        + s[1:-1, 2:, 1:-1]
        + s[:-2, 1:-1, 1:-1]
        + s[2:, 1:-1, 1:-1]
    ) / 7.0
    return [np.int32(n), src, np.zeros_like(src)], 2, e.astype(np.float32)


def _nbody_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    pos = _rng().random((n, 4), dtype=np.float32)
    pos[:, 3] = 1.0 / n
    p = pos.astype(np.float64)
    d = p[None, :, :3] - p[:, None, :3]
    s = p[None, :, 3] * ((d**2).sum(-1) + 0.01) ** -1.5
    acc = np.zeros((n, 4))
    acc[:, :3] = (s[:, :, None] * d).sum(1)
    return [np.int32(n), pos, np.zeros_like(pos)], 2, acc.astype(np.float32)


# Each restriction on a line of its own: Kernel Tuner reads a lambda's source text.
KERNELS: dict[str, SuiteKernel] = {
    k.name: k
    for k in (
        SuiteKernel(
            name="axpy",
            character="more: 1D memory-bound, ITEMS per item",
            source=AXPY,
            kernel="axpy",
            params={"block_size_x": [16, 32, 64, 128, 256, 512, 1024], "block_size_y": [1], "ITEMS": [1, 2, 4, 8]},
            allowed=lambda p: p["block_size_x"] >= 16,
            problem=lambda n: (n, 1),
            grid_div_x=["block_size_x", "ITEMS"],
            grid_div_y=[],
            inputs=_axpy_inputs,
            size=1 << 22,
            quick_size=1 << 20,
            quick_params={"ITEMS": [1, 4]},
        ),
        SuiteKernel(
            name="stencil3d",
            character="more: 3D 7-point stencil",
            source=STENCIL3D,
            kernel="stencil3d",
            params={"block_size_x": [4, 8, 16, 32, 64, 128], "block_size_y": [1, 2, 4, 8, 16]},
            allowed=lambda p: 16 <= p["block_size_x"] * p["block_size_y"] <= 512,
            problem=lambda n: (n, n),
            grid_div_x=["block_size_x"],
            grid_div_y=["block_size_y"],
            inputs=_stencil3d_inputs,
            size=128,
            quick_size=64,
        ),
        SuiteKernel(
            name="nbody",
            character="more: compute-bound, ~25 ms launches",
            source=NBODY,
            kernel="nbody",
            params={"block_size_x": [16, 32, 64, 128, 256], "block_size_y": [1], "UNROLL": [1, 2, 4, 8]},
            allowed=lambda p: p["block_size_x"] >= 16,
            problem=lambda n: (n, 1),
            grid_div_x=["block_size_x"],
            grid_div_y=[],
            inputs=_nbody_inputs,
            size=4096,
            quick_size=1024,
            atol=1e-2,
            quick_params={"UNROLL": [1, 4]},
        ),
    )
}
