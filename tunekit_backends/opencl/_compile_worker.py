"""A compile worker: reads ProgramRequest lines on stdin, answers one ProgramReply line each.

Run by the parent as ``python -m tunekit_backends.opencl._compile_worker PLATFORM DEVICE [--warm-up-kernel]``.
Its first line says it is ready (and whether its builds can reach PoCL's kernel cache).
Each worker has its own driver, so PoCL's per-process compiler lock does not serialise the
variants across workers; the compiled program and its work-group functions land in PoCL's on-disk kernel
cache, where the parent's identical build and first launch find them.

The replies go out on a private copy of the original stdout; file descriptor 1 is pointed at
stderr, so a kernel's ``printf`` (or a driver's chatter) cannot break the protocol. A worker
whose parent dies exits, even while a launch it cannot interrupt is running.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

import numpy as np

from tunekit_backends.opencl._cl import (
    HELPER_SOURCE,
    PROBE_KERNEL,
    WARM_UP_KERNEL_FLAG,
    build_log,
    first_error_line,
    helper_items,
    is_pocl,
    pocl_kernel_cache_on,
    pyopencl,
)
from tunekit_backends.opencl._compile_wire import KernelArg, Launch, ProgramReply, ProgramRequest, WorkerReady
from tunekit_backends.opencl._overrun import canary_intact, overrun_message

__all__ = ["kernel_cache_problem", "main", "pocl_cache_dir", "serve"]

_KEEP_PROGRAMS = 8
"""Requests for one tune's programs come close together; older programs are let go."""


class _Worker:
    """The worker's device queue, built programs (by source and options) and the current input data."""

    def __init__(self, platform: str, device: str) -> None:
        cl = pyopencl()
        found = next(
            (d for p in cl.get_platforms() if p.name == platform for d in p.get_devices() if d.name == device), None
        )
        if found is None:
            raise SystemExit(f"no OpenCL device {device!r} on a platform {platform!r} in the compile worker")
        self.context = cl.Context([found])
        self.queue = cl.CommandQueue(self.context)
        self.built: OrderedDict[tuple[str, tuple[str, ...]], Any] = OrderedDict()
        self.data: tuple[str, np.ndarray] | None = None

    def program(self, request: ProgramRequest) -> Any:
        key = (request.source, request.options)
        if key not in self.built:
            self.built[key] = pyopencl().Program(self.context, request.source).build(options=list(request.options))
            while len(self.built) > _KEEP_PROGRAMS:
                self.built.popitem(last=False)
        self.built.move_to_end(key)
        return self.built[key]

    def bytes_of(self, path: str) -> np.ndarray:
        if self.data is None or self.data[0] != path:
            self.data = (path, np.fromfile(path, dtype=np.uint8) if path else np.zeros(0, np.uint8))
        return self.data[1]


def serve(request: ProgramRequest, worker: _Worker) -> ProgramReply:
    """Build the request's program (once per worker) and launch each kernel once on copies of the inputs."""
    cl = pyopencl()
    try:
        program = worker.program(request)
    except cl.Error as exc:
        return ProgramReply(build_error=first_error_line(build_log(exc)))
    data = worker.bytes_of(request.data_file)
    errors: list[str | None] = []
    written: list[bool] = []
    digests: list[str] = []
    retire = False
    for launch in request.launches:
        written.append(False)
        digests.append("")
        try:
            args: list[Any] = []
            buffers: list[tuple[int, Any, KernelArg]] = []
            for position, arg in enumerate(launch.args):
                if arg.kind == "buffer":
                    host = np.full(max(arg.nbytes + arg.canary, 1), arg.canary_value, np.uint8)
                    host[: arg.nbytes] = data[arg.offset : arg.offset + arg.nbytes]
                    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
                    args.append(cl.Buffer(worker.context, flags, hostbuf=host))
                    buffers.append((position, args[-1], arg))
                else:
                    args.append(np.dtype(arg.dtype).type(arg.value))
            kernel = cl.Kernel(program, launch.kernel)
            kernel(worker.queue, launch.global_size, launch.local_size, *args).wait()
            overrun = _overrun(worker.queue, buffers)
            errors.append(overrun)
            retire = retire or overrun is not None
            if overrun is None and launch.read_back:
                digests[-1], written[-1] = _write_outputs(worker.queue, args, launch)
        except cl.Error as exc:
            errors.append(first_error_line(str(exc)))
        except Exception as exc:  # pyopencl refusing the arguments (too many, say): the variant's, not the worker's
            errors.append(f"{type(exc).__name__}: {first_error_line(str(exc))}")
    asked = any(launch.read_back for launch in request.launches)
    return ProgramReply(
        launch_errors=tuple(errors),
        read_back=tuple(written) if asked else (),
        read_back_digests=tuple(digests) if asked else (),
        retire=retire,
    )


