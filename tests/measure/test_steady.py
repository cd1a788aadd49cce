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


def _overrun_run(duration_ns: int) -> tuple[list[int], list[int], int]:
    """One warm-up of 2 ms chunks that never settle; the chunks' start and end times and the time spent."""
    starts: list[int] = []
    ends: list[int] = []

    def never_steady() -> int:
        starts.append(time.perf_counter_ns())
        time.sleep(0.002)
        ends.append(time.perf_counter_ns())
        return 1000 if len(starts) % 2 else 3000

    spent = warm_until_steady(never_steady, duration_ns, min_fraction=0)
    return starts, ends, spent


def test_only_the_chunk_running_at_the_deadline_ends_after_it() -> None:
    # The upper bound on a warm-up, as ordering rather than speed: no chunk starts once the deadline has
    # passed, so the warm-up overruns by the one chunk running then, however slow load makes that chunk.
    # The property needs several chunks to say anything; on a loaded machine one 2 ms sleep can outlast
    # the whole deadline, so the deadline grows until at least three chunks ran (the ordering is checked
    # whatever the deadline, so growing it cannot hide a chunk started late).
    for duration_ns in (20_000_000, 80_000_000, 320_000_000, 1_280_000_000):
        starts, ends, spent = _overrun_run(duration_ns)
        assert spent >= duration_ns
        # The deadline is duration_ns after the warm-up started, so no later than that after the first chunk started.
        assert all(end < starts[0] + duration_ns for end in ends[:-1]), "a chunk started after the deadline"
        if len(ends) >= 3:
            break
    assert len(ends) >= 3, f"only {len(ends)} chunks of 2 ms ran in {duration_ns / 1e6:.0f} ms"
