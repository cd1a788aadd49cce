"""The isolated worker process: candidates run there, so a crash or hang costs only that candidate.

Two ways to start one. By default the worker is *forked* from the caller once the benchmark
inputs exist: it inherits the tunable set and the inputs as they are, so candidates may be
lambdas and closures; only candidate indices cross the pipe. Device runtimes whose state does
not survive ``fork()`` (OpenCL, CUDA: their driver threads are not copied) instead get a
*spawned* worker, a fresh interpreter that rebuilds its own client, tunable set and inputs
by calling a module-level factory, named by ``module:qualname`` (``with_isolation(worker=)``),
with the key's fields and, when it takes them, the tune's ``device_id`` and the calling client's
``locator`` (see ``tunekit.backend.SupportsLocator``: identical devices share a device id, the locator tells
them apart). The worker checks that the client it built has that device id and, when both
clients have a locator, that it is on the same device.

Either way the parent sends ``(op, index, flush)`` and the worker answers ``("ok", ns)`` or
``("error", reason)`` (``("closed", reason)`` for :class:`ClientClosed`, raised again in the
parent); a worker that dies or stops answering in time is killed, reported as ``crashed: signal
N (NAME)`` or ``timeout after T s``, and replaced for the next candidate.

A worker dies with its caller's process (Linux ``PR_SET_PDEATHSIG``), even mid-hang. The kernel
sends that signal when the *thread* that created the worker exits, not the process, so workers
are created by one thread that lives as long as the process: a worker started from a
short-lived thread (a request handler's, a thread pool's) outlives that thread.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any, TypeVar

from tunekit._base.errors import CandidateFailed, ClientClosed, TunekitError, WorkerStartFailed, describe_error
from tunekit._base.self_call import inherit, tunes_to_pass_on
from tunekit._candidates.isolation import (
    resolve_reference,
)
from tunekit._candidates.tunable_set import TunableSet, tuned_function
from tunekit._measure.check import CheckOutcome, Gate
from tunekit._measure.client import Client, locator_of
from tunekit._measure.runner import InProcessRunner

__all__ = ["ProcessRunner", "timeout_reason"]

# The worker's exit status when its own loop failed (not the candidate): EX_SOFTWARE.
_WORKER_BROKEN = 70
# Held from creating a forked worker's pipe until the parent closed the worker's end: a worker
# forked meanwhile by another thread would inherit that end and hide the first worker's death
# (its pipe would never reach EOF), turning a crash into a timeout.
_FORK_LOCK = threading.Lock()
# A spawned worker imports the user's modules and builds its device state before it is ready.
SPAWN_SETUP_TIMEOUT_S = 300.0

T = TypeVar("T")

_starter: ThreadPoolExecutor | None = None
"""The thread workers are created from (see the module's docstring); made at the first start."""
_starter_lock = threading.Lock()


def _from_lasting_thread(start: Callable[[], T]) -> T:
    """``start()`` (which forks or spawns a worker) on the long-lived starter thread, in the caller's context.

    The context carries the tunes the caller works for: a forked worker must see them (``tunekit._base.self_call``).
    """
    global _starter
    with _starter_lock:
        if _starter is None:
            _starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tunekit-worker-starter")
        starter = _starter
    try:
        future = starter.submit(contextvars.copy_context().run, start)
    except RuntimeError:  # the interpreter is shutting down: no new thread, and the process ends soon anyway
        return start()
    return future.result()


def _forget_starter() -> None:
    """In a forked child: the parent's starter thread was not copied, so the child makes its own when needed."""
    global _starter, _starter_lock
    _starter, _starter_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_starter)


def timeout_reason(timeout_s: float) -> str:
    """The reason a candidate that ran out of time is disqualified with."""
    return f"timeout after {timeout_s:g} s"


