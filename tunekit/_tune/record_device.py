"""The device a committed record was measured on, against the one it is to serve.

A client's ``device_id`` names the hardware and the software stack (driver, numpy, BLAS),
because a cached winner must be measured afresh whenever timings may move. A committed
record is different: it is the winners a team chose to keep, and another driver or numpy on
the same hardware only shifts timings (rarely, the winner). So a record is refused only on
another device *model* (``tunekit.backend.SupportsDeviceModel``); on the same model under another stack it
is used, with a warning that names both stacks and says how to refresh it. A record or a
caller that does not say its model keeps the exact-id check.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from tunekit._measure.client import Client, device_model_of

__all__ = [
    "RunningDevice",
    "UnverifiedSeeds",
    "device_refusal",
    "running_device",
    "stack_drift",
    "unverified_elsewhere",
]

_log = logging.getLogger("tunekit.tuner")


@dataclass(frozen=True, slots=True)
class RunningDevice:
    """The running device's id and, when its client says it, its model."""

    id: str
    model: str | None


def running_device(where: str, device: object) -> RunningDevice:
    """The device ``device`` (a client, or a client's ``device_id``) stands for, checked."""
    if isinstance(device, str) and device:
        return RunningDevice(device, None)
    if not isinstance(device, type) and isinstance(device, Client):
        device_id, model = device.device_id, device_model_of(device)
        if not isinstance(device_id, str) or not device_id:
            raise TypeError(_not_a_name(where, "device_id", device_id, device))
        # An empty model would equal another client's empty one, and take a record of that other device.
        if model is not None and (not isinstance(model, str) or not model):
            raise TypeError(_not_a_name(where, "device_model", model, device))
        return RunningDevice(device_id, model)
    raise TypeError(
        f"{where}(device_id=...) takes the client (a tk.Client) or its device_id (a non-empty str), got {device!r}"
    )


def _not_a_name(where: str, member: str, value: object, client: object) -> str:
    return f"{where}: the client's {member} must be a non-empty str, got {value!r} from {type(client).__name__}"


def device_refusal(measured_on: str, measured_model: str | None, running: RunningDevice) -> str | None:
    """Why a record measured on ``measured_on`` does not apply to ``running``; None when it does."""
    if measured_on == running.id:
        return None
    if measured_model is not None and running.model is not None:
        if measured_model == running.model:
            return None
        return (
            f"it was measured on device model {measured_model!r} (device {measured_on!r}), this is model "
            f"{running.model!r} (device {running.id!r})"
        )
    why = f"it was measured on device {measured_on!r}, this is {running.id!r}"
    if measured_model is not None:
        why += (
            f" (the record was measured on device model {measured_model!r}: to use it on that model under "
            "another software stack, pass the running client, which says its model, instead of its device_id)"
        )
    elif running.model is not None:
        why += (
            " (the record does not say its device model, as records written before they kept it do not, so only "
            "its exact device id is taken)"
        )
    return why


def stack_drift(measured_on: str, running: RunningDevice) -> str | None:
    """The warning for a record of ``running``'s model measured under another stack; None on the same device id."""
    if measured_on == running.id:
        return None
    return (
        f"measured on {measured_on!r}, running on {running.id!r}: the same device model ({running.model!r}) under "
        "another software stack (driver or library versions), which shifts timings and can, rarely, change the "
        "winner; its winners are used here as they are; to refresh them, re-tune on this stack and commit the new "
        "record (tk.Record.for_tunables(tuner, client, tunables))"
    )


def unverified_elsewhere(tuner: str, seeded: dict[str, str | None], running: RunningDevice) -> str:
    """Why the winners of records seeded unverified (``seeded``: device id -> model) do not serve ``running``.

    ``Record.seed`` of a plain ``Record.load`` installs the winners for the device the record
    was measured on, the only one it knows. Run on another device id, the operation tunes its
    keys there; without this reason it would do so without a word, though the record may be of the
    same model under another stack, which ``load_verified`` moves to the running device.
    """
    ids = ", ".join(map(repr, seeded))
    said = (
        f"tuner {tuner!r}: the committed winners seeded into it (tk.Record.load, not verified) serve device {ids}, "
        f"and it runs on {running.id!r}, so its keys are tuned here"
    )
    models = {model for model in seeded.values() if model is not None}
    if running.model is not None and models and running.model not in models:
        return said + (
            f"; the record was measured on another device model ({', '.join(map(repr, sorted(models)))}, this is "
            f"{running.model!r}): commit a record measured on this one (tk.Record.for_tunables(tuner, client, "
            "tunables))"
        )
    return said + (
        "; to use a record of this device model measured under another software stack here, load it with "
        "tk.Record.load_verified(path, tunables, client, tuner=...) before seed, which installs its winners for "
        "the running client's device id (and refuses another model's)"
    )


class UnverifiedSeeds:
    """The device ids that an operation's winners seeded from unverified records serve, and who was told.

    ``Record.seed`` of a plain ``Record.load`` installs the winners for the device the record was
    measured on (``add``). Run on another device id, the operation tunes its keys there, and
    ``warn_unserved`` says why, once per device id.
    """

    def __init__(self, tuner: str) -> None:
        self._tuner = tuner
        self._lock = threading.Lock()
        self._served: dict[str, str | None] = {}
        """Device id -> model, of each device the seeded records were measured on."""
        self._told: set[str] = set()

    def add(self, device_id: str, device_model: str | None) -> None:
        """Note that an unverified record's winners were installed for ``device_id`` only."""
        with self._lock:
            self._served[device_id] = device_model

    def warn_unserved(self, device_id: str, client: Client) -> None:
        """Warn, once per device id, when the seeded winners do not serve ``device_id``.

        Called at each key not in memory, not only at a device's first call: a record seeded
        into a tuner that has already run on another device is still told about there.
        """
        if not self._served or device_id in self._served or device_id in self._told:
            return
        with self._lock:
            if device_id in self._told:
                return
            self._told.add(device_id)
            seeded = dict(self._served)
        _log.warning("%s", unverified_elsewhere(self._tuner, seeded, RunningDevice(device_id, device_model_of(client))))

    def clear(self) -> None:
        """Forget every seed and every warning given."""
        with self._lock:
            self._served.clear()
            self._told.clear()
