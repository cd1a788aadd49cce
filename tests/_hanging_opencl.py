"""A KernelTemplate whose ``MODE=1`` variant never ends, tuned under process isolation by a fresh interpreter.

``main`` runs in a child process the test can kill (a hang there must not hang the test suite);
it prints the tune's record as JSON. ``build`` is the worker factory: the isolated worker
imports it by name to rebuild the client, the variants and the inputs.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pyopencl.array as cla

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient

N = 64

SPIN = """
__kernel void spin(__global float* y, volatile __global const int* stop, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if MODE == 1
    while (stop[0] == 0) { y[i] += 1.0f; }   /* stop is 0 and nothing sets it: never ends */
#endif
    y[i] = (float)(MODE + 1);
}
"""


@tk.autotune_key
class SpinKey:
    n: int


def _tune(client: OpenCLClient, n: int) -> tuple[OpenCLClient, tk.TunableSet[SpinKey, Any], tuple[Any, ...]]:
    template = KernelTemplate(SPIN, "spin", {"MODE": [0, 1]}, geometry=lambda config, key: ((key.n,), (8,)))

    def fresh(*_: Any) -> tuple[Any, ...]:
        return (cla.zeros(client.queue, n, np.float32), cla.zeros(client.queue, 1, np.int32), np.int32(n))

    tunables = template.tunable_set(client, key=lambda y, stop, size: SpinKey(n=int(size)), inputs=fresh)
    return client, tunables, fresh()


def build(key: dict[str, Any], *, device_id: str) -> tuple[OpenCLClient, tk.TunableSet[SpinKey, Any], tuple[Any, ...]]:
    """The worker factory, for the device the tune is for."""
    return _tune(OpenCLClient(flush_cache=False, device_id=device_id, compile_in="thread"), int(key["n"]))


def main() -> None:
    """``sys.argv``: compile_in, the set's timeout_s."""
    compile_in, timeout_s = sys.argv[1], float(sys.argv[2])
    client, tunables, inputs = _tune(OpenCLClient(flush_cache=False, compile_in=compile_in, compile_workers=1), N)  # type: ignore[arg-type]
    isolated = tunables.with_isolation("process", timeout_s=timeout_s, worker=build)
    records: list[tk.AutotuneRecord] = []
    tk.add_record_sink(records.append)
    tk.LocalTuner[SpinKey, Any]("hanging").execute(client.device_id, client, isolated, inputs).wait()
    print(records[-1].model_dump_json(), flush=True)
    client.close()
