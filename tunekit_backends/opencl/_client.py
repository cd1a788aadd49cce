"""OpenCLClient: one device, a profiling-enabled queue, event timing and a cache flush."""

from __future__ import annotations

import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from tunekit import ClientClosed
from tunekit.backend import CheckBuffers, DevicePeaks
from tunekit_backends.opencl._buffers import DeviceCheckBuffers
from tunekit_backends.opencl._cl import is_pocl, pocl_kernel_cache_on, pyopencl
from tunekit_backends.opencl._cold import cold_inputs
from tunekit_backends.opencl._compile import CompilePool
from tunekit_backends.opencl._fork import FORK_FIX, forked_from, opening
from tunekit_backends.opencl._peaks import busy_kernel, measure_device_peaks, warm_up_device
from tunekit_backends.opencl._selection import Selection, describe_devices, device_id_of

__all__ = ["OpenCLClient", "describe_devices"]

T = TypeVar("T")


_MIN_FLUSH_BYTES = 8 << 20

_MAX_DEFAULT_WORKERS = 8

_STILL_WARM_S = 1.0
"""A device that ran timed work less than this ago, without a longer pause since its warm-up, is still warm.

GPU drivers keep boost clocks for about a second or more of idleness, and a CPU governor reacts
within milliseconds of new work: a second is short enough for both.
"""


class _Warmth:
    """When each device of this process was last warmed up and last ran timed work (by ``int_ptr``).

    Process-wide, not per client: two clients of one device (a tune and its re-timing, say) share its clocks.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warm: dict[int, float] = {}  # device -> last activity, while warm since a warm-up

    def warmed(self, device: int) -> None:
        with self._lock:
            self._warm[device] = time.monotonic()

    def ran(self, device: int) -> None:
        """Timed work ran on ``device``: it stays warm if the last activity was recent, else it went cold."""
        now = time.monotonic()
        with self._lock:
            last = self._warm.get(device)
            if last is not None:
                if now - last < _STILL_WARM_S:
                    self._warm[device] = now
                else:
                    del self._warm[device]

    def is_warm(self, device: int) -> bool:
        with self._lock:
            last = self._warm.get(device)
            return last is not None and time.monotonic() - last < _STILL_WARM_S


_WARMTH = _Warmth()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _compiles_faster_in_processes(device: Any) -> bool:
    """PoCL compiles one program at a time per process; other processes reach it through its disk cache.

    ``POCL_KERNEL_CACHE=0`` is PoCL's own switch for that cache: without it a worker's build
    is lost, so compiling in workers would only double the work.
    """
    return is_pocl(device.platform.name) and pocl_kernel_cache_on() and _usable_cpus() >= 2


_LOCATOR = re.compile(r"opencl:platform=(\d+),device=(\d+)")


def _located(locator: object) -> tuple[int, int]:
    """The platform and device indices a client's ``locator`` names."""
    found = _LOCATOR.fullmatch(locator) if isinstance(locator, str) else None
    if found is None:
        raise ValueError(
            f"OpenCLClient(locator=...) takes a client's locator, 'opencl:platform=P,device=D' (P and D the indices "
            f"`tunekit devices` lists), got {locator!r}"
        )
    return int(found.group(1)), int(found.group(2))


def _locator_of(cl: Any, device: Any) -> str:
    """Where ``device`` is among this process's devices: its platform's index and its index there."""
    for p, platform in enumerate(cl.get_platforms()):
        for d, candidate in enumerate(platform.get_devices()):
            if candidate.int_ptr == device.int_ptr:
                return f"opencl:platform={p},device={d}"
    raise RuntimeError(f"the OpenCL device {device.name} is not among this process's devices")


def _device_model_of(device: Any) -> str:
    """A device's hardware identity (see ``OpenCLClient.device_model``): its id without the driver's versions."""
    return f"opencl:{device.platform.name}|{device.name}"


