"""Campaign: tune a declared list of jobs on a Ray cluster, merged into committed records, resumable."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tunekit._base.counted import counted
from tunekit._base.errors import describe_error
from tunekit._campaign.fleet import run_on_ray
from tunekit._campaign.job import CampaignJob
from tunekit._campaign.journal import DoneJob, Journal
from tunekit._campaign.merge import RecordMerger, holds
from tunekit._campaign.progress import CampaignProgress
from tunekit._campaign.result import JobResult
from tunekit._campaign.spec import CampaignError, read_campaign_file
from tunekit._campaign.target import load_target

__all__ = ["Campaign", "CampaignResult"]

JOURNAL_NAME = ".campaign-journal.json"


@dataclass(frozen=True)
class CampaignResult:
    """What a run did: the jobs it finished, those the journal had finished before, those that failed."""

    finished: tuple[JobResult, ...]
    """The jobs this run finished, in the order they finished."""
    skipped: tuple[CampaignJob, ...]
    """Jobs an earlier run had finished, whose winners are still in their records: not run again."""
    failed: tuple[tuple[CampaignJob, str], ...]
    """Jobs that raised (or whose worker died more often than ``max_retries``), with why."""
    records: tuple[Path, ...]
    """The record files this run wrote to."""
    seconds: float

    @property
    def tuned(self) -> int:
        """Jobs that measured their candidates in this run."""
        return sum(r.decision == "tuned" for r in self.finished)

    @property
    def stored(self) -> int:
        """Jobs whose winner a worker's cache already held: nothing measured."""
        return sum(r.decision == "stored" for r in self.finished)


