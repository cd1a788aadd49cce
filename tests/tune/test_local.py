"""A long-running process and the cache other processes change under it: what it picks up, and when."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from _command import run
from _procs import drop_root, in_child
from _two_devices import SimulatedDevice

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


def test_clear_stored_forgets_this_tuners_stored_winners_on_every_device_and_each_key_is_tuned_again(
    isolated_settings: Path,
) -> None:
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[LenKey, str] = tk.LocalTuner("forgetful", sinks=[records.append])
    tuner.clear(stored=True)  # nothing stored yet: no cache file is made for it
    assert not (isolated_settings / tk.PersistentCache.FILENAME).exists()
    kept: tk.LocalTuner[LenKey, str] = tk.LocalTuner("kept", sinks=[records.append])
    devices = [SimulatedDevice(0), SimulatedDevice(1)]
    for device in devices:
        for n in (1, 2):
            tuner.execute(device.device_id, device, tuner.init(_set), (np.ones(n),))
    kept.execute(devices[0].device_id, devices[0], kept.init(_set), (np.ones(1),))
    cache = tk.PersistentCache(isolated_settings)
    assert cache.put_failure(devices[0].device_id, "forgetful", '{"n":3}', "c", None)  # a recorded failed tune
    assert len(list(cache.rows(tuner="forgetful"))) == 4
    records.clear()

    assert tuner.clear(stored=True) is None
    assert list(cache.rows(tuner="forgetful")) == [] and cache.failed_keys(tuner="forgetful") == []
    assert [(r.tuner, r.key) for r in cache.rows() if not isinstance(r, str)] == [("kept", '{"n":1}')]
    # This process (its memory cleared too) and a new one (nothing in memory) tune each key again, once.
    for device in devices:
        tuner.execute(device.device_id, device, tuner.init(_set), (np.ones(1),))
        fresh: tk.LocalTuner[LenKey, str] = tk.LocalTuner("forgetful", sinks=[records.append])
        fresh.execute(device.device_id, device, fresh.init(_set), (np.ones(2),))
    kept.clear()
    kept.execute(devices[0].device_id, devices[0], kept.init(_set), (np.ones(1),))  # read from the file
    tuned = sorted((r.tuner, r.device_id, r.key["n"]) for r in records if r.decision == "tuned")
    assert tuned == [("forgetful", d.device_id, n) for d in devices for n in (1, 2)]


def test_clear_stored_with_the_cache_off_clears_memory_only(isolated_settings: Path) -> None:
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[LenKey, str] = tk.LocalTuner("cache_off", sinks=[records.append])
    client = CpuClient()
    tuner.execute(client.device_id, client, tuner.init(_set), (np.ones(1),))
    tk.configure(cache=False)  # or TUNEKIT_CACHE=0
    tuner.clear(stored=True)
    assert [r.tuner for r in tk.PersistentCache(isolated_settings).rows()] == ["cache_off"]  # the file is left alone
    tuner.execute(client.device_id, client, tuner.init(_set), (np.ones(1),))
    assert [r.decision for r in records] == ["tuned", "tuned"]  # memory was cleared: nothing to serve it from


@pytest.mark.subprocess
def test_clear_stored_of_a_cache_this_user_may_only_read_raises_naming_the_file_and_still_clears_memory() -> None:
    """A winner that could not be removed would be served again: the caller is told, not left to find out."""
    client = CpuClient()

    def other_user(shared: Path) -> dict[str, object]:
        drop_root()
        tk.configure(cache_dir=shared)
        records: list[tk.AutotuneRecord] = []
        tuner: tk.LocalTuner[LenKey, str] = tk.LocalTuner("read_only", sinks=[records.append])
        for n in (1, 2):  # key 1 read from the file; key 2 tuned, kept in memory only
            tuner.execute(client.device_id, client, tuner.init(_set), (np.ones(n),))
        try:
            tuner.clear(stored=True)
        except OSError as exc:
            error = str(exc)
        else:
            error = ""
        for n in (1, 2):
            tuner.execute(client.device_id, client, tuner.init(_set), (np.ones(n),))
        return {"error": error, "tuned": [r.key["n"] for r in records if r.decision == "tuned"]}

    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)  # the other user must reach the cache directory
        shared = Path(top) / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        tk.configure(cache_dir=shared)
        stored: tk.LocalTuner[LenKey, str] = tk.LocalTuner("read_only")
        stored.execute(client.device_id, client, stored.init(_set), (np.ones(1),))
        database = shared / tk.PersistentCache.FILENAME
        database.chmod(0o444)  # another user's database: this one may read it, not write it
        got = in_child(lambda: other_user(shared))
        left = [r.tuner for r in tk.PersistentCache(shared, read_only=True).rows() if not isinstance(r, str)]
    assert str(database) in got["error"] and "'read_only'" in got["error"], got
    assert "tunekit cache clear --tuner NAME" in got["error"], got
    assert got["tuned"] == [2, 2]  # key 1 served from the file both times; key 2 tuned again: memory was cleared
    assert left == ["read_only"]
