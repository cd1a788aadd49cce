"""Tunes of one device that run at once in a process (threads missing different keys) are named as such."""

from __future__ import annotations

import logging
import threading

import pytest

import tunekit as tk
from tunekit_backends.simulated import NoiseModel, SimulatedClient


@tk.autotune_key
class SizeKey:
    n: int


def _tune(tuner: tk.LocalTuner[SizeKey, object], n: int, meet: threading.Barrier | None) -> None:
    """Tune key n on a noisy simulated device with two equally fast candidates: a decision in doubt (n = 2, 3)."""
    client = SimulatedClient(NoiseModel(noise=0.5), seed=n)
    first, second = client.kernel(100_000), client.kernel(100_000)

    met: list[bool] = []

    def waits_for_the_other_tune(x: int) -> object:
        if meet is not None and not met:
            met.append(True)
            meet.wait(timeout=30)  # both tunes are measuring now: they overlap, whatever the scheduler does
        return first(x)

    tunables = (
        tk.TunableSet(key=lambda x: SizeKey(n=x))
        .with_tunable(tk.Tunable("first", waits_for_the_other_tune))
        .with_tunable(tk.Tunable("second", second))
    )
    tuner.execute(client.device_id, client, tunables, (n,))


def _doubts(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    return {r.getMessage().split(":")[0]: r.getMessage() for r in caplog.records if r.name == "tunekit.doubt"}


@pytest.mark.parametrize("together", [True, False])
def test_a_doubtful_tune_names_the_other_tunes_this_process_ran_beside_it(
    caplog: pytest.LogCaptureFixture, together: bool
) -> None:
    """Found by a service test: five threads tuning five keys at once blamed "the machine was probably busy"."""
    caplog.set_level(logging.INFO, logger="tunekit.doubt")
    tuner: tk.LocalTuner[SizeKey, object] = tk.LocalTuner("overlapping")
    if together:
        meet = threading.Barrier(2)
        threads = [threading.Thread(target=_tune, args=(tuner, n, meet)) for n in (2, 3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        for n in (2, 3):
            _tune(tuner, n, None)
    doubts = _doubts(caplog)
    assert set(doubts) == {"overlapping SizeKey(n=2)", "overlapping SizeKey(n=3)"}, doubts
    for text in doubts.values():
        assert ("1 other tune of this device ran in this process at the same time" in text) is together, text
        assert "the machine was probably busy" in text
