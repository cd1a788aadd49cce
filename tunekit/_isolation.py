"""Where candidates run when they may crash or hang: a forked worker, or here under a watchdog.

``isolation="process"`` times candidates in a worker process forked from the caller. Fork
is what makes this work for ordinary candidates: they are lambdas and closures, which
cannot be pickled, but a forked child inherits the tunable set and the benchmark inputs
as they are, and receives only candidate indices over a pipe. A candidate that kills its
worker (segfault, ``abort()``, ``os._exit``) is disqualified with ``crashed: signal N``,
one that runs past the limit with ``timeout after T s``; the worker is killed and a fresh
one forked for the next candidate, so the tune goes on and the caller never dies.

``isolation="none"`` runs candidates in the calling thread. A watchdog thread raises an
exception inside a candidate that runs past its limit; that interrupts Python code only.
A candidate blocked in C (a long numpy call, ``time.sleep``, a device wait, a kernel
that never ends) cannot be interrupted in-process: it is disqualified once it returns,
and if it never returns the caller hangs with it. Use ``isolation="process"`` for that.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any, TypeVar

from tunekit._client import Client
from tunekit._errors import CandidateFailed, TunekitError
from tunekit._runner import CandidateRunner, InProcessRunner
from tunekit._settings import IsolationMode, Settings
from tunekit._tunable_set import TunableSet

__all__ = ["Isolation", "ProcessRunner", "WatchdogRunner", "open_runner"]

T = TypeVar("T")

# The worker's exit status when its own loop failed (not the candidate): EX_SOFTWARE.
_WORKER_BROKEN = 70


@dataclass(frozen=True, slots=True)
class Isolation:
    """A tunable set's own isolation, overriding the global settings (see ``TunableSet.with_isolation``).

    ``timeout_s`` None takes ``candidate_timeout_s`` from the settings; ``math.inf`` means
    no limit for this set.
    """

    mode: IsolationMode
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("none", "process"):
            raise ValueError(f"isolation mode must be 'none' or 'process', got {self.mode!r}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 (math.inf for no limit), got {self.timeout_s!r}")


def _policy(tunables: TunableSet[Any, Any], settings: Settings) -> tuple[IsolationMode, float | None]:
    """The isolation mode and the per-run limit in force for ``tunables`` (None: no limit)."""
    override = tunables.isolation
    mode = settings.isolation if override is None else override.mode
    timeout = settings.candidate_timeout_s
    if override is not None and override.timeout_s is not None:
        timeout = override.timeout_s
    return mode, (None if math.isinf(timeout) else timeout)


def _describe(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def _timeout_reason(timeout_s: float) -> str:
    return f"timeout after {timeout_s:g} s"


# -- in-process: a watchdog thread ------------------------------------------------------------


class _Interrupt(BaseException):
    """Raised inside a candidate that ran out of time; a BaseException so ``except Exception`` in it cannot eat it."""


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    # CPython's documented hook for asynchronous exceptions; None clears a pending one.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type is not None else None
    )


class _Watchdog:
    """One daemon thread per process that interrupts each armed thread once its deadline passes.

    Arming and disarming only touch a dict under a lock; the thread is woken only when a
    new deadline comes before the one it sleeps until, so µs-long candidates pay no thread
    switches. Shared by every tune in the process, whatever thread it runs in.
    """

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread and its lock do not survive fork

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._deadlines: dict[int, float] = {}
        self._fired: set[int] = set()
        self._wake_at = math.inf
        self._thread: threading.Thread | None = None

    def arm(self, timeout_s: float) -> None:
        """Watch the calling thread for ``timeout_s`` seconds from now."""
        thread_id = threading.get_ident()
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="tunekit-candidate-watchdog", daemon=True)
                self._thread.start()
            deadline = time.monotonic() + timeout_s
            self._deadlines[thread_id] = deadline
            if deadline < self._wake_at:
                self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching the calling thread; True when its deadline passed (a pending interrupt is withdrawn)."""
        thread_id = threading.get_ident()
        with self._cond:
            self._deadlines.pop(thread_id, None)
            if thread_id not in self._fired:
                return False
            self._fired.discard(thread_id)
            _raise_in_thread(thread_id, None)
            return True

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for thread_id, deadline in list(self._deadlines.items()):
                    if deadline <= now:
                        del self._deadlines[thread_id]
                        self._fired.add(thread_id)
                        _raise_in_thread(thread_id, _Interrupt)
                self._wake_at = min(self._deadlines.values(), default=math.inf)
                self._cond.wait(None if math.isinf(self._wake_at) else self._wake_at - now)


_WATCHDOG = _Watchdog()


