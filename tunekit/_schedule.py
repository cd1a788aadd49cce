"""The measurement schedule: how a batch of candidates is timed."""

from __future__ import annotations

from collections.abc import Sequence

from tunekit._benchmark import BenchmarkDurations
from tunekit._errors import CandidateFailed
from tunekit._outcome import Failed, Measured, Outcome
from tunekit._runner import CandidateRunner
from tunekit._settings import Settings

__all__ = ["describe_error", "measure_batch"]


def describe_error(exc: BaseException) -> str:
    """One line naming the exception type and its message."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def measure_batch(runner: CandidateRunner, batch: Sequence[int], settings: Settings) -> dict[int, Outcome]:
    """Time each candidate of ``batch`` in turn: warm-up runs, then timed samples.

    A candidate that raises is disqualified with its error; the rest still run.
    """
    outcomes: dict[int, Outcome] = {}
    for index in batch:
        try:
            for _ in range(settings.warmup):
                runner.warmup(index)
            samples = tuple(runner.sample(index) for _ in range(settings.samples))
        except CandidateFailed as exc:  # the runner knows the stage: crash, timeout, or a run error elsewhere
            outcomes[index] = Failed(exc.reason, exc.stage)
        except Exception as exc:  # any candidate error disqualifies only that candidate
            outcomes[index] = Failed(describe_error(exc), "run")
        else:
            outcomes[index] = Measured(BenchmarkDurations(samples))
    return outcomes
