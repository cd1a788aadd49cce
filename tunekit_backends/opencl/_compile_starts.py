"""Compile workers that fail to start, counted per way of starting them, for the whole process.

A start fails for reasons of the machine, not of the pool that tried: a Python that cannot
import pyopencl, a full disk, a driver that hangs while it opens the device. So the failures,
and the pause they lead to (see ``_compile.py``), belong to the way a worker is started (the
command and its environment), shared by every pool of the process: counted per pool, each new
client (one per request in a server, say) would pay two failed starts again, or a hung start's
whole timeout. A change of command or environment (another ``sys.executable``, a fixed
``PYTHONPATH``) is a new way, tried at once; a worker that gets ready forgets the failures.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["FAILED_STARTS", "MAX_PAUSE_S", "START_FAILURES", "FailedStarts", "WorkerCommand", "command_for"]

START_FAILURES = 2
"""Failed starts in a row after which no worker is started for a while: the next would fail the same way."""

MAX_PAUSE_S = 3600.0


@dataclass(frozen=True, slots=True)
class WorkerCommand:
    """How a compile worker is started: its command and environment (what decides whether it can start)."""

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def command_for(platform: str, device: str) -> WorkerCommand:
    """How a compile worker for this device is started now."""
    # The parent's sys.path, so a worker imports the same tunekit even from an uninstalled checkout ("" is the
    # current directory). -P: that path alone; else `-m` puts the current directory first, and a checkout there
    # (another tree's tunekit_backends, as a bench comparing two trees runs into) shadows the parent's.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if isinstance(p, str)))
    # A worker never calls BLAS, but numpy's OpenBLAS starts a thread per core at import that spins
    # for a while: about 0.1 s of CPU per worker taken from the compiles (unless the user chose a count).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    command = (sys.executable, "-P", "-m", "tunekit_backends.opencl._compile_worker", platform, device)
    return WorkerCommand(command, tuple(sorted(env.items())))


@dataclass(slots=True)
class _Failures:
    in_a_row: int = 0
    next_pause_s: float | None = None  # None: the pausing pool's first pause
    paused_until: float = 0.0  # time.monotonic() before which no worker is started
    because: str = ""


class FailedStarts:
    """Failed starts in a row and the pause they led to, per :class:`WorkerCommand`; only those that failed are kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[WorkerCommand, _Failures] = {}
        os.register_at_fork(after_in_child=self._new_lock)  # a lock held by another thread at fork stays held

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def state(self, how: WorkerCommand) -> tuple[int, str | None]:
        """Failed starts in a row started as ``how``, and why none may start now (None when one may)."""
        with self._lock:
            failures = self._failures.get(how)
            if failures is None:
                return 0, None
            paused = time.monotonic() < failures.paused_until
            return failures.in_a_row, failures.because if paused else None

    def failed(self, how: WorkerCommand, reason: str, *, timed_out: bool, first_pause_s: float) -> str | None:
        """Count a failed start as ``how``; why none starts from now on when this failure pauses it, else None."""
        with self._lock:
            failures = self._failures.setdefault(how, _Failures())
            # A hung start costs its whole timeout: never wait for a second one in a row.
            failures.in_a_row += START_FAILURES if timed_out else 1
            now = time.monotonic()
            if failures.in_a_row < START_FAILURES or now < failures.paused_until:
                return None
            pause = first_pause_s if failures.next_pause_s is None else failures.next_pause_s
            failures.next_pause_s = min(2 * pause, MAX_PAUSE_S)
            failures.paused_until = now + pause
            after = "" if timed_out else f"after {failures.in_a_row} failed starts in a row, "
            failures.because = f"{reason}; {after}no compile worker is started for {pause:.0f} s"
            return failures.because

    def succeeded(self, how: WorkerCommand) -> None:
        """A worker started this way got ready: its failures and pauses are over."""
        with self._lock:
            self._failures.pop(how, None)


FAILED_STARTS = FailedStarts()
"""The process's record, shared by every compile pool."""
