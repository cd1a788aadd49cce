"""Simulated devices: two with different device ids, two identical ones, and worker factories for them (test_worker.py).

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


class IdenticalDevice(CpuClient):
    """The host CPU posing as slot ``slot`` of a machine with two identical devices: one device id, two locators."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    @property
    def device_id(self) -> str:
        """The model's id, the same in every slot."""
        return "sim-identical-model"

    @property
    def locator(self) -> str:
        """Which slot."""
        return f"sim-slot:{self.slot}"


SLOTS = {device.locator: device for device in (IdenticalDevice(0), IdenticalDevice(1))}


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


def build_located(
    key: dict[str, Any], *, device_id: str, locator: str | None
) -> tuple[IdenticalDevice, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """The tune for the device at ``locator``."""
    assert locator is not None and SLOTS[locator].device_id == device_id
    return SLOTS[locator], SET, (int(key["n"]),)


def build_located_only(key: dict[str, Any], locator: str | None) -> Any:
    """locator as an ordinary parameter, without device_id."""
    return build_located(key, device_id="sim-identical-model", locator=locator)


def build_first_slot(key: dict[str, Any], *, device_id: str) -> Any:
    """Told only the device id, it can only build the first device of that model."""
    return SLOTS["sim-slot:0"], SET, (int(key["n"]),)


def build_default(key: dict[str, Any]) -> tuple[SimulatedDevice, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """A factory that takes only the key's fields: it can only build for its default device."""
    return DEVICES["sim-device:0"], SET, (int(key["n"]),)


def build_positional(key: dict[str, Any], device_id: str) -> Any:
    """device_id as an ordinary parameter: passed by keyword all the same."""
    return build(key, device_id=device_id)


def build_any(key: dict[str, Any], **options: Any) -> Any:
    """A factory taking any keywords (a wrapper forwarding them) is called the original way, without device_id."""
    return build(key, device_id=options.get("device_id", "sim-device:0"))


def build_locator_positional_only(key: dict[str, Any], locator: str | None = None, /) -> Any:
    """A locator the worker cannot pass by keyword: called without it."""
    return build_default(key)


def build_two_fields(key: dict[str, Any], shape: tuple[int, ...]) -> Any:
    """Needs a second argument the worker never gives."""
    return build_default(key)


def build_nothing() -> Any:
    """Takes no key fields."""
    return build_default({"n": 1})
