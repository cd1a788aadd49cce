"""JobResult: what a worker sends back for a job, as JSON (the winner as a one-entry committed record)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tunekit._base.persisted import Persisted
from tunekit._values.record_file import RecordFile

__all__ = ["JobResult"]


class JobResult(Persisted):
    """One finished job: its winner with the record's provenance, whether it was measured now, and where."""

    schema_version: Literal[1] = 1
    job_id: str
    decision: Literal["tuned", "stored"] = Field(
        description="tuned: measured by this job; stored: the worker's cache already held the winner, nothing measured."
    )
    record: RecordFile = Field(description="The winner as a committed record of one entry (tk.Record's file format).")
    host: str
    pid: int
    seconds: float = Field(ge=0)
