"""What an OpenCL device can do at best (the roofline's ceilings), and keeping it busy to warm it up.

Measured with small kernels of our own, timed by event profiling on the device's clock like
every candidate, so the limits and the candidates' times are in the same units.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tunekit.backend import DevicePeaks, warm_until_steady
from tunekit_backends.opencl._cl import HELPER_SOURCE, helper_items

__all__ = ["busy_kernel", "measure_device_peaks", "warm_up_device"]

_ITERATIONS = 512
_CHUNK_NS = 2_000_000
_FLOPS_PER_ITEM = 4 * 2 * _ITERATIONS  # four chains, a multiply and an add per step


class _Kernels:
    def __init__(self, cl: Any, context: Any, device: Any) -> None:
        self.program = cl.Program(context, HELPER_SOURCE).build()
        self.out = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, 4)
        self.items = helper_items(device)
        self.fma = self.program.tunekit_fma
        self.empty = self.program.tunekit_empty


def busy_kernel(cl: Any, context: Any, device: Any) -> Any:
    """The compiled helper kernels for one context (build once, reuse)."""
    return _Kernels(cl, context, device)


def _elapsed_ns(event: Any) -> int:
    event.wait()
    return max(int(event.profile.end - event.profile.start), 1)


def measure_device_peaks(cl: Any, queue: Any, kernels: _Kernels) -> DevicePeaks:
    """Best of a few runs: multiply-adds for compute, a large buffer copy for bandwidth, an empty kernel.

    Best-of, because the roofline is what the device can do at all, not what it usually does.
    """
    fma_ns = min(
        _elapsed_ns(kernels.fma(queue, (kernels.items,), None, kernels.out, np.int32(_ITERATIONS))) for _ in range(4)
    )
    device = queue.device
    size = int(min(64 << 20, max(int(device.global_mem_size) // 16, 1 << 20), int(device.max_mem_alloc_size)))
    src = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, size)
    dst = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, size)
    cl.enqueue_fill_buffer(queue, src, np.uint8(1), 0, size).wait()
    copy_ns = min(_elapsed_ns(cl.enqueue_copy(queue, dst, src)) for _ in range(4))
    launch_ns = min(_elapsed_ns(kernels.empty(queue, (1,), None, kernels.out)) for _ in range(20))
    return DevicePeaks(
        ops_per_s=kernels.items * _FLOPS_PER_ITEM / (fma_ns * 1e-9),
        bytes_per_s=2 * size / (copy_ns * 1e-9),  # read and write
        launch_overhead_ns=float(launch_ns),
    )


def warm_up_device(queue: Any, kernels: _Kernels, duration_ns: int, *, min_fraction: float = 1 / 3) -> int:
    """Run multiply-add kernels back to back until the device's speed is steady (at most ``duration_ns``).

    Each chunk is sized to about 2 ms of device time, so that a ramp shows up over many chunks.
    ``min_fraction`` is ``warm_until_steady``'s.
    """
    first = _elapsed_ns(kernels.fma(queue, (kernels.items,), None, kernels.out, np.int32(_ITERATIONS)))
    iterations = np.int32(min(max(_ITERATIONS * _CHUNK_NS // first, 1), 1 << 20))
    return warm_until_steady(
        lambda: _elapsed_ns(kernels.fma(queue, (kernels.items,), None, kernels.out, iterations)),
        duration_ns,
        min_fraction=min_fraction,
    )
