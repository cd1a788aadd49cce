"""The client protocol: what a device backend provides to the tuner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

__all__ = [
    "CHECKED_CLIENT_TYPES",
    "Client",
    "DevicePeaks",
    "SupportsCacheFlush",
    "SupportsColdInputs",
    "SupportsDeviceModel",
    "SupportsForkCheck",
    "SupportsLocator",
    "SupportsPeaks",
    "SupportsWarmup",
    "device_model_of",
    "fork_hazard_of",
    "locator_of",
    "require_client",
]

T = TypeVar("T")


@runtime_checkable
class Client(Protocol):
    """A device the tuner can time candidates on.

    ``device_id`` must change whenever timings may change (another device, driver or
    library version), because it namespaces every cached winner.
    """

    @property
    def device_id(self) -> str:
        """Stable, specific identity of the device and its software stack."""
        ...

    def profile(self, run: Callable[[], T]) -> tuple[T, float]:
        """Run ``run`` once and return its output and its duration in ns on the device's clock."""
        ...

    def sync(self) -> None:
        """Block until all work submitted to the device has finished."""
        ...


_MEMBERS = ("device_id", "profile", "sync")

CHECKED_CLIENT_TYPES: set[type] = set()
"""Classes that carry every client member themselves, so each of their instances is a client.

``execute`` tests membership here on every call (a set lookup) and runs the full check only
for a class it has not seen, or one whose members live on the instance.
"""


def require_client(client: object, where: str) -> None:
    """Refuse, before any tuning or cache access, an object that is not a ``tk.Client``.

    Checked structurally, like ``isinstance(client, tk.Client)``, but naming what is missing:
    without it a string or a class passed as the client would fail every candidate one by one
    with an ``AttributeError`` and the tune would end in ``NoValidKernelFound``.
    """
    cls = type(client)
    if cls in CHECKED_CLIENT_TYPES:
        return
    if isinstance(client, type):
        raise TypeError(
            f"{where}: the client is the class {client.__name__}, not an instance of it; "
            f"pass {client.__name__}(...) (a tk.Client instance)"
        )
    missing = []
    for name in _MEMBERS:
        if not hasattr(client, name):
            missing.append(name)
        elif name != "device_id" and not callable(getattr(client, name)):
            missing.append(f"a callable {name} (its {name} is {type(getattr(client, name)).__name__})")
    if missing:
        shown = repr(client)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise TypeError(
            f"{where}: the client must be a tk.Client, e.g. tunekit_backends.cpu.CpuClient(); got "
            f"{cls.__name__} {shown}, which lacks {_listed(missing)}. A client provides: device_id (a property: "
            "a stable str naming the device and its software stack), profile(run) -> (output, duration_ns) "
            "and sync() -> None (docs/clients.md)"
        )
    if hasattr(cls, "device_id") and callable(getattr(cls, "profile", None)) and callable(getattr(cls, "sync", None)):
        CHECKED_CLIENT_TYPES.add(cls)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@runtime_checkable
class SupportsCacheFlush(Protocol):
    """Optional: evict the device's caches so a timed sample starts cold."""

    def flush_cache(self) -> None:
        """Overwrite the caches; called outside the timed region."""
        ...


@runtime_checkable
class SupportsColdInputs(Protocol):
    """Optional: cold inputs for each timed sample without a whole-cache flush before each.

    A flush writes twice the last-level cache before every sample, which on a device with a
    large cache costs far more than a small kernel's run. Rotating through copies of the
    inputs gets the same cold start cheaper: between two uses of one copy, the other copies
    (and, when there are too few of them, a slice of the flush buffer) stream at least as many
    bytes through the cache as the flush would. Checked for before ``SupportsCacheFlush``.
    """

    def cold_inputs(self, inputs: tuple[object, ...]) -> Callable[[], tuple[object, ...]] | None:
        """A function returning, at each call, inputs equal to ``inputs`` whose data is out of the caches.

        Called once per tune, outside any timed region; each call of the result is too (it may
        write part of a flush buffer). None: these inputs cannot be copied (an argument the
        client does not know how to copy, or copies that would not fit), and the caller flushes.
        """
        ...


