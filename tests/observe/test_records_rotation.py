"""A records file bounded by rotation: a running process's next record goes to the file at the path, none lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class RotKey:
    n: int


def _keys(path: Path) -> list[object]:
    return [line.record.key["n"] for line in tk.read_records(path)]


def test_a_records_file_moved_or_truncated_under_a_running_process_starts_afresh(tmp_path: Path) -> None:
    """Nothing said how to bound a records file that grows by ~1.7 KB a tune; rotation works without a restart."""
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    client = CpuClient()
    tuner: tk.LocalTuner[RotKey, float] = tk.LocalTuner("rotated_total")
    tunables = (
        tk.TunableSet(key=lambda x: RotKey(n=x.shape[0]))
        .with_tunable(tk.Tunable("sum", lambda x: float(x.sum())))
        .with_tunable(tk.Tunable("dot", lambda x: float(x @ np.ones_like(x))))
    )

    def tune(n: int) -> None:
        tuner.execute(client.device_id, client, tunables, (np.ones(n),))

    tune(1)
    tune(2)
    path.rename(tmp_path / "records.jsonl.1")  # logrotate's default: move the file, no signal to the process
    tune(3)
    assert _keys(tmp_path / "records.jsonl.1") == [1, 2]
    assert _keys(path) == [3]
    with path.open("r+") as file:  # logrotate's copytruncate: the file stays, emptied
        file.truncate(0)
    tune(4)
    assert path.read_text().count("\n") == 1 and _keys(path) == [4]  # no blank line before it
