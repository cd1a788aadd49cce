"""AutotuneRecord: one JSON object per tuning decision, the published contract for tools."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from tunekit._benchmark import BenchmarkDurations
from tunekit._outcome import Failed, Measured, Outcome, Skipped
from tunekit._version import __version__

__all__ = [
    "AutotuneRecord",
    "CandidateRecord",
    "CheckResult",
    "Demoted",
    "FallbackBatch",
    "Prepared",
    "RecordEvent",
    "SampleStats",
    "SearchEnded",
]

SCHEMA_VERSION: Literal[1] = 1

JsonScalar = int | float | str | bool | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SampleStats(_Model):
    """Statistics of a candidate's timed samples, all in ns (variance in ns^2)."""

    count: int = Field(ge=0)
    min_ns: float = Field(ge=0)
    median_ns: float = Field(ge=0)
    mean_ns: float = Field(ge=0)
    variance_ns2: float = Field(ge=0)

    @classmethod
    def of(cls, durations: BenchmarkDurations) -> SampleStats:
        """Summarise timed samples."""
        return cls(
            count=len(durations.samples_ns),
            min_ns=durations.min_ns,
            median_ns=durations.median_ns,
            mean_ns=durations.mean_ns,
            variance_ns2=durations.variance_ns2,
        )


class CandidateRecord(_Model):
    """One candidate's part in a decision: its status, samples and, if it failed, why."""

    name: str
    status: Literal["measured", "failed", "skipped"]
    batch: int = Field(ge=0, description="Index of the plan batch the candidate belonged to.")
    stats: SampleStats | None = None
    samples_ns: list[int] = Field(default_factory=list)
    stage: str | None = Field(None, description="For a failure: compile, check, run, timeout or crash.")
    error: str | None = None

    @classmethod
    def of(cls, name: str, batch: int, outcome: Outcome) -> CandidateRecord:
        """The record of ``outcome``."""
        match outcome:
            case Measured(durations):
                return cls(
                    name=name,
                    status="measured",
                    batch=batch,
                    stats=SampleStats.of(durations),
                    samples_ns=list(durations.samples_ns),
                )
            case Failed(reason, stage):
                return cls(name=name, status="failed", batch=batch, stage=stage, error=reason)
            case Skipped(reason):
                return cls(name=name, status="skipped", batch=batch, error=reason)


class FallbackBatch(_Model):
    """Every candidate of the batches before ``batch`` failed, so the next tier ran."""

    kind: Literal["fallback"] = "fallback"
    batch: int


class Demoted(_Model):
    """A cached winner raised on real inputs; the next-ranked candidate took its place."""

    kind: Literal["demoted"] = "demoted"
    name: str
    error: str
    replacement: str | None


class CacheRecovered(_Model):
    """A cache row or file was unreadable and was discarded; the key was re-tuned."""

    kind: Literal["cache_recovered"] = "cache_recovered"
    detail: str


class SearchEnded(_Model):
    """A search over a declared space finished: how, and which limit ended it."""

    kind: Literal["search"] = "search"
    strategy: str
    seed: int
    space_hash: str
    evaluations: int = Field(ge=0, description="Distinct configurations evaluated, resumed ones included.")
    resumed: int = Field(ge=0, description="Trials answered from the trial log of an earlier run.")
    stopped_by: Literal["max_evals", "max_seconds", "exhausted", "objective_budget"]
    strategy_seconds: float = Field(ge=0, description="Time the strategy itself took to propose and learn.")


class CheckResult(_Model):
    """One candidate's correctness check, run once before any timing."""

    kind: Literal["check"] = "check"
    name: str
    passed: bool
    against: str = Field(
        description="'reference' (the set's reference function) or the name of the baseline candidate."
    )
    detail: str = Field(description="What was compared and, on failure, where the worst element is.")
    max_abs_error: float | None = None
    max_rel_error: float | None = None


class Prepared(_Model):
    """The prepare (compile) phase of a batch: every candidate's hook run concurrently before timing."""

    kind: Literal["prepare"] = "prepare"
    batch: int
    candidates: int = Field(ge=0)
    failed: int = Field(ge=0)
    workers: int = Field(ge=1)
    wall_time_s: float = Field(ge=0)


RecordEvent = Annotated[
    FallbackBatch | Demoted | CacheRecovered | CheckResult | Prepared | SearchEnded, Field(discriminator="kind")
]


class AutotuneRecord(_Model):
    """One tuning decision. ``model_json_schema()`` is the published contract.

    ``decision`` says what happened: ``tuned`` (candidates measured), ``disabled``
    (autotuning off: the first planned candidate was taken unmeasured) or ``demoted``
    (a cached winner failed at launch and was replaced).
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    tunekit_version: str = __version__
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    tuner: str
    device_id: str
    key: dict[str, JsonScalar]
    checksum: str
    decision: Literal["tuned", "disabled", "demoted"]
    candidates: list[CandidateRecord] = Field(default_factory=list)
    winner: str | None
    stored: bool = Field(description="Whether the winner was written to the persistent cache.")
    wall_time_s: float = Field(ge=0, description="Wall time of the whole decision, in seconds.")
    events: list[RecordEvent] = Field(default_factory=list)