def _die_with_parent() -> None:
    """Linux: have the kernel kill the worker when the caller dies, even mid-hang."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _serve(conn: Connection, runner: InProcessRunner, gate: Gate | None) -> None:
    """The worker's loop: run what the parent asks, answer ("ok", value) or ("error", reason)."""
    while True:
        try:
            op, index, arg = conn.recv()
        except EOFError:
            return
        reply: tuple[str, Any]
        try:
            if op == "warmup":
                runner.warmup(index)
                reply = ("ok", 0)
            elif op == "sample":
                reply = ("ok", runner.sample(index, flush=bool(arg)))
            elif op == "check" and gate is not None:
                known = gate.baseline is not None
                tunable = runner.tunables.tunables[index]
                outcome = gate.check(tunable.name, tuned_function(tunable.fn))
                # The first candidate's outputs become the baseline: the caller keeps them for later workers.
                reply = ("ok", (outcome, None if known else gate.baseline))
            elif op == "adopt" and gate is not None:
                gate.adopt(*arg)
                reply = ("ok", 0)
            else:
                reply = ("error", f"the worker cannot {op!r}")
        except ClientClosed as exc:  # the worker's client went away: no candidate's fault, the tune stops
            reply = ("closed", str(exc))
        except CandidateFailed as exc:  # its stage goes too: a build error in the worker is a compile failure
            reply = ("failed", (exc.reason, exc.stage))
        except BaseException as exc:  # even SystemExit from a candidate disqualifies only that candidate
            reply = ("error", describe_error(exc))
        conn.send(reply)


def _exit_reason(code: int) -> str:
    """Why a worker ended, from its exit code (negative: the signal that killed it)."""
    if code < 0:
        try:
            return f"crashed: signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"crashed: signal {-code}"
    return f"crashed: the worker exited with status {code}"


