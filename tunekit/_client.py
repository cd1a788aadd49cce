"""The client protocol: what a device backend provides to the tuner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["Client", "DevicePeaks", "SupportsCacheFlush", "SupportsPeaks", "SupportsWarmup"]

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

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run`` once and return its output and its duration in ns on the device's clock."""
        ...

    def sync(self) -> None:
        """Block until all work submitted to the device has finished."""
        ...


@runtime_checkable
class SupportsCacheFlush(Protocol):
    """Optional: evict the device's caches so a timed sample starts cold."""

    def flush_cache(self) -> None:
        """Overwrite the caches; called outside the timed region."""
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
