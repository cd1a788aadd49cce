"""Compiling in worker processes: parallel compiles for drivers that serialise them in-process.

Measured on PoCL: pyopencl releases the GIL while building and launching, yet two threads
build no faster than one, because PoCL holds one lock around its LLVM work per process.
A worker process has its own lock. It builds a program and launches each of its kernels once
on zeroed scratch buffers, which leaves the compiled program and work-group functions in
PoCL's on-disk kernel cache (``POCL_CACHE_DIR``, on by default); the parent's own build and
first launch are then cache hits. A worker that dies (a crashing compiler) costs that request,
never the caller's process.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

import numpy as np

from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._compile_wire import KernelArg, Launch, ProgramReply, ProgramRequest

__all__ = ["CompilePool", "WorkerDied", "describe_launch"]


class WorkerDied(RuntimeError):
    """A compile worker exited while handling a request (the compiler crashed, or was killed)."""


def describe_launch(
    kernel: str, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, args: Sequence[Any]
) -> Launch:
    """A launch with ``args`` as a worker can replay it: buffers by size, scalars by value and dtype."""
    cl = pyopencl()
    described: list[KernelArg] = []
    for value in args:
        if isinstance(value, cl.array.Array):
            described.append(KernelArg(kind="buffer", nbytes=int(value.nbytes)))
        elif isinstance(value, cl.Buffer):
            described.append(KernelArg(kind="buffer", nbytes=int(value.size)))
        elif isinstance(value, np.generic):
            described.append(KernelArg(kind="scalar", value=value.item(), dtype=value.dtype.str))
        else:
            raise TypeError(f"kernel argument of type {type(value).__name__} cannot be sent to a compile worker")
    return Launch(kernel=kernel, global_size=global_size, local_size=local_size, args=tuple(described))


class _Worker:
    def __init__(self, platform: str, device: str) -> None:
        # The parent's sys.path, so a worker imports the same tunekit even from an uninstalled checkout.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tunekit_backends.opencl._compile_worker", platform, device],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )

    def ask(self, request: ProgramRequest) -> ProgramReply:
        stdin: IO[str] | None = self.process.stdin
        stdout: IO[str] | None = self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(request.model_dump_json() + "\n")
            stdin.flush()
            line = stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = self.process.wait()
            reason = f"signal {-code}" if code < 0 else f"exit status {code}"
            raise WorkerDied(f"the compile worker died ({reason})")
        return ProgramReply.model_validate_json(line)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class CompilePool:
    """``workers`` compile processes for one device, kept for the client's lifetime."""

    def __init__(self, workers: int, platform: str, device: str) -> None:
        self.workers = max(1, workers)
        self._where = (platform, device)
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started: list[_Worker] = []

    def start(self) -> None:
        """Start every worker now, so their interpreters boot while the caller does other work."""
        with self._lock:
            while len(self._started) < self.workers:
                worker = _Worker(*self._where)
                self._started.append(worker)
                self._idle.put(worker)

    def run(self, request: ProgramRequest) -> ProgramReply:
        """Serve ``request`` on the next idle worker (blocks the calling thread only)."""
        self.start()
        worker = self._idle.get()
        try:
            return worker.ask(request)
        except WorkerDied:
            with self._lock:
                self._started.remove(worker)
            worker = _Worker(*self._where)
            with self._lock:
                self._started.append(worker)
            raise
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop the workers."""
        with self._lock:
            started, self._started = self._started, []
        for worker in started:
            worker.stop()
        self._idle = queue.SimpleQueue()
