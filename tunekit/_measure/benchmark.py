"""Timing one candidate: warm-up runs, then timed samples through the client's clock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tunekit._measure.client import Client, SupportsCacheFlush, require_client
from tunekit._measure.runner import timed_run
from tunekit._values.durations import BenchmarkDurations

__all__ = ["tune_benchmark"]


def tune_benchmark(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    client: Client,
    *,
    warmup: int = 1,
    samples: int = 10,
    flush: bool = True,
) -> BenchmarkDurations:
    """Time ``fn(*inputs)`` on ``client``: ``warmup`` untimed runs, then ``samples`` timed ones.

    An exception from ``fn`` propagates: the tuner turns it into a failed outcome.
    The cache is flushed before each timed sample when the client can and ``flush`` is set.
    """
    require_client(client, "tune_benchmark()")
    if samples < 1:
        raise ValueError(f"tune_benchmark needs samples >= 1, got {samples}")
    if warmup < 0:
        raise ValueError(f"tune_benchmark needs warmup >= 0, got {warmup}")
    args = tuple(inputs)
    for _ in range(warmup):
        fn(*args)
    client.sync()
    flusher = client if flush and isinstance(client, SupportsCacheFlush) else None
    timed: list[int] = []
    for _ in range(samples):
        if flusher is not None:
            flusher.flush_cache()
        timed.append(timed_run(client, lambda: fn(*args)))
    return BenchmarkDurations(tuple(timed))
