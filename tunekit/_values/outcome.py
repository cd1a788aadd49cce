"""A candidate's outcome as a value: measured, failed with a reason, or skipped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from tunekit._base.errors import FailureStage
from tunekit._values.durations import BenchmarkDurations

__all__ = ["Failed", "Measured", "Outcome", "Skipped", "outcome_reason"]

_STAGES: tuple[str, ...] = get_args(FailureStage)


@dataclass(frozen=True, slots=True)
class Measured:
    """The candidate ran; its timed samples.

    ``discarded_ns`` are timed samples left out of the statistics (the first, warm-up-biased
    one); they are kept so the record shows every sample taken.
    """

    durations: BenchmarkDurations
    discarded_ns: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Failed:
    """The candidate is disqualified; ``reason`` says why in one line."""

    reason: str
    stage: FailureStage = "run"

    def __post_init__(self) -> None:
        # An objective's Failed("too slow", "slow") would be recorded as stage 'slow', then read
        # back from its trial log as 'run': refused where it is made, naming the stages there are.
        if self.stage not in _STAGES:
            raise ValueError(f"tk.Failed stage must be one of {', '.join(map(repr, _STAGES))}, got {self.stage!r}")


@dataclass(frozen=True, slots=True)
class Skipped:
    """The candidate was not measured (priority, elimination, short circuit)."""

    reason: str


Outcome = Measured | Failed | Skipped


def outcome_reason(outcome: Outcome, *, staged: bool = False) -> str:
    """Why the candidate has no timing, in one line ("measured" when it has one).

    ``staged`` puts the stage first (``compile: ...``, ``skipped: ...``), as a search's failures
    show it; a tune's show the reason alone.
    """
    match outcome:
        case Failed(why, stage):
            return f"{stage}: {why}" if staged else why
        case Skipped(why):
            return f"skipped: {why}" if staged else why
        case Measured():
            return "measured"
