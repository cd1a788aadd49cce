"""An OpenCL template searched inside execute (``with_search``), for a worker process to rebuild by name.

``build`` is the worker factory that ``tk.search``'s refusal of an OpenCL client under process
isolation points to: the same search, run by a tuner, times each variant in a fresh interpreter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl.array as cla

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient

SOURCE = """
__kernel void fill(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (float)(BLOCK * UNROLL);
}
"""


@tk.autotune_key
class FillKey:
    n: int


def searched(client: OpenCLClient, n: int) -> tuple[OpenCLClient, tk.TunableSet[FillKey, Any], tuple[Any, ...]]:
    """Sixteen variants, four of them searched per key."""
    template = KernelTemplate(
        SOURCE,
        "fill",
        {"BLOCK": [8, 16, 32, 64], "UNROLL": [1, 2, 4, 8]},
        geometry=lambda config, key: ((key.n,), (int(config.BLOCK),)),
    )

    def fresh(*_: Any) -> tuple[Any, ...]:
        return (cla.zeros(client.queue, n, np.float32), np.int32(n))

    tunables = template.tunable_set(client, key=lambda y, size: FillKey(n=int(size)), inputs=fresh)
    return client, tunables.with_search(max_evals=4, seed=0, batch=2), fresh()


def build(key: dict[str, Any], *, device_id: str) -> tuple[OpenCLClient, tk.TunableSet[FillKey, Any], tuple[Any, ...]]:
    """The worker factory, for the device the tune is for."""
    return searched(OpenCLClient(flush_cache=False, device_id=device_id, compile_in="thread"), int(key["n"]))
