"""Compiling in worker processes: parallel compiles for drivers that serialise them in-process.

Measured on PoCL: pyopencl releases the GIL while building and launching, yet two threads
build no faster than one, because PoCL holds one lock around its LLVM work per process.
A worker process has its own lock. It builds the variant and launches it once on zeroed
scratch buffers, which leaves the compiled program and work-group function in PoCL's
on-disk kernel cache (``POCL_CACHE_DIR``, on by default); the parent's own build and first
launch are then cache hits. Only picklable values cross the process boundary.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunekit._check import CANARY_BYTES
from tunekit_backends.opencl._cl import first_error_line, pyopencl

__all__ = ["LaunchSpec", "WarmPool", "launch_spec"]


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything a worker needs to compile and first-launch one variant."""

    platform: str
    device: str
    source: str
    options: tuple[str, ...]
    kernel_name: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple[tuple[str, int | float, str], ...]
    """("buffer", nbytes, "") or ("scalar", value, numpy dtype string), in argument order."""


def launch_spec(
    device: Any,
    source: str,
    options: list[str],
    kernel_name: str,
    global_size: tuple[int, ...],
    local_size: tuple[int, ...] | None,
    args: tuple[Any, ...],
) -> LaunchSpec:
    """The spec of a launch with ``args``: buffers by size, scalars by value and dtype."""
    cl = pyopencl()
    described: list[tuple[str, int | float, str]] = []
    for value in args:
        if isinstance(value, cl.array.Array):
            described.append(("buffer", int(value.nbytes), ""))
        elif isinstance(value, cl.Buffer):
            described.append(("buffer", int(value.size), ""))
        elif isinstance(value, np.generic):
            described.append(("scalar", value.item(), value.dtype.str))
        else:
            raise TypeError(f"kernel argument of type {type(value).__name__} cannot be sent to a compile worker")
    return LaunchSpec(
        device.platform.name,
        device.name,
        source,
        tuple(options),
        kernel_name,
        global_size,
        local_size,
        tuple(described),
    )


_worker_contexts: dict[tuple[str, str], tuple[Any, Any]] = {}


def _warm(spec: LaunchSpec) -> str | None:
    """In a worker: build and launch once; None on success, else the first line of the error."""
    cl = pyopencl()
    where = (spec.platform, spec.device)
    if where not in _worker_contexts:
        device = next(
            d for p in cl.get_platforms() if p.name == spec.platform for d in p.get_devices() if d.name == spec.device
        )
        context = cl.Context([device])
        _worker_contexts[where] = (context, cl.CommandQueue(context))
    context, queue = _worker_contexts[where]
    try:
        program = cl.Program(context, spec.source).build(options=list(spec.options))
        kernel = cl.Kernel(program, spec.kernel_name)
        launch_args: list[Any] = []
        for kind, value, dtype in spec.args:
            if kind == "buffer":
                buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, max(int(value) + CANARY_BYTES, 1))
                cl.enqueue_fill_buffer(queue, buffer, np.uint8(0), 0, buffer.size)
                launch_args.append(buffer)
            else:
                launch_args.append(np.dtype(dtype).type(value))
        kernel(queue, spec.global_size, spec.local_size, *launch_args).wait()
    except cl.Error as exc:
        return first_error_line(str(exc))
    return None


class WarmPool:
    """A lazily started pool of compile worker processes (spawned: no fork of an OpenCL context)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def warm(self, spec: LaunchSpec) -> str | None:
        """Compile and first-launch ``spec`` in a worker; blocks the calling thread only."""
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
            pool = self._pool
        return pool.submit(_warm, spec).result()

    def close(self) -> None:
        """Stop the workers."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(cancel_futures=True)
