"""Where candidates run when they may crash or hang: a worker process, or here under a watchdog.

``isolation="process"`` times candidates in a worker process (see ``tunekit._measure.worker``): a
candidate that kills its worker (segfault, ``abort()``, ``os._exit``) is disqualified with
``crashed: signal N``, one that runs past the limit with ``timeout after T s``; the worker is
replaced for the next candidate, so the tune goes on and the caller never dies.

``isolation="none"`` runs candidates in the calling thread. A watchdog thread raises an
exception inside a candidate that runs past its limit; that interrupts Python code only.
A candidate blocked in C (a long numpy call, ``time.sleep``, a device wait, a kernel
that never ends) cannot be interrupted in-process: it is disqualified once it returns,
and if it never returns the caller hangs with it. Use ``isolation="process"`` for that.

While a runner is open, :func:`~tunekit._measure.run_policy.current_run_policy` tells code working
for the tune (prepare hooks on their thread pool, compile workers) where its candidates run and the
limit on one run, so a backend that runs a candidate while preparing it (OpenCL's first launch) holds it to the
same rules as the tune's own runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from tunekit._base.errors import CandidateFailed, TunekitError
from tunekit._base.settings_model import Settings
from tunekit._candidates.isolation import Isolation
from tunekit._candidates.tunable_set import TunableSet, tuned_function
from tunekit._keys.key import key_to_dict
from tunekit._measure.check import CheckOutcome, Gate, ReferenceFailed
from tunekit._measure.client import Client, fork_hazard_of
from tunekit._measure.run_policy import policy_of, running_policy
from tunekit._measure.runner import CandidateRunner, InProcessRunner
from tunekit._measure.schedule import candidate_failure
from tunekit._measure.worker import ProcessRunner, SpawnRecipe, timeout_reason
from tunekit._values.outcome import Failed

__all__ = ["WatchdogRunner", "check_candidate", "open_runner", "refuse_unforkable"]

T = TypeVar("T")


WORKER_FACTORY_FIX = (
    "give the set a worker factory, which builds its own client in a fresh interpreter: "
    "tunables.with_isolation('process', worker=build), where build(key_fields, *, device_id, locator) -> "
    "(client, tunables, inputs) is a function at the top level of a module (docs/robustness.md)"
)
"""The fix offered first to a caller that can take a worker factory (a tuner; ``tk.search`` cannot)."""


def refuse_unforkable(
    client: Client,
    own: Isolation | None,
    settings: Settings,
    *,
    where: str,
    other_fixes: Sequence[str] = (WORKER_FACTORY_FIX,),
) -> None:
    """Refuse, before any candidate runs, a forked worker for a client that cannot be used in one.

    Forked, such a client (an OpenCL context) hangs at the first launch: each candidate would run
    into its time limit (8 variants, 60 s each: 8 minutes) and the tune end in NoValidKernelFound
    with nothing saying why. ``own`` is the set's ``with_isolation`` (None: the settings decide);
    ``where`` names the call, as in ``tuner 'gemm'``; ``other_fixes``: what the caller can do
    besides timing in this process, offered first (only the fixes that apply to it).
    """
    if not policy_of(own, settings).isolated or (own is not None and own.worker is not None):
        return
    hazard = fork_hazard_of(client)
    if hazard is None:
        return
    if own is not None:
        asked = "the set's with_isolation('process') has no worker factory, so it forks this process"
        in_process = "with_isolation('none') on the set"
    else:
        asked = "isolation='process' (TUNEKIT_ISOLATION or tk.configure) forks this process"
        in_process = "TUNEKIT_ISOLATION=none or tk.configure(isolation='none')"
    fixes = "; or ".join([*other_fixes, f"time the candidates in this process: {in_process}"])
    raise TunekitError(
        f"{where}: {asked} to time candidates, but {client!r} cannot be used in a forked process: {hazard}, "
        f"so every candidate would hang until its time limit. To tune on it, {fixes}"
    )


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
        self.guard(lambda: self.inner.warmup(index))

    def sample(self, index: int, *, flush: bool = True) -> int:
        """Time one run of candidate ``index`` within the limit (the flush or cold copies before it are not)."""
        inputs = self.inner.sample_inputs(flush)
        return self.guard(lambda: self.inner.timed(index, inputs))

    def guard(self, run: Callable[[], T]) -> T:
        """Run ``run`` in this thread under the per-run limit; CandidateFailed(timeout) past it."""
        try:
            _WATCHDOG.arm(self.timeout_s)
            try:
                result = run()
            finally:
                fired = _WATCHDOG.disarm()
        except _Interrupt:
            raise CandidateFailed(timeout_reason(self.timeout_s), "timeout") from None
        if fired:  # the candidate sat in C past its deadline and returned later
            raise CandidateFailed(timeout_reason(self.timeout_s), "timeout")
        return result


def check_candidate(runner: CandidateRunner, gate: Gate, index: int, tunables: TunableSet[Any, Any]) -> CheckOutcome:
    """Run the correctness gate on candidate ``index`` where the runner runs candidates.

    Under process isolation the check runs in the worker (a crash or hang there is contained
    like a timed run's); in-process it runs under the same per-run time limit.
    """
    tunable = tunables.tunables[index]
    if isinstance(runner, ProcessRunner):
        return runner.check(index)
    if isinstance(runner, WatchdogRunner):
        return runner.guard(lambda: gate.check(tunable.name, tuned_function(tunable.fn)))
    return gate.check(tunable.name, tuned_function(tunable.fn))


def check_each(
    runner: CandidateRunner, gate: Gate, indices: Iterable[int], tunables: TunableSet[Any, Any]
) -> Iterator[tuple[int, CheckOutcome | Failed]]:
    """Each candidate's check, or the failure it raised on the way (a crash, a timeout), in order.

    ``ReferenceFailed`` (the user's reference, not a candidate) propagates: the tune or search stops with it.
    """
    for index in indices:
        try:
            yield index, check_candidate(runner, gate, index, tunables)
        except ReferenceFailed:
            raise
        except Exception as exc:  # out, as in measure_batch; ClientClosed and WorkerStartFailed end the tune
            yield index, candidate_failure(exc)


@contextlib.contextmanager
def open_runner(
    client: Client,
    tunables: TunableSet[Any, Any],
    inputs: tuple[Any, ...],
    settings: Settings,
    *,
    key: object,
    where: str,
    gate: Gate | None = None,
) -> Iterator[CandidateRunner]:
    """The runner the settings (or the set's ``with_isolation``) ask for for ``key``, shut down on exit.

    Raises TunekitError, starting nothing, when the runner would fork a client that cannot be
    forked; ``where`` names the call in that message.
    """
    refuse_unforkable(client, tunables.isolation, settings, where=where)
    policy = policy_of(tunables.isolation, settings)
    timeout_s = policy.timeout_s
    runner: ProcessRunner | WatchdogRunner | InProcessRunner
    if policy.isolated:
        own = tunables.isolation
        recipe = None
        if own is not None and own.worker is not None:
            recipe = SpawnRecipe(
                own.worker, key_to_dict(key), pass_device_id=own.worker_device_id, pass_locator=own.worker_locator
            )
        runner = ProcessRunner(client, tunables, inputs, timeout_s=timeout_s, recipe=recipe, gate=gate)
    elif timeout_s is not None:
        runner = WatchdogRunner(InProcessRunner(client, tunables, inputs), timeout_s)
    else:
        runner = InProcessRunner(client, tunables, inputs)
    token = running_policy.set(policy)
    try:
        yield runner
    finally:
        running_policy.reset(token)
        if isinstance(runner, ProcessRunner):
            runner.close()
