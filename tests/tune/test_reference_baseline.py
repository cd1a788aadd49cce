"""with_reference() without a function: the first candidate to run is the answer; disagreeing with it is said aloud."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class LenKey:
    n: int


def _times(name: str, factor: float) -> tk.Tunable[np.ndarray]:
    return tk.Tunable(name, lambda x: x * np.float32(factor))


def _tune(tunables: tk.TunableSet[LenKey, np.ndarray], name: str) -> tuple[str | None, list[str]]:
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[LenKey, np.ndarray] = tk.LocalTuner(name, sinks=[records.append])
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(256, np.float32),))
    return records[0].winner, [c.name for c in records[0].candidates if c.stage == "check"]


def _set(*tunables: tk.Tunable[np.ndarray]) -> tk.TunableSet[LenKey, np.ndarray]:
    return tk.TunableSet(key=lambda x: LenKey(n=len(x))).with_tunables(list(tunables)).with_reference()


def test_a_wrong_first_candidate_that_every_other_contradicts_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: the wrong first candidate became the reference, the right ones failed their check against it, and
    it won with no word said."""
    tunables = _set(_times("wrong", 3), _times("right", 2), _times("also_right", 2))
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        winner, failed_check = _tune(tunables, "baseline-wrong")
    assert (winner, failed_check) == ("wrong", ["right", "also_right"])  # the documented rule: the first is the answer
    (message,) = [r.getMessage() for r in caplog.records if r.name == "tunekit.tuner"]
    assert "with_reference() has no reference function" in message
    assert "'wrong'" in message and "every other candidate checked (2) disagrees with it" in message
    assert "give with_reference() a function" in message


def test_one_candidate_disagreeing_with_the_first_is_named(caplog: pytest.LogCaptureFixture) -> None:
    tunables = _set(_times("right", 2), _times("wrong", 3), _times("also_right", 2))
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        winner, failed_check = _tune(tunables, "baseline-right")
    assert winner in {"right", "also_right"} and failed_check == ["wrong"]
    (message,) = [r.getMessage() for r in caplog.records if r.name == "tunekit.tuner"]
    assert "1 of 2 other candidates checked disagree with it (wrong)" in message


def test_candidates_that_agree_raise_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        _tune(_set(_times("a", 2), _times("b", 2)), "baseline-agreed")
    assert [r for r in caplog.records if r.name == "tunekit.tuner"] == []
