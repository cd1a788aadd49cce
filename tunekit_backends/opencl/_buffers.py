"""Fresh device copies of a candidate's arguments, with canary bytes after each output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

import tunekit as tk
from tunekit.backend import CANARY_BYTES, CANARY_VALUE, ReferenceFailed
from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._overrun import canary_intact, overrun_message


class _HasQueue(Protocol):
    """The client a check copies buffers on: only its command queue is used."""

    @property
    def queue(self) -> Any: ...


__all__ = ["DeviceCheckBuffers", "argument_hint", "canary_bytes", "canary_changed", "kernel_arg", "overrun_message"]

CANARY_MAX_BYTES = 4 << 20
"""The most canary bytes after one buffer: a fourth of a 16 MiB buffer; past it, device memory matters more."""


def canary_bytes(nbytes: int) -> int:
    """How many canary bytes follow a buffer of ``nbytes``: a fourth of it, at least 64, at most 4 MiB.

    Sized to the buffer so that the usual overrun, a kernel without a bounds guard launched on a
    global size rounded up to whole work-groups (up to one work-group past the end, 384 bytes for
    96 float items past a 4000-float output), lands in the canary. On a CPU device (PoCL) a write
    past the canary lands in the tuning process's own heap; with a fixed 64 bytes it usually would.
    """
    return min(max(CANARY_BYTES, nbytes // 4), CANARY_MAX_BYTES)


def kernel_arg(value: Any) -> Any:
    """What a kernel launch takes for ``value``: a pyopencl array's buffer, anything else as is."""
    cl = pyopencl()
    return value.data if isinstance(value, cl.array.Array) else value


def canary_changed(queue: Any, buffer: Any, nbytes: int) -> bool:
    """Whether the canary bytes after the first ``nbytes`` of ``buffer`` changed: a launch wrote past its end."""
    return not canary_intact(queue, buffer, nbytes, canary_bytes(nbytes), CANARY_VALUE)


def argument_hint(args: tuple[Any, ...]) -> str:
    """What in ``args`` no kernel launch can take, as advice to append to the driver's error ('' if nothing).

    The driver only says ``INVALID_ARG_SIZE`` or ``invalid kernel argument`` with a 1-based number;
    these are the usual causes, each named with what to pass instead.
    """
    cl = pyopencl()
    problems = []
    for position, value in enumerate(args):
        # type() rather than isinstance: np.float64 is a float subclass, and a launch takes it.
        if type(value) in (bool, int, float):
            c_type = "int" if isinstance(value, int) else "float"
            example = "np.int32" if isinstance(value, int) else "np.float32"
            problems.append(
                f"argument {position} is a Python {type(value).__name__} ({value!r}): a scalar parameter takes the "
                f"numpy scalar of its C type, e.g. {example}({value!r}) for `{c_type}`"
            )
        elif isinstance(value, np.ndarray):
            problems.append(
                f"argument {position} is a numpy array in host memory: a __global pointer takes device memory, "
                "e.g. pyopencl.array.to_device(client.queue, array)"
            )
        elif value is not None and not isinstance(
            value, np.generic | cl.array.Array | cl.MemoryObjectHolder | cl.LocalMemory
        ):
            problems.append(f"argument {position} is a {type(value).__name__}, which no kernel parameter takes")
    return "; ".join(problems)


def _check_context(position: int, value: Any, context: Any, cl: Any) -> None:
    """Refuse an array or buffer made in another OpenCL context than the client's, saying where to make it.

    The driver's own words name neither the argument nor the fix ("clEnqueueCopyBuffer failed: INVALID_CONTEXT").
    """
    if isinstance(value, cl.array.Array | cl.Buffer) and value.context != context:
        kind = "array" if isinstance(value, cl.array.Array) else "Buffer"
        raise tk.InputTypeError(
            f"argument {position} is a pyopencl {kind} of another OpenCL context than the client's, so its memory "
            "cannot be used there; make it on the client's queue, e.g. pyopencl.array.to_device(client.queue, "
            "host_array), or open the client on that context's device and use its queue for every array"
        )


class DeviceCheckBuffers:
    """Copies made on the device: pyopencl arrays and buffers are duplicated, scalars passed through.

    Every argument is copied, not only outputs, so that a kernel writing to an input cannot
    change what the next candidate sees.
    """

    def __init__(self, client: _HasQueue, inputs: tuple[Any, ...], outputs: Sequence[int]) -> None:
        cl = pyopencl()
        self._cl = cl
        self._queue = client.queue
        self._outputs = tuple(outputs)
        self._sizes: dict[int, int] = {}
        self._buffers: dict[int, Any] = {}
        args: list[Any] = []
        for position, value in enumerate(inputs):
            _check_context(position, value, self._queue.context, cl)
            if isinstance(value, cl.array.Array):
                if not value.flags.forc:
                    raise TypeError(f"argument {position}: a kernel argument must be a contiguous pyopencl array")
                buffer = self._copy(position, value.base_data, value.offset, value.nbytes)
                args.append(cl.array.Array(self._queue, value.shape, value.dtype, data=buffer, strides=value.strides))
            elif isinstance(value, cl.Buffer):
                args.append(self._copy(position, value, 0, value.size))
            else:
                args.append(value)
        self._queue.finish()
        self._args = tuple(args)

    def _copy(self, position: int, source: Any, offset: int, nbytes: int) -> Any:
        cl = self._cl
        extra = canary_bytes(nbytes) if position in self._outputs else 0
        buffer = cl.Buffer(self._queue.context, cl.mem_flags.READ_WRITE, max(nbytes + extra, 1))
        if nbytes:
            cl.enqueue_copy(self._queue, buffer, source, byte_count=nbytes, src_offset=offset, dst_offset=0)
        if extra:
            cl.enqueue_fill_buffer(self._queue, buffer, np.uint8(CANARY_VALUE), nbytes, extra)
        self._sizes[position] = nbytes
        self._buffers[position] = buffer
        return buffer

    @property
    def args(self) -> tuple[Any, ...]:
        """The copies, in argument order."""
        return self._args

    def read(self, position: int) -> Any:
        """A device argument read back to the host; a scalar as it is."""
        value = self._args[position]
        if isinstance(value, self._cl.array.Array):
            return value.get(queue=self._queue)
        if isinstance(value, self._cl.Buffer):
            # Read as bytes, a float output would be compared byte by byte, exactly, and a reference
            # would compute on the bytes of its inputs: every candidate would fail with figures that mean nothing.
            raise ReferenceFailed(
                f"argument {position} is a pyopencl Buffer, which has no dtype or shape, so the check cannot read "
                "it as numbers: pass a pyopencl.array.Array instead (pyopencl.array.to_device(queue, host_array); "
                "a kernel launch takes its .data)"
            )
        return value

    def damaged(self) -> list[int]:
        """Output positions whose canary bytes changed."""
        return [
            p
            for p in self._outputs
            if p in self._buffers and canary_changed(self._queue, self._buffers[p], self._sizes[p])
        ]

    def size(self, position: int) -> int:
        """The size in bytes of the data copied for argument ``position`` (the canary bytes not counted)."""
        return self._sizes[position]
