"""``tk.bench``: time one function with the engine tunekit tunes with, for a number rather than a winner.

A tune's measurement pieces, without a tune: the client's device warm-up (or the function's own
runs until its speed is steady), untimed warm-up runs, then samples through the client's clock,
each on cold inputs where the client can give them (:class:`InProcessRunner`, as a tune's
samples are). No cache, no records: nothing is kept but the returned :class:`BenchResult`.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, TypeVarTuple, runtime_checkable

from tunekit._base import settings as _settings
from tunekit._candidates.tunable import Tunable
from tunekit._candidates.tunable_set import TunableSet
from tunekit._measure.bench_result import BenchResult, WarmupMethod
from tunekit._measure.client import Client, SupportsCacheFlush, SupportsWarmup, require_client
from tunekit._measure.runner import InProcessRunner
from tunekit._measure.steady import warm_until_steady
from tunekit._values.durations import BenchmarkDurations

__all__ = ["DEFAULT_SECONDS", "MIN_SAMPLES", "HostClock", "bench"]

Ts = TypeVarTuple("Ts")
T = TypeVar("T")

DEFAULT_SECONDS = 0.1
"""Wall time spent sampling when neither ``samples`` nor ``max_seconds`` is given."""

MIN_SAMPLES = 5
"""Samples a time budget takes at least, however slow the function: enough for a median and quartiles."""


class HostClock:
    """The client ``tk.bench`` times with when given none: the host's monotonic clock around each call.

    Right for work that is done when the call returns (numpy, pure Python); work a call only
    enqueues on a device needs that device's client, whose clock sees the device.
    """

    device_id = "host"

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run`` once; its duration in ns by ``time.perf_counter_ns``."""
        start = time.perf_counter_ns()
        output = run()
        return output, time.perf_counter_ns() - start

    def sync(self) -> None:
        """Nothing to wait for: the call has returned."""


@runtime_checkable
class _FlushSwitch(Protocol):
    """A client whose flush can be turned off (``OpenCLClient(flush_cache=False)``): flush_cache() then does nothing."""

    flush_enabled: bool


def _flushes(client: Client) -> bool:
    """Whether ``client`` evicts its caches when asked: it can, and it has not been told not to."""
    if not isinstance(client, SupportsCacheFlush):
        return False
    return not isinstance(client, _FlushSwitch) or bool(client.flush_enabled)


def bench(
    fn: Callable[[*Ts], object],
    /,
    *args: *Ts,
    client: Client | None = None,
    samples: int | None = None,
    max_seconds: float | None = None,
    warmup: int | None = None,
    warmup_ms: float | None = None,
    cold: bool = True,
) -> BenchResult:
    """Time ``fn(*args)`` on ``client`` as a tune times a candidate, and return the figures.

    Args:
        fn: the function; its positional arguments follow it, checked against it by a type
            checker (for keyword arguments, pass a ``functools.partial`` or a lambda).
        client: whose clock times each call (``tk.Client``); by default the host's
            ``time.perf_counter_ns``. On OpenCL pass the ``OpenCLClient`` and a function that
            enqueues the work and returns its event: the samples are then the device's event times.
        samples: how many timed samples (at least 1; no upper limit).
        max_seconds: wall time to spend sampling, however many samples fit in it; at least 5 are
            taken whatever it says.
            Neither given: 0.1 s. Both given: whichever ends first.
        warmup: untimed runs of ``fn`` before the first sample (default: the ``warmup`` setting, 1).
        warmup_ms: device warm-up before those (default: the ``warmup_ms`` setting, 300 ms): the
            client's own when it has one (``SupportsWarmup``), else ``fn``'s runs until their time is steady.
        cold: each sample on cold caches where the client can flush them (cold copies of the
            inputs, or a flush: ``SupportsColdInputs``, ``SupportsCacheFlush``), as a tune samples;
            False: warm.

    An exception from ``fn`` propagates from its first run. Bad options raise before anything runs.
    """
    if not callable(fn):
        raise TypeError(f"tk.bench() takes the function to time first, got {type(fn).__name__} {fn!r:.60}")
    clock: Client = HostClock() if client is None else client
    require_client(clock, "tk.bench()")
    settings = _settings.current()
    runs = settings.warmup if warmup is None else _count("warmup", warmup, low=0)
    warm_ns = int(1e6 * (settings.warmup_ms if warmup_ms is None else _duration("warmup_ms", warmup_ms, zero=True)))
    if samples is not None:
        _count("samples", samples, low=1)
    seconds = None if max_seconds is None else _duration("max_seconds", max_seconds, zero=False)
    if samples is None and seconds is None:
        seconds = DEFAULT_SECONDS
    if not isinstance(cold, bool):  # bool("false") is True
        raise TypeError(f"tk.bench(cold=...) takes True or False, got {cold!r}")

    tunables: TunableSet[Any, object] = TunableSet(key=lambda *_: None).with_tunable(Tunable("fn", fn))
    runner = InProcessRunner(clock, tunables, tuple(args))
    method, spent_ns = _warm_device(clock, runner, warm_ns)
    for _ in range(runs):
        runner.warmup(0)
    taken: list[int] = []
    deadline = None if seconds is None else time.perf_counter() + seconds
    # No cap on the count: the median's interval costs microseconds at any n (median_interval).
    limit = samples if samples is not None else math.inf
    while len(taken) < limit:
        taken.append(runner.sample(0, flush=cold))
        if deadline is not None and len(taken) >= min(MIN_SAMPLES, limit) and time.perf_counter() >= deadline:
            break
    return BenchResult(
        durations=BenchmarkDurations(tuple(taken)),
        device_id=str(clock.device_id),
        timer="host time.perf_counter_ns" if client is None else f"{type(clock).__name__}.profile",
        warmup_runs=runs,
        warmup_ms=spent_ns / 1e6,
        warmup_method=method,
        cold=cold and _flushes(clock),
    )


def _warm_device(client: Client, runner: InProcessRunner, duration_ns: int) -> tuple[WarmupMethod, int]:
    """Warm the device as a tune does: by the client's own warm-up, else by ``fn``'s runs until steady."""
    if duration_ns <= 0:
        return "none", 0
    if isinstance(client, SupportsWarmup):
        spent = client.warm_up(duration_ns)
        return "device", duration_ns if spent is None else spent
    return "function", warm_until_steady(lambda: runner.sample(0, flush=False), duration_ns)


def _count(name: str, value: object, *, low: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"tk.bench({name}=...) takes an int, got {type(value).__name__} {value!r}")
    number = int(value)
    if number < low:
        raise ValueError(f"tk.bench({name}=...) must be >= {low}, got {number}")
    return number


def _duration(name: str, value: object, *, zero: bool) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"tk.bench({name}=...) takes a number, got {type(value).__name__} {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        raise ValueError(f"tk.bench({name}=...) must be a finite number {'>= 0' if zero else '> 0'}, got {value!r}")
    return number
