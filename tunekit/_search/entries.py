"""A trial as its trial log line, and back: what a resumed search reads of an earlier run."""

from __future__ import annotations

from tunekit._candidates.config import Config
from tunekit._values.durations import BenchmarkDurations
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.trial_log import TrialEntry

__all__ = ["entry_of", "outcome_of"]


def entry_of(config: Config, outcome: Outcome, elapsed: float) -> TrialEntry:
    """The log line of ``config``'s ``outcome``, written ``elapsed`` seconds into the search."""
    match outcome:
        case Measured(durations):
            return TrialEntry(
                config=config.to_dict(),
                status="measured",
                samples_ns=list(durations.samples_ns),
                score_ns=durations.score,
                elapsed_s=elapsed,
            )
        case Failed(reason, stage):
            return TrialEntry(config=config.to_dict(), status="failed", stage=stage, error=reason, elapsed_s=elapsed)
        case Skipped(reason):
            return TrialEntry(config=config.to_dict(), status="skipped", error=reason, elapsed_s=elapsed)


def outcome_of(entry: TrialEntry) -> Outcome:
    """The outcome a log line holds; a stage the log does not know reads as a failed run."""
    if entry.status == "measured" and entry.samples_ns:
        return Measured(BenchmarkDurations(tuple(entry.samples_ns)))
    if entry.status == "skipped":
        return Skipped(entry.error or "skipped")
    stage = entry.stage if entry.stage in ("compile", "check", "run", "timeout", "crash") else "run"
    return Failed(entry.error or "failed", stage)  # type: ignore[arg-type]
