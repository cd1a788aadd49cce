"""A candidate's outcome as a value: measured, failed with a reason, or skipped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tunekit._benchmark import BenchmarkDurations

__all__ = ["Failed", "Measured", "Outcome", "Skipped"]

FailureStage = Literal["compile", "check", "run", "timeout", "crash"]


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


@dataclass(frozen=True, slots=True)
class Skipped:
    """The candidate was not measured (priority, elimination, short circuit)."""

    reason: str


Outcome = Measured | Failed | Skipped
