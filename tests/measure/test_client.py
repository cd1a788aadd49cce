"""The client contract is checked when execute() is called, before any tuning or cache access."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

import tunekit as tk
from tunekit._measure.client import CHECKED_CLIENT_TYPES, require_client
from tunekit_backends.cpu import CpuClient

T = TypeVar("T")


@tk.autotune_key
class Key:
    n: int


def _counting_set(calls: list[str]) -> tk.TunableSet[Key, int]:
    def candidate(name: str) -> tk.Tunable[int]:
        def run(n: int) -> int:
            calls.append(name)
            return n

        return tk.Tunable(name, run)

    return tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([candidate("a"), candidate("b")])


class NoProfile:
    """Has two of the three members."""

    device_id = "no-profile-device"

    def sync(self) -> None:
        pass


class ProfileNotCallable:
    device_id = "bad-profile-device"
    profile = 5

    def sync(self) -> None:
        pass


@dataclass(frozen=True)
class FieldClient:
    """A user client that implements the protocol structurally, its device id a plain instance field."""

    device_id: str

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        start = time.perf_counter_ns()
        output = run()
        return output, time.perf_counter_ns() - start

    def sync(self) -> None:
        pass


class RaisingClient(CpuClient):
    """A real client whose device fails at run time."""

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        raise RuntimeError("device lost")


@pytest.mark.parametrize(
    ("client", "lacks"),
    [
        ("cpu", "lacks device_id, profile and sync"),
        (object(), "lacks device_id, profile and sync"),
        (NoProfile(), "lacks profile."),
        (ProfileNotCallable(), "lacks a callable profile (its profile is int)"),
    ],
)
def test_a_non_client_is_refused_at_the_call_before_any_tuning_or_cache_access(
    client: object, lacks: str, isolated_settings: Path
) -> None:
    """Regression: a string as the client failed every candidate with an AttributeError, one by one."""
    calls: list[str] = []
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        with pytest.raises(TypeError, match="the client must be a tk.Client") as caught:
            tk.LocalTuner("contract").execute("dev", client, _counting_set(calls), (3,))  # type: ignore[arg-type]
    finally:
        tk.remove_record_sink(sink)
    message = str(caught.value)
    assert "tuner 'contract': execute()" in message
    assert lacks in message
    assert "profile(run) -> (output, duration_ns)" in message and "sync() -> None" in message
    assert calls == [] and records == []
    assert not isolated_settings.exists(), "nothing may be written to the cache directory"


def test_a_client_class_passed_instead_of_an_instance_says_to_instantiate_it() -> None:
    with pytest.raises(TypeError, match=r"the client is the class CpuClient, not an instance of it; pass CpuClient\("):
        tk.LocalTuner("class-client").execute("dev", CpuClient, _counting_set([]), (3,))  # type: ignore[arg-type]


def test_the_device_scoped_tuner_refuses_a_non_client_too() -> None:
    tunables = _counting_set([])
    with pytest.raises(TypeError, match=r"tuner 'scoped': resolve\(\): the client must be a tk.Client"):
        tk.Tuner("scoped", "dev").resolve("cpu", tunables, Key(n=3), (3,))  # type: ignore[arg-type]


def test_a_structural_user_client_with_an_instance_field_tunes_and_is_checked_on_every_call() -> None:
    client = FieldClient("user-device:v1")
    assert isinstance(client, tk.Client)
    calls: list[str] = []
    tuner: tk.LocalTuner[Key, int] = tk.LocalTuner("structural")
    tunables = _counting_set(calls)
    assert tuner.execute(client.device_id, client, tunables, (4,)) == 4
    assert set(calls) == {"a", "b"}
    # Its device_id lives on the instance, so the class is not trusted for every instance.
    assert FieldClient not in CHECKED_CLIENT_TYPES


def test_the_backends_clients_pass_and_their_class_is_then_trusted() -> None:
    client = CpuClient()
    require_client(client, "test")
    assert CpuClient in CHECKED_CLIENT_TYPES


def test_a_client_failing_at_run_time_still_fails_each_candidate_with_its_reason() -> None:
    client = RaisingClient()
    tuner: tk.LocalTuner[Key, int] = tk.LocalTuner("runtime-failure")
    with pytest.raises(tk.NoValidKernelFound) as caught:
        tuner.execute(client.device_id, client, _counting_set([]), (3,))
    assert [name for name, _ in caught.value.failures] == ["a", "b"]
    assert all("device lost" in reason for _, reason in caught.value.failures)


def test_tune_benchmark_refuses_a_non_client_before_running_anything() -> None:
    ran: list[int] = []
    with pytest.raises(TypeError, match=r"tune_benchmark\(\): the client must be a tk.Client.*lacks device_id"):
        tk.tune_benchmark(lambda: ran.append(1), (), "cpu")  # type: ignore[arg-type]
    assert ran == []