@dataclass(frozen=True, slots=True)
class DevicePeaks:
    """What a device can do at best: the roofline's ceilings and the cost of one launch."""

    ops_per_s: float
    bytes_per_s: float
    launch_overhead_ns: float


@runtime_checkable
class SupportsPeaks(Protocol):
    """Optional: measure the device's peak compute, memory bandwidth and launch overhead."""

    def measure_peaks(self) -> DevicePeaks:
        """Measure (slowly, once); the tuner caches the result per device id."""
        ...


@runtime_checkable
class SupportsWarmup(Protocol):
    """Optional: keep the device busy for a while so its clocks ramp up before timing.

    Without it the schedule warms the device by running the candidates untimed for the
    same wall time. A simulated device implements it to advance its virtual clock instead
    of costing real time.
    """

    def warm_up(self, duration_ns: int) -> int | None:
        """Keep the device busy for up to ``duration_ns``; it may stop early once its speed is steady.

        Returns the time it spent in ns, or None for the whole ``duration_ns``.
        """
        ...


@runtime_checkable
class SupportsLocator(Protocol):
    """Optional: which device of this machine the client is on, where ``device_id`` names only its model.

    Identical devices share a device id by design (their winners are shared), so two of the
    same GPU cannot be told apart by it. A process-isolation worker factory that takes
    ``locator=`` is given the locator of the client that called ``execute``, so it builds its
    client on that very device; the worker checks it did.
    """

    @property
    def locator(self) -> str:
        """Where the device is on this machine, e.g. ``"opencl:platform=0,device=1"``.

        Meaningful only on this machine (an index, a PCI bus id): passed to worker
        processes, never stored with a winner.
        """
        ...


def locator_of(client: object) -> str | None:
    """The client's locator, or None when it does not provide one."""
    return client.locator if isinstance(client, SupportsLocator) else None


@runtime_checkable
class SupportsDeviceModel(Protocol):
    """Optional: the hardware part of ``device_id``, without the software stack.

    ``device_id`` changes with a driver or library upgrade, so that cached winners are
    measured afresh. A committed record is the winners a team chose to keep, though: one
    measured on the same model under another stack is used (with a warning naming both
    stacks) by ``tk.Record.load_verified`` given a client that says its model, instead of
    being refused and re-tuned in production.
    """

    @property
    def device_model(self) -> str:
        """The device's hardware identity: the part of ``device_id`` an upgrade of the software leaves as it is.

        E.g. ``"cpu:<model>:8c:x86_64"`` for ``cpu:<model>:8c:x86_64:numpy-2.1.0:openblas-0.3.27``.
        Two devices of one model must give the same string, and two of different models
        different ones.
        """
        ...


def device_model_of(client: object) -> str | None:
    """The client's device model, or None when it does not say."""
    return client.device_model if isinstance(client, SupportsDeviceModel) else None


@runtime_checkable
class SupportsForkCheck(Protocol):
    """Optional: say whether a worker forked from the calling process can use this client.

    ``isolation="process"`` without a worker factory forks the caller and times candidates with
    the same client object in the child. A device runtime whose state does not survive
    ``fork()`` (OpenCL, CUDA: the driver's threads are not copied) hangs there at the first
    launch, so every candidate would run into its time limit and the tune end in
    ``NoValidKernelFound``; a client that names its hazard is refused before any candidate runs.
    """

    @property
    def fork_hazard(self) -> str | None:
        """Why a forked child cannot use this client (a clause for an error message), or None when it can."""
        ...


def fork_hazard_of(client: object) -> str | None:
    """Why a forked worker cannot use ``client``, or None (also for a client that does not say)."""
    return client.fork_hazard if isinstance(client, SupportsForkCheck) else None
