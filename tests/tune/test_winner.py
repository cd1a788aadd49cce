"""LocalTuner.winner: which candidate, and which configuration, won a key; from memory and from the cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: int


def _key(x: np.ndarray) -> NKey:
    return NKey(n=x.size)


def _build(config: tk.Config) -> Any:
    """A row sum whose inner step is BLOCK wide; SLOW adds work that cannot win."""
    block, slow = int(config.BLOCK), int(config.SLOW)

    def run(x: np.ndarray) -> float:
        for _ in range(slow * 50):
            x.sum()
        return float(x.reshape(-1, block).sum())

    return run


SPACE = tk.Space(BLOCK=[4, 8], SLOW=[0, 1])
X = np.random.default_rng(0).random(4096)


def _set(version: str = "") -> tk.TunableSet[NKey, float]:
    return tk.TunableSet.from_space(SPACE, _build, key=_key, version=version)


def test_a_key_not_tuned_has_no_winner_and_after_execute_its_configuration_is_read() -> None:
    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("winner-space")
    tunables = _set()
    assert tuner.winner(CLIENT.device_id, tunables, NKey(n=X.size)) is None
    assert tuner.winner(CLIENT.device_id, tunables, inputs=(X,)) is None

    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (X,))
    finally:
        tk.remove_record_sink(sink)

    winner = tuner.winner(CLIENT.device_id, tunables, inputs=(X,))
    assert winner is not None and not winner.stored
    assert winner.name == records[-1].winner  # the record's word for it, the same candidate
    assert winner.config is not None and winner.config.SLOW == 0 and winner.config.BLOCK in (4, 8)
    assert winner.config.name == winner.name  # from_space names a candidate by its configuration
    assert tuner.winner(CLIENT.device_id, tunables, NKey(n=X.size)) == winner
    assert tuner.winner(CLIENT.device_id, tunables, NKey(n=8)) is None  # another key: not tuned
    assert tuner.winner("another device", tunables, NKey(n=X.size)) is None


def test_a_later_tuner_reads_the_winner_from_the_persistent_cache_without_tuning() -> None:
    first: tk.LocalTuner[NKey, float] = tk.LocalTuner("winner-cached")
    first.execute(CLIENT.device_id, CLIENT, _set(), (X,))
    tuned = first.winner(CLIENT.device_id, _set(), inputs=(X,))  # an equal set (same checksum) finds it too
    assert tuned is not None

    later: tk.LocalTuner[NKey, float] = tk.LocalTuner("winner-cached")  # as a later process's would start
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        stored = later.winner(CLIENT.device_id, _set(), inputs=(X,))
    finally:
        tk.remove_record_sink(sink)
    assert stored is not None and stored.stored and records == []  # nothing was measured to answer
    assert (stored.name, stored.config) == (tuned.name, tuned.config)
    # A set edited since (another checksum) would re-tune the key: the row is no winner for it.
    assert later.winner(CLIENT.device_id, _set(version="2"), inputs=(X,)) is None


def test_a_set_of_hand_written_tunables_has_a_name_and_no_configuration() -> None:
    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("numpy_sum", lambda x: float(np.sum(x))))
    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("winner-plain")
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (X,))
    assert tuner.winner(CLIENT.device_id, tunables, inputs=(X,)) == tk.Winner("numpy_sum", None)


def test_a_key_and_inputs_both_or_neither_are_refused_saying_which() -> None:
    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("winner-args")
    with pytest.raises(TypeError, match=r"winner\(\) takes a key or inputs=\(...\), one of the two.*got neither"):
        tuner.winner(CLIENT.device_id, _set())
    with pytest.raises(TypeError, match=r"got both"):
        tuner.winner(CLIENT.device_id, _set(), NKey(n=1), inputs=(X,))
    with pytest.raises(TypeError, match=r"winner\(inputs=...\) takes a tuple, got ndarray"):
        tuner.winner(CLIENT.device_id, _set(), inputs=X)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"winner\(\) takes the tk.TunableSet that init\(\) returned, got list"):
        tuner.winner(CLIENT.device_id, [], NKey(n=1))  # type: ignore[arg-type]
