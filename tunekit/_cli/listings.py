"""What each listing command prints with ``--json``: pydantic models, their JSON schema published by ``tunekit schema``.

A script reads these instead of parsing a table fitted to a terminal. Each document has a
``schema_version`` and a ``listing`` naming its kind; within one ``schema_version`` fields are
only added. Durations are in nanoseconds, device ids in full beside their short form.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tunekit._values.decision import TuneDecision

__all__ = [
    "LISTINGS",
    "CacheCandidate",
    "CacheEntry",
    "CacheList",
    "CacheShow",
    "CacheStore",
    "CacheWinner",
    "DeviceEntry",
    "DeviceList",
    "KeyFailure",
    "KeySkip",
    "KeySummaryEntry",
    "RecordsSummary",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)  # no additionalProperties: false, so a newer field leaves old readers valid


class _Device(_Model):
    device_id: str = Field(description="The device id in full: the namespace of its cached winners.")
    device_short: str = Field(description="Its short form in tables: the first 24 characters, ~, 6 hex of SHA-256.")


CacheStore = Literal["fleet", "local"]
_STORE = (
    "Which store the winners are from: 'local', this host's own cache file; 'fleet', the PostgreSQL database "
    "TUNEKIT_CACHE_URL names (added within schema_version 1: a document without it is from the local cache)."
)
_WHERE = "The local cache file's path, or the fleet database's URL without its password."


class CacheWinner(_Device):
    """One stored winner, as a line of ``tunekit cache list``."""

    tuner: str
    key: dict[str, Any] = Field(description="The stored (anchored) key's fields.")
    key_text: str = Field(description="The key as the cache stores it: canonical JSON.")
    winner: str
    winner_ns: float | None = Field(description="The winner's time as the deciding stage measured it.")
    decision: TuneDecision | None = Field(description="The figures that decided the winner; None in older rows.")
    tuned_at: datetime


class CacheList(_Model):
    """``tunekit cache list --json``."""

    schema_version: Literal[1] = 1
    listing: Literal["cache list"] = "cache list"
    store: CacheStore = Field("local", description=_STORE)
    cache: str = Field(description=_WHERE)
    winners: list[CacheWinner]
    unreadable: list[str] = Field(description="Why each row that could not be read was left out.")


class CacheCandidate(_Model):
    """One candidate's result in a stored winner's row."""

    name: str
    status: Literal["measured", "failed", "skipped"]
    median_ns: float | None
    samples: int
    note: str = Field(description="What `cache show` says beside it: winner, runner-up, error, why it lost.")


class CacheEntry(CacheWinner):
    """Every candidate's result for one stored key, as a block of ``tunekit cache show``."""

    checksum: str
    tunekit_version: str
    ranking: list[str]
    candidates: list[CacheCandidate]


class CacheShow(_Model):
    """``tunekit cache show TUNER --json``."""

    schema_version: Literal[1] = 1
    listing: Literal["cache show"] = "cache show"
    store: CacheStore = Field("local", description=_STORE)
    cache: str = Field(description=_WHERE)
    entries: list[CacheEntry]
    unreadable: list[str]


class KeyFailure(_Model):
    """A candidate that failed in the latest tune of a key."""

    name: str
    status: str
    stage: str | None
    reason: str


class KeySkip(_Model):
    """A candidate the latest tune of a key did not measure by design."""

    name: str
    reason: str


class KeySummaryEntry(_Device):
    """One tuner and key of a records file, as a line of ``tunekit records summary``."""

    tuner: str
    key: dict[str, Any]
    decisions: int = Field(description="Tunes of this key in the file.")
    winner: str | None
    winner_median_ns: float | None
    runner_up: str | None
    runner_up_median_ns: float | None
    margin: float | None = Field(description="The runner-up's time over the winner's, less one.")
    decided_by: str = Field(description="The deciding stage (runoff, rounds, ...); '-' when nothing was measured.")
    decision: TuneDecision | None
    samples: int
    tuning_time_s: float
    failures: list[KeyFailure]
    skipped: list[KeySkip]
    strategy: str | None = Field(description="The search strategy that chose the winner; None: no search.")
    evaluations: int | None
    stopped_by: str | None


class RecordsSummary(_Model):
    """``tunekit records summary FILE --json``."""

    schema_version: Literal[1] = 1
    listing: Literal["records summary"] = "records summary"
    file: str
    records: int
    bad_lines: int
    keys: list[KeySummaryEntry]
    hit_summaries: int = Field(
        0, description="Cache-hit summary lines (TUNEKIT_COUNT_HITS=1), no records; added within schema_version 1."
    )
    cache_hits: int = Field(0, description="Every hit of those summaries added up.")


class DeviceEntry(_Model):
    """One device a backend found, as a line of ``tunekit devices``; ``unavailable`` says why one could not start."""

    backend: str
    device_id: str | None
    device_short: str | None
    locator: str | None = Field(description="What OpenCLClient(locator=...) takes to open exactly this device.")
    unavailable: str | None = Field(description="Why the backend or device could not start; None when it did.")
    ops_per_s: float | None = Field(description="Measured peak compute; None with --no-peaks or where not measured.")
    bytes_per_s: float | None
    launch_overhead_ns: float | None
    peaks_note: str | None = Field(description="Why no peaks are given (not measurable, failed, --no-peaks).")


class DeviceList(_Model):
    """``tunekit devices --json``."""

    schema_version: Literal[1] = 1
    listing: Literal["devices"] = "devices"
    devices: list[DeviceEntry]


LISTINGS: dict[str, type[BaseModel]] = {
    "cache-list": CacheList,
    "cache-show": CacheShow,
    "records-summary": RecordsSummary,
    "devices": DeviceList,
}
"""The ``--json`` documents by the name ``tunekit schema NAME`` takes."""
