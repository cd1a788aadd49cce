"""The trial log's lines: a header naming the search, then one entry per evaluated configuration."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from tunekit._base.persisted import JsonScalar, Persisted
from tunekit._base.version import __version__
from tunekit._candidates.config import ParamValue
from tunekit._candidates.space_model import SpaceModel

__all__ = ["TrialEntry", "TrialLogHeader"]


class TrialLogHeader(Persisted):
    """The first line: what the trials below were measured for."""

    kind: Literal["header"] = "header"
    schema_version: Literal[1] = 1
    tuner: str
    key: dict[str, JsonScalar] | None = None
    device_id: str
    space_hash: str
    space: SpaceModel
    build: str | None = Field(
        None,
        description="A digest of tk.search's build code: a log measured with other kernels is refused. None where "
        "the search has no build (tk.tune_objective), or in logs written before it was kept (resumed as before).",
    )
    tunekit_version: str = __version__
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))


class TrialEntry(Persisted):
    """One evaluated configuration: its samples (ns) when measured, its reason when it failed.

    Version 2 adds the batch the trial was measured in and that batch's size: the adaptive
    schedule eliminates candidates against their batchmates, so a resume re-measures a batch
    the kill left unfinished as a whole, with the same batchmates, rather than the part that
    was not written. Version 1 entries (no batch) are read as finished.
    """

    kind: Literal["trial"] = "trial"
    schema_version: Literal[1, 2] = 2
    config: dict[str, ParamValue]
    status: Literal["measured", "failed", "skipped"]
    samples_ns: list[int] = Field(default_factory=list)
    score_ns: float | None = Field(None, ge=0, description="Median sample: lower is better.")
    stage: str | None = None
    error: str | None = None
    elapsed_s: float = Field(
        0.0, ge=0, description="Seconds the search had run when the trial was written, earlier runs' included."
    )
    batch: int | None = Field(None, ge=0, description="Which measured batch of this log the trial was in.")
    batch_size: int | None = Field(None, ge=1, description="How many trials that batch measured.")


_LINE: TypeAdapter[TrialLogHeader | TrialEntry] = TypeAdapter(
    Annotated[TrialLogHeader | TrialEntry, Field(discriminator="kind")]
)
