"""A tune's record says where its wall time went: compile, check, warm-up, measure, runoff."""

from __future__ import annotations

import time
from typing import Annotated

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _slow_compile(x: np.ndarray) -> None:
    time.sleep(0.05)


def _twice(x: np.ndarray) -> np.ndarray:
    return x * 2


def test_the_record_carries_each_phases_wall_time_and_they_add_up_to_at_most_the_wall_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUNEKIT_WARMUP_MS", "20")
    tk.configure()
    client = CpuClient()
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[NKey, np.ndarray] = tk.LocalTuner("phases", sinks=[records.append])
    tunables = (
        tk.TunableSet(key=lambda x: NKey(n=len(x)))
        .with_tunables([tk.Tunable("a", _twice, prepare=_slow_compile), tk.Tunable("b", lambda x: x + x)])
        .with_reference(_twice)
    )
    tuner.execute(client.device_id, client, tunables, (np.linspace(0, 1, 64),))
    (record,) = records
    phases = record.phases
    assert phases is not None
    assert phases.compile_s >= 0.05  # the prepare hook's sleep
    assert phases.check_s > 0 and phases.warmup_s > 0 and phases.measure_s > 0
    parts = phases.compile_s + phases.check_s + phases.warmup_s + phases.measure_s + phases.runoff_s
    assert parts + phases.other_s == pytest.approx(record.wall_time_s, rel=1e-6, abs=1e-6)
    assert tk.AutotuneRecord.model_validate_json(record.model_dump_json()).phases == phases


def test_a_record_without_phases_still_reads() -> None:
    """Records written before the phases were kept have none: read as None, not refused."""
    record = tk.AutotuneRecord(
        tuner="t", device_id="d", key={}, checksum="c", decision="tuned", winner=None, stored=False, wall_time_s=0
    )
    assert tk.AutotuneRecord.model_validate_json(record.model_dump_json(exclude={"phases"})).phases is None
