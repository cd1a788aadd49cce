"""A committed record's file: the winner of each key bucket with where and how it was measured."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field, model_validator

from tunekit._base.persisted import JsonScalar, Persisted
from tunekit._base.settings import AutotuneLevel
from tunekit._base.version import __version__
from tunekit._candidates.config import ParamValue
from tunekit._candidates.space_model import SpaceModel

__all__ = ["RecordEntry", "RecordFile", "entry_key"]


class RecordEntry(Persisted):
    """The winner of one key bucket, with what was measured for it."""

    key: dict[str, JsonScalar]
    winner: str
    config: dict[str, ParamValue] | None = None
    ranking: list[str] = Field(description="Fastest first; the runners-up replace a winner that fails at launch.")
    median_ns: float = Field(ge=0)
    samples: int = Field(ge=0)
    strategy: str | None = None
    evaluations: int | None = Field(None, ge=0)
    stopped_by: str | None = None
    measured_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @model_validator(mode="after")
    def _winner_leads(self) -> RecordEntry:
        # seed() installs the ranking as it stands, so a winner other than ranking[0] would be
        # checked on load and then silently replaced by ranking[0] in production.
        if not self.ranking or self.ranking[0] != self.winner:
            first = repr(self.ranking[0]) if self.ranking else "nothing (it is empty)"
            raise ValueError(
                f"entry {self.key}: winner {self.winner!r} must be ranking[0], which is {first}; "
                "put the winner first in its ranking (or re-tune)"
            )
        return self


class RecordFile(Persisted):
    """The whole committed file."""

    schema_version: Literal[1] = 1
    tuner: str
    device_id: str
    device_model: str | None = Field(
        None,
        description="The hardware part of device_id (tunekit.backend.SupportsDeviceModel), without the software stack: "
        "a record of the same model under another driver or numpy is used, with a warning. None when the client "
        "that made the record does not say its model, or in records written before it was kept: then only "
        "device_id is taken.",
    )
    checksum: str = Field(description="TunableSet.checksum() of the candidates the winners were chosen from.")
    space_hash: str | None = None
    space: SpaceModel | None = Field(
        None,
        description="The space searched (parameter names and values, restriction identities), kept so that a "
        "record refused for an edited space says what changed, not only two hashes. None for a set made without "
        "a space, or in records written before it was kept.",
    )
    tunekit_version: str = __version__
    autotune_level: AutotuneLevel | None = Field(
        None,
        description="The autotune_level the keys were anchored at: its buckets are the keys' meaning. "
        "None in records written before it was kept.",
    )
    anchored_fields: list[str] | None = Field(
        None,
        description="The key class's anchored fields: [] means the keys are the same buckets at every autotune_level. "
        "None when no entry was added yet, or in records written before it was kept.",
    )
    entries: list[RecordEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_entry_per_key(self) -> RecordFile:
        # Read into a dict by key, the later of two entries would silently win: a record merged by
        # hand (two branches each adding the key) would serve whichever came last in the file.
        first: dict[str, int] = {}
        for index, entry in enumerate(self.entries):
            if (seen := first.setdefault(entry_key(entry), index)) != index:
                raise ValueError(
                    f"entries {seen} and {index} are both for key {entry.key} (winners {self.entries[seen].winner!r} "
                    f"and {entry.winner!r}); keep one entry per key (or re-tune the key)"
                )
        return self


def entry_key(entry: RecordEntry) -> str:
    """The same canonical JSON as ``key_to_json``, from the stored dict."""
    return json.dumps(entry.key, sort_keys=True, separators=(",", ":"))
