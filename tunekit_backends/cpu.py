"""CpuClient: numpy functions timed on the host with ``time.perf_counter_ns``."""

from __future__ import annotations

import functools
import os
import platform
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from tunekit.backend import DevicePeaks, warm_until_steady

__all__ = ["CpuClient", "found_clients"]

T = TypeVar("T")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def _blas() -> str:
    """numpy's BLAS by name and version: a BLAS upgrade changes which numpy call is fastest."""
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')}-{blas.get('version', '?')}"
    except Exception:
        return "blas-unknown"


@functools.cache
def _device_model() -> str:
    cores = os.cpu_count() or 0
    return f"cpu:{_cpu_model()}:{cores}c:{platform.machine()}"


@functools.cache
def _device_id() -> str:
    return f"{_device_model()}:numpy-{np.__version__}:{_blas()}"


class CpuClient:
    """The host CPU as a tunekit client.

    ``device_id`` names the CPU model, core count, numpy version and BLAS, since any of
    them can change which candidate is fastest; ``device_model`` (``tunekit.backend.SupportsDeviceModel``)
    is its hardware part, the CPU model, core count and architecture.
    """

    if TYPE_CHECKING:  # a property to type checkers: pyright matches no cached_property to Client's property

        @property
        def device_id(self) -> str:
            """Stable, specific identity of this host's CPU and numpy stack."""
            ...

    else:

        @functools.cached_property  # kept on the instance: every TUNER.execute(client.device_id, ...) reads it
        def device_id(self) -> str:
            """Stable, specific identity of this host's CPU and numpy stack."""
            return _device_id()

    @property
    def device_model(self) -> str:
        """The CPU model, core count and architecture: ``device_id`` without numpy and its BLAS."""
        return _device_model()

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run`` once; its duration in ns by the host's monotonic clock."""
        start = time.perf_counter_ns()
        output = run()
        return output, time.perf_counter_ns() - start

    def sync(self) -> None:
        """Nothing to wait for: numpy calls return when done."""

    def warm_up(self, duration_ns: int) -> int:
        """Keep the cores busy with small matrix products until their speed is steady (at most ``duration_ns``)."""
        a = np.ones((64, 64), np.float32)

        def chunk() -> int:
            nonlocal a
            start = time.perf_counter_ns()
            for _ in range(16):
                a = (a @ a) * np.float32(1.0 / 64)
            return time.perf_counter_ns() - start

        return warm_until_steady(chunk, duration_ns)

    def measure_peaks(self) -> DevicePeaks:
        """Best of a few runs of float32 matrix products, a large copy, and an empty-ish call.

        Best-of, because the roofline is what the machine can do at all, not what it usually does.
        Takes a few tenths of a second; the tuner measures once per device per process.
        """
        n = 512
        a = np.ones((n, n), np.float32)
        b = np.ones((n, n), np.float32)
        matmul_ns = _best_ns(lambda: a @ b, 5)
        # A multi-threaded BLAS product on a busy machine waits for its descheduled threads at
        # every sync: every run can come out 30-200x slow, and a peak that low makes the roofline a
        # limit ordinary candidates "meet", short-circuiting batches whose best is never timed.
        # A small product runs on one core, far inside one time slice, so its best of many is
        # what a core can do whatever the load; times the cores, it bounds the large product's
        # figure from below (an overestimate only makes the short circuit rarer).
        small = 64
        c = np.ones((small, small), np.float32)
        small_ns = _best_ns(lambda: c @ c, 200)
        ops_per_s = max(2 * n**3 / (matmul_ns * 1e-9), 2 * small**3 / (small_ns * 1e-9) * _cores())
        chunk = 4 << 20
        copy_ns = _best_chunk_copy_ns(64 << 20, chunk, passes=3)  # 64 MiB: larger than the last-level cache
        one = np.ones(1, np.float32)
        launch_ns = _best_ns(lambda: np.add(one, one), 200)
        return DevicePeaks(
            ops_per_s=ops_per_s,
            bytes_per_s=2 * chunk / (copy_ns * 1e-9),  # read and write
            launch_overhead_ns=float(launch_ns),
        )


def _cores() -> int:
    """The cores this process may run on (its affinity where the OS tells, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _best_chunk_copy_ns(size: int, chunk: int, *, passes: int) -> int:
    """The fastest copy of one ``chunk`` bytes, over ``passes`` passes through a ``size``-byte buffer.

    One copy of the whole buffer takes milliseconds, long enough to be preempted on a busy
    machine: every one of a few can come out 4-8x slow, a bandwidth "peak" that ordinary
    candidates would then meet. A chunk fits in a time slice, and was last touched a whole buffer ago: not cached.
    """
    src = np.ones(size, np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # every page mapped before timing
    best: int | None = None
    for _ in range(passes):
        for start in range(0, size, chunk):
            began = time.perf_counter_ns()
            np.copyto(dst[start : start + chunk], src[start : start + chunk])
            elapsed = max(time.perf_counter_ns() - began, 1)
            best = elapsed if best is None else min(best, elapsed)
    assert best is not None
    return best


def _best_ns(run: Callable[[], object], repeats: int) -> int:
    run()
    best = None
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run()
        elapsed = max(time.perf_counter_ns() - start, 1)
        best = elapsed if best is None else min(best, elapsed)
    assert best is not None
    return best


def found_clients() -> Iterator[tuple[str, CpuClient]]:
    """The host CPU, for ``tunekit devices`` (the ``tunekit.clients`` entry point)."""
    yield "cpu", CpuClient()
