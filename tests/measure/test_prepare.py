"""The prepare phase: hooks that prepare together get one shared call, before their own calls."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest

import tunekit as tk
from tunekit._observe.event_text import describe_events
from tunekit.backend import PreparesTogether
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class Key:
    n: int


class SharedBuild:
    """A backend's shared compile step, as a compiler that builds many candidates in one go would have."""

    def __init__(self, *, fail: bool = False, note: str | None = None) -> None:
        self.fail = fail
        self.note = note
        self.log: list[tuple[str, ...]] = []
        self.lock = threading.Lock()


class Hook:
    def __init__(self, name: str, shared: SharedBuild) -> None:
        self.name = name
        self.shared = shared

    @property
    def together(self) -> SharedBuild:
        return self.shared

    def prepare_together(self, hooks: Sequence[object], inputs: tuple[Any, ...]) -> str | None:
        with self.shared.lock:
            self.shared.log.append(("together", *sorted(h.name for h in hooks if isinstance(h, Hook))))
        if self.shared.fail:
            raise RuntimeError("the shared compiler is down")
        return self.shared.note

    def __call__(self, *inputs: Any) -> None:
        with self.shared.lock:
            self.shared.log.append(("alone", self.name))


def _tunable(name: str, shared: SharedBuild, value: int) -> tk.Tunable[int]:
    return tk.Tunable(name, lambda n: value, prepare=Hook(name, shared))


def test_hooks_sharing_a_group_are_prepared_together_once_before_their_own_calls() -> None:
    first, second = SharedBuild(), SharedBuild()
    assert isinstance(Hook("a", first), PreparesTogether)
    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
        [_tunable("a", first, 1), _tunable("b", first, 2), _tunable("c", second, 3), tk.Tunable("plain", lambda n: 4)]
    )
    tk.LocalTuner[Key, int]("together").execute(CLIENT.device_id, CLIENT, tunables, (1,))
    assert first.log[0] == ("together", "a", "b") and sorted(first.log[1:]) == [("alone", "a"), ("alone", "b")]
    assert second.log == [("together", "c"), ("alone", "c")]


def test_a_failing_shared_step_leaves_each_hook_to_prepare_alone(caplog: pytest.LogCaptureFixture) -> None:
    broken = SharedBuild(fail=True)
    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([_tunable("a", broken, 1), _tunable("b", broken, 2)])
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        assert tk.LocalTuner[Key, int]("together-broken").execute(CLIENT.device_id, CLIENT, tunables, (1,)) in (1, 2)
    assert sorted(broken.log[1:]) == [("alone", "a"), ("alone", "b")]
    assert "preparing 2 candidates together failed; each prepares alone" in caplog.text


def test_why_a_shared_step_took_a_slower_path_goes_on_the_record() -> None:
    slow, fine = SharedBuild(note="no worker process could start: it exited with status 1"), SharedBuild()
    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([_tunable("a", slow, 1), _tunable("b", fine, 2)])
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tk.LocalTuner[Key, int]("together-noted").execute(CLIENT.device_id, CLIENT, tunables, (1,))
    finally:
        tk.remove_record_sink(sink)
    (prepared,) = [e for e in records[0].events if e.kind == "prepare"]
    assert prepared.compiled_in_process == "no worker process could start: it exited with status 1"
    assert "compiled in the tuning process: no worker process" in "\n".join(describe_events(records[0].events))