@dataclass(frozen=True)
class Campaign:
    """A list of tunes to run before a release, each on a Ray worker that has its device kind.

    Each job tunes a ``tk.CampaignTarget`` (named by import path) for one shape on one
    device kind, with the operation's own ``execute`` on the worker: same cache, records,
    isolation and decision as a production call. Every winner is merged into
    ``records/<tuner>.<device kind>.json`` (a ``tk.Record`` file, for ``tk.Record.load_verified``)
    as its job finishes, and noted in the journal ``state``. Run again, a campaign skips the
    jobs the journal lists; a job whose winner a worker's cache holds measures nothing.

    Everything that can be checked here is, at construction: each target imports and is a
    ``tk.CampaignTarget``, knows the job's device kind, and each shape gives its fields.

    Args:
        jobs: the tunes, one ``tk.CampaignJob`` per target, device kind and shape.
        records: the directory the merged records are written to.
        state: the journal file (default ``records/.campaign-journal.json``).
        env: environment variables set on the workers for this campaign's jobs
            (``TUNEKIT_CACHE_DIR``, ``TUNEKIT_CACHE_URL``, ``PYTHONPATH``, ...).
        max_retries: how many times Ray re-runs a job whose worker died.
    """

    jobs: Sequence[CampaignJob]
    records: Path
    state: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    max_retries: int = 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "records", Path(self.records).expanduser())
        if self.state is not None:
            object.__setattr__(self, "state", Path(self.state).expanduser())
        object.__setattr__(self, "env", dict(self.env))
        if not self.jobs:
            raise CampaignError("a campaign needs at least one job")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise CampaignError(f"max_retries must be a whole number >= 0, got {self.max_retries!r}")
        bad_env = [k for k, v in self.env.items() if not (isinstance(k, str) and k and isinstance(v, str))]
        if bad_env:
            raise CampaignError(f"env maps variable names to str values; not {bad_env}")
        check_jobs(self.jobs, [f"job {i}" for i in range(len(self.jobs))])

    @classmethod
    def load(cls, path: str | Path) -> Campaign:
        """The campaign a TOML or JSON file declares (paths in it are relative to the file); CampaignError naming
        the job and field at fault."""
        path = Path(path).expanduser()
        spec = read_campaign_file(path)
        jobs: list[CampaignJob] = []
        labels: list[str] = []
        for index, entry in enumerate(spec.jobs):
            for number, shape in enumerate(entry.shapes):
                jobs.append(CampaignJob(target=entry.target, device=entry.device, shape=shape))
                labels.append(f"{path}: jobs[{index}] ({entry.target}) shapes[{number}]")
        check_jobs(jobs, labels)
        base = path.parent
        return cls(
            jobs=jobs,
            records=base / spec.records,
            state=None if spec.state is None else base / spec.state,
            env=spec.env,
            max_retries=spec.max_retries,
        )

    @property
    def journal_path(self) -> Path:
        """Where the journal of finished jobs is kept."""
        return self.state if self.state is not None else self.records / JOURNAL_NAME

    def run(self, *, address: str | None = None, progress: bool = True) -> CampaignResult:
        """Run the jobs not finished yet on the Ray cluster at ``address``; a line on stderr per finished job.

        ``address``: the cluster's (``"HEAD:6379"``); None connects as ``ray.init()`` does. Raises
        CampaignError before any job starts when no worker declares a job's device kind, and
        ImportError naming ``pip install 'tunekit[ray]'`` when Ray is not installed.
        """
        started = time.perf_counter()
        journal = Journal(self.journal_path)
        merger = RecordMerger(self.records)
        skipped = [job for job in self.jobs if _still_done(self.records, journal.done.get(job.id))]
        skipped_ids = {job.id for job in skipped}
        todo = [job for job in self.jobs if job.id not in skipped_ids]
        finished: list[JobResult] = []
        failed: list[tuple[CampaignJob, str]] = []
        written: dict[Path, None] = {}
        shown = CampaignProgress(len(todo), shown=progress)
        if skipped:
            shown.console.print(
                f"{len(skipped)} of {counted(len(self.jobs), 'job')} finished in an earlier run: skipped", markup=False
            )

        def done(job: CampaignJob, outcome: str | BaseException) -> None:
            if isinstance(outcome, BaseException):
                failed.append((job, describe_error(outcome)))
                shown.failed(job, failed[-1][1])
                return
            result = JobResult.model_validate_json(outcome)
            path = merger.merge(result.record, job.device)  # the record first: the journal never lists a lost one
            journal.add(job.id, DoneJob.of(path, result))
            written[path] = None
            finished.append(result)
            shown.finished(job, result)

        if todo:
            with shown:
                run_on_ray(todo, done, address=address, env=self.env, max_retries=self.max_retries)
        result = CampaignResult(
            finished=tuple(finished),
            skipped=tuple(skipped),
            failed=tuple(failed),
            records=tuple(written),
            seconds=time.perf_counter() - started,
        )
        shown.console.print(
            f"campaign: {counted(len(finished), 'job')} finished "
            f"({result.tuned} tuned, {result.stored} already stored), "
            f"{len(skipped)} skipped, {len(failed)} failed in {result.seconds:.1f} s; records in {self.records}",
            markup=False,  # a path is text: `runs/[b]/records` lost its `[b]` as a bold tag
        )
        return result


def _still_done(records: Path, done: DoneJob | None) -> bool:
    return done is not None and holds(records / done.record, done.key, done.winner)


def check_jobs(jobs: Sequence[object], labels: Sequence[str]) -> None:
    """Refuse a job that cannot run, naming it: not a CampaignJob, a target that does not import, an unknown kind
    or a shape missing a field; and a job given twice."""
    seen: dict[str, str] = {}
    for job, label in zip(jobs, labels, strict=True):
        if not isinstance(job, CampaignJob):
            raise CampaignError(f"{label}: a campaign's jobs are tk.CampaignJob, got {type(job).__name__}")
        try:
            target = load_target(job.target)
        except ValueError as exc:
            raise CampaignError(f"{label}: {exc}") from None
        if job.device not in target.clients:
            raise CampaignError(
                f"{label}: device {job.device!r} is not a kind the target {job.target} runs on; it knows "
                f"{sorted(target.clients)}"
            )
        if missing := [name for name in target.shape if name not in job.shape]:
            raise CampaignError(
                f"{label}: shape {job.shape} lacks {missing}; {job.target} builds its inputs from {list(target.shape)}"
            )
        if (first := seen.setdefault(job.id, label)) != label:
            raise CampaignError(f"{label} is the same job as {first} ({job.describe()}): give it once")
