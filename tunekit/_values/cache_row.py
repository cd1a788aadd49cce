"""A stored winner: the JSON value kept per key, and a row with its namespace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from tunekit._base.persisted import Persisted
from tunekit._base.version import __version__
from tunekit._values.decision import TuneDecision
from tunekit._values.set_origin import SetOrigin

__all__ = ["CacheRow", "CacheValue", "CandidateResult"]


class CandidateResult(Persisted):
    """What was measured for one candidate, kept for reports and demotion."""

    name: str = Field(max_length=1000)
    status: Literal["measured", "failed", "skipped"]
    median_ns: float | None = Field(None, ge=0)
    samples: int = Field(0, ge=0)
    error: str | None = Field(None, max_length=10_000)


class CacheValue(Persisted):
    """The JSON stored per key.

    ``ranking`` lists the measured candidates fastest first, so a winner that fails at
    launch can be replaced by the runner-up without re-tuning. ``results`` is never read
    back by the tuner; it is kept so ``tunekit cache show`` can say why a winner won.
    """

    schema_version: Literal[1] = 1
    winner: str = Field(max_length=1000)
    ranking: list[str] = Field(max_length=100_000)
    results: list[CandidateResult] = Field(default_factory=list, max_length=100_000)
    tunekit_version: str = __version__
    tuned_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    origin: SetOrigin | None = None
    """Where the set that measured the row was defined. Never used to pick a winner: it tells a
    process whose set has another checksum whether the set was edited or another operation shares
    the tuner name (``tunekit._tune.stale``). None in rows stored by a tunekit that did not keep it:
    such a row counts as an edit."""
    decision: TuneDecision | None = None
    """The figures that decided the winner (its estimate, the runner-up's, the margin, the stage), for
    ``tunekit cache show``, which has no samples to derive them from. Never used to pick a winner;
    None in rows stored before it was kept, and in rows of a decision that measured nothing."""


@dataclass(frozen=True, slots=True)
class CacheRow:
    """One stored winner with its namespace."""

    device_id: str
    tuner: str
    key: str
    checksum: str
    value: CacheValue