@dataclass(slots=True)
class _Worker:
    pid: int
    conn: Connection
    process: subprocess.Popen[bytes] | None  # set for a spawned worker, None for a forked one

    def stop(self, *, kill: bool) -> int:
        """Reap the worker (killing it first when ``kill``); its exit code, negative for a signal.

        Whatever its candidates started (a helper process, a compiler) is killed with it, even when the worker
        itself has already died: it would outlive the worker under PID 1, holding the caller's stdout open.
        """
        with contextlib.suppress(OSError):
            self.conn.close()
        _kill_group(self.pid)
        if self.process is not None:
            if kill:
                self.process.kill()
            return self.process.wait()
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def _kill_group(pid: int) -> None:
    """SIGKILL the process group the worker ``pid`` leads (it calls ``setsid()`` first thing).

    Called before the worker is reaped, so that its id, and so its group's, cannot have been reused yet. A worker
    that has not called ``setsid()`` yet leads no group and has started nothing: ESRCH, and it is killed by PID.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _start_failed(how: str, exc: OSError) -> WorkerStartFailed:
    """The error of a worker that could not be started: the system's fault, not a candidate's."""
    return WorkerStartFailed(
        f"could not start the isolated worker process ({how}: {exc}); no candidate ran and none is blamed. "
        "The process limit (ulimit -u, a cgroup's pids.max), the open-file limit or memory may be exhausted: "
        "free some, or time candidates in this process (isolation='none')"
    )


@dataclass(frozen=True, slots=True)
class SpawnRecipe:
    """What a spawned worker needs to rebuild the tune: the factory's reference and the key's fields.

    ``pass_device_id``: call the factory with ``device_id=`` the tune's device id, too;
    ``pass_locator``: with ``locator=`` the calling client's locator (None if it has none).
    """

    factory: str
    key: dict[str, Any]
    pass_device_id: bool = False
    pass_locator: bool = False


class ProcessRunner:
    """Runs candidates in a worker process; a crash or hang disqualifies only that candidate.

    The worker starts on first use and is replaced after every crash or timeout; :meth:`close`
    kills it. With a ``recipe`` it is a fresh interpreter built by the recipe's factory,
    otherwise a fork of this process.
    """

    def __init__(
        self,
        client: Client,
        tunables: TunableSet[Any, Any],
        inputs: tuple[Any, ...],
        *,
        timeout_s: float | None,
        recipe: SpawnRecipe | None = None,
        gate: Gate | None = None,
    ) -> None:
        if recipe is None and not hasattr(os, "fork"):
            raise TunekitError(
                "isolation='process' needs os.fork() on this platform, or a worker factory: "
                "with_isolation('process', worker=build) with build(key_fields, *, device_id) -> "
                "(client, tunables, inputs)"
            )
        self.client = client
        self.tunables = tunables
        self.inputs = inputs
        self.timeout_s = timeout_s
        self.recipe = recipe
        self.gate = gate
        # Taken here, in the tuning thread: a spawned worker must refuse to tune these keys itself.
        self.tuning = tunes_to_pass_on()
        self._worker: _Worker | None = None
        self._setup_error: str | None = None

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` once in the worker, untimed."""
        self._request("warmup", index, None)

    def sample(self, index: int, *, flush: bool = True) -> int:
        """Time one run of candidate ``index`` in the worker, on the worker's clock."""
        return int(self._request("sample", index, flush))

    def check(self, index: int) -> CheckOutcome:
        """Run the correctness gate on candidate ``index`` in the worker, so a crash there is contained too."""
        if self.gate is None:
            raise TunekitError("this runner has no correctness gate")
        self.gate.prime()  # the trusted reference runs here, once; workers inherit or receive its outputs
        outcome, baseline = self._request("check", index, None)
        if baseline is not None and self.gate.baseline is None:
            self.gate.adopt(*baseline)
        return outcome  # type: ignore[no-any-return]

    def close(self) -> None:
        """Kill the worker; nothing in it is worth a graceful exit."""
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.stop(kill=True)

    def _start(self) -> _Worker:
        if self._setup_error is not None:  # a factory that failed once fails again: do not respawn per candidate
            raise CandidateFailed(self._setup_error, "run")
        worker = _from_lasting_thread(self._fork) if self.recipe is None else self._spawn(self.recipe)
        self._worker = worker
        return worker

    def _fork(self) -> _Worker:
        with _FORK_LOCK:  # no other runner may fork while this worker's end of the pipe is open here
            try:
                parent_end, child_end = Pipe()
            except OSError as exc:
                raise _start_failed("its pipe", exc) from exc
            try:
                pid = os.fork()
            except OSError as exc:
                parent_end.close()
                child_end.close()
                raise _start_failed("fork", exc) from exc
            if pid != 0:
                child_end.close()
        if pid == 0:  # pragma: no cover - runs in the worker, reported through the pipe
            code = 0
            try:
                # Its own session, so that the group killed with it holds whatever its candidates start.
                os.setsid()
                parent_end.close()
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the caller, who kills us
                _die_with_parent()
                _serve(child_end, InProcessRunner(self.client, self.tunables, self.inputs), self.gate)
            except BaseException:
                code = _WORKER_BROKEN
            finally:
                os._exit(code)
        return _Worker(pid, parent_end, None)

    def _spawn(self, recipe: SpawnRecipe) -> _Worker:
        try:
            parent_end, child_end = Pipe()
        except OSError as exc:
            raise _start_failed("its pipe", exc) from exc
        command = [sys.executable, "-c", _SPAWNED, str(child_end.fileno())]
        try:
            # Its own session, as a forked worker's: the group killed with it holds whatever its candidates start.
            process = _from_lasting_thread(
                lambda: subprocess.Popen(command, pass_fds=[child_end.fileno()], start_new_session=True)
            )
        except OSError as exc:
            parent_end.close()
            raise _start_failed("spawn", exc) from exc
        finally:
            child_end.close()
        worker = _Worker(process.pid, parent_end, process)
        setup = {
            "sys_path": sys.path,
            "factory": recipe.factory,
            "key": recipe.key,
            "names": list(self.tunables.names),
            "device_id": self.client.device_id,
            "pass_device_id": recipe.pass_device_id,
            "locator": locator_of(self.client),
            "pass_locator": recipe.pass_locator,
            "gate": self.gate is not None,
            "tuning": self.tuning,
        }
        try:
            parent_end.send_bytes(json.dumps(setup).encode())
            if not parent_end.poll(SPAWN_SETUP_TIMEOUT_S):
                worker.stop(kill=True)
                raise CandidateFailed(f"the worker process was not ready within {SPAWN_SETUP_TIMEOUT_S:g} s", "crash")
            status, value = parent_end.recv()
        except (EOFError, OSError):
            raise CandidateFailed(_exit_reason(worker.stop(kill=False)), "crash") from None
        if status != "ready":
            worker.stop(kill=True)
            self._setup_error = f"the worker process could not set up ({recipe.factory}): {value}"
            raise CandidateFailed(self._setup_error, "run")
        baseline = self.gate.baseline if self.gate is not None else None
        if baseline is not None:  # what a forked worker would inherit, a spawned one is sent
            self._worker = worker
            self._request("adopt", 0, baseline)
        return worker

    def _request(self, op: str, index: int, arg: Any) -> Any:
        worker = self._worker or self._start()
        try:
            worker.conn.send((op, index, arg))
            ready = worker.conn.poll(self.timeout_s)
        except OSError:  # the worker died before it could read
            self._worker = None
            raise CandidateFailed(_exit_reason(worker.stop(kill=False)), "crash") from None
        if not ready:
            self._worker = None
            worker.stop(kill=True)
            assert self.timeout_s is not None
            raise CandidateFailed(timeout_reason(self.timeout_s), "timeout")
        try:
            status, value = worker.conn.recv()
        except (EOFError, OSError):
            self._worker = None
            raise CandidateFailed(_exit_reason(worker.stop(kill=False)), "crash") from None
        if status == "error":
            raise CandidateFailed(str(value), "run")
        if status == "failed":
            raise CandidateFailed(*value)
        if status == "closed":
            raise ClientClosed(f"in the isolated worker process: {value}")
        return value


