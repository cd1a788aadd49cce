"""Compiling in worker processes: parallel compiles for drivers that serialise them in-process.

Measured on PoCL: pyopencl releases the GIL while building and launching, yet two threads
build no faster than one, because PoCL holds one lock around its LLVM work per process.
A worker process has its own lock. It builds a program and launches each of its kernels once
on copies of the benchmark inputs, which leaves the compiled program and work-group functions
in PoCL's on-disk kernel cache (``POCL_CACHE_DIR``, on by default); the parent's own build and
first launch are then cache hits. A worker that dies, hangs past its deadline or answers
garbage costs that request and is replaced, never the caller's process; when no worker can
start at all, the caller compiles in its own process (see ``_together.py``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import IO, Any

import numpy as np
from pydantic import ValidationError

from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._compile_wire import KernelArg, Launch, ProgramReply, ProgramRequest

__all__ = ["CompilePool", "InputsFile", "WorkerDied", "launch_of"]

_log = logging.getLogger("tunekit.opencl")

_STDERR_TAIL = 2000


class WorkerDied(RuntimeError):
    """A compile worker stopped answering: killed by a signal, exited, hung past its deadline, or spoke garbage.

    ``started`` is False when no worker got going at all: it could not be launched, or it exited
    before answering anything. That is this machine's trouble, not the request's, and the next
    worker would most likely fare no better.
    """

    def __init__(
        self, reason: str, *, signal_number: int | None = None, timed_out: bool = False, started: bool = True
    ) -> None:
        super().__init__(reason)
        self.signal_number = signal_number
        self.timed_out = timed_out
        self.started = started

    @property
    def crashed(self) -> bool:
        """Killed by a signal (a segfault in the compiler or the kernel), not a Python error in the worker."""
        return self.signal_number is not None


class InputsFile:
    """The benchmark inputs' buffers copied to one temporary file, and how each argument reads from it."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        cl = pyopencl()
        self.args: list[KernelArg] | None = []
        handle, self.path = tempfile.mkstemp(prefix="tunekit-inputs-", suffix=".bin")
        try:
            self._write(cl, handle, inputs)
        except BaseException:
            self.close()
            raise

    def _write(self, cl: Any, handle: int, inputs: Sequence[Any]) -> None:
        offset = 0
        assert self.args is not None
        with os.fdopen(handle, "wb") as out:
            for value in inputs:
                if isinstance(value, cl.array.Array | cl.Buffer):
                    data = value.get() if isinstance(value, cl.array.Array) else _read(cl, value)
                    raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
                    out.write(raw.tobytes())
                    self.args.append(KernelArg(kind="buffer", nbytes=raw.size, offset=offset))
                    offset += raw.size
                elif isinstance(value, np.generic):
                    self.args.append(KernelArg(kind="scalar", value=value.item(), dtype=value.dtype.str))
                else:  # say, cl.LocalMemory: such a launch compiles in the caller's process
                    self.args = None
                    break

    def close(self) -> None:
        """Delete the file."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _read(cl: Any, buffer: Any) -> np.ndarray:
    queue_ = cl.CommandQueue(buffer.context)
    host = np.empty(buffer.size, np.uint8)
    cl.enqueue_copy(queue_, host, buffer).wait()
    return host


def launch_of(
    kernel: str, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, inputs: InputsFile
) -> Launch:
    """The launch of ``kernel`` on the inputs in ``inputs`` (whose ``args`` must be set)."""
    assert inputs.args is not None
    return Launch(kernel=kernel, global_size=global_size, local_size=local_size, args=tuple(inputs.args))


class _Worker:
    def __init__(self, platform: str, device: str) -> None:
        # The parent's sys.path, so a worker imports the same tunekit even from an uninstalled checkout.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        if not sys.executable:  # an embedded interpreter may not know its own executable
            raise WorkerDied("cannot start a compile worker: sys.executable is empty", started=False)
        command = [sys.executable, "-m", "tunekit_backends.opencl._compile_worker", platform, device]
        try:
            self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the worker's stderr, kept for its last words
        except OSError as exc:
            raise WorkerDied(
                f"cannot start a compile worker: no temporary file for its stderr ({exc})", started=False
            ) from None
        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env, text=True
            )
        except OSError as exc:
            self.stderr.close()
            raise WorkerDied(
                f"cannot start a compile worker ({shlex.join(command[:3])}): {exc}", started=False
            ) from None
        self.replies: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.busy = False
        self.answered = False
        threading.Thread(target=self._read, daemon=True, name="tunekit-compile-reader").start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            self.replies.put(line)
        self.replies.put("")  # end of stream: the worker is gone

    def ask(self, request: ProgramRequest, timeout_s: float) -> ProgramReply:
        stdin = self.process.stdin
        assert stdin is not None
        self.busy = True
        try:
            return self._ask(stdin, request, timeout_s)
        finally:
            self.busy = False

    def _ask(self, stdin: IO[str], request: ProgramRequest, timeout_s: float) -> ProgramReply:
        try:
            stdin.write(request.model_dump_json() + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the reader sees the end of the stream
        try:
            line = self.replies.get(timeout=None if math.isinf(timeout_s) else timeout_s)
        except queue.Empty:
            self.kill()
            raise WorkerDied(
                f"no answer from the compile worker within {timeout_s:.0f} s (build and first launch)",
                timed_out=True,
            ) from None
        if not line:
            code = self.process.wait()
            if code < 0:
                name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
                raise WorkerDied(f"the compile worker was killed by signal {-code} ({name})", signal_number=-code)
            if not self.answered:
                raise WorkerDied(
                    f"a compile worker exited with status {code} before answering: {self.stderr_tail()}", started=False
                )
            raise WorkerDied(f"the compile worker exited with status {code}: {self.stderr_tail()}")
        self.answered = True
        try:
            return ProgramReply.model_validate_json(line)
        except ValidationError as exc:
            self.kill()
            raise WorkerDied(f"the compile worker answered something unreadable ({exc.errors()[0]['msg']})") from None

    def stderr_tail(self) -> str:
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - _STDERR_TAIL))
            text = self.stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        lines = text.splitlines()
        return lines[-1] if lines else "no error output"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stderr.close()

    def stop(self) -> None:
        if self.process.poll() is not None:
            self.stderr.close()
            return
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()


class CompilePool:
    """Up to ``workers`` compile processes for one device, started as requests need them."""

    def __init__(self, workers: int, platform: str, device: str) -> None:
        self.workers = max(1, workers)
        self._where = (platform, device)
        self._ready = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive: set[_Worker] = set()
        self._starting = 0
        self._closed = False
        self._warned: set[str] = set()

    def _take(self) -> _Worker:
        with self._ready:
            while True:
                if self._closed:
                    raise WorkerDied("the compile pool is closed")
                if self._idle:
                    return self._idle.pop()
                if len(self._alive) + self._starting < self.workers:
                    self._starting += 1
                    break
                self._ready.wait()
        worker: _Worker | None = None
        try:
            worker = _Worker(*self._where)  # started outside the lock: it takes a moment
        finally:
            with self._ready:
                self._starting -= 1
                if worker is not None:
                    self._alive.add(worker)
                self._ready.notify()
        return worker

    def _give_back(self, worker: _Worker, *, usable: bool) -> None:
        with self._ready:
            keep = usable and not self._closed
            if keep:
                self._idle.append(worker)
            else:
                self._alive.discard(worker)
            self._ready.notify()
        if not keep:
            worker.stop()

    def run(self, request: ProgramRequest, timeout_s: float) -> ProgramReply:
        """Serve ``request`` on an idle worker (blocks the calling thread only); a failed worker is replaced."""
        worker = self._take()
        try:
            reply = worker.ask(request, timeout_s)
        except BaseException:
            worker.kill()
            self._give_back(worker, usable=False)
            raise
        self._give_back(worker, usable=True)
        return reply

    def warn_once(self, kind: str, message: str) -> None:
        """Log ``message`` as a warning the first time this pool meets trouble of this ``kind``, later at debug level.

        The fallback it announces repeats for every batch of every tune; the advice need not.
        """
        with self._ready:
            first = kind not in self._warned
            self._warned.add(kind)
        _log.log(logging.WARNING if first else logging.DEBUG, "%s", message)

    def close(self) -> None:
        """Stop the workers; requests in flight end with WorkerDied."""
        with self._ready:
            self._closed = True
            workers = list(self._alive)
            self._alive.clear()
            self._idle.clear()
            self._ready.notify_all()
        threads = [threading.Thread(target=w.kill if w.busy else w.stop) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