def _write_outputs(queue: Any, args: list[Any], launch: Launch) -> tuple[str, bool]:
    """The SHA-256 of the launch's ``read_back`` buffers (their data, not their canaries), and whether they were
    written to its file: not when the parent holds outputs with that digest already.

    Variants of one kernel mostly give the same bits: a digest (2-3 ms for 4 MB here) instead of
    a file (3-40 ms to write, by the page cache's mood, measured here). An output that cannot
    be read or written is no fault of the variant: the tune then checks it in its own process.
    """
    cl = pyopencl()
    try:
        hosts = []
        digest = hashlib.sha256()
        for position in launch.read_back:
            host = np.empty(launch.args[position].nbytes, np.uint8)
            if host.size:
                cl.enqueue_copy(queue, host, args[position]).wait()  # the host array says how many bytes
            digest.update(host.data)
            hosts.append(host)
    except (cl.Error, IndexError):
        return "", False
    hexdigest = digest.hexdigest()
    if hexdigest in launch.known:
        return hexdigest, False
    try:
        with open(launch.read_back_file, "wb") as out:
            for host in hosts:
                host.tofile(out)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(launch.read_back_file)
        return "", False
    return hexdigest, True


def _overrun(queue: Any, buffers: list[tuple[int, Any, KernelArg]]) -> str | None:
    """What to say of the first buffer the launch wrote past the end of, or None.

    Caught here, the variant never runs in the tuning process, where on a CPU device (PoCL)
    the same write lands in the caller's heap and can abort it before the check sees it.
    """
    return next(
        (
            overrun_message(p, arg.nbytes)
            for p, buffer, arg in buffers
            if not canary_intact(queue, buffer, arg.nbytes, arg.canary, arg.canary_value)
        ),
        None,
    )


def kernel_cache_problem(platform: str) -> str | None:
    """Why this process's builds will not land in PoCL's on-disk kernel cache; None when they will (or not PoCL).

    The directory is PoCL's own choice (``POCL_CACHE_DIR``, else the XDG cache directory), and
    it is probed by writing a file: a permission bit says nothing on a read-only mount or to root.
    """
    if not is_pocl(platform):
        return None
    if not pocl_kernel_cache_on():
        return "PoCL's kernel cache is off in the compile workers (POCL_KERNEL_CACHE=0)"
    directory = pocl_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=directory, prefix=".tunekit-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        return f"PoCL's kernel cache {directory} is not writable in the compile workers ({exc.strerror or exc})"
    return None


def pocl_cache_dir() -> Path:
    """Where PoCL keeps its kernel cache on Linux (``pocl_cache.c``)."""
    explicit = os.environ.get("POCL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "pocl" / "kcache"
    home = os.environ.get("HOME")
    return Path(home) / ".cache" / "pocl" / "kcache" if home else Path(tempfile.gettempdir()) / "POCL_CACHE"


def _first_launch_helpers(worker: _Worker) -> None:
    """Build and first-launch the client's warm-up kernel as the client will, into PoCL's kernel cache.

    Then the tuning process's warm-up loads it from there, and that process, whose variants all
    come from the cache too, never loads PoCL's compiler (about 0.45 s of CPU) on a cold cache.
    Done after the ready line, by the worker told so (see ``_cl.WARM_UP_KERNEL_FLAG``): requests sent
    meanwhile wait in the pipe for a fraction of a second.
    """
    cl = pyopencl()
    with contextlib.suppress(cl.Error):
        kernel = cl.Program(worker.context, HELPER_SOURCE).build().tunekit_fma
        out = cl.Buffer(worker.context, cl.mem_flags.WRITE_ONLY, 4)
        items = helper_items(worker.context.devices[0])
        kernel(worker.queue, (items,), None, out, np.int32(1)).wait()


def _exit_with_parent() -> None:
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def _protocol_stream() -> IO[str]:
    """A private copy of stdout for the replies; fd 1 then goes to stderr."""
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin closes."""
    argv = sys.argv[1:] if argv is None else argv
    warm_up_kernel = argv[2:] == [WARM_UP_KERNEL_FLAG]
    if len(argv) != 2 and not warm_up_kernel:
        print(
            f"usage: python -m tunekit_backends.opencl._compile_worker PLATFORM DEVICE [{WARM_UP_KERNEL_FLAG}]",
            file=sys.stderr,
        )
        return 2
    replies = _protocol_stream()
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    worker = _Worker(argv[0], argv[1])
    # A first build loads the compiler and its kernel library while the parent is still busy;
    # a failure here shows again, with its message, in the first request's reply.
    with contextlib.suppress(pyopencl().Error):
        pyopencl().Program(worker.context, PROBE_KERNEL).build()  # the client's probe then finds it cached
    replies.write(WorkerReady(kernel_cache=kernel_cache_problem(argv[0])).model_dump_json() + "\n")
    replies.flush()
    if warm_up_kernel:
        _first_launch_helpers(worker)
    for line in sys.stdin:
        if line.strip():
            reply = serve(ProgramRequest.model_validate_json(line), worker)
            replies.write(reply.model_dump_json() + "\n")
            replies.flush()
            if reply.retire:  # its heap may be damaged: the parent starts a fresh worker instead
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
