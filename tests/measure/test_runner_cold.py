"""Making cold inputs (or flushing) before a sample is no candidate's time: a per-run limit leaves it out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


class SlowFlushClient(CpuClient):
    """A CPU client whose flush takes a while, as writing twice a 480 MiB cache does under load."""

    def flush_cache(self) -> None:
        time.sleep(0.3)


class SlowColdClient(SlowFlushClient):
    """One whose cold copies take a while to make, as copying twice a large cache does."""

    def cold_inputs(self, inputs: tuple[object, ...]) -> Callable[[], tuple[object, ...]]:
        time.sleep(0.3)
        return lambda: inputs


def _double(n: int) -> int:
    return 2 * n


def _record(client: CpuClient, name: str) -> tk.AutotuneRecord:
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(name, sinks=[records.append])
    tunables = (
        tk.TunableSet(key=lambda n: NKey(n=n))
        .with_tunables([tk.Tunable("a", _double), tk.Tunable("b", lambda n: n + n)])
        .with_isolation("none", timeout_s=0.2)
    )
    assert tuner.execute(client.device_id, client, tunables, (5,)) == 10
    (record,) = records
    return record


def test_slow_cold_inputs_do_not_time_a_candidate_out() -> None:
    """Copying the inputs at the first sample counted against the candidate's 0.2 s limit: it timed out."""
    record = _record(SlowColdClient(), "cold-watchdog")
    assert {c.name: c.status for c in record.candidates} == {"a": "measured", "b": "measured"}


def test_a_slow_flush_does_not_time_a_candidate_out() -> None:
    record = _record(SlowFlushClient(), "flush-watchdog")
    assert {c.name: c.status for c in record.candidates} == {"a": "measured", "b": "measured"}
