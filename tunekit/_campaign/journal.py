"""The campaign's journal: the jobs finished so far, rewritten atomically as each one finishes.

A campaign run again with the same journal skips the jobs it lists whose winner is still in
their record; every other job runs, and one whose winner the worker's cache already holds is
read back from there, measured nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from tunekit._base.atomic import write_atomic
from tunekit._base.persisted import STORED, Persisted
from tunekit._campaign.result import JobResult
from tunekit._campaign.spec import CampaignError

__all__ = ["DoneJob", "Journal"]


class DoneJob(Persisted):
    """A finished job: where its winner went, and how it was found."""

    record: str = Field(description="The record file its winner was merged into, in the campaign's records directory.")
    key: dict[str, str | int | float | bool | None]
    winner: str
    decision: Literal["tuned", "stored"]
    host: str
    pid: int

    @classmethod
    def of(cls, record: Path, result: JobResult) -> DoneJob:
        """The journal's line for ``result``, whose winner was merged into the file ``record``."""
        entry = result.record.entries[0]
        return cls(
            record=record.name,
            key=dict(entry.key),
            winner=entry.winner,
            decision=result.decision,
            host=result.host,
            pid=result.pid,
        )


class JournalFile(Persisted):
    """The journal on disk."""

    schema_version: Literal[1] = 1
    done: dict[str, DoneJob] = Field(default_factory=dict)


class Journal:
    """The finished jobs by id, loaded from and written back to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, DoneJob] = {}
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise CampaignError(f"cannot read the campaign journal {path}: {exc.strerror or exc}") from None
        try:
            self.done = dict(JournalFile.model_validate_json(data, context=STORED).done)
        except ValidationError:
            raise CampaignError(
                f"{path} is no campaign journal (or another version's); delete it to run every job again"
            ) from None

    def add(self, job_id: str, done: DoneJob) -> None:
        """Note ``job_id`` finished, on disk before this returns."""
        self.done[job_id] = done
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, JournalFile(done=self.done).model_dump_json(indent=1) + "\n")
