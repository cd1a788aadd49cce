"""Campaign targets of the tests: a numpy operation on the CPU and a tiny OpenCL kernel on PoCL."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class SumKey:
    rows: int
    n: int


ROW_SUM_TUNER: tk.LocalTuner[SumKey, Any] = tk.LocalTuner("campaign_row_sum")


def _row_sum_set(client: tk.Client) -> tk.TunableSet[SumKey, Any]:
    return (
        tk.TunableSet(key=lambda x: SumKey(rows=x.shape[0], n=x.shape[1]))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
        .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)))
        .with_tunable(tk.Tunable("matvec", lambda x: x @ np.ones(x.shape[1], dtype=x.dtype)))
    )


def _row_sum_inputs(client: tk.Client, shape: Any) -> tuple[Any, ...]:
    return (np.random.default_rng(0).random((int(shape["rows"]), int(shape["n"]))).astype(np.float32),)


ROW_SUM = tk.CampaignTarget(
    tuner=ROW_SUM_TUNER,
    tunables=_row_sum_set,
    inputs=_row_sum_inputs,
    clients={"cpu-numpy": CpuClient},
    shape=("rows", "n"),
)


SCALE_SOURCE = """
__kernel void scale(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i];
}
"""


@tk.autotune_key
class ScaleKey:
    n: int


SCALE_TUNER: tk.LocalTuner[ScaleKey, Any] = tk.LocalTuner("campaign_opencl_scale")


def _opencl_client() -> tk.Client:
    from tunekit_backends.opencl import OpenCLClient  # noqa: PLC0415 - pyopencl only on the workers that run it

    return OpenCLClient(flush_cache=False, compile_in="thread")


def _geometry(config: tk.Config, key: ScaleKey) -> tuple[tuple[int], tuple[int]]:
    block = int(config.BLOCK)
    return ((key.n + block - 1) // block * block,), (block,)


def _scale_set(client: Any) -> tk.TunableSet[ScaleKey, Any]:
    import pyopencl.array as cla  # noqa: PLC0415

    from tunekit_backends.opencl import KernelTemplate  # noqa: PLC0415

    def inputs(key: ScaleKey, *args: object) -> tuple[object, ...]:
        x = np.random.default_rng(0).random(key.n, dtype=np.float32)
        return (
            cla.to_device(client.queue, x),
            cla.empty(client.queue, key.n, np.float32),
            np.float32(3),
            np.int32(key.n),
        )

    template = KernelTemplate(SCALE_SOURCE, "scale", {"BLOCK": [16, 64]}, geometry=_geometry)
    return template.tunable_set(
        client,
        key=lambda x, y, a, n: ScaleKey(n=int(n)),
        inputs=inputs,
        reference=lambda x, y, a, n: a * x,
        outputs=[1],
    )


def _scale_inputs(client: Any, shape: Any) -> tuple[Any, ...]:
    import pyopencl.array as cla  # noqa: PLC0415

    n = int(shape["n"])
    x = cla.to_device(client.queue, np.linspace(0, 1, n, dtype=np.float32))
    return (x, cla.empty(client.queue, n, np.float32), np.float32(3), np.int32(n))


SCALE = tk.CampaignTarget(
    tuner=SCALE_TUNER,
    tunables=_scale_set,
    inputs=_scale_inputs,
    clients={"opencl:pocl": _opencl_client},
    shape=("n",),
)


@tk.autotune_key
class NapKey:
    n: int


NAP_TUNER: tk.LocalTuner[NapKey, Any] = tk.LocalTuner("campaign_nap")


def _nap(factor: int) -> tk.Tunable[int]:
    def run(n: int, ms: float) -> int:
        time.sleep(factor * ms / 1000)
        return n

    return tk.Tunable(f"nap{factor}", run)


NAP = tk.CampaignTarget(
    tuner=NAP_TUNER,
    tunables=lambda client: tk.TunableSet(key=lambda n, ms: NapKey(n=n)).with_tunables([_nap(1), _nap(2)]),
    inputs=lambda client, shape: (int(shape["n"]), float(shape["ms"])),
    clients={"cpu-numpy": CpuClient},
    shape=("n", "ms"),
)
"""A tune that takes as long as its shape's ``ms`` says (each candidate sleeps): a job still running when a test
kills its worker or its driver."""

SCALE_ON_A_GPU = tk.CampaignTarget(
    tuner=SCALE_TUNER,
    tunables=_scale_set,
    inputs=_scale_inputs,
    clients={"opencl:gpu": _opencl_client},
    shape=("n",),
)
"""The kernel on a device kind this machine's cluster does not have."""


def _refused(client: tk.Client, shape: Any) -> tuple[Any, ...]:
    if shape["n"] < 0:
        raise ValueError(f"n={shape['n']} is no size")
    return _row_sum_inputs(client, {"rows": 2, "n": shape["n"]})


CHECKED_ROW_SUM = tk.CampaignTarget(
    tuner=ROW_SUM_TUNER, tunables=_row_sum_set, inputs=_refused, clients={"cpu-numpy": CpuClient}, shape=("n",)
)
"""Row sums whose inputs refuse a negative size: a job that fails on its worker."""
