"""Which OpenCL device a client opens, and whether its compiler works: settled as the client opens, or just after.

By default the first GPU, else the first device whose compiler builds a trivial kernel
(``_cl.PROBE_KERNEL``); a selection (``platform=``, ``device=``, ``device_id=``) keeps platform
order among its matches, and one whose every match fails the build is refused by name. A device
that could only fail at the tune, once per variant, naming no device, is never used.

When the first candidate compiles in worker processes started as the client opens, its probe
waits for the first of them: a worker's first build is the probe's kernel, so the probe here is a
PoCL cache hit and this process never loads the compiler (about 0.5 s of CPU), which it needs for
nothing else. That wait (0.8 s on this 2-core VM, more when loaded) runs on a thread, so the
client returns at once and the caller's own set-up (its inputs, its reference, the tuner) runs
beside the workers' start. What needs the outcome waits for it: the device itself only when
another device could still replace it, the compile workers (the first compile) and the
warm-up kernel always. Otherwise (workers started at the first compile, compiling in threads)
everything is settled before the client returns, as the probe builds in this process anyway.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tunekit import ClientClosed
from tunekit_backends.opencl._cl import INSTALL_HINT, PROBE_KERNEL, first_error_line, pyopencl
from tunekit_backends.opencl._compile import CompilePool

__all__ = ["DeviceCannotCompile", "Selection", "Settled", "describe_devices", "device_id_of"]

_log = logging.getLogger("tunekit.opencl")

PROBE_WAIT_S = 10.0
"""How long the probe waits for the device's first compile worker before it builds cold in this process.

