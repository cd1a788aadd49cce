"""The in-process runner: what a client's profile() returns is checked before it becomes a sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient

T = TypeVar("T")


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


class BadClockClient(CpuClient):
    """A client whose clock returns ``duration`` for every run."""

    def __init__(self, duration: object) -> None:
        super().__init__()
        self.duration = duration

    @property
    def device_id(self) -> str:
        return f"bad-clock:{self.duration!r}"

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        return run(), self.duration  # type: ignore[return-value]


def _twice(n: int) -> int:
    return 2 * n


def _plus(n: int) -> int:
    return n + n


@pytest.mark.parametrize("duration", [-5, "12", float("nan"), float("inf"), None, True])
def test_a_bad_duration_from_profile_fails_the_candidates_with_the_reason(duration: object) -> None:
    """A negative duration escaped as pydantic's 'median_ns >= 0' error; a string '12' was taken as 12 ns."""
    client = BadClockClient(duration)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [tk.Tunable("twice", _twice), tk.Tunable("plus", _plus)]
    )
    with pytest.raises(
        tk.NoValidKernelFound, match=r"BadClockClient.profile\(\) returned a duration of .*finite number"
    ):
        tk.LocalTuner(f"bad-clock-{duration!r}").execute(client.device_id, client, tunables, (5,))


def test_a_zero_duration_is_a_valid_sample() -> None:
    client = BadClockClient(0)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [tk.Tunable("twice", _twice), tk.Tunable("plus", _plus)]
    )
    assert tk.LocalTuner("zero-clock").execute(client.device_id, client, tunables, (5,)) == 10


class PairlessClient(CpuClient):
    """A client whose profile() returns ``result(output)`` instead of (output, duration)."""

    def __init__(self, result: Callable[[object], object]) -> None:
        super().__init__()
        self.result = result

    @property
    def device_id(self) -> str:
        return "pairless"

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        return self.result(run())  # type: ignore[return-value]


@pytest.mark.parametrize("result", [lambda out: out, lambda out: (out, 1, 2), lambda out: 7])
def test_a_profile_result_that_is_not_a_pair_fails_naming_the_client(result: Callable[[object], object]) -> None:
    """It failed as "too many values to unpack (expected 2)" (or "cannot unpack"), naming no client."""
    client = PairlessClient(result)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables([tk.Tunable("twice", _twice)])
    with pytest.raises(tk.NoValidKernelFound, match=r"PairlessClient.profile\(\) returned .*; it must return a pair"):
        tk.LocalTuner(f"pairless-{id(result)}").execute(client.device_id, client, tunables, (5,))
    with pytest.raises(ValueError, match=r"PairlessClient.profile\(\) returned .*; it must return a pair"):
        tk.tune_benchmark(_twice, (5,), client, samples=1)
