"""An OpenCL device of this machine whose compiler fails a trivial build, for the tests of how a client refuses it.

Pip's PoCL 3.0-rc2 on a CPU its LLVM does not know (this AMD VM) is one; a machine without one skips those tests.
"""

from __future__ import annotations

import pyopencl as cl


def broken_device() -> tuple[int, int] | None:
    """(platform, device) of a device whose compiler cannot build a trivial kernel here, if any."""
    for p, platform in enumerate(cl.get_platforms()):
        for d, device in enumerate(platform.get_devices()):
            try:
                cl.Program(cl.Context([device]), "__kernel void k(__global int* x) { x[0] = 1; }").build()
            except cl.Error:
                return p, d
    return None
