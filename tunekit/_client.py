"""The client protocol: what a device backend provides to the tuner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["Client", "SupportsCacheFlush"]

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
