"""Telling a launch that wrote past the end of a buffer: canary bytes after it that changed.

Kept apart from ``_buffers.py`` (which sizes the canaries by ``tunekit.backend``'s constants) so
that a compile worker checks its first launches importing only numpy and pyopencl: the parent
sends each buffer's canary size and value in the request.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tunekit_backends.opencl._cl import pyopencl

__all__ = ["canary_intact", "overrun_message"]


def canary_intact(queue: Any, buffer: Any, nbytes: int, canary: int, value: int) -> bool:
    """Whether the ``canary`` bytes after the first ``nbytes`` of ``buffer`` all still hold ``value``."""
    if canary == 0:
        return True
    found = np.empty(canary, np.uint8)
    pyopencl().enqueue_copy(queue, found, buffer, src_offset=nbytes)
    return bool(np.all(found == value))


def overrun_message(position: int, nbytes: int) -> str:
    """What to say of a first launch that wrote past the end of argument ``position``, said alike wherever it ran."""
    return (
        f"wrote past the end of argument {position} (a buffer of {nbytes} bytes) at its first launch: the launch "
        "covers more items than the arrays hold (an anchored key's geometry is shaped from its bucket, rounded up "
        "from the call's size); guard the kernel's bounds (if (i < n)), or size the arrays to the key (allocated by "
        "an inputs= generator)"
    )
