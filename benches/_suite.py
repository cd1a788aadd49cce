"""The OpenCL kernel suite tunekit is compared on against Kernel Tuner: five kernels of different character.

Each kernel is written for this suite, so that both tools get exactly the same source: Kernel
Tuner inserts each parameter as a ``#define``, tunekit passes it as a ``-D`` option, and the
work-group sides are called ``block_size_x``/``block_size_y`` (Kernel Tuner's names). The launch
grid is described once, Kernel Tuner's way (a problem size and the parameters each side is
divided by), and :func:`geometry` derives tunekit's global and local sizes from the same
description, so both tools launch every variant identically.

- ``stencil``: a 5-point Jacobi step on a 2D grid, memory-bound, well under a millisecond a launch.
- ``matmul``: the tiled SGEMM of ``examples/opencl/sgemm.py`` (local-memory tiles, vector columns).
- ``conv``: a 2D convolution whose 7x7 filter is staged in local memory, each item computing TILE_Y rows.
- ``reduce``: row sums of a matrix, a tree reduction in local memory per row.
- ``transpose``: a tiled transpose through local memory, with and without a padded tile row.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sgemm_space

__all__ = ["KERNELS", "SuiteKernel", "geometry"]

STENCIL = """
__kernel void stencil(const int W, const int H, __global const float* restrict src, __global float* restrict dst) {
    const int x = get_global_id(0);
    const int y0 = get_group_id(1) * block_size_y * TILE_Y + get_local_id(1);
    if (x >= W) return;
    for (int t = 0; t < TILE_Y; t++) {
        const int y = y0 + t * block_size_y;
        if (y >= H) return;
        const int i = y * W + x;
        if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
            dst[i] = src[i];
        } else {
            dst[i] = 0.2f * (src[i] + src[i - 1] + src[i + 1] + src[i - W] + src[i + W]);
        }
    }
}
"""

CONV = """
#define FW 7
#define FH 7
__kernel void conv(const int W, const int H, __global const float* restrict img,
                   __constant float* restrict filter, __global float* restrict out) {
    __local float f[FH * FW];
    const int lid = get_local_id(1) * block_size_x + get_local_id(0);
    for (int i = lid; i < FH * FW; i += block_size_x * block_size_y) f[i] = filter[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    const int x = get_global_id(0);
    const int y0 = get_group_id(1) * block_size_y * TILE_Y + get_local_id(1);
    if (x >= W) return;
    const int stride = W + FW - 1;
    for (int t = 0; t < TILE_Y; t++) {
        const int y = y0 + t * block_size_y;
        if (y >= H) return;
        float acc = 0.0f;
        for (int j = 0; j < FH; j++) {
            for (int i = 0; i < FW; i++) {
                acc += img[(y + j) * stride + x + i] * f[j * FW + i];
            }
        }
        out[y * W + x] = acc;
    }
}
"""

REDUCE = """
__kernel void row_sums(const int R, const int C, __global const float* restrict m, __global float* restrict sums) {
    __local float partial[block_size_y][block_size_x];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int row = get_group_id(1) * block_size_y + ty;
    float acc = 0.0f;
    if (row < R) {
#if VEC == 1
        for (int c = tx; c < C; c += block_size_x) acc += m[row * C + c];
#else
        __global const float* r = m + row * C;
        for (int c = tx * VEC; c < C; c += block_size_x * VEC) {
#if VEC == 2
            const float2 v = vload2(0, r + c); acc += v.x + v.y;
#else
            const float4 v = vload4(0, r + c); acc += (v.x + v.y) + (v.z + v.w);
#endif
        }
#endif
    }
    partial[ty][tx] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = block_size_x / 2; step > 0; step /= 2) {
        if (tx < step) partial[ty][tx] += partial[ty][tx + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (tx == 0 && row < R) sums[row] = partial[ty][0];
}
"""

TRANSPOSE = """
__kernel void transpose(const int N, __global const float* restrict src, __global float* restrict dst) {
    __local float tile[block_size_x][block_size_x + PAD];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int bx = get_group_id(0) * block_size_x, by = get_group_id(1) * block_size_x;
    for (int r = ty; r < block_size_x; r += block_size_y) tile[r][tx] = src[(by + r) * N + bx + tx];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = ty; r < block_size_x; r += block_size_y) dst[(bx + r) * N + by + tx] = tile[tx][r];
}
"""


@tk.autotune_key
class SuiteKey:
    """One key for every kernel of the suite: its name and problem size."""

    kernel: str
    size: int


@dataclass(frozen=True)
class SuiteKernel:
    """One kernel of the suite, described once for both tools.

    ``problem`` and ``grid_div_x``/``grid_div_y`` are Kernel Tuner's: the global size along
    each side is ``ceil(problem / product of the named parameters)`` work-groups of
    ``block_size`` items. ``inputs(size)`` returns the host arguments, the output's index and the
    float64-derived reference of that output.
    """

    name: str
    character: str
    source: str
    kernel: str
    params: dict[str, list[int]]
    allowed: Callable[[dict[str, Any]], bool]
    problem: Callable[[int], tuple[int, int]]
    grid_div_x: list[str]
    grid_div_y: list[str]
    inputs: Callable[[int], tuple[list[Any], int, np.ndarray]]
    size: int
    quick_size: int
    atol: float = 1e-3
    quick_params: dict[str, list[int]] = field(default_factory=dict)

    def space_params(self, quick: bool) -> dict[str, list[int]]:
        """The parameters, narrowed in ``--quick`` mode."""
        return {**self.params, **self.quick_params} if quick else dict(self.params)

    def configs(self, quick: bool = False) -> list[dict[str, int]]:
        """Every allowed configuration, in Cartesian order."""
        params = self.space_params(quick)
        names = list(params)
        points = (dict(zip(names, values, strict=True)) for values in itertools.product(*params.values()))
        return [p for p in points if self.allowed(p)]

    def template(self, size: int, quick: bool = False) -> KernelTemplate[SuiteKey]:
        """The tunekit template: the same source, parameters and launch grid Kernel Tuner gets."""
        return KernelTemplate(
            self.source,
            self.kernel,
            tk.Space(restrict=lambda c: self.allowed(dict(c.items())), **self.space_params(quick)),
            geometry=lambda config, key: geometry(self, dict(config.items()), size),
        )


def _divided(problem: int, names: list[str], config: dict[str, Any]) -> int:
    return math.ceil(problem / math.prod(int(config[n]) for n in names))


def geometry(kernel: SuiteKernel, config: dict[str, Any], size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Global and local size of ``config``, computed as Kernel Tuner computes them."""
    px, py = kernel.problem(size)
    bx, by = int(config["block_size_x"]), int(config["block_size_y"])
    return (
        (_divided(px, kernel.grid_div_x, config) * bx, _divided(py, kernel.grid_div_y, config) * by),
        (bx, by),
    )


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _stencil_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    src = _rng().random((n, n), dtype=np.float32)
    s = src.astype(np.float64)
    expected = s.copy()
    expected[1:-1, 1:-1] = 0.2 * (s[1:-1, 1:-1] + s[1:-1, :-2] + s[1:-1, 2:] + s[:-2, 1:-1] + s[2:, 1:-1])
    return [np.int32(n), np.int32(n), src, np.zeros_like(src)], 3, expected.astype(np.float32)


def _matmul_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    rng = _rng()
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    return [np.int32(n), np.int32(n), np.int32(n), a, b, np.zeros_like(expected)], 5, expected


def _conv_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    rng = _rng()
    img = rng.random((n + 6, n + 6), dtype=np.float32)
    filt = rng.random((7, 7), dtype=np.float32) / 49
    i64, f64 = img.astype(np.float64), filt.astype(np.float64)
    expected = np.zeros((n, n))
    for j in range(7):
        for i in range(7):
            expected += i64[j : j + n, i : i + n] * f64[j, i]
    out = np.zeros((n, n), np.float32)
    return [np.int32(n), np.int32(n), img, filt, out], 4, expected.astype(np.float32)


def _reduce_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    rows, cols = n, 1024
    m = _rng().random((rows, cols), dtype=np.float32)
    expected = m.astype(np.float64).sum(axis=1).astype(np.float32)
    return [np.int32(rows), np.int32(cols), m, np.zeros(rows, np.float32)], 3, expected


def _transpose_inputs(n: int) -> tuple[list[Any], int, np.ndarray]:
    src = _rng().random((n, n), dtype=np.float32)
    return [np.int32(n), src, np.zeros_like(src)], 2, np.ascontiguousarray(src.T)


KERNELS: dict[str, SuiteKernel] = {
    k.name: k
    for k in (
        SuiteKernel(
            name="stencil",
            character="memory-bound 2D, small launches",
            source=STENCIL,
            kernel="stencil",
            params={"block_size_x": [8, 16, 32, 64, 128], "block_size_y": [1, 2, 4, 8], "TILE_Y": [1, 2, 4]},
            allowed=lambda p: 32 <= p["block_size_x"] * p["block_size_y"] <= 256,
            problem=lambda n: (n, n),
            grid_div_x=["block_size_x"],
            grid_div_y=["block_size_y", "TILE_Y"],
            inputs=_stencil_inputs,
            size=1024,
            quick_size=512,
            quick_params={"TILE_Y": [1, 2]},
        ),
        SuiteKernel(
            name="matmul",
            character="compute-bound, local-memory tiles",
            source=_sgemm_space.SOURCE,
            kernel="sgemm",
            params={"block_size_x": [4, 8, 16, 32], "block_size_y": [2, 4, 8, 16, 32], "VEC": [1, 2, 4]},
            allowed=_sgemm_space.allowed,
            problem=lambda n: (n, n),
            grid_div_x=["block_size_x", "VEC"],
            grid_div_y=["block_size_x", "VEC"],
            inputs=_matmul_inputs,
            size=256,
            quick_size=128,
            atol=1e-2,
            quick_params={"VEC": [1, 4]},
        ),
        SuiteKernel(
            name="conv",
            character="2D convolution, filter in local memory",
            source=CONV,
            kernel="conv",
            params={"block_size_x": [8, 16, 32], "block_size_y": [2, 4, 8, 16], "TILE_Y": [1, 2, 4]},
            allowed=lambda p: 32 <= p["block_size_x"] * p["block_size_y"] <= 256,
            problem=lambda n: (n, n),
            grid_div_x=["block_size_x"],
            grid_div_y=["block_size_y", "TILE_Y"],
            inputs=_conv_inputs,
            size=512,
            quick_size=256,
            quick_params={"TILE_Y": [1, 4]},
        ),
        SuiteKernel(
            name="reduce",
            character="row reduction, tree in local memory",
            source=REDUCE,
            kernel="row_sums",
            params={"block_size_x": [32, 64, 128, 256], "block_size_y": [1, 2, 4, 8], "VEC": [1, 2, 4]},
            allowed=lambda p: p["block_size_x"] * p["block_size_y"] <= 256,
            problem=lambda n: (1, n),
            grid_div_x=["block_size_x"],
            grid_div_y=["block_size_y"],
            inputs=_reduce_inputs,
            size=2048,
            quick_size=512,
            atol=1e-2,
            quick_params={"VEC": [1, 4]},
        ),
        SuiteKernel(
            name="transpose",
            character="tiled transpose through local memory",
            source=TRANSPOSE,
            kernel="transpose",
            params={"block_size_x": [8, 16, 32, 64], "block_size_y": [1, 2, 4, 8, 16, 32], "PAD": [0, 1]},
            allowed=lambda p: (
                16 <= p["block_size_x"] * p["block_size_y"] <= 256 and p["block_size_y"] <= p["block_size_x"]
            ),
            problem=lambda n: (n, n),
            grid_div_x=["block_size_x"],
            grid_div_y=["block_size_x"],
            inputs=_transpose_inputs,
            size=1024,
            quick_size=512,
            quick_params={"PAD": [1]},
        ),
    )
}
