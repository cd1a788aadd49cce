"""What is no TunableSet (a list of tunables, say) is refused at the entry point, in its own words."""

from __future__ import annotations

import traceback

import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: int


def test_a_list_of_tunables_is_refused_by_execute_without_an_internal_error_chained() -> None:
    """Regression: the clear TypeError came chained from an internal "'list' object has no attribute 'key'"."""
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("not-a-set")
    with pytest.raises(
        TypeError, match=r"execute\(\) takes the tk.TunableSet that init\(\) returned, got list"
    ) as info:
        tuner.execute(CLIENT.device_id, CLIENT, [tk.Tunable("a", lambda n: n)], (3,))  # type: ignore[arg-type]
    shown = "".join(traceback.format_exception(info.value))
    assert "AttributeError" not in shown and "During handling" not in shown, shown


def test_a_list_of_tunables_is_refused_by_a_device_tuner() -> None:
    tuner = tk.Tuner("not-a-set", CLIENT.device_id)
    with pytest.raises(TypeError, match=r"tuner 'not-a-set': resolve\(\) takes a tk.TunableSet, got list") as info:
        tuner.resolve(CLIENT, [tk.Tunable("a", lambda n: n)], NKey(n=3), (3,))  # type: ignore[arg-type]
    assert "AttributeError" not in "".join(traceback.format_exception(info.value))
