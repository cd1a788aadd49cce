"""Roofline bounds: how fast an operation could possibly run, and the time that counts as good enough.

A candidate that reaches a set fraction of the device's peak on the resource that binds the
operation (compute or memory) cannot be beaten by much, so the rest of its batch need not be
measured. This is CubeCL's short circuit: it saves whole batches of slow candidates on large
problems where one good kernel is obvious.
"""

from __future__ import annotations

import threading
from typing import Any

from tunekit._base.errors import TunekitError
from tunekit._candidates.roofline import Bounds, Thresholds
from tunekit._candidates.tunable_set import BoundsFn
from tunekit._measure.client import Client, DevicePeaks, SupportsPeaks

__all__ = ["clear_peaks", "device_peaks", "time_limit_ns"]


_peaks_lock = threading.Lock()
_peaks: dict[str, DevicePeaks] = {}


def device_peaks(client: Client) -> DevicePeaks | None:
    """The client's peaks, measured once per device id per process; None when it cannot measure them."""
    if not isinstance(client, SupportsPeaks):
        return None
    device = client.device_id
    peaks = _peaks.get(device)
    if peaks is None:
        # Measured outside the lock: it is slow, and two threads measuring once each is harmless.
        measured = client.measure_peaks()
        with _peaks_lock:
            peaks = _peaks.setdefault(device, measured)
    return peaks


def clear_peaks() -> None:
    """Forget every cached device peak (tests, or after a driver change)."""
    with _peaks_lock:
        _peaks.clear()


def time_limit_ns(
    bounds_fn: BoundsFn | None, key: object, inputs: tuple[Any, ...], client: Client, fraction: float | None, owner: str
) -> float | None:
    """The short-circuit limit for ``key`` in ns, or None when there is none.

    None when the set has no bounds function, the level never short-circuits, or the client
    cannot measure its peaks. A bounds function that raises or returns something else than
    ``tk.Bounds`` is a programming error and is reported naming the tuner.
    """
    if bounds_fn is None or fraction is None:
        return None
    peaks = device_peaks(client)
    if peaks is None:
        return None
    try:
        bounds = bounds_fn(key, inputs)
    except Exception as exc:
        raise TunekitError(f"tuner {owner!r}: the bounds function raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(bounds, Bounds):
        raise TunekitError(
            f"tuner {owner!r}: the bounds function returned {type(bounds).__name__}; it must return tk.Bounds"
        )
    return bounds.limit_ns(Thresholds.uniform(fraction), peaks)
