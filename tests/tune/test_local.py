"""A long-running process and the cache other processes change under it: what it picks up, and when."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _command import run

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class LenKey:
    n: int


def _set() -> tk.TunableSet[LenKey, str]:
    return (
        tk.TunableSet(key=lambda x: LenKey(n=len(x)))
        .with_tunable(tk.Tunable("a", lambda x: "a"))
        .with_tunable(tk.Tunable("b", lambda x: "b"))
    )


@pytest.mark.subprocess
def test_a_running_process_keeps_the_winners_it_used_and_reads_others_stored_meanwhile(
    isolated_settings: Path, tmp_path: Path
) -> None:
    """What concepts.md promises a server: `cache import`/`clear` by another process reach keys it has not used
    yet, and the ones it has once it calls `.clear()` (or restarts); nothing is tuned again for them."""
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[LenKey, str] = tk.LocalTuner("long_running", sinks=[records.append])
    client = CpuClient()
    tunables = tuner.init(_set)
    first = tuner.execute(client.device_id, client, tunables, (np.ones(1),))
    other = "b" if first == "a" else "a"
    assert len(records) == 1

    # Another process stores `other` as the winner of this key and of a key this process has not used.
    bundle = json.loads(run("cache", "export").stdout)
    (entry,) = bundle["entries"]
    value = entry["value"]
    value["winner"], value["ranking"] = other, [other, first]
    value["decision"].update(winner=other, runner_up=first)
    bundle["entries"].append({**entry, "key": json.dumps({"n": 2}, separators=(",", ":"))})
    (tmp_path / "bundle.json").write_text(json.dumps(bundle))
    imported = subprocess.run(
        [sys.executable, "-m", "tunekit", "cache", "import", str(tmp_path / "bundle.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "imported 2 winners" in imported.stdout, imported

    assert tuner.execute(client.device_id, client, tunables, (np.ones(1),)) == first  # kept in memory
    assert tuner.execute(client.device_id, client, tunables, (np.ones(2),)) == other  # read from the file
    tuner.clear()
    for n in (1, 2):
        assert tuner.execute(client.device_id, client, tuner.init(_set), (np.ones(n),)) == other
    assert len(records) == 1  # every winner after the first came from the file: nothing was tuned again

    run("cache", "clear", "--yes")  # cleared meanwhile: the keys in memory are still served, and not re-tuned
    for n in (1, 2):
        assert tuner.execute(client.device_id, client, tuner.init(_set), (np.ones(n),)) == other
    assert len(records) == 1
