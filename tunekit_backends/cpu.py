"""CpuClient: numpy functions timed on the host with ``time.perf_counter_ns``."""

from __future__ import annotations

import functools
import os
import platform
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

__all__ = ["CpuClient"]

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
def _device_id() -> str:
    cores = os.cpu_count() or 0
    return f"cpu:{_cpu_model()}:{cores}c:{platform.machine()}:numpy-{np.__version__}:{_blas()}"


class CpuClient:
    """The host CPU as a tunekit client.

    ``device_id`` names the CPU model, core count, numpy version and BLAS, since any of
    them can change which candidate is fastest.
    """

    @property
    def device_id(self) -> str:
        """Stable, specific identity of this host's CPU and numpy stack."""
        return _device_id()

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run`` once; its duration in ns by the host's monotonic clock."""
        start = time.perf_counter_ns()
        output = run()
        return output, time.perf_counter_ns() - start

    def sync(self) -> None:
        """Nothing to wait for: numpy calls return when done."""
