"""One key of a tuner name, one tunable set: a second, different set for that key is refused with the fix."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tunables import sleeping

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit_backends.cpu import CpuClient
from tunekit_backends.simulated import SimulatedClient


@tk.autotune_key
class NKey:
    n: int


CLIENT = CpuClient()


def _key(n: int) -> NKey:
    return NKey(n=n)


def _other_key(n: int) -> NKey:
    return NKey(n=n)


@pytest.fixture
def records() -> Iterator[list[tk.AutotuneRecord]]:
    got: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(got.append)
    try:
        yield got
    finally:
        tk.remove_record_sink(sink)


def _first_set() -> tk.TunableSet[NKey, int]:
    return tk.TunableSet(key=_key).with_tunables([sleeping(0.002), sleeping(0.0)])


def _second_set() -> tk.TunableSet[NKey, int]:
    return tk.TunableSet(key=_other_key).with_tunables([sleeping(0.001), sleeping(0.003)])


def test_a_second_set_under_one_name_is_refused_and_the_first_keeps_its_row() -> None:
    """Regression: two sets under one name each found the other's row stale and re-tuned over it, forever."""
    first: tk.LocalTuner[NKey, int] = tk.LocalTuner("matmul")
    second: tk.LocalTuner[NKey, int] = tk.LocalTuner("matmul")  # e.g. a copy-pasted module
    first_set, second_set = _first_set(), _second_set()
    assert first.execute(CLIENT.device_id, CLIENT, first_set, (5,)) == 5
    with pytest.raises(ValueError) as raised:
        second.execute(CLIENT.device_id, CLIENT, second_set, (5,))
    message = str(raised.value)
    assert "tuner 'matmul'" in message
    assert "TunableSet(sleep0.002, sleep0.0)" in message and "TunableSet(sleep0.001, sleep0.003)" in message
    assert "_key" in message and "_other_key" in message and __file__ in message  # where each set is built
    assert 'Give each operation its own name, e.g. tk.LocalTuner("matmul") for one and tk.LocalTuner("matmul_2")' in (
        message
    )
    cache = tk.persistent_cache()
    assert cache is not None
    stored = cache.get(CLIENT.device_id, "matmul", key_to_json(NKey(n=5)))
    assert isinstance(stored, tuple) and stored[0] == first_set.checksum()
    # The refusal is not a one-off: the second set stays refused for that key while the first is in use.
    with pytest.raises(ValueError, match="already runs key"):
        second.execute(CLIENT.device_id, CLIENT, second_set, (5,))


def test_two_sets_of_one_local_tuner_are_refused_with_the_cache_off_too() -> None:
    tk.configure(cache=False)
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("softmax")
    first_set = tuner.init(_first_set)
    second_set = tuner.init(_second_set)
    tuner.execute(CLIENT.device_id, CLIENT, first_set, (3,))
    with pytest.raises(
        ValueError, match=r"tuner 'softmax' on device .* already runs key \{\"n\": ?3\} in this process"
    ):
        tuner.execute(CLIENT.device_id, CLIENT, second_set, (3,))


def test_the_same_set_twice_and_an_equal_set_under_the_name_tune_once(records: list[tk.AutotuneRecord]) -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("same")
    tunables = _first_set()
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,)) == 4
    # Another tuner object with a set equal to the first (same candidates: same checksum) shares its rows.
    again: tk.LocalTuner[NKey, int] = tk.LocalTuner("same")
    assert again.execute(CLIENT.device_id, CLIENT, _first_set(), (4,)) == 4
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, (5,)) == 5  # 5 is a new key: tuned
    assert [r.decision for r in records] == ["tuned", "tuned"]
    assert [r.key for r in records] == [{"n": 4}, {"n": 5}]


def test_sets_of_one_name_whose_keys_never_meet_both_stay_cached(records: list[tk.AutotuneRecord]) -> None:
    """One set per dtype under one tuner (the dtype in the key, as CubeCL does) shares no row: allowed."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("per_dtype")
    first_set, second_set = tuner.init(_first_set), tuner.init(_second_set)
    for _ in range(2):
        assert tuner.execute(CLIENT.device_id, CLIENT, first_set, (16,)) == 16
        assert tuner.execute(CLIENT.device_id, CLIENT, second_set, (32,)) == 32
    assert [(r.decision, r.key) for r in records] == [("tuned", {"n": 16}), ("tuned", {"n": 32})]
    cache = tk.persistent_cache()
    assert cache is not None
    for n, tunables in ((16, first_set), (32, second_set)):
        stored = cache.get(CLIENT.device_id, "per_dtype", key_to_json(NKey(n=n)))
        assert isinstance(stored, tuple) and stored[0] == tunables.checksum()


def test_sets_of_one_name_may_differ_between_devices() -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("per_device")
    first_set, second_set = _first_set(), _second_set()
    assert tuner.execute(CLIENT.device_id, CLIENT, first_set, (2,)) == 2
    another = SimulatedClient(device_id="another-device")
    assert tuner.execute(another.device_id, another, second_set, (2,)) == 2


def test_a_set_replaced_in_a_running_process_re_tunes_once_the_old_one_is_gone(
    records: list[tk.AutotuneRecord],
) -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("notebook")
    tuner.execute(CLIENT.device_id, CLIENT, tuner.init(_first_set), (6,))
    tuner.clear()  # what the error message tells a notebook user to do before redefining the set
    tuner.execute(CLIENT.device_id, CLIENT, tuner.init(_second_set), (6,))
    # A LocalTuner dropped with its sets (a notebook cell run again) gives its name up as well.
    tuner = tk.LocalTuner("notebook")
    tuner.execute(CLIENT.device_id, CLIENT, tuner.init(_first_set), (6,))
    assert [(r.decision, r.checksum) for r in records] == [
        ("tuned", _first_set().checksum()),
        ("tuned", _second_set().checksum()),
        ("tuned", _first_set().checksum()),
    ]


EDITED = textwrap.dedent(
    """
    import json, sys
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class NKey:
        n: int

    records = []
    tk.add_record_sink(records.append)
    client = CpuClient()
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [tk.Tunable(name, lambda n: n) for name in sys.argv[1].split(",")]
    )
    tk.LocalTuner("edited").execute(client.device_id, client, tunables, (1,))
    print(json.dumps([r.decision for r in records]))
    """
)


def _run_edited(names: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", EDITED, names], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout))


@pytest.mark.slow
@pytest.mark.subprocess
def test_an_edited_set_in_a_new_process_re_tunes_then_stays_cached(isolated_settings: Path) -> None:
    assert _run_edited("a,b") == ["tuned"]
    assert _run_edited("a,b") == []
    assert _run_edited("a,b,c") == ["tuned"]  # the code was edited: same name, new checksum
    assert _run_edited("a,b,c") == []
    assert (isolated_settings / tk.PersistentCache.FILENAME).exists()