class WatchdogRunner:
    """Runs candidates in the calling thread and disqualifies a run that passes ``timeout_s``."""

    def __init__(self, inner: InProcessRunner, timeout_s: float) -> None:
        self.inner = inner
        self.timeout_s = timeout_s

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` once, untimed, within the limit."""
        self._guard(lambda: self.inner.warmup(index))

    def sample(self, index: int, *, flush: bool = True) -> int:
        """Time one run of candidate ``index`` within the limit."""
        return self._guard(lambda: self.inner.sample(index, flush=flush))

    def _guard(self, run: Callable[[], T]) -> T:
        try:
            _WATCHDOG.arm(self.timeout_s)
            try:
                result = run()
            finally:
                fired = _WATCHDOG.disarm()
        except _Interrupt:
            raise CandidateFailed(_timeout_reason(self.timeout_s), "timeout") from None
        if fired:  # the candidate sat in C past its deadline and returned later
            raise CandidateFailed(_timeout_reason(self.timeout_s), "timeout")
        return result


# -- out of process: a forked worker ----------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: have the kernel kill the worker when the caller dies, even mid-hang."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _serve(conn: Connection, runner: InProcessRunner) -> None:
    """The worker's loop: run what the parent asks, answer ("ok", ns) or ("error", reason)."""
    while True:
        try:
            op, index, flush = conn.recv()
        except EOFError:
            return
        reply: tuple[str, int | str]
        try:
            if op == "warmup":
                runner.warmup(index)
                reply = ("ok", 0)
            else:
                reply = ("ok", runner.sample(index, flush=flush))
        except BaseException as exc:  # even SystemExit from a candidate disqualifies only that candidate
            reply = ("error", _describe(exc))
        conn.send(reply)


@dataclass(slots=True)
class _Worker:
    pid: int
    conn: Connection


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            return f"crashed: signal {number}"
        return f"crashed: signal {number} ({name})"
    return f"crashed: the worker exited with status {os.waitstatus_to_exitcode(status)}"


class ProcessRunner:
    """Runs candidates in a forked worker process; a crash or hang disqualifies only that candidate.

    The worker is forked on first use, after the benchmark inputs exist, so it inherits
    them; it is replaced after every crash or timeout, and killed by :meth:`close`.
    """

    def __init__(
        self, client: Client, tunables: TunableSet[Any, Any], inputs: tuple[Any, ...], *, timeout_s: float | None
    ) -> None:
        if not hasattr(os, "fork"):
            raise TunekitError("isolation='process' needs os.fork(), which this platform lacks; use isolation='none'")
        self.client = client
        self.tunables = tunables
        self.inputs = inputs
        self.timeout_s = timeout_s
        self._worker: _Worker | None = None

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` once in the worker, untimed."""
        self._call("warmup", index, flush=False)

    def sample(self, index: int, *, flush: bool = True) -> int:
        """Time one run of candidate ``index`` in the worker, on the worker's clock."""
        return self._call("sample", index, flush=flush)

    def close(self) -> None:
        """Kill the worker; nothing in it is worth a graceful exit."""
        if self._worker is not None:
            self._stop(self._worker)

    def _start(self) -> _Worker:
        parent_end, child_end = Pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the worker, reported through the pipe
            code = 0
            try:
                parent_end.close()
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the caller, who kills us
                _die_with_parent()
                _serve(child_end, InProcessRunner(self.client, self.tunables, self.inputs))
            except BaseException:
                code = _WORKER_BROKEN
            finally:
                os._exit(code)
        child_end.close()
        self._worker = _Worker(pid, parent_end)
        return self._worker

    def _stop(self, worker: _Worker) -> int:
        """Kill and reap ``worker``; its wait status."""
        self._worker = None
        with contextlib.suppress(OSError):
            worker.conn.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
        _, status = os.waitpid(worker.pid, 0)
        return status

    def _reap(self, worker: _Worker) -> int:
        """The wait status of a worker that closed its pipe (it is dying or dead)."""
        self._worker = None
        with contextlib.suppress(OSError):
            worker.conn.close()
        _, status = os.waitpid(worker.pid, 0)
        return status

    def _call(self, op: str, index: int, *, flush: bool) -> int:
        worker = self._worker or self._start()
        try:
            worker.conn.send((op, index, flush))
            ready = worker.conn.poll(self.timeout_s)
        except OSError:  # the worker died before it could read
            raise CandidateFailed(_exit_reason(self._reap(worker)), "crash") from None
        if not ready:
            self._stop(worker)
            assert self.timeout_s is not None
            raise CandidateFailed(_timeout_reason(self.timeout_s), "timeout")
        try:
            status, value = worker.conn.recv()
        except (EOFError, OSError):
            raise CandidateFailed(_exit_reason(self._reap(worker)), "crash") from None
        if status == "error":
            raise CandidateFailed(str(value), "run")
        return int(value)


@contextlib.contextmanager
def open_runner(
    client: Client, tunables: TunableSet[Any, Any], inputs: tuple[Any, ...], settings: Settings
) -> Iterator[CandidateRunner]:
    """The runner the settings (or the set's ``with_isolation``) ask for, shut down on exit."""
    mode, timeout_s = _policy(tunables, settings)
    runner: ProcessRunner | WatchdogRunner | InProcessRunner
    if mode == "process":
        runner = ProcessRunner(client, tunables, inputs, timeout_s=timeout_s)
    elif timeout_s is not None:
        runner = WatchdogRunner(InProcessRunner(client, tunables, inputs), timeout_s)
    else:
        runner = InProcessRunner(client, tunables, inputs)
    try:
        yield runner
    finally:
        if isinstance(runner, ProcessRunner):
            runner.close()
