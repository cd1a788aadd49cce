"""A compile worker: reads ProgramRequest lines on stdin, answers one ProgramReply line each.

Run by the parent as ``python -m tunekit_backends.opencl._compile_worker``. Each worker has
its own driver, so PoCL's per-process compiler lock no longer serialises the variants; the
compiled program and its work-group functions land in PoCL's on-disk kernel cache, where the
parent's identical build and first launch find them.
"""

from __future__ import annotations

import contextlib
import sys
from collections import OrderedDict
from typing import Any

import numpy as np

from tunekit._check import CANARY_BYTES
from tunekit_backends.opencl._cl import build_log, first_error_line, pyopencl
from tunekit_backends.opencl._compile_wire import ProgramReply, ProgramRequest

__all__ = ["main", "serve"]


def _queue(cl: Any, contexts: dict[tuple[str, str], tuple[Any, Any]], platform: str, device: str) -> tuple[Any, Any]:
    if (platform, device) not in contexts:
        found = next(d for p in cl.get_platforms() if p.name == platform for d in p.get_devices() if d.name == device)
        context = cl.Context([found])
        contexts[(platform, device)] = (context, cl.CommandQueue(context))
    return contexts[(platform, device)]


_KEEP_PROGRAMS = 8
"""Requests for one tune's programs come close together; older programs are let go."""


class _Programs:
    """The worker's built programs, by device, source and options: a request may name one already built."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.built: OrderedDict[tuple[str, str, str, tuple[str, ...]], Any] = OrderedDict()

    def queue(self, platform: str, device: str) -> tuple[Any, Any]:
        return _queue(pyopencl(), self.queues, platform, device)

    def program(self, request: ProgramRequest) -> Any:
        key = (request.platform, request.device, request.source, request.options)
        if key not in self.built:
            context, _ = self.queue(request.platform, request.device)
            self.built[key] = pyopencl().Program(context, request.source).build(options=list(request.options))
            while len(self.built) > _KEEP_PROGRAMS:
                self.built.popitem(last=False)
        self.built.move_to_end(key)
        return self.built[key]


def serve(request: ProgramRequest, programs: _Programs) -> ProgramReply:
    """Build the request's program (once per worker) and launch each kernel once on zeroed scratch buffers."""
    cl = pyopencl()
    context, queue = programs.queue(request.platform, request.device)
    try:
        program = programs.program(request)
    except cl.Error as exc:
        return ProgramReply(build_error=first_error_line(build_log(exc)))
    errors: list[str | None] = []
    for launch in request.launches:
        try:
            args: list[Any] = []
            for arg in launch.args:
                if arg.kind == "buffer":
                    buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, max(arg.nbytes + CANARY_BYTES, 1))
                    cl.enqueue_fill_buffer(queue, buffer, np.uint8(0), 0, buffer.size)
                    args.append(buffer)
                else:
                    args.append(np.dtype(arg.dtype).type(arg.value))
            kernel = cl.Kernel(program, launch.kernel)
            kernel(queue, launch.global_size, launch.local_size, *args).wait()
            errors.append(None)
        except cl.Error as exc:
            errors.append(first_error_line(str(exc)))
    return ProgramReply(launch_errors=tuple(errors))


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin closes; given a platform and device, load their compiler first."""
    argv = sys.argv[1:] if argv is None else argv
    programs = _Programs()
    if len(argv) == 2:
        # A trivial build loads the compiler and its kernel library while the parent is still busy.
        cl = pyopencl()
        context, _ = programs.queue(argv[0], argv[1])
        # A failure here shows again, with its message, in the first request's reply.
        with contextlib.suppress(cl.Error):
            cl.Program(context, "__kernel void tunekit_boot(__global int* x) { x[0] = 0; }").build()
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = serve(ProgramRequest.model_validate_json(line), programs)
        sys.stdout.write(reply.model_dump_json() + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
