"""The fields of a committed record's entry: from a search's result, or from the record of a tune ``execute`` ran.

Each is checked against the record first: a search or tune of another tuner, device, key,
space or set of candidates answers another question than the record's, and is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tunekit._base.errors import RecordMismatch
from tunekit._candidates.config import Config
from tunekit._candidates.space_model import space_difference
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import key_to_json
from tunekit._search.result import SearchResult
from tunekit._tune.record_checks import Provenance
from tunekit._values.outcome import Measured
from tunekit._values.records import AutotuneRecord, SearchEnded

__all__ = ["from_search", "from_tune"]


def from_search(
    record: Provenance, key: object, result: SearchResult, runners_up: int, name_of: Callable[[Config], str]
) -> dict[str, Any]:
    """The entry fields of a search's result; ``name_of`` names a configuration as the record's set does."""
    if result.tuner != record.tuner or result.device_id != record.device_id:
        raise RecordMismatch(_not_measured_here(record, "search", result.tuner, result.device_id))
    if result.key is not None and result.key != key:
        # A loop that searched one key and added another would commit a winner for a size it was
        # never measured at, which load_verified cannot see.
        raise RecordMismatch(
            f"the search ran for key {result.key!r}, not {key!r}; add it under its own key: "
            "record.add(result.key, result)"
        )
    if record.space_hash is not None and result.space.hash != record.space_hash:
        changed = f" ({space_difference(record.space, result.space.describe())})" if record.space is not None else ""
        raise RecordMismatch(
            f"the search ran over space {result.space.hash}; this record is for {record.space_hash}{changed}"
        )
    ranking = result.ranking
    if not ranking:
        raise ValueError(f"the search for {key!r} measured nothing successfully; there is no winner to record")
    best = ranking[0]
    if not isinstance(best.outcome, Measured):
        raise AssertionError("ranking holds measured trials only")
    durations = best.outcome.durations
    return dict(
        ranking=[name_of(t.config) for t in ranking[: 1 + runners_up]],
        config=best.config.to_dict(),
        median_ns=durations.score,
        samples=len(durations.samples_ns),
        strategy=result.strategy,
        evaluations=result.evaluations,
        stopped_by=result.stopped_by,
    )


def from_tune(
    record: Provenance, tunables: TunableSet[Any, Any] | None, key: object, tune: AutotuneRecord, runners_up: int
) -> dict[str, Any]:
    """The entry fields of the record of a tune ``execute`` ran (a search inside it, or a plain tune).

    ``tunables``: the set the record was made for, whose winner's configuration the entry shows; None: not known.
    """
    if tune.tuner != record.tuner or tune.device_id != record.device_id:
        raise RecordMismatch(_not_measured_here(record, "tune", tune.tuner, tune.device_id))
    if tune.key != json.loads(key_to_json(key)):
        # Built again here, the key anchors at the running level: a tune at another one lands elsewhere.
        raise RecordMismatch(
            f"the tune's key {tune.key} is no key bucket here, where it builds {key!r}: it was tuned at another "
            "autotune level, or the key's anchors changed; tune again at this level"
        )
    if tune.checksum != record.checksum:
        # A tk.search record carries its space's hash here: it is added as its SearchResult.
        raise RecordMismatch(
            f"the tune measured a set of checksum {tune.checksum}, this record's candidates have {record.checksum}: "
            "add tunes of the set the record was made for (tk.Record.for_tunables(tuner, device_id, tunables)); "
            "a tk.search is added as the SearchResult it returned"
        )
    measured = {c.name: c for c in tune.candidates if c.status == "measured" and c.stats is not None}
    winner = measured.get(tune.winner) if tune.decision == "tuned" and tune.winner is not None else None
    if winner is None or winner.stats is None:
        raise ValueError(
            f"the {tune.decision!r} record of {tune.key} has no measured winner to commit "
            f"(winner {tune.winner!r}); add the record of a tune that measured its candidates"
        )
    rest = sorted((c for c in measured.values() if c is not winner), key=lambda c: c.stats.median_ns if c.stats else 0)
    ended = next((e for e in tune.events if isinstance(e, SearchEnded)), None)
    fn = tunables.tunables[i].fn if tunables and (i := tunables.index_of(winner.name)) is not None else None
    config = getattr(fn, "config", None)
    return dict(
        ranking=[winner.name, *(c.name for c in rest[:runners_up])],
        config=config.to_dict() if isinstance(config, Config) else None,
        median_ns=winner.stats.median_ns,
        samples=len(winner.samples_ns),
        strategy=ended.strategy if ended else None,
        evaluations=ended.evaluations if ended else None,
        stopped_by=ended.stopped_by if ended else None,
        measured_at=tune.timestamp,
    )


def _not_measured_here(record: Provenance, what: str, tuner: str, device_id: str) -> str:
    """Why a search or tune of ``tuner`` on ``device_id`` is not added to this record."""
    said = f"the {what} ran for tuner {tuner!r} on {device_id!r}; this record is for tuner {record.tuner!r} on "
    said += repr(record.device_id)
    if tuner == record.tuner and device_id == record.running_device_id:
        # Added, its winner would be saved as measured under the record's stack: a record names one stack for all.
        said += (
            ", the same device model under another software stack: one record holds winners measured under one "
            "stack, so re-tune its keys here into a new record (tk.Record.for_tunables(tuner, client, tunables)) "
            "to refresh it"
        )
    return said