About 1 s on a quiet machine here (0.7-0.9 s of the worker's CPU), 4-6 s on one loaded to 5x its cores. Waiting
costs little: the first compile waits for the workers anyway, and a start that hangs would cost that compile
the ready timeout (60 s) in any case."""


class DeviceCannotCompile(ClientClosed):
    """No device the client may open can build a trivial kernel.

    A :class:`tunekit.ClientClosed`: raised at a tune's first compile (when the probe was still
    running as the client returned), it stops the tune, blames no variant and stores nothing.
    """


@dataclass(frozen=True, slots=True)
class Settled:
    """The device a client uses, a context on it (the probe's), and its compile pool (None: compiles in threads)."""

    device: Any
    context: Any
    pool: CompilePool | None


@dataclass(frozen=True, slots=True)
class _Candidate:
    platform_index: int
    device_index: int
    device: Any

    def __str__(self) -> str:
        return f"{self.platform_index}:{self.device_index} {self.device.platform.name} / {self.device.name}"


def _matches(wanted: int | str, index: int, name: str) -> bool:
    if isinstance(wanted, int):
        return wanted == index
    return wanted.lower() in name.lower()


def describe_devices() -> list[str]:
    """Every OpenCL device this process sees, as ``platform index: device index: names``."""
    cl = pyopencl()
    return [
        f"{p}:{d} {platform.name} / {device.name} ({device.version}, driver {device.driver_version})"
        for p, platform in enumerate(cl.get_platforms())
        for d, device in enumerate(platform.get_devices())
    ]


def device_id_of(device: Any) -> str:
    """A device's tunekit device id (see ``OpenCLClient.device_id``)."""
    plat = device.platform
    return f"opencl:{plat.name}|{plat.version}|{device.name}|driver {device.driver_version}|{device.version}"


def probe(cl: Any, context: Any) -> str | None:
    """None when the compiler builds a trivial kernel in ``context``, else the compiler's first error line.

    The probe builds in the context the client then keeps: PoCL loads its kernel library once
    per context (0.4 s measured), so probing in a throw-away context would pay for it twice.
    """
    try:
        cl.Program(context, PROBE_KERNEL).build()
    except cl.Error as exc:
        return first_error_line(str(exc))
    return None


class Selection:
    """The device a client opens, chosen among the matches of its selection, with the compile pool for it.

    ``new_pool`` makes the (unstarted) pool for a device, or None when it compiles in threads;
    ``start_workers`` starts that pool's workers before its device is probed. :meth:`settled`
    waits for the outcome, :meth:`close` stops it (and every pool) whether or not it is settled.
    """

    def __init__(
        self,
        cl: Any,
        *,
        platform: int | str | None,
        device: int | str | None,
        device_id: str | None,
        new_pool: Callable[[Any], CompilePool | None],
        start_workers: bool,
    ) -> None:
        self._cl = cl
        self._new_pool = new_pool
        self._start_workers = start_workers
        self._wanted = f"platform={platform!r}, device={device!r}" + (f", device_id={device_id!r}" if device_id else "")
        self._explicit = platform is not None or device is not None or device_id is not None
        self._ordered = self._candidates(platform, device, device_id)
        self._lock = threading.Lock()  # guards _pools and _closed
        self._pools: list[CompilePool] = []  # every pool made, stopped by close()
        self._closed = False
        self._done = threading.Event()
        self._outcome: Settled | BaseException | None = None
        self.known: tuple[Any, Any] | None = None  # the device and its context, once no other can replace it
        self._thread: threading.Thread | None = None
        first = self._ordered[0]
        pool = None if self._unprobed(first) or not start_workers else self._pool_for(first)
        if pool is None:  # the probe builds here, cold, whether now or later: settled before returning
            self._settle(None, None)
            self.settled()  # raises what it raised
            return
        try:
            context = cl.Context([first.device])
            pool.start_all()
        except BaseException:
            self.close()
            raise
        if len(self._ordered) == 1:
            self.known = (first.device, context)
        self._thread = threading.Thread(
            target=self._settle, args=(context, pool), daemon=True, name="tunekit-opencl-probe"
        )
        self._thread.start()

    def _candidates(
        self, platform: int | str | None, device: int | str | None, device_id: str | None
    ) -> list[_Candidate]:
        cl = self._cl
        candidates = [
            _Candidate(p, d, dev)
            for p, plat in enumerate(cl.get_platforms())
            for d, dev in enumerate(plat.get_devices())
            if (platform is None or _matches(platform, p, plat.name))
            and (device is None or _matches(device, d, dev.name))
            and (device_id is None or device_id_of(dev) == device_id)
        ]
        if not candidates:
            seen = describe_devices() or [f"none; install a driver, e.g. {INSTALL_HINT}"]
            raise RuntimeError(f"no OpenCL device matches {self._wanted}; this process sees: {seen}")
        if self._explicit:  # a selection keeps platform order
            return candidates
        return sorted(
            candidates,
            key=lambda c: (not bool(c.device.type & cl.device_type.GPU), c.platform_index, c.device_index),
        )

    def _unprobed(self, candidate: _Candidate) -> bool:
        # An offline-compiled device (an FPGA) runs kernels built from binaries; chosen by name, it is kept.
        return self._explicit and not candidate.device.compiler_available

    def _pool_for(self, candidate: _Candidate) -> CompilePool | None:
        with self._lock:
            if self._closed:
                raise self._closed_error()
            pool = self._new_pool(candidate.device)
            if pool is not None:
                self._pools.append(pool)
            return pool

    def _settle(self, context: Any, pool: CompilePool | None) -> None:
        """Choose the device (``context`` and ``pool``: the first candidate's, made already) and keep the outcome."""
        try:
            self._outcome = self._choose(context, pool)
        except BaseException as exc:
            self._outcome = exc
            self._stop_pools()
        finally:
            self._done.set()

    def _choose(self, first_context: Any, first_pool: CompilePool | None) -> Settled:
        cl = self._cl
        refused: list[str] = []
        for index, candidate in enumerate(self._ordered):
            context = first_context if index == 0 and first_context is not None else cl.Context([candidate.device])
            pool = first_pool if index == 0 and first_pool is not None else self._pool_for(candidate)
            if pool is not None and self._start_workers:
                pool.start_all()  # nothing new for the first candidate: it started as the client opened
            if self._unprobed(candidate):
                return Settled(candidate.device, context, pool)
            if pool is not None and self._start_workers:
                # A worker's first build is this probe's kernel: waited for, the probe here is a cache hit.
                pool.wait_for_one(PROBE_WAIT_S)
            if self._closed:  # closed meanwhile: a cold build now would load the compiler for no one
                raise self._closed_error()
            problem = probe(cl, context)
            if problem is None:
                for skipped in refused:  # said only when another device is used instead; else the error says it
                    _log.warning("skipping OpenCL device %s: its compiler fails a trivial build", skipped)
                return Settled(candidate.device, context, pool)
            refused.append(f"{candidate} ({problem})")
            if pool is not None:
                pool.close()
        if self._explicit:
            raise DeviceCannotCompile(
                f"no OpenCL device matching {self._wanted} can build a trivial kernel: "
                + "; ".join(refused)
                + f"; select another device (`tunekit devices` lists them; this process sees: {describe_devices()}), "
                "or install a working driver for this one"
            )
        raise DeviceCannotCompile("no OpenCL device can build a trivial kernel:\n  " + "\n  ".join(refused))

    @property
    def pending(self) -> bool:
        """Whether the device's probe is still running (the client returned before its first worker was ready)."""
        return not self._done.is_set()

    def settled(self) -> Settled:
        """The outcome, once the probe has run; raises why no device was chosen (or :class:`tunekit.ClientClosed`)."""
        outcome = self._outcome  # set before _done: a set outcome is final
        if outcome is None:
            self._done.wait()
            outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome.with_traceback(None)
        assert outcome is not None
        return outcome

    def _closed_error(self) -> ClientClosed:
        return ClientClosed(
            f"the OpenCL client for {self._wanted} was closed (OpenCLClient.close()) before it chose its device"
        )

    def _stop_pools(self) -> None:
        with self._lock:
            pools = list(self._pools)
        for pool in pools:
            pool.close()

    def close(self) -> None:
        """Stop every pool (a pending probe then ends without building) and wait for the probe's thread."""
        with self._lock:
            self._closed = True
        self._stop_pools()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
