"""Compiling in worker processes: parallel compiles for drivers that serialise them in-process.

Measured on PoCL: pyopencl releases the GIL while building and launching, yet two threads
build no faster than one, because PoCL holds one lock around its LLVM work per process.
A worker process has its own lock. It builds a program and launches each of its kernels once
on copies of the benchmark inputs, which leaves the compiled program and work-group functions
in PoCL's on-disk kernel cache (``POCL_CACHE_DIR``, on by default); the parent's own build and
first launch are then cache hits. A worker that dies, hangs past its deadline or answers
garbage costs that request and is replaced, never the caller's process.

A worker announces itself ready (its device open, a first build through its compiler) before
it takes a request. One that dies or hangs before that (killed at start-up, a Python that
cannot import pyopencl) is no evidence against the variant it was sent: the request goes to a
fresh worker once, and when that one cannot start either, the caller compiles in its own
process (see ``_together.py``). One that dies after it, while building or first launching a
variant, blames that variant: a compiler crash on that source is real evidence.

Workers that keep failing to start would otherwise cost every batch of every tune new starts
(and a hung start its whole timeout): after ``_compile_starts.START_FAILURES`` failed starts in
a row, no pool of the process starts one the same way (same command and environment, see
``_compile_starts.py``) for ``PAUSE_S`` (doubling each time it pauses again), so requests fail
at once and the caller compiles in its own process. After a failed start, workers start one at
a time until one gets ready.
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
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from pydantic import ValidationError

from tunekit import ClientClosed
from tunekit.backend import CANARY_VALUE
from tunekit_backends.opencl._buffers import canary_bytes
from tunekit_backends.opencl._cl import WARM_UP_KERNEL_FLAG, pyopencl
from tunekit_backends.opencl._compile_starts import FAILED_STARTS, WorkerCommand, command_for
from tunekit_backends.opencl._compile_wire import KernelArg, Launch, ProgramReply, ProgramRequest, WorkerReady

__all__ = ["CompilePool", "InputsFile", "WorkerDied", "launch_of"]

_log = logging.getLogger("tunekit.opencl")

_STDERR_TAIL = 2000

READY_TIMEOUT_S = 60.0
"""How long a new worker may take to import pyopencl, open its device and build a first kernel.

About 0.5 s on PoCL here (2 shared cores); 60 s leaves room for a loaded machine and a cold disk. A start that
hangs past it pauses the starts at once (see ``_compile_starts.START_FAILURES``): it is never waited for twice."""

PAUSE_S = 120.0
"""How long the first pause lasts; each further pause doubles, up to ``_compile_starts.MAX_PAUSE_S``."""


class WorkerDied(RuntimeError):
    """A compile worker stopped answering: killed by a signal, exited, hung past its deadline, or spoke garbage.

    ``started`` is False when no worker got going: it could not be launched, or it died, hung or
    spoke garbage before it said it was ready. That is this machine's trouble, not the request's.
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


_INPUTS_PREFIX = "tunekit-inputs-"
# A batch's inputs file lives while its variants compile: seconds to minutes, never an hour.
_ORPHAN_AGE_S = 3600.0