class OpenCLClient:
    """An OpenCL device as a tunekit client.

    Picks the device by platform and device index or name substring, or by ``device_id`` (a
    client's ``device_id``: what a process-isolation worker factory is told to build for; the
    first such device when several identical ones share it), or exactly by ``locator`` (a
    client's :attr:`locator`, which tells identical devices apart; with ``device_id`` too, the
    device there must have that id); by default the first GPU, else the first device whose
    compiler works (PoCL's CPU device on a machine without a GPU). Durations
    come from event profiling on the device's clock, never the host's. ``flush_cache=False`` times
    candidates with warm caches.

    ``compile_in`` says where variants compile before they are timed: ``"process"`` in a pool
    of ``compile_workers`` worker processes (default: the usable CPUs, at most 8), for drivers such as
    PoCL whose compiler runs one build at a time per process, handing the result back through
    the driver's on-disk kernel cache; ``"thread"`` in this process. ``"auto"`` (the default)
    picks processes for PoCL when at least two CPUs are usable and its kernel cache is on,
    threads otherwise. When workers cannot be used (the temporary directory cannot take the copy
    of the inputs they launch on, or no worker starts), variants compile in this process as with
    ``"thread"``, and the first such failure is logged once as a warning saying what to do;
    after two failed starts in a row no client of the process starts a worker the same way (same
    Python and environment) for a while (2 minutes, doubling).

    ``start_workers`` says when those workers start: ``"open"`` (the default) as the client
    opens, in the background, so that their start-up (about 0.7 s of CPU each on PoCL: Python,
    the driver, its compiler's first build) overlaps the caller's set-up and the first compile
    finds them ready; ``"first_compile"`` at the first compile, so that a process that only runs
    cached winners (a server, say) starts none.

    With workers started as it opens, the client returns before its device's compiler is probed:
    the probe waits for the first worker, whose first build puts the probe's kernel in PoCL's cache
    (see ``_selection.py``). What needs its outcome waits for it: ``device``, ``context`` and
    ``queue`` only while another matching device could still be chosen instead, ``compile_pool``
    (the first compile) and the warm-up always. So a device whose compiler fails raises its
    error there, at the latest at the tune's first compile (a :class:`tunekit.ClientClosed` that
    blames no variant), rather than here; with ``start_workers="first_compile"`` or
    ``compile_in="thread"`` it raises here, as the probe builds in this process anyway.
    """

    def __init__(
        self,
        *,
        platform: int | str | None = None,
        device: int | str | None = None,
        device_id: str | None = None,
        locator: str | None = None,
        flush_cache: bool = True,
        compile_in: Literal["auto", "thread", "process"] = "auto",
        compile_workers: int | None = None,
        start_workers: Literal["open", "first_compile"] = "open",
    ) -> None:
        if compile_in not in ("auto", "thread", "process"):
            raise ValueError(f"OpenCLClient(compile_in=...) takes 'auto', 'thread' or 'process', got {compile_in!r}")
        for name, wanted in (("platform", platform), ("device", device)):
            # True would match index 1 and "" every name: neither selects what it seems to.
            if wanted is not None and (
                isinstance(wanted, bool)
                or not isinstance(wanted, int | str)
                or (isinstance(wanted, int) and wanted < 0)
                or (isinstance(wanted, str) and not wanted.strip())
            ):
                raise TypeError(
                    f"OpenCLClient({name}=...) takes an index (an int >= 0) or a non-empty substring of the name, "
                    f"got {wanted!r}; `tunekit devices` lists each device with its platform= and device="
                )
        if compile_workers is not None and compile_workers < 1:
            raise ValueError(f"OpenCLClient(compile_workers=...) must be at least 1, got {compile_workers}")
        if locator is not None:
            if platform is not None or device is not None:
                raise ValueError(
                    f"OpenCLClient(locator={locator!r}) names one device: give it without platform= and device="
                )
            platform, device = _located(locator)
        if start_workers not in ("open", "first_compile"):
            raise ValueError(f"OpenCLClient(start_workers=...) takes 'open' or 'first_compile', got {start_workers!r}")
        if not isinstance(flush_cache, bool | np.bool_):
            # bool("false") is True: a string here would silently keep flushing.
            raise TypeError(f"OpenCLClient(flush_cache=...) takes True or False, got {flush_cache!r}")
        cl = pyopencl()
        opening(self)
        self._cl = cl
        # Each worker holds a driver and its compiler (150-280 MB measured on PoCL): a few suffice.
        workers = compile_workers or min(_usable_cpus(), _MAX_DEFAULT_WORKERS)

        def new_pool(candidate: Any) -> CompilePool | None:
            if compile_in == "thread" or (compile_in == "auto" and not _compiles_faster_in_processes(candidate)):
                return None
            return CompilePool(workers, candidate.platform.name, candidate.name)

        self._selection = Selection(
            cl,
            platform=platform,
            device=device,
            device_id=device_id,
            new_pool=new_pool,
            start_workers=start_workers == "open",
        )
        weakref.finalize(self, _close_unless_forked, self._selection)
        self.flush_enabled = bool(flush_cache)
        self._open_lock = threading.Lock()
        self._open: tuple[Any, Any, Any] | None = None  # device, context, queue
        self._forked_repr = ""  # set in a forked child: how the parent's client is named there
        self._flush_lock = threading.Lock()
        self._flush_buffer: Any = None
        self._flush_count = 0
        self._helpers: Any = None

    def _opened_device(self) -> tuple[Any, Any, Any]:
        """The device, its context and a profiling queue; waits for the probe only while another device could win."""
        opened = self._open
        if opened is not None:
            return opened
        self._refuse_if_forked()
        known = self._selection.known
        device, context = known if known is not None else self._settled_device()
        with self._open_lock:
            if self._open is None:
                queue = self._cl.CommandQueue(context, properties=self._cl.command_queue_properties.PROFILING_ENABLE)
                self._open = (device, context, queue)
            return self._open

    def _forget_device(self) -> None:
        """In a forked child: drop the parent's device, context and queue, so that a use raises instead of hanging."""
        self._forked_repr = repr(self)  # named as the parent knew it: the child no longer can
        self._open = None
        for name in ("device", "context", "queue"):
            vars(self).pop(name, None)

    def _refuse_if_forked(self) -> None:
        parent = forked_from()
        if parent is not None:
            raise ClientClosed(
                f"{self._forked_repr} was opened in process {parent}, and this process ({os.getpid()}) is a fork "
                "of it: an OpenCL context does not survive fork() (the driver's threads are not copied; a launch "
                f"here would hang); use the client in the process that opened it, or {FORK_FIX}"
            )

    def _settled_device(self) -> tuple[Any, Any]:
        settled = self._selection.settled()
        return settled.device, settled.context

    # Cached: a dispatch reads device_id (and a timed launch the device) each time, an attribute once known.
    @cached_property
    def device(self) -> Any:
        """The ``pyopencl.Device``."""
        return self._opened_device()[0]

    @cached_property
    def context(self) -> Any:
        """A ``pyopencl.Context`` on the device alone."""
        return self._opened_device()[1]

    @cached_property
    def queue(self) -> Any:
        """A profiling-enabled ``pyopencl.CommandQueue`` on the device: candidates launch on it."""
        return self._opened_device()[2]

    @property
    def compile_pool(self) -> CompilePool | None:
        """The compile worker processes; None when variants compile in this process.

        Waits for the device's probe, if still running: a device whose compiler fails raises here (the first
        compile) the error the client would otherwise have raised as it opened.
        """
        self._refuse_if_forked()  # the probe's thread, which a wait would be for, is the parent's
        return self._selection.settled().pool

    @property
    def compile_in(self) -> Literal["thread", "process"]:
        """Where variants compile: ``"process"`` in :attr:`compile_pool`, ``"thread"`` in this process."""
        return "process" if self.compile_pool is not None else "thread"

    if TYPE_CHECKING:  # a property to type checkers: pyright matches no cached_property to Client's property

        @property
        def device_id(self) -> str:
            """Platform, device, driver version and OpenCL version: a driver upgrade re-tunes."""
            ...

    else:

        @cached_property  # kept on the instance: every TUNER.execute(client.device_id, ...) reads it
        def device_id(self) -> str:
            """Platform, device, driver version and OpenCL version: a driver upgrade re-tunes."""
            return device_id_of(self.device)

    @cached_property
    def device_model(self) -> str:
        """The platform and device names (``tunekit.backend.SupportsDeviceModel``): ``device_id`` without its versions.

        The platform's version, the driver's and the device's OpenCL version all come with the
        driver (``OpenCL 3.0 CUDA 12.4``, ``PoCL 5.0 ... LLVM 16``), so an upgrade changes them
        on the same hardware. The platform's name stays: another implementation on one device
        (PoCL or the vendor's runtime on a CPU) compiles kernels its own way, and is another device here.
        """
        return _device_model_of(self.device)

    @cached_property
    def locator(self) -> str:
        """Which device of this machine, ``opencl:platform=P,device=D``: ``OpenCLClient(locator=)`` opens it again.

        Unlike ``device_id`` it tells two identical devices apart; it holds on this machine only
        (``tunekit devices`` lists the indices), so it is given to worker processes, never stored.
        """
        return _locator_of(self._cl, self.device)

    @property
    def fork_hazard(self) -> str:
        """Why a forked worker cannot use this client (``tunekit.backend.SupportsForkCheck``).

        Process isolation needs a worker factory.
        """
        return "an OpenCL context does not survive fork() (the driver's threads are not copied; a launch there hangs)"

    @property
    def is_cpu(self) -> bool:
        """Whether the device is a CPU (PoCL's, typically)."""
        return bool(self.device.type & self._cl.device_type.CPU)

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run``, which enqueues and returns its kernel's event (or a list of events).

        The duration is from the first event's start to the last one's end, by the device's
        profiling clock; for one event that is exactly the kernel's execution time.
        """
        result = run()
        events = self._events(result)
        for event in events:
            event.wait()
        _WARMTH.ran(self.device.int_ptr)
        return result, int(events[-1].profile.end - events[0].profile.start)

    def _events(self, result: object) -> list[Any]:
        if isinstance(result, self._cl.Event):
            return [result]
        if isinstance(result, Sequence) and result and all(isinstance(e, self._cl.Event) for e in result):
            return list(result)
        raise TypeError(
            f"an OpenCL candidate must return the cl.Event of its launch (or a list of events), "
            f"got {type(result).__name__}; return the value of kernel(queue, global, local, *args)"
        )

    def sync(self) -> None:
        """Wait for everything enqueued on the queue."""
        self.queue.finish()

    def flush_cache(self) -> None:
        """Write a buffer twice the device's last-level cache, outside any timed region."""
        if not self.flush_enabled:
            return
        with self._flush_lock:
            if self._flush_buffer is None:
                size = 2 * self._cache_bytes()
                self._flush_buffer = self._cl.Buffer(self.context, self._cl.mem_flags.READ_WRITE, size)
            self._flush_count += 1
            buffer = self._flush_buffer
            pattern = np.uint8(self._flush_count % 251)
        self._cl.enqueue_fill_buffer(self.queue, buffer, pattern, 0, buffer.size).wait()

    def cold_inputs(self, inputs: tuple[Any, ...]) -> Callable[[], tuple[Any, ...]] | None:
        """Copies of ``inputs`` to rotate through, each cold at its sample (``tunekit.backend.SupportsColdInputs``).

        As cold as a flush before each sample, without writing twice the cache each time (see
        ``_cold.py``); None with ``flush_cache=False`` (samples are timed warm), or when the copies
        would take more than a quarter of the device's memory (each sample is then flushed).
        """
        if not self.flush_enabled:
            return None
        return cold_inputs(self._cl, self.queue, inputs, self._cache_bytes(), int(self.device.global_mem_size) // 4)

    def _cache_bytes(self) -> int:
        """The last-level cache a flush must evict; half the smallest flush for a device that reports none."""
        return max(int(self.device.global_mem_cache_size), _MIN_FLUSH_BYTES // 2)

    def warm_up(self, duration_ns: int) -> int:
        """Keep the device busy with multiply-add kernels until its clocks are steady (at most ``duration_ns``).

        Skipped (0 ns) when this process warmed the device up and has kept it timing since, with no
        pause over a second: back-to-back tunes pay one warm-up. A CPU device stops as soon as its
        speed is steady, without the GPU's minimum third of ``duration_ns``: a CPU governor ramps
        within milliseconds, and a CPU that has just compiled the candidates is already at speed.
        """
        device = self.device.int_ptr
        if _WARMTH.is_warm(device):
            _WARMTH.warmed(device)
            return 0
        spent = warm_up_device(
            self.queue, self._helper_kernels(), duration_ns, min_fraction=0.0 if self.is_cpu else 1 / 3
        )
        _WARMTH.warmed(device)
        return spent

    def measure_peaks(self) -> DevicePeaks:
        """Peak multiply-add rate, buffer-copy bandwidth and an empty kernel's time, on this device."""
        return measure_device_peaks(self._cl, self.queue, self._helper_kernels())

    def _helper_kernels(self) -> Any:
        self._selection.settled()  # a device whose compiler fails says so here, not as a build error
        with self._flush_lock:
            if self._helpers is None:
                self._helpers = busy_kernel(self._cl, self.context, self.device)
            return self._helpers

    def check_buffers(self, inputs: tuple[Any, ...], outputs: Sequence[int]) -> CheckBuffers:
        """Device-side copies of ``inputs``; each output buffer followed by canary bytes."""
        return DeviceCheckBuffers(self, inputs, outputs)

    def close(self) -> None:
        """Stop the compile worker processes, if any (they also stop when the client is collected, or at exit).

        A tune that is compiling in them meanwhile (or compiles in them later) raises
        :class:`tunekit.ClientClosed` rather than blaming the variant a stopped worker was building.
        In a forked child it does nothing: the workers are the parent's.
        """
        _close_unless_forked(self._selection)

    def __repr__(self) -> str:
        opened, known = self._open, self._selection.known  # a repr never waits for the probe
        device = opened[0] if opened is not None else known[0] if known is not None else None
        if device is None:
            return "OpenCLClient(choosing its device)"
        return f"OpenCLClient({device.platform.name} / {device.name})"


def _close_unless_forked(selection: Selection) -> None:
    """Close a client's probe and compile workers, unless they belong to the process this one was forked from."""
    if forked_from() is None:
        selection.close()
