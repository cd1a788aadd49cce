"""How each key's winner and its time changed across runs and devices: the report's history view.

A run is a records file, or a tune of the key within one growing file; every ``tuned`` decision
of a key is one point of its history, in the order of the records' timestamps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from tunekit._values.decision import decision_of
from tunekit._values.records import AutotuneRecord

__all__ = ["HistoryPoint", "KeyHistory", "history"]


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One tune of a key: where it was read from, when, on which device, who won, in how long."""

    source: str
    timestamp: datetime
    device_id: str
    winner: str | None
    winner_ns: float | None
    margin_text: str
    stage_text: str
    changed: bool
    """The winner differs from the previous tune of this key on the same device."""


@dataclass(frozen=True, slots=True)
class KeyHistory:
    """Every tune of one key of one tuner, on any device, oldest first."""

    tuner: str
    key_json: str
    points: tuple[HistoryPoint, ...]

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices the key was tuned on, in the order they first appear."""
        return tuple(dict.fromkeys(p.device_id for p in self.points))

    @property
    def winners(self) -> tuple[str, ...]:
        """The distinct winners, in the order they first won."""
        return tuple(dict.fromkeys(p.winner for p in self.points if p.winner is not None))


def history(records: Iterable[tuple[str, AutotuneRecord]]) -> list[KeyHistory]:
    """The history of every key tuned more than once among ``(source, record)`` pairs, by tuner then key."""
    tunes: dict[tuple[str, str], list[tuple[str, AutotuneRecord]]] = {}
    for source, record in records:
        if record.decision == "tuned":
            key_json = json.dumps(record.key, sort_keys=True, separators=(",", ":"))
            tunes.setdefault((record.tuner, key_json), []).append((source, record))
    histories: list[KeyHistory] = []
    for (tuner, key_json), found in sorted(tunes.items()):
        if len(found) < 2:
            continue
        found.sort(key=lambda pair: pair[1].timestamp)
        last_winner: dict[str, str | None] = {}
        points: list[HistoryPoint] = []
        for source, record in found:
            decision = decision_of(record)
            device = record.device_id
            changed = device in last_winner and last_winner[device] != record.winner
            last_winner[device] = record.winner
            points.append(
                HistoryPoint(
                    source=source,
                    timestamp=record.timestamp,
                    device_id=device,
                    winner=record.winner,
                    winner_ns=decision.winner_ns if decision is not None else None,
                    margin_text=decision.margin_text if decision is not None else "-",
                    stage_text=decision.stage_text if decision is not None else "-",
                    changed=changed,
                )
            )
        histories.append(KeyHistory(tuner, key_json, tuple(points)))
    return histories
