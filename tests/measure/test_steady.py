"""Warming up until the device's speed is steady: stops once flat, keeps going while it ramps."""

from __future__ import annotations

import time
from collections.abc import Iterator

from tunekit._measure.steady import warm_until_steady


def _chunks(durations: Iterator[int], calls: list[int]) -> object:
    def chunk() -> int:
        calls.append(1)
        return next(durations)

    return chunk


def test_a_steady_device_stops_after_two_equal_windows() -> None:
    calls: list[int] = []
    warm_until_steady(_chunks(iter([1000] * 100), calls), 10**9, min_fraction=0)  # type: ignore[arg-type]
    assert len(calls) == 6


def test_a_ramping_device_is_warmed_until_it_stops_getting_faster() -> None:
    # Clocks ramping: each chunk 5% faster than the last for 20 chunks, then flat.
    ramp = [int(2000 * 0.95**i) for i in range(20)]
    calls: list[int] = []
    warm_until_steady(_chunks(iter(ramp + [ramp[-1]] * 100), calls), 10**9, min_fraction=0)  # type: ignore[arg-type]
    assert 20 <= len(calls) <= 26


def test_a_device_that_never_settles_is_warmed_for_the_whole_duration() -> None:
    def never_steady() -> Iterator[int]:
        while True:
            time.sleep(0.001)
            yield 1000
            yield 3000

    calls: list[int] = []
    spent = warm_until_steady(_chunks(never_steady(), calls), 30_000_000, min_fraction=0)  # type: ignore[arg-type]
    assert spent >= 30_000_000


def test_the_floor_is_always_spent() -> None:
    def flat() -> Iterator[int]:
        while True:
            time.sleep(0.0005)
            yield 1000

    spent = warm_until_steady(_chunks(flat(), []), 60_000_000)  # type: ignore[arg-type]
    assert spent >= 20_000_000  # a third of 60 ms


def test_only_the_chunk_running_at_the_deadline_ends_after_it() -> None:
    # The upper bound on a warm-up, as ordering rather than speed: no chunk starts once the deadline has
    # passed, so the warm-up overruns by the one chunk running then, however slow load makes that chunk.
    starts: list[int] = []
    ends: list[int] = []

    def never_steady() -> int:
        starts.append(time.perf_counter_ns())
        time.sleep(0.002)
        ends.append(time.perf_counter_ns())
        return 1000 if len(starts) % 2 else 3000

    spent = warm_until_steady(never_steady, 20_000_000, min_fraction=0)
    # The deadline is 20 ms after the warm-up started, so no later than 20 ms after the first chunk started.
    assert len(ends) >= 2 and spent >= 20_000_000
    assert all(end < starts[0] + 20_000_000 for end in ends[:-1])
