"""Two simulated devices with different device ids, and worker factories for them (see test_worker.py).

At module level so that a spawned worker can import the factories by name.
"""

from __future__ import annotations

import time
from typing import Any

import tunekit as tk
from tunekit_backends.cpu import CpuClient


class SimulatedDevice(CpuClient):
    """The host CPU posing as device number ``index`` of a machine with several different devices."""

    def __init__(self, index: int) -> None:
        self.index = index

    @property
    def device_id(self) -> str:
        """One id per simulated device."""
        return f"sim-device:{self.index}"


DEVICES = {device.device_id: device for device in (SimulatedDevice(0), SimulatedDevice(1))}


@tk.autotune_key
class NKey:
    n: int


def _short(n: int) -> int:
    time.sleep(0.0005)
    return n


def _long(n: int) -> int:
    time.sleep(0.002)
    return n


SET: tk.TunableSet[NKey, int] = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
    [tk.Tunable("long", _long), tk.Tunable("short", _short)]
)


def build(key: dict[str, Any], *, device_id: str) -> tuple[SimulatedDevice, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """The tune for the device ``device_id``."""
    return DEVICES[device_id], SET, (int(key["n"]),)


def build_default(key: dict[str, Any]) -> tuple[SimulatedDevice, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """A factory that takes only the key's fields: it can only build for its default device."""
    return DEVICES["sim-device:0"], SET, (int(key["n"]),)


def build_positional(key: dict[str, Any], device_id: str) -> Any:
    """device_id as an ordinary parameter: passed by keyword all the same."""
    return build(key, device_id=device_id)


def build_any(key: dict[str, Any], **options: Any) -> Any:
    """A factory taking any keywords (a wrapper forwarding them) is called the original way, without device_id."""
    return build(key, device_id=options.get("device_id", "sim-device:0"))


def build_two_fields(key: dict[str, Any], shape: tuple[int, ...]) -> Any:
    """Needs a second argument the worker never gives."""
    return build_default(key)


def build_nothing() -> Any:
    """Takes no key fields."""
    return build_default({"n": 1})
