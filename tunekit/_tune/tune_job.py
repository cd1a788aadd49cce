"""TuneJob: one key's tune, the values each of its steps reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tunekit._base.settings_model import Settings
from tunekit._candidates.tunable_set import TunableSet
from tunekit._measure.client import Client
from tunekit._store.cache import PersistentCache
from tunekit._store.store_protocol import Store
from tunekit._values.records import RecordEvent

__all__ = ["TuneJob"]


@dataclass(frozen=True, slots=True)
class TuneJob:
    """What ``Tuner.resolve`` hands to each step of one key's tune: made once, read everywhere.

    ``settings`` are those in force when the call began: each step reads them here, so all see the
    same ones. ``events`` is the one mutable part: the steps append what the tune's record tells,
    in the order it happens; ``phase_s`` adds up where the time went.
    """

    tuner: str
    device_id: str
    client: Client
    tunables: TunableSet[Any, Any]
    key: object
    key_json: str
    inputs: tuple[Any, ...]
    settings: Settings
    cache: PersistentCache | None
    """Where the winner is written through to; None with the cache off, or autotuning off (nothing is written)."""
    fleet: Store | None = None
    """The store a fleet shares (``TUNEKIT_CACHE_URL``), read and locked before ``cache``; None without one."""
    events: list[RecordEvent] = field(default_factory=list)
    phase_s: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase of the tune (``compile``, ``check``, ``warmup``, ``measure``, ``runoff``), summed
    over its batches: mutable like ``events``, for the record's ``phases``."""

    def add_phase(self, phase: str, seconds: float) -> None:
        """Count ``seconds`` of wall time to ``phase``."""
        self.phase_s[phase] = self.phase_s.get(phase, 0.0) + seconds

    @property
    def where(self) -> str:
        """How messages name the tuner."""
        return f"tuner {self.tuner!r}"