def _remove_orphans() -> None:
    """Delete the inputs files of processes that died before deleting their own (SIGKILL, say).

    Each file is as large as a batch's buffers and /tmp is often memory (tmpfs): a killed tune
    would leave its copy there for good. The file name carries the writer's pid; a pid that another
    process has since taken keeps its file, which is only a missed clean-up. Only files older than
    ``_ORPHAN_AGE_S`` go: a temporary directory shared across PID namespaces (containers mounting
    one /tmp) holds live tunes' files whose pids this process cannot see.
    """
    now = time.time()
    for path in Path(tempfile.gettempdir()).glob(f"{_INPUTS_PREFIX}*-*.bin"):
        pid = path.name[len(_INPUTS_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):  # another process may be cleaning it up too, or have done so
            if now - path.stat().st_mtime >= _ORPHAN_AGE_S:
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, under another user
        return True
    return True


class InputsFile:
    """The benchmark inputs' buffers copied to one temporary file, and how each argument reads from it."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        cl = pyopencl()
        self.args: list[KernelArg] | None = []
        _remove_orphans()
        handle, self.path = tempfile.mkstemp(prefix=f"{_INPUTS_PREFIX}{os.getpid()}-", suffix=".bin")
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
                    self.args.append(
                        KernelArg(
                            kind="buffer",
                            nbytes=raw.size,
                            offset=offset,
                            canary=canary_bytes(raw.size),
                            canary_value=CANARY_VALUE,
                        )
                    )
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
    def __init__(self, how: WorkerCommand, *, warm_up_kernel: bool) -> None:
        env = dict(how.env)
        command = [*how.command, *([WARM_UP_KERNEL_FLAG] if warm_up_kernel else [])]
        if not command[0]:  # an embedded interpreter may not know its own executable
            raise WorkerDied("cannot start a compile worker: sys.executable is empty", started=False)
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
        except BaseException:
            self.stderr.close()
            raise
        self.replies: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.busy = False
        self.kernel_cache: str | None = None
        threading.Thread(target=self._read, daemon=True, name="tunekit-compile-reader").start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        with stdout:
            for line in stdout:
                self.replies.put(line)
        self.replies.put("")  # end of stream: the worker is gone

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the worker's ready line; WorkerDied(started=False) if it dies, hangs or says something else."""
        try:
            line = self.replies.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            raise WorkerDied(
                f"a compile worker was not ready within {timeout_s:.0f} s", timed_out=True, started=False
            ) from None
        if not line:
            ended = self.ended()
            raise WorkerDied(f"a compile worker {ended} before it was ready: {self.stderr_tail()}", started=False)
        try:
            self.kernel_cache = WorkerReady.model_validate_json(line).kernel_cache
        except ValidationError as exc:
            self.kill()
            raise WorkerDied(
                f"a compile worker said something else than ready ({exc.errors()[0]['msg']})", started=False
            ) from None

    def ended(self) -> str:
        """How the worker process ended (it has or is about to)."""
        code = self.process.wait()
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            return f"was killed by signal {-code} ({name})"
        return f"exited with status {code}"

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
            ended = self.ended()
            if self.process.returncode < 0:
                raise WorkerDied(f"the compile worker {ended}", signal_number=-self.process.returncode)
            raise WorkerDied(f"the compile worker {ended}: {self.stderr_tail()}")
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
        # The end-of-stream mark now, not when the pipe closes: a process the worker started (a shell
        # wrapper's child, say) can hold its stdout open long after the kill, and a thread waiting for
        # the ready line would wait for it too.
        self.replies.put("")
        self._close()

    def stop(self) -> None:
        if self.process.poll() is not None:
            self._close()
            return
        self._close_stdin()  # the worker's end of input: it exits
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close()

    def _close_stdin(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):  # a request the worker never read: its pipe is broken
                self.process.stdin.close()

    def _close(self) -> None:
        """Close this side's files of a worker that has ended (its stdout is the reader thread's to close)."""
        self._close_stdin()
        self.stderr.close()


class CompilePool:
    """Up to ``workers`` compile processes for one device, started by :meth:`start_all` or as requests need them.

    ``ready_timeout_s`` and ``pause_s`` are :data:`READY_TIMEOUT_S` and :data:`PAUSE_S` unless
    a test shortens them.
    """

    def __init__(
        self,
        workers: int,
        platform: str,
        device: str,
        *,
        ready_timeout_s: float = READY_TIMEOUT_S,
        pause_s: float = PAUSE_S,
    ) -> None:
        self.workers = max(1, workers)
        self._where = (platform, device)
        self._ready_timeout_s = ready_timeout_s
        self._ready = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive: set[_Worker] = set()
        self._starting = 0
        self._closed = False
        self._warned: set[str] = set()
        self._first_pause_s = pause_s
        self._launched: set[_Worker] = set()  # by start_all, not ready yet: close() kills them
        self._warm_up_kernel_asked = False  # see _cl.WARM_UP_KERNEL_FLAG

    def _take(self) -> _Worker:
        with self._ready:
            while True:
                if self._closed:
                    raise self._closed_error()
                while self._idle:
                    idle = self._idle.pop()
                    if idle.process.poll() is None:
                        return idle
                    # Killed while idle (the OOM killer, say): no fault of the request about to be sent to it.
                    _log.debug("a compile worker %s while idle; starting another", idle.ended())
                    self._alive.discard(idle)
                    idle.stop()
                how = command_for(*self._where)  # read now: a fixed Python or environment is tried at once
                failed_starts, paused = FAILED_STARTS.state(how)
                if paused is not None and not self._alive and not self._starting:
                    raise WorkerDied(paused, started=False)
                # After a failed start, one start at a time: a broken set-up costs one failure, not one per thread.
                limit = self.workers if failed_starts == 0 else len(self._alive) + 1
                if paused is None and len(self._alive) + self._starting < min(limit, self.workers):
                    self._starting += 1
                    break
                self._ready.wait()  # for an idle worker, or for a start in flight to end
        return self._start(how)

    def start_all(self) -> None:
        """Start every worker now, in the background, instead of at the first compile.

        Called as the client opens: a worker's start (Python, its imports, the driver and its
        compiler's first build, about 0.7 s of CPU each on PoCL here) then overlaps the client's own
        and the tune's set-up, and the first compile finds the workers ready. The processes are
        launched here (so a start the OS refuses raises in the caller); their ready lines are
        awaited on daemon threads. Starts nothing after failed starts (the first compile then
        starts workers as it always has, one at a time) or when the workers are up already.
        """
        with self._ready:
            how = command_for(*self._where)
            failed_starts, paused = FAILED_STARTS.state(how)
            if self._closed or failed_starts or paused is not None:
                return
            count = self.workers - len(self._alive) - self._starting
            self._starting += max(count, 0)
        for launched in range(max(count, 0)):
            try:
                worker = _Worker(how, warm_up_kernel=self._ask_warm_up_kernel())
                with self._ready:
                    self._launched.add(worker)
            except BaseException as exc:
                with self._ready:  # this start and those not yet launched
                    self._starting -= count - launched
                    self._ready.notify_all()
                if isinstance(exc, WorkerDied):  # the first compile tries again, and counts it
                    _log.debug("%s; workers start at the first compile instead", exc)
                    return
                raise
            threading.Thread(
                target=self._start_idle, args=(how, worker), daemon=True, name="tunekit-compile-start"
            ).start()

    def _ask_warm_up_kernel(self) -> bool:
        """Whether the worker about to be launched first-launches the client's warm-up kernel: the pool's first does."""
        with self._ready:
            first, self._warm_up_kernel_asked = not self._warm_up_kernel_asked, True
        return first

    def wait_for_one(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` until a worker is ready or no start is in flight; whether one is ready."""
        deadline = time.monotonic() + timeout_s
        with self._ready:
            while not self._alive and self._starting and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._ready.wait(left)
            return bool(self._alive)

    def _start_idle(self, how: WorkerCommand, launched: _Worker) -> None:
        """Wait for a worker launched by :meth:`start_all` to get ready, and keep it idle for the first request."""
        try:
            worker = self._start(how, launched)
        except WorkerDied as exc:  # counted; the request that needs a worker starts one
            _log.debug("a compile worker started as the client opened: %s", exc)
            return
        except ClientClosed:  # closed while it started: close() killed it
            return
        finally:
            with self._ready:
                self._launched.discard(launched)
        self._give_back(worker, usable=True)

    def _start(self, how: WorkerCommand, launched: _Worker | None = None) -> _Worker:
        """A new worker, ready (one start counted in ``_starting`` by the caller, and uncounted here).

        ``launched``: its process, already launched by :meth:`start_all`; else it is launched here.
        """
        worker: _Worker | None = launched
        ready = False
        try:
            if worker is None:
                worker = _Worker(how, warm_up_kernel=self._ask_warm_up_kernel())  # outside the lock: it takes a moment
            worker.wait_ready(self._ready_timeout_s)
            FAILED_STARTS.succeeded(how)
            ready = True
        except WorkerDied as exc:
            if self._closed:  # killed by close(): no failure of the way workers start
                raise self._closed_error() from None
            # Counted before the start is uncounted: a thread woken below then sees the pause, if any.
            paused = FAILED_STARTS.failed(how, str(exc), timed_out=exc.timed_out, first_pause_s=self._first_pause_s)
            raise (exc if paused is None else WorkerDied(paused, timed_out=exc.timed_out, started=False)) from None
        finally:
            if worker is not None and not ready:
                worker.kill()
            with self._ready:
                self._starting -= 1
                if ready:
                    assert worker is not None
                    self._alive.add(worker)
                self._ready.notify_all()
        if worker.kernel_cache is not None:
            self.warn_once(
                "kernel-cache",
                f"{worker.kernel_cache}: compile workers' builds cannot reach this process, which builds every "
                "variant again. Point POCL_CACHE_DIR at a writable directory (and leave POCL_KERNEL_CACHE unset), "
                "or pass OpenCLClient(compile_in='thread') to compile here only.",
            )
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
        """Serve ``request`` on an idle worker (blocks the calling thread only); a failed worker is replaced.

        A worker that does not get ready is replaced once for this request; a second one that
        does not either raises WorkerDied(started=False), and so does every request while starts
        pause after failed starts, in this pool or another (unless one of its workers is alive to serve it).
        """
        try:
            worker = self._take()
        except WorkerDied as exc:
            if exc.started:
                raise
            _log.debug("%s; starting another", exc)
            worker = self._take()
        try:
            reply = worker.ask(request, timeout_s)
        except WorkerDied:
            worker.kill()
            self._give_back(worker, usable=False)
            if self._closed:  # close() killed it: the variant it was building is not to blame
                raise self._closed_error() from None
            raise
        except BaseException:
            worker.kill()
            self._give_back(worker, usable=False)
            raise
        self._give_back(worker, usable=not reply.retire)
        return reply

    def _closed_error(self) -> ClientClosed:
        platform, device = self._where
        return ClientClosed(
            f"the OpenCL client on {platform} / {device} is closed (OpenCLClient.close()): its compile workers "
            "stopped, so this tune cannot build its variants; no variant is to blame, so the tune stops and "
            "stores nothing. Close a client only after its tunes end"
        )

    def warn_once(self, kind: str, message: str) -> None:
        """Log ``message`` as a warning the first time this pool meets trouble of this ``kind``, later at debug level.

        The fallback it announces repeats for every batch of every tune; the advice need not.
        """
        with self._ready:
            first = kind not in self._warned
            self._warned.add(kind)
        _log.log(logging.WARNING if first else logging.DEBUG, "%s", message)

    def close(self) -> None:
        """Stop the workers; requests in flight, and any made later, raise :class:`tunekit.ClientClosed`."""
        with self._ready:
            self._closed = True
            for starting in self._launched:  # a start the client no longer needs: its CPU is better spent elsewhere
                starting.kill()
            workers = list(self._alive)
            self._alive.clear()
            self._idle.clear()
            self._ready.notify_all()
        threads = [threading.Thread(target=w.kill if w.busy else w.stop) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
