"""pyopencl, imported on first use so that importing tunekit never pays for it."""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["CompileError", "build_log", "first_error_line", "is_pocl", "pocl_kernel_cache_on", "pyopencl"]

INSTALL_HINT = "pip install 'tunekit[opencl]'"

PROBE_KERNEL = "__kernel void tunekit_probe(__global int* x) { x[get_global_id(0)] = 1; }"
"""The trivial kernel a client builds to check a device's compiler, and a compile worker builds first.

The same text (and no options) in both: a worker that starts as the client opens builds it first
into PoCL's kernel cache, and the client's own probe is then a cache hit, which spares this
process loading the compiler at all on PoCL (about 0.45 s of CPU with a cold cache) when its
workers compile every variant.
"""


# Four independent multiply-add chains per work item keep the ALUs' pipelines full; the
# store at the end (never taken: the values stay finite) keeps the compiler from removing them.
HELPER_SOURCE = """
__kernel void tunekit_fma(__global float* out, const int iterations) {
    float a = get_global_id(0) * 1e-9f, b = a + 1e-9f, c = a + 2e-9f, d = a + 3e-9f;
    for (int i = 0; i < iterations; i++) {
        a = a * 0.9999f + 1e-7f;
        b = b * 0.9999f + 1e-7f;
        c = c * 0.9999f + 1e-7f;
        d = d * 0.9999f + 1e-7f;
    }
    float s = a + b + c + d;
    if (s > 1e30f) out[get_global_id(0)] = s;
}

__kernel void tunekit_empty(__global float* out) {}
"""


WARM_UP_KERNEL_FLAG = "--warm-up-kernel"
"""Appended to the command of a pool's first compile worker: it also first-launches ``HELPER_SOURCE`` into PoCL's cache.

One copy there serves the client's warm-up: two workers starting together would both build it cold (0.15 s of
CPU each here, while the CPUs are busiest). Not part of the way workers start (``_compile_starts``): a worker
starts, or fails to, the same way with it or without."""


def helper_items(device: Any) -> int:
    """The global size the helper kernels run at on ``device``: enough work-groups to fill every compute unit."""
    return max(int(device.max_compute_units) * int(device.max_work_group_size) * 4, 1 << 14)


def pyopencl() -> Any:
    """The pyopencl module (with ``pyopencl.array`` loaded), or an ImportError naming the extra."""
    try:
        import pyopencl as cl  # noqa: PLC0415 - the optional opencl extra, imported at first use
        import pyopencl.array  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(f"the OpenCL backend needs pyopencl and an OpenCL driver: {INSTALL_HINT}") from exc
    return cl


def is_pocl(platform_name: str) -> bool:
    """Whether a platform is PoCL, whose compiler and on-disk kernel cache tunekit works around."""
    return "portable computing language" in platform_name.lower()


def pocl_kernel_cache_on() -> bool:
    """PoCL's own switch for its kernel cache (``POCL_KERNEL_CACHE=0`` turns it off; it is on by default)."""
    return os.environ.get("POCL_KERNEL_CACHE", "1") != "0"


class CompileError(RuntimeError):
    """A kernel variant failed to build, or the device refused to launch it.

    The first line says what went wrong in one line (it becomes the record's reason);
    the full compiler log follows.
    """


# PoCL compiles a copy of the source under a random name (.../kcache/tempfile_KCpeV2.cl:3:12): said as the
# line of the user's source, the same mistake reads the same in every variant, and is said once for them all.
_TEMPORARY_SOURCE = re.compile(r"\S*tempfile_\w+\.cl:(\d+):(\d+):?")


def first_error_line(log: str) -> str:
    """The first line of a compiler log that names an error, else its first non-empty line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return _TEMPORARY_SOURCE.sub(r"line \1, column \2 of the kernel source:", line)
    return lines[0] if lines else "no compiler output"


def build_log(exc: BaseException) -> str:
    """The build log inside a pyopencl build error (after its 'Build on <device>:' line)."""
    text = str(exc)
    _, _, log = text.partition("Build on")
    return log.partition("\n")[2] if log else text
