"""Cold inputs by rotation: copies of a tune's inputs, each used once every ``count`` samples.

A flush writes twice the last-level cache before each sample so that the sample reads its
inputs from memory, not from the cache. Writing that much costs 0.1-0.3 s per sample on a CPU
device with a 480 MiB L3 (measured on PoCL), which is 100-1000x a small kernel's run. The same
cold start costs almost nothing when each sample runs on another copy of the inputs: between
two uses of one copy, the samples on the other copies stream their own bytes through the
cache. With ``count`` copies of ``size`` bytes, ``(count - 1) * size`` bytes pass through the cache
between two uses of a copy; when that falls short of twice the cache (small inputs, since the
copies are capped at ``MAX_COPIES``), each sample also writes a window of a flush buffer, a
different window each time, so that the bytes streamed between two uses of a copy add up to
twice the cache, as with the whole flush. It assumes what the whole flush assumes (the cache
evicts the least recently used lines first, roughly) and that each run reads and writes its
arguments' buffers, as every variant of one operation does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["MAX_COPIES", "cold_inputs"]

MAX_COPIES = 256
"""Copies at most; beyond, each sample writes a window of the flush buffer too (smaller inputs)."""


def _nbytes(cl: Any, value: Any) -> int | None:
    """The bytes of a buffer argument, 0 for a scalar or local memory, None for what cannot be copied here."""
    if isinstance(value, cl.array.Array):
        return int(value.nbytes)
    if isinstance(value, cl.Buffer):
        return int(value.size)
    if isinstance(value, np.generic | int | float | cl.LocalMemory) or value is None:
        return 0
    return None


def _copy(cl: Any, queue: Any, value: Any) -> Any:
    if isinstance(value, cl.array.Array):
        return value.copy(queue=queue)
    if isinstance(value, cl.Buffer):
        copy = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, value.size)
        cl.enqueue_copy(queue, copy, value)
        return copy
    return value


def cold_inputs(
    cl: Any, queue: Any, inputs: tuple[Any, ...], cache_bytes: int, max_bytes: int
) -> Callable[[], tuple[Any, ...]] | None:
    """Rotating copies of ``inputs`` that reach each sample cold; None when they cannot be made.

    None when an argument is neither a buffer nor a scalar, when the inputs hold no buffer (the
    flush is then as cheap as it gets), or when the copies and the flush window's buffer would
    take more than ``max_bytes`` of device memory.
    """
    sizes = [_nbytes(cl, value) for value in inputs]
    if any(size is None for size in sizes):
        return None
    size = sum(s for s in sizes if s is not None)
    if size <= 0:
        return None
    streamed = 2 * cache_bytes  # what the whole flush writes
    count = min(MAX_COPIES, math.ceil(streamed / size) + 1)
    window = max(math.ceil(streamed / (count - 1)) - size, 0)
    if count * size + window * (count - 1) > max_bytes:
        return None
    # Fresh copies only: the caller's inputs also serve untimed runs, which would leave one copy warmer.
    copies = [tuple(_copy(cl, queue, value) for value in inputs) for _ in range(count)]
    flush = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, window * (count - 1)) if window else None
    queue.finish()
    # On an in-order queue the sample's kernel, enqueued after the window's fill, starts once the fill is
    # done, and its event times the kernel alone: waiting for the fill here would only add a round trip
    # to the driver per sample (0.14 ms on PoCL's CPU device, more when the machine is busy).
    ordered = not queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    turn = 0

    def next_inputs() -> tuple[Any, ...]:
        nonlocal turn
        turn += 1
        if flush is not None:
            slot = turn % (count - 1)
            filled = cl.enqueue_fill_buffer(queue, flush, np.uint8(turn % 251), slot * window, window)
            if not ordered:
                filled.wait()
        return copies[turn % count]

    return next_inputs