def _spawned_main(fd: int) -> None:  # pragma: no cover - runs in the spawned worker
    """A spawned worker: rebuild the tune from the factory, check it matches the caller's, then serve."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    setup = json.loads(conn.recv_bytes())
    sys.path[:] = setup["sys_path"]
    inherit(setup["tuning"])  # before the factory, which may execute operations itself
    try:
        factory: Any = resolve_reference(setup["factory"])
        keywords: dict[str, Any] = {"device_id": setup["device_id"]} if setup["pass_device_id"] else {}
        if setup["pass_locator"]:
            keywords["locator"] = setup["locator"]
        client, tunables, inputs = factory(setup["key"], **keywords)
        if list(tunables.names) != setup["names"]:
            raise TunekitError(f"it built the candidates {list(tunables.names)}, the caller has {setup['names']}")
        if client.device_id != setup["device_id"]:
            raise TunekitError(f"its client is {client.device_id!r}, the caller's {setup['device_id']!r}")
        located, wanted = locator_of(client), setup["locator"]
        if located is not None and wanted is not None and located != wanted:
            # Same device id, another device of the same model: its timings would be filed under the caller's.
            raise TunekitError(
                f"its client is at {located!r}, the caller's at {wanted!r}: take locator= in the worker factory and "
                "build the client on that device (e.g. OpenCLClient(locator=locator))"
            )
        if setup["gate"] and tunables.reference is None:
            raise TunekitError("its tunable set has no with_reference(), the caller's has")
        gate = Gate(client, inputs, tunables.reference) if setup["gate"] and tunables.reference else None
    except BaseException as exc:
        conn.send(("setup_error", describe_error(exc)))
        return
    conn.send(("ready", 0))
    _serve(conn, InProcessRunner(client, tunables, inputs), gate)


_SPAWNED = "import sys; from tunekit._measure.worker import _spawned_main; _spawned_main(int(sys.argv[1]))"
