"""The measurement schedule: how a batch of candidates is timed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunekit._benchmark import tune_benchmark
from tunekit._client import Client
from tunekit._outcome import Failed, Measured, Outcome
from tunekit._settings import Settings
from tunekit._tunable_set import TunableSet

__all__ = ["describe_error", "measure_batch"]


def describe_error(exc: BaseException) -> str:
    """One line naming the exception type and its message."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def measure_batch(
    client: Client,
    tunables: TunableSet[Any, Any],
    batch: Sequence[int],
    inputs: tuple[Any, ...],
    settings: Settings,
) -> dict[int, Outcome]:
    """Time each candidate of ``batch`` in turn; a candidate that raises is disqualified, the rest still run."""
    outcomes: dict[int, Outcome] = {}
    for index in batch:
        tunable = tunables.tunables[index]
        try:
            durations = tune_benchmark(tunable.fn, inputs, client, warmup=settings.warmup, samples=settings.samples)
        except Exception as exc:
            outcomes[index] = Failed(describe_error(exc), "run")
        else:
            outcomes[index] = Measured(durations)
    return outcomes
