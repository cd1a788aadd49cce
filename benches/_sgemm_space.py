"""The SGEMM kernel and space shared by the OpenCL benches, written so Kernel Tuner can run it too.

Kernel Tuner names the work-group sides ``block_size_x``/``block_size_y`` and inserts each
parameter as a ``#define``; tunekit passes the same parameters as ``-D`` options. The tile
side is ``block_size_x * VEC`` and each work-item computes ``TS / block_size_y`` rows.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate
from tunekit_backends.opencl._vector import VECTOR_PREAMBLE

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "opencl"))
from sgemm import KERNEL as SGEMM_KERNEL

# The example's kernel, with the tile and rows-per-item derived from Kernel Tuner's names.
SOURCE = (
    VECTOR_PREAMBLE
    + "#define TS (block_size_x * VEC)\n#define WPT (TS / block_size_y)\n"
    + "#define RTS block_size_y\n#define CTS block_size_x\n"
    + SGEMM_KERNEL
)

PARAMS: dict[str, list[int]] = {"block_size_x": [4, 8, 16, 32], "block_size_y": [2, 4, 8, 16, 32], "VEC": [1, 2, 4]}


def allowed(p: dict[str, Any]) -> bool:
    """Tile 16..64 wide, whole rows per work-item (1..16), at most 256 work-items per group."""
    ts = p["block_size_x"] * p["VEC"]
    return (
        16 <= ts <= 64
        and ts % p["block_size_y"] == 0
        and 1 <= ts // p["block_size_y"] <= 16
        and p["block_size_x"] * p["block_size_y"] <= 256
    )


def configs() -> list[dict[str, int]]:
    """Every allowed configuration, in Cartesian order."""
    names = list(PARAMS)
    points = (dict(zip(names, values, strict=True)) for values in itertools.product(*PARAMS.values()))
    return [p for p in points if allowed(p)]


@tk.autotune_key
class GemmKey:
    m: int
    n: int
    k: int


def geometry(config: tk.Config, key: GemmKey) -> tuple[tuple[int, int], tuple[int, int]]:
    """Global (N / VEC, M / WPT) and local (block_size_x, block_size_y), as Kernel Tuner computes it."""
    bx, by, vec = int(config.block_size_x), int(config.block_size_y), int(config.VEC)
    ts = bx * vec
    return (key.n // ts * bx, key.m // ts * by), (bx, by)


def template() -> KernelTemplate[GemmKey]:
    """The tunekit template of the space (the same source and parameters Kernel Tuner gets)."""
    return KernelTemplate(
        SOURCE,
        "sgemm",
        tk.Space(restrict=lambda c: allowed(dict(c.items())), **PARAMS),
        geometry=geometry,
        applies=lambda c, key: all(side % (c.block_size_x * c.VEC) == 0 for side in (key.m, key.n, key.k)),
    )


def host_inputs(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A, B and the float64 reference product rounded to float32."""
    rng = np.random.default_rng(0)
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    return a, b, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def gflops(size: int, ns: float) -> float:
    """GFLOP/s of one ``size``-cubed SGEMM in ``ns``."""
    return 2.0 * size**3 / ns if ns > 0 else math.nan
