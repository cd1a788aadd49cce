"""Committed records: provenance is checked on load, drift is reported, a verified record seeds the tuner."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import _searched_set
import numpy as np
import pytest
from _searched_set import RowKey
from kt_cache import BEST, write_cache

import tunekit as tk
from tunekit._observe.sinks import CallbackSink
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.replay import ReplayClient, ReplayData, load_kernel_tuner_cache


@tk.autotune_key
class Shape:
    n: Annotated[int, tk.Anchor()]


def key_of(x: np.ndarray) -> Shape:
    return Shape(n=len(x))


@pytest.fixture
def data(tmp_path: Path) -> ReplayData:
    return load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))


def committed(
    data: ReplayData, path: Path, client: ReplayClient | None = None
) -> tuple[tk.Record, tk.TunableSet[Shape, Any]]:
    client = client or ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)
    for n in (1000, 5000):
        result = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=n))
        record.add(Shape(n=n), result)
    record.save(path)
    return record, tunables


def test_a_record_round_trips_with_its_provenance(data: ReplayData, tmp_path: Path) -> None:
    record, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema_version"] == 1
    assert doc["checksum"] == tunables.checksum() and doc["space_hash"] == data.space.hash
    assert [e["key"] for e in doc["entries"]] == [{"n": 1024}, {"n": 8192}]
    entry = doc["entries"][0]
    assert entry["winner"] == "X=4,Y=32,Z=1" and entry["config"] == dict(zip("XYZ", BEST, strict=True))
    assert entry["samples"] == tk.settings().samples and entry["median_ns"] > 0
    assert entry["stopped_by"] == "exhausted" and entry["strategy"] == "exhaustive"
    loaded = tk.Record.load(tmp_path / "r.json")
    assert loaded.model() == record.model()


def test_a_record_is_looked_up_by_key(data: ReplayData, tmp_path: Path) -> None:
    """Reading one key's winner took record.entries[key_to_json(key)]."""
    committed(data, tmp_path / "r.json")
    loaded = tk.Record.load(tmp_path / "r.json")
    entry = loaded.get(Shape(n=1000))  # the bucket n=1024
    assert entry is not None and entry.winner == "X=4,Y=32,Z=1"
    assert Shape(n=5000) in loaded and Shape(n=100) not in loaded and loaded.get(Shape(n=100)) is None
    assert "n=1024" not in loaded
    with pytest.raises(TypeError, match=r"Record.get\(\) takes an @tk.autotune_key instance, got dict"):
        loaded.get({"n": 1024})


def test_a_verified_record_seeds_the_tuner_so_nothing_is_tuned(data: ReplayData, tmp_path: Path) -> None:
    client = ReplayClient(data)
    _, tunables = committed(data, tmp_path / "r.json", client)
    record = tk.Record.load_verified(tmp_path / "r.json", tunables, client.device_id)
    assert record.warnings == ()
    decisions: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed", sinks=[CallbackSink(decisions.append)])
    assert record.seed(tuner, tunables, Shape) == 2
    before = client.clock_ns
    tuner.execute(client.device_id, client, tunables, (np.zeros(1000),))
    assert decisions == [], "a seeded key is never tuned"
    best = data.space.config(dict(zip("XYZ", BEST, strict=True)))
    assert client.clock_ns - before in {round(t * 1e6) for t in data.samples_ms[best]}, "ran the winner once"
    assert tuner.tuner(client.device_id).winners[tunables][Shape(n=1000)].config.values_tuple == BEST  # type: ignore[attr-defined]


@tk.autotune_key
class Plane:
    rows: int
    cols: int


def test_seeding_with_another_key_class_names_both_sets_of_fields(data: ReplayData, tmp_path: Path) -> None:
    """It said only "Plane.__init__() got an unexpected keyword argument 'n'"."""
    client = ReplayClient(data)
    _, tunables = committed(data, tmp_path / "r.json", client)
    record = tk.Record.load_verified(tmp_path / "r.json", tunables, client.device_id)
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed")
    with pytest.raises(tk.RecordMismatch) as raised:
        record.seed(tuner, tunables, Plane)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "record key {'n': 1024} does not build a Plane: the key has fields ['n'], Plane has ['cols', 'rows']; "
        "pass the key class the record's keys were made with, or re-tune with this one and commit a new record"
    )
    assert record.seed(tuner, tunables, Shape) == 2


def test_get_with_another_key_class_is_refused_not_answered_none(data: ReplayData, tmp_path: Path) -> None:
    """record.get(OtherKey(...)) returned None, so production took its defaults for every key, silently."""
    committed(data, tmp_path / "r.json")
    record = tk.Record.load(tmp_path / "r.json")
    with pytest.raises(tk.RecordMismatch, match=r"the key has fields \['n'\], Plane has \['cols', 'rows'\]"):
        record.get(Plane(rows=1024, cols=1))
    assert record.get(Shape(n=100)) is None  # a bucket the record lacks is still None
    assert Plane(rows=1024, cols=1) not in record


def test_a_record_seeded_with_one_set_serves_an_equal_set_built_elsewhere(data: ReplayData, tmp_path: Path) -> None:
    """Seeding with one set object and executing with another (TUNER.init's) tuned the seeded keys afresh."""
    client = ReplayClient(data)
    _, tunables = committed(data, tmp_path / "r.json", client)
    decisions: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed", sinks=[decisions.append])
    tk.Record.load_verified(tmp_path / "r.json", tunables, client.device_id).seed(tuner, tunables, Shape)
    in_use = tuner.init(lambda: tk.TunableSet.from_space(data.space, client.kernel, key=key_of))
    assert in_use is not tunables and in_use.checksum() == tunables.checksum()
    tuner.execute(client.device_id, client, in_use, (np.zeros(1000),))
    assert decisions == [], "a seeded key is never tuned"
    assert tuner.tuner(client.device_id).winners[in_use][Shape(n=1000)].config.values_tuple == BEST  # type: ignore[attr-defined]
    tuner.clear()
    tuner.execute(client.device_id, client, in_use, (np.zeros(1000),))
    assert [d.decision for d in decisions] in (["tuned"], ["cached"]), "clear() forgets seeded winners too"


def test_a_record_from_another_device_is_refused(data: ReplayData, tmp_path: Path) -> None:
    _, tunables = committed(data, tmp_path / "r.json")
    with pytest.raises(tk.RecordMismatch, match="measured on device"):
        tk.Record.load_verified(tmp_path / "r.json", tunables, "replay:another/gpu")


def test_a_record_for_other_candidates_or_another_space_is_refused(data: ReplayData, tmp_path: Path) -> None:
    committed(data, tmp_path / "r.json")
    client = ReplayClient(data)
    bumped = tk.TunableSet.from_space(data.space, client.kernel, key=key_of, version="2")
    with pytest.raises(tk.RecordMismatch, match="checksum"):
        tk.Record.load_verified(tmp_path / "r.json", bumped, client.device_id)
    smaller = tk.Space(X=[1, 2, 4], Y=[16, 32, 64, 128], Z=[0, 1, 2])
    other_space = tk.TunableSet.from_space(smaller, client.kernel, key=key_of)
    with pytest.raises(tk.RecordMismatch, match="space"):
        tk.Record.load_verified(tmp_path / "r.json", other_space, client.device_id)


def test_a_search_with_another_build_is_refused_naming_both(data: ReplayData, tmp_path: Path) -> None:
    """Regression: Record.add took a search of the record's space whose build made other kernels: its winner was
    committed under the name of the set's candidate, which no one had measured."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)

    def doubled(config: tk.Config) -> Any:  # another build function: the set cannot know what it makes
        return client.kernel(config)

    other = tk.search(data.space, doubled, client, (), tuner="replayed", key=Shape(n=1000), max_evals=4, seed=0)
    with pytest.raises(tk.RecordMismatch) as raised:
        record.add(Shape(n=1000), other)
    said = str(raised.value)
    assert f"with {__name__}.test_a_search_with_another_build_is_refused_naming_both.<locals>.doubled (code " in said
    assert "but this record's set builds them with tunekit_backends.replay.ReplayClient.kernel (code " in said
    assert other.build_id is not None and other.build_id in said and not record.entries
    # The set's own build is taken, and so is a loaded record's verified set's.
    same = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=1000), max_evals=4, seed=0)
    record.add(Shape(n=1000), same)
    record.save(tmp_path / "r.json")
    verified = tk.Record.load_verified(tmp_path / "r.json", tunables, client.device_id)
    with pytest.raises(tk.RecordMismatch, match="doubled"):
        verified.add(Shape(n=1000), other)


def test_a_record_refused_for_an_edited_space_says_what_changed(data: ReplayData, tmp_path: Path) -> None:
    """Regression: the refusal named two space hashes only, where the trial log says "Z was [0, 1, 2], is [...]"."""
    path = tmp_path / "r.json"
    committed(data, path)
    assert tk.SpaceModel.model_validate(json.loads(path.read_text())["space"]) == data.space.describe()
    cache = json.loads(data.path.read_text())
    cache["tune_params"]["Z"] = [0, 1, 2, 3]  # a value added to the space, nothing measured for it
    data.path.write_text(json.dumps(cache))  # the same file: the same replayed device
    edited = load_kernel_tuner_cache(data.path)
    client = ReplayClient(edited)
    tunables = tk.TunableSet.from_space(edited.space, client.kernel, key=key_of)
    changed = r"it was searched over space \w+, the running space is \w+ \(Z was \[0, 1, 2\], is \[0, 1, 2, 3\]\);"
    with pytest.raises(tk.RecordMismatch, match=changed):
        tk.Record.load_verified(path, tunables, client.device_id)
    search = tk.search(edited.space, client.kernel, client, (), tuner="replayed", key=Shape(n=1000), max_evals=2)
    with pytest.raises(tk.RecordMismatch, match=r"this record is for \w+ \(Z was \[0, 1, 2\], is \[0, 1, 2, 3\]\)"):
        tk.Record.load(path).add(Shape(n=1000), search)


def test_a_record_written_before_it_kept_its_space_loads_as_before(data: ReplayData, tmp_path: Path) -> None:
    """Records committed without the space field still load, verify and refuse (naming the hashes only)."""
    path = tmp_path / "r.json"
    _, tunables = committed(data, path)
    doc = json.loads(path.read_text())
    del doc["space"]
    path.write_text(json.dumps(doc))
    client = ReplayClient(data)
    record = tk.Record.load_verified(path, tunables, client.device_id)
    assert record.space is None and len(record.entries) == 2
    smaller = tk.TunableSet.from_space(tk.Space(X=[1, 2], Y=[16], Z=[0]), client.kernel, key=key_of)
    with pytest.raises(tk.RecordMismatch, match=r"the running space is \w+; \["):
        tk.Record.load_verified(path, smaller, client.device_id)
    # A search of its space added to it completes the file.
    record.add(Shape(n=100), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=100)))
    record.save(path)
    assert json.loads(path.read_text())["space"] == data.space.describe().model_dump(mode="json")


def test_timing_only_drift_is_a_warning_not_a_refusal(data: ReplayData, tmp_path: Path) -> None:
    _, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["tunekit_version"] = "0.0.9"
    doc["entries"][0]["samples"] = 1
    doc["entries"][1]["measured_at"] = "2020-01-01T00:00:00Z"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    record = tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id)
    text = "\n".join(record.warnings)
    assert "tunekit 0.0.9" in text and "{'n': 1024} with 1 sample" in text and "over a year ago" in text


def test_drift_of_many_entries_is_one_warning_per_kind_naming_a_few(data: ReplayData, tmp_path: Path) -> None:
    """Regression: each thin or old entry was its own warning, so a library's record of many keys
    printed a line per key in every process of every user."""
    _, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    (entry,) = [e for e in doc["entries"] if e["key"] == {"n": 1024}]
    doc["entries"] = [
        {**entry, "key": {"n": 2**p}, "samples": 1, "measured_at": "2020-01-01T00:00:00Z"} for p in range(2, 12)
    ]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    thin, old = tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id).warnings
    assert thin.endswith(
        "r.json: all 10 of its entries were measured with fewer samples than 3 (the adaptive schedule's min_samples): "
        "{'n': 4} with 1 sample, {'n': 8} with 1 sample, {'n': 16} with 1 sample, and 7 more"
    ), thin
    assert "all 10 of its entries were measured over a year ago: {'n': 4} on 2020-01-01," in old and "and 7 more" in old


def test_an_entry_measured_in_the_future_is_a_warning(data: ReplayData, tmp_path: Path) -> None:
    """A measured_at years ahead loaded with no word: it would then never be found stale."""
    _, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["entries"][0]["measured_at"] = "2999-01-01T00:00:00Z"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    record = tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id)
    (warning,) = record.warnings
    assert "1 of its 2 entries was measured in the future here: {'n': 1024} on 2999-01-01; the clock" in warning


def test_a_record_made_and_loaded_under_the_default_schedule_has_no_warning(
    data: ReplayData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: load_verified compared the adaptive schedule's 3-10 kept samples with ``samples`` (10)."""
    monkeypatch.delenv("TUNEKIT_SAMPLES")
    tk.configure()
    assert tk.settings().adaptive and tk.settings().samples == 10
    _, tunables = committed(data, tmp_path / "r.json")
    kept = [e["samples"] for e in json.loads((tmp_path / "r.json").read_text())["entries"]]
    assert min(kept) >= tk.settings().min_samples and min(kept) < 10, kept
    assert tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id).warnings == ()


def test_fewer_samples_than_the_schedule_in_force_requires_is_a_warning(data: ReplayData, tmp_path: Path) -> None:
    _, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["entries"][0]["samples"] = 2
    doc["entries"][1]["samples"] = 5
    (tmp_path / "r.json").write_text(json.dumps(doc))
    device_id = ReplayClient(data).device_id
    tk.configure(min_samples=3)
    (adaptive,) = tk.Record.load_verified(tmp_path / "r.json", tunables, device_id).warnings
    assert (
        "1 of its 2 entries was measured with fewer samples than 3 (the adaptive schedule's min_samples): " in adaptive
    )
    assert adaptive.endswith("{'n': 1024} with 2 samples")
    tk.configure(adaptive=False, samples=10)
    (fixed,) = tk.Record.load_verified(tmp_path / "r.json", tunables, device_id).warnings
    assert fixed.endswith(
        "all 2 of its entries were measured with fewer samples than 10 (the fixed schedule's samples): "
        "{'n': 1024} with 2 samples, {'n': 8192} with 5 samples"
    )


def test_a_winner_that_is_not_first_in_its_ranking_is_refused(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a hand-edited winner passed load while seed silently installed ranking[0] instead."""
    _, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    entry = doc["entries"][0]
    entry["winner"] = entry["ranking"][1]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    pattern = rf"winner '{entry['ranking'][1]}' must be ranking\[0\], which is '{entry['ranking'][0]}'"
    with pytest.raises(tk.RecordMismatch, match=pattern):
        tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id)
    with pytest.raises(ValueError, match="must be ranking"):
        tk.RecordEntry(key={"n": 8}, winner="a", ranking=[], median_ns=1.0, samples=3)


def test_an_entry_whose_config_is_not_its_winner_is_refused(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a hand-edited config loaded and seeded; production ran the winner, the file showed another."""
    _, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    entry = doc["entries"][0]
    other = next(c for c in data.space if c.name != entry["winner"])
    entry["config"] = other.to_dict()
    (tmp_path / "r.json").write_text(json.dumps(doc))
    pattern = rf"its config .* is candidate '{other.name}', not its winner '{entry['winner']}'"
    with pytest.raises(tk.RecordMismatch, match=pattern):
        tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id)


def test_two_entries_for_one_key_are_refused(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a record merged by hand with one key twice loaded, the later entry silently winning."""
    committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["entries"].append(doc["entries"][0])
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(tk.RecordMismatch, match=r"entries 0 and 2 are both for key \{'n': 1024\}"):
        tk.Record.load(tmp_path / "r.json")


def test_ranking_names_that_are_not_candidates_are_refused(data: ReplayData, tmp_path: Path) -> None:
    """Regression: runners-up that are not candidates of the tunables were accepted and dropped silently."""
    record, tunables = committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["entries"][0]["ranking"][1:] = ["X=3,Y=32,Z=1", "nonsense"]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    named = r"\['X=3,Y=32,Z=1', 'nonsense'\] in its rankings are not candidates"
    with pytest.raises(tk.RecordMismatch, match=named):
        tk.Record.load_verified(tmp_path / "r.json", tunables, ReplayClient(data).device_id)
    unverified = tk.Record.load(tmp_path / "r.json")
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed")
    with pytest.raises(tk.RecordMismatch, match="'nonsense'\\] in this record's rankings are not candidates"):
        unverified.seed(tuner, tunables, Shape)
    assert tuner.tuner(record.device_id).winners_names() == [], "nothing was seeded"


def test_a_file_that_is_not_a_record_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"schema_version": 7}')
    with pytest.raises(tk.RecordMismatch, match="not a valid tunekit record"):
        tk.Record.load(tmp_path / "r.json")
    with pytest.raises(FileNotFoundError, match="no committed record"):
        tk.Record.load(tmp_path / "missing.json")


def test_seeding_another_tuner_is_refused(data: ReplayData, tmp_path: Path) -> None:
    """Regression: seed's refusal named the two tuners but not what to do (load_verified's says it)."""
    _, tunables = committed(data, tmp_path / "r.json")
    record = tk.Record.load(tmp_path / "r.json")
    with pytest.raises(tk.RecordMismatch) as refused:
        record.seed(tk.LocalTuner("other"), tunables, Shape)
    assert str(refused.value) == (
        "this record does not apply here: it is for tuner 'replayed', this is tuner 'other'; seed the tuner it was "
        "made for (tk.LocalTuner('replayed')), or the record committed for 'other' into this one "
        "(tk.Record.load_verified(path, tunables, client, tuner=...) checks both at load), "
        "or re-tune and commit a new record"
    )
    elsewhere = tk.LocalTuner[Shape, Any]("replayed").tuner("replay:another/gpu")
    device = r"this tuner runs on 'replay:another/gpu'; seed the record committed for 'replay:another/gpu'"
    with pytest.raises(tk.RecordMismatch, match=device):
        record.seed(elsewhere, tunables, Shape)


def test_load_verified_refuses_a_record_made_for_another_tuner(data: ReplayData, tmp_path: Path) -> None:
    """Regression: load_verified(..., tuner=) did not check the record's tuner; only seed did, so get() served it."""
    record, tunables = committed(data, tmp_path / "r.json")
    path, device = tmp_path / "r.json", record.device_id
    mismatch = r"r\.json does not apply here: it was made for tuner 'replayed', this is tuner 'other'; re-tune"
    with pytest.raises(tk.RecordMismatch, match=mismatch):
        tk.Record.load_verified(path, tunables, device, tuner="other")
    with pytest.raises(tk.RecordMismatch, match=mismatch):
        tk.Record.load_verified(path, tunables, device, tuner=tk.LocalTuner[Shape, Any]("other"))
    with pytest.raises(tk.RecordMismatch, match=r"measured on device .*; it was made for tuner 'replayed'"):
        tk.Record.load_verified(path, tunables, "replay:another/gpu", tuner="other")  # every problem at once
    with pytest.raises(TypeError, match=r"load_verified\(tuner=...\) takes the tuner the record serves.*got ''"):
        tk.Record.load_verified(path, tunables, device, tuner="")
    mine = tk.LocalTuner[Shape, Any]("replayed")
    for tuner in ("replayed", mine, mine.tuner(device), None):  # None: as before, seed checks the tuner
        assert tk.Record.load_verified(path, tunables, device, tuner=tuner).get(Shape(n=1000)) is not None


def test_a_saved_record_is_readable_by_others_and_keeps_its_mode(tmp_path: Path) -> None:
    """Regression: Record.save wrote 0600 (mkstemp) and reset a replaced file to it: CI could not read it."""
    path = tmp_path / "tuning" / "r.json"
    tk.Record("gemm", "cpu:test", "abc").save(path)
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    path.chmod(0o664)
    tk.Record("gemm", "cpu:test", "abc").save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o664
    assert tk.Record.load(path).checksum == "abc"


def test_adding_something_other_than_a_search_result_is_refused(data: ReplayData) -> None:
    """record.add(key, result.best) failed as "'Trial' object has no attribute 'tuner'"."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)
    result = tk.search(data.space, client.kernel, client, (), tuner="replayed", max_evals=2)
    with pytest.raises(TypeError, match=r"Record.add\(\) takes the tk.SearchResult .* got BestTrial"):
        record.add(Shape(n=8), result.best)  # type: ignore[arg-type]
    assert record.entries == {}


def test_a_record_for_an_empty_tuner_or_device_or_no_set_is_refused() -> None:
    """Record.for_tunables('', ...) made a record that no tuner could ever be seeded from."""
    tunables = tk.TunableSet(key=key_of).with_tunable(tk.Tunable("a", lambda x: x))
    with pytest.raises(ValueError, match=r"tk.Record.for_tunables\(tuner=...\) must be a non-empty str, got ''"):
        tk.Record.for_tunables("", "cpu", tunables)
    with pytest.raises(
        TypeError, match=r"for_tunables\(device_id=...\) takes the client \(a tk.Client\) or .*got None"
    ):
        tk.Record.for_tunables("t", None, tunables)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"takes a tk.TunableSet, got list"):
        tk.Record.for_tunables("t", "cpu", [tunables])  # type: ignore[arg-type]


def test_a_record_is_made_for_the_local_tuner_it_serves(data: ReplayData, tmp_path: Path) -> None:
    """for_tunables(TUNER, ...) was refused as "must be a non-empty str", though load_verified(tuner=TUNER) takes it."""
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed_local")
    tunables = tk.TunableSet.from_space(data.space, ReplayClient(data).kernel, key=key_of)
    record = tk.Record.for_tunables(tuner, "cpu", tunables)
    record.save(tmp_path / "r.json")
    assert tk.Record.load_verified(tmp_path / "r.json", tunables, "cpu", tuner=tuner).model().tuner == "replayed_local"


def test_loading_or_seeding_with_the_wrong_arguments_names_them(data: ReplayData, tmp_path: Path) -> None:
    """load_verified(path, space, ...) failed as "'Space' object has no attribute 'checksum'"; seed(..., dict) as a
    key "not JSON-serialisable"; a missing file told to use tk.Record(...), which needs a checksum by hand."""
    record, tunables = committed(data, tmp_path / "r.json")
    device = ReplayClient(data).device_id
    with pytest.raises(TypeError, match=r"load_verified\(\) takes the running tk.TunableSet .* got (Replay)?Space"):
        tk.Record.load_verified(tmp_path / "r.json", data.space, device)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"load_verified\(device_id=...\) takes .* got None"):
        tk.Record.load_verified(tmp_path / "r.json", tunables, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Record.seed\(key_type=...\) takes the @tk.autotune_key class .* got dict$"):
        record.seed(tk.LocalTuner("replayed"), tunables, dict)
    with pytest.raises(TypeError, match=r"Record.seed\(\) takes the tk.LocalTuner \(or Tuner\) to seed, got str"):
        record.seed("replayed", tunables, Shape)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Record.seed\(\) takes the running tk.TunableSet"):
        record.seed(tk.LocalTuner("replayed"), data.space, Shape)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match=r"tk.Record.for_tunables\(tuner, client, tunables\)"):
        tk.Record.load(tmp_path / "missing.json")
    # A directory said only "[Errno 21] Is a directory", where save() to one says what to give.
    with pytest.raises(IsADirectoryError, match="give the record's file path in it"):
        tk.Record.load_verified(tmp_path, tunables, device)


def test_a_search_added_under_another_key_is_refused(data: ReplayData) -> None:
    """record.add(Shape(n=1024), the search for n=8192) committed that winner for a size it was never measured at."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)
    result = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=8192), max_evals=3)
    with pytest.raises(tk.RecordMismatch, match=r"the search ran for key Shape\(n=8192\), not Shape\(n=1024\)"):
        record.add(Shape(n=1024), result)
    assert record.entries == {}
    record.add(Shape(n=5000), result)  # the same bucket, built from another size
    assert result.key == Shape(n=8192) and list(record.entries) == ['{"n":8192}']


@tk.autotune_key
class Count:
    n: int


@tk.autotune_key
class Width:
    m: int


@tk.autotune_key
class AnchoredCount:
    n: Annotated[int, tk.Anchor()]  # Count's field, anchored: other buckets


def count_of(x: np.ndarray) -> Count:
    return Count(n=len(x))


def test_a_record_refuses_a_key_of_another_class_when_it_is_added(data: ReplayData) -> None:
    """A record of Count(n) entries took a Width(m) entry (both anchor nothing, all that was compared), and seed
    refused the committed file in production; an empty record took a Width into a set whose keys are Counts."""
    client = ReplayClient(data)
    record = tk.Record.for_tunables(
        "replayed", client.device_id, tk.TunableSet.from_space(data.space, client.kernel, key=count_of)
    )
    width = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Width(m=8), max_evals=2)
    with pytest.raises(
        tk.RecordMismatch, match=r"Width\(m=8\) is no Count, the key class of the record's set .*count_of"
    ):
        record.add(Width(m=8), width)  # type: ignore[arg-type]
    assert record.entries == {}
    record.add(
        Count(n=8), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Count(n=8), max_evals=2)
    )
    untyped = tk.Record.for_tunables(
        "replayed", client.device_id, tk.TunableSet.from_space(data.space, client.kernel, key=lambda: Count(n=1))
    )
    untyped.add(
        Count(n=8), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Count(n=8), max_evals=2)
    )
    for mixed in (record, untyped):  # a lambda declares no class: the first entry's fields decide
        with pytest.raises(
            tk.RecordMismatch, match=r"Width\(m=8\) has fields \['m'\], but this record holds keys with fields \['n'\]"
        ):
            mixed.add(Width(m=8), width)  # type: ignore[arg-type]
        assert [entry.key for entry in mixed.entries.values()] == [{"n": 8}]
    anchored = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=AnchoredCount(n=8), max_evals=2)
    with pytest.raises(tk.RecordMismatch, match=r"anchored on \[\], but AnchoredCount anchors \['n'\]"):
        untyped.add(AnchoredCount(n=8), anchored)  # type: ignore[arg-type]


def test_a_record_under_the_home_directory_is_saved_and_loaded_there(
    data: ReplayData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record.save("~/r.json") wrote ./~/r.json, a directory named "~" in the working directory."""
    record, _ = committed(data, tmp_path / "r.json")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    record.save("~/tuning/r.json")
    assert (tmp_path / "home" / "tuning" / "r.json").is_file() and not (tmp_path / "~").exists()
    assert tk.Record.load("~/tuning/r.json").model() == record.model()


def test_a_record_without_entries_loads_with_a_warning(data: ReplayData, tmp_path: Path) -> None:
    """A record saved before anything was added loaded silently, and production then tuned every key."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    tk.Record.for_tunables("replayed", client.device_id, tunables).save(tmp_path / "r.json")
    loaded = tk.Record.load_verified(tmp_path / "r.json", tunables, client.device_id)
    assert [w.split(": ", 1)[1] for w in loaded.warnings] == [
        "holds no entries, so every key is tuned here; add search results (record.add) and save"
    ]


def test_saving_under_a_file_names_that_file(data: ReplayData, tmp_path: Path) -> None:
    """record.save("notes.txt/r.json") said only "[Errno 17] File exists: 'notes.txt'"."""
    record, _ = committed(data, tmp_path / "r.json")
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(NotADirectoryError, match=r"notes.txt is a file, not a directory; give a path in a directory"):
        record.save(tmp_path / "notes.txt" / "sub" / "r.json")


def test_a_record_of_a_newer_tunekit_loads_and_a_resave_keeps_its_new_fields(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a field added within schema_version 1 made an older tunekit refuse the committed record."""
    path = tmp_path / "r.json"
    _, tunables = committed(data, path)
    doc = json.loads(path.read_text())
    doc["reviewed_by"] = "ci"
    doc["space_hash_algorithm"] = {"name": "sha256", "version": 2}
    doc["entries"][0]["p99_ns"] = 1234.5
    path.write_text(json.dumps(doc))
    record = tk.Record.load_verified(path, tunables, ReplayClient(data).device_id)
    record.save(path)  # e.g. after adding an entry: what the newer version wrote stays
    again = json.loads(path.read_text())
    assert again["reviewed_by"] == "ci" and again["space_hash_algorithm"] == {"name": "sha256", "version": 2}
    assert again["entries"][0]["p99_ns"] == 1234.5
    doc["schema_version"] = 2
    path.write_text(json.dumps(doc))
    with pytest.raises(tk.RecordMismatch, match="schema_version"):
        tk.Record.load(path)


def _committed_at(level: str, data: ReplayData, path: Path, sizes: tuple[int, ...]) -> tk.TunableSet[Shape, Any]:
    """A record of ``sizes`` tuned and saved at ``level`` (the keys are anchored when built, at the level then)."""
    tk.configure(autotune_level=level)
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)
    for n in sizes:
        record.add(Shape(n=n), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=n)))
    record.save(path)
    return tunables


@pytest.mark.parametrize(("made", "used"), [("balanced", "minimal"), ("minimal", "balanced")])
def test_a_record_made_at_one_autotune_level_is_refused_at_another_naming_both(
    data: ReplayData, tmp_path: Path, made: str, used: str
) -> None:
    """Regression: seeded at another level, a record's keys were re-anchored to that level's buckets: entries served
    sizes they were never measured for, and two (n=2048 and n=4096 at balanced) landed on one minimal bucket."""
    path = tmp_path / "r.json"
    tunables = _committed_at(made, data, path, (1500, 3000))
    assert json.loads(path.read_text())["autotune_level"] == made
    device = ReplayClient(data).device_id
    tk.configure(autotune_level=used)
    expected = rf"autotune_level='{made}' and this process runs at '{used}'.*TUNEKIT_AUTOTUNE_LEVEL={made}"
    with pytest.raises(tk.RecordMismatch, match=expected):
        tk.Record.load_verified(path, tunables, device)
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed")
    with pytest.raises(tk.RecordMismatch, match=expected):
        tk.Record.load(path).seed(tuner, tunables, Shape)
    assert tuner.tuner(device).winners == {}, "nothing was seeded"
    # Run at the level it was made at, as the message says, and it seeds every entry.
    tk.configure(autotune_level=made)
    record = tk.Record.load_verified(path, tunables, device)
    assert record.warnings == ()
    assert record.seed(tuner, tunables, Shape) == len(record.entries)


def test_a_record_without_its_level_is_seeded_only_where_its_keys_are_buckets_of_the_running_level(
    data: ReplayData, tmp_path: Path
) -> None:
    """A record saved before levels were kept: a key that re-anchors elsewhere shows it came from another level."""
    path = tmp_path / "r.json"
    tunables = _committed_at("balanced", data, path, (1500, 3000))
    doc = json.loads(path.read_text())
    del doc["autotune_level"]
    path.write_text(json.dumps(doc))
    device = ReplayClient(data).device_id
    tk.configure(autotune_level="minimal")
    record = tk.Record.load_verified(path, tunables, device)
    assert any("written before records kept their autotune level" in w for w in record.warnings)
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("replayed")
    with pytest.raises(
        tk.RecordMismatch,
        match=r"1 of this record's keys .* at autotune_level='minimal' \(\{'n': 2048\} -> \{'n': 4096\}\)",
    ):
        record.seed(tuner, tunables, Shape)
    assert tuner.tuner(device).winners == {}, "nothing was seeded"
    tk.configure(autotune_level="balanced")
    assert record.seed(tuner, tunables, Shape) == 2


def test_add_asks_whether_the_key_is_a_bucket_of_the_records_level_not_which_level_is_in_force(
    data: ReplayData,
) -> None:
    """Regression: add compared the level in force at add with the record's: a key built at balanced (n=2048, no
    bucket at minimal) went into a minimal record once minimal was in force, and seed refused that record in
    production; a key built at the record's own level was refused once another level was in force."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    tk.configure(autotune_level="minimal")
    minimal = tk.Record.for_tunables("replayed", client.device_id, tunables)
    tk.configure(autotune_level="balanced")
    balanced = tk.Record.for_tunables("replayed", client.device_id, tunables)
    key = Shape(n=1500)  # anchored at balanced: 2048; at minimal 1500 falls in 4096
    result = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=key, max_evals=2)
    tk.configure(autotune_level="minimal")
    with pytest.raises(
        tk.RecordMismatch,
        match=r"Shape\(n=2048\) is no key bucket of autotune_level='minimal'.*\(n=2048 falls in bucket 4096 there\)",
    ):
        minimal.add(key, result)
    assert minimal.entries == {}
    balanced.add(key, result)
    assert list(balanced.entries) == ['{"n":2048}']
    # A key built at minimal whose value is a balanced bucket too (4096) is one of the balanced record's buckets.
    built_at_minimal = Shape(n=3000)
    searched = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=built_at_minimal, max_evals=2)
    balanced.add(built_at_minimal, searched)
    assert list(balanced.entries) == ['{"n":2048}', '{"n":4096}']


@tk.autotune_key
class Rows:
    rows: int  # no anchor: the same key at every autotune level


def test_a_record_of_a_key_class_without_anchors_applies_at_every_level(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a record made at minimal was refused at balanced (and the reverse) even when its key class anchors
    nothing, so its keys are the same buckets at every level; add refused such keys once the level changed too."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=lambda x: Rows(rows=len(x)))
    tk.configure(autotune_level="minimal")
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)
    for rows, level in ((1500, "minimal"), (3000, "balanced")):
        tk.configure(autotune_level=level)
        key = Rows(rows=rows)
        record.add(key, tk.search(data.space, client.kernel, client, (), tuner="replayed", key=key, max_evals=3))
    with pytest.raises(tk.RecordMismatch, match=r"fields \['n'\], but this record holds keys with fields \['rows'\]"):
        record.add(Shape(n=1500), tk.search(data.space, client.kernel, client, (), tuner="replayed", max_evals=2))
    path = tmp_path / "r.json"
    record.save(path)
    doc = json.loads(path.read_text())
    assert doc["autotune_level"] == "minimal" and doc["anchored_fields"] == []
    verified = tk.Record.load_verified(path, tunables, client.device_id)  # at balanced
    assert any("tuned at autotune_level='minimal', running at 'balanced'" in w for w in verified.warnings)
    decisions: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[Rows, None] = tk.LocalTuner("replayed", sinks=[decisions.append])
    assert verified.seed(tuner, tunables, Rows) == 2
    tuner.execute(client.device_id, client, tunables, (np.zeros(1500),))
    assert decisions == [], "a seeded key is never tuned"
    # A file that predates anchored_fields: load_verified cannot tell, seed knows the key class.
    del doc["anchored_fields"]
    path.write_text(json.dumps(doc))
    with pytest.raises(tk.RecordMismatch, match="autotune_level='minimal' and this process runs at 'balanced'"):
        tk.Record.load_verified(path, tunables, client.device_id)
    assert tk.Record.load(path).seed(tk.LocalTuner("replayed"), tunables, Rows) == 2


def test_a_record_that_keeps_its_level_with_a_key_off_its_buckets_says_why(data: ReplayData, tmp_path: Path) -> None:
    """A hand-edited key (n=3000 at balanced) was blamed on the record predating records keeping their level."""
    path = tmp_path / "r.json"
    _, tunables = committed(data, path)
    doc = json.loads(path.read_text())
    doc["entries"][0]["key"]["n"] = 3000
    path.write_text(json.dumps(doc))
    record = tk.Record.load_verified(path, tunables, ReplayClient(data).device_id)
    with pytest.raises(
        tk.RecordMismatch, match=r"n': 3000\} -> \{'n': 4096\}\): the record was made at 'balanced' too"
    ):
        record.seed(tk.LocalTuner("replayed"), tunables, Shape)


def test_levels_that_share_buckets_load_with_a_warning_not_a_refusal(data: ReplayData, tmp_path: Path) -> None:
    """Only minimal changes the buckets: a record tuned at extensive serves balanced, noting the other threshold."""
    path = tmp_path / "r.json"
    tunables = _committed_at("extensive", data, path, (1500, 3000))
    tk.configure(autotune_level="balanced")
    record = tk.Record.load_verified(path, tunables, ReplayClient(data).device_id)
    assert any("tuned at autotune_level='extensive', running at 'balanced'" in w for w in record.warnings)
    assert record.seed(tk.LocalTuner("replayed"), tunables, Shape) == 2


def test_a_trial_log_given_as_a_record_is_named(data: ReplayData, tmp_path: Path) -> None:
    """Record.load of a search's trial log said "Invalid JSON: trailing characters", not what the file is."""
    client = ReplayClient(data)
    tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=2, log=tmp_path / "t.jsonl")
    with pytest.raises(tk.RecordMismatch, match=r"t.jsonl is a trial log \(written by tk.search\(log=...\)\).*not a"):
        tk.Record.load(tmp_path / "t.jsonl")


FILL = """
__kernel void fill(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (float)(BLOCK);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
def test_a_record_of_an_opencl_template_names_its_candidates_as_the_template_does(tmp_path: Path) -> None:
    """Regression: add() named winners config.name ('BLOCK=16'), a template's candidates are 'fill[BLOCK=16]': the
    record of a tk.search over a KernelTemplate was refused by load_verified as naming no candidate."""
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(FILL, "fill", {"BLOCK": [8, 16, 32]}, geometry=lambda c, k: ((k.n,), (int(c.BLOCK),)))
    tunables = template.tunable_set(client, key=lambda y, n: Shape(n=int(n)))
    y = cla.zeros(client.queue, 64, np.float32)

    def build(config: tk.Config) -> Any:
        index = tunables.index_of(template.name_of(config))
        assert index is not None
        return tunables.tunables[index].fn

    def searched(n: int) -> tk.SearchResult:
        return tk.search(template.space, build, client, (y, np.int32(n)), tuner="fill", key=Shape(n=n))

    record = tk.Record.for_tunables("fill", client.device_id, tunables)
    entry = record.add(Shape(n=64), searched(64))
    assert entry.config is not None and entry.winner == template.name_of(template.space.config(entry.config))
    assert sorted(entry.ranking) == ["fill[BLOCK=16]", "fill[BLOCK=32]", "fill[BLOCK=8]"]
    path = tmp_path / "fill.json"
    record.save(path)
    verified = tk.Record.load_verified(path, tunables, client.device_id)
    tuner: tk.LocalTuner[Shape, Any] = tk.LocalTuner("fill")
    assert verified.seed(tuner, tunables, Shape) == 1
    assert tuner.tuner(client.device_id).winners_names() == [entry.winner]
    # A plain load() cannot know the template's naming: adding to it is refused rather than written wrong ...
    with pytest.raises(tk.RecordMismatch, match=r"its own way \('fill\[BLOCK=\d+\]' for 'BLOCK=\d+'\).*load_verified"):
        tk.Record.load(path).add(Shape(n=32), searched(32))
    # ... and a verified one names them as its set does.
    assert verified.add(Shape(n=32), searched(32)).winner.startswith("fill[")
    # A search over configurations the set does not hold is refused at add, not at the next load.
    wider = tk.search(
        tk.Space(BLOCK=[8, 64]),
        lambda config: build(template.space.config(BLOCK=8)),
        client,
        (y, np.int32(64)),
        tuner="fill",
        key=Shape(n=64),
    )
    with pytest.raises(tk.RecordMismatch, match=r"'fill\[BLOCK=64\]'.* not candidates of the record's"):
        record.add(Shape(n=64), wider)


@tk.autotune_key
class Small:
    n: Annotated[int, tk.Anchor(min=3)]


def test_a_record_of_a_key_anchored_to_a_min_off_the_powers_is_seeded_and_served(
    data: ReplayData, tmp_path: Path
) -> None:
    """Anchor(min=3) sent n=1 to 3 and the stored 3 to 4: seeding refused the record or missed its key."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=lambda x: Small(n=len(x)))
    record = tk.Record.for_tunables("replayed", client.device_id, tunables)
    key = Small(n=1)
    assert key.n == 3
    record.add(key, tk.search(data.space, client.kernel, client, (), tuner="replayed", key=key))
    record.save(tmp_path / "r.json")
    decisions: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[Small, None] = tk.LocalTuner("replayed", sinks=[decisions.append])
    loaded = tk.Record.load_verified(tmp_path / "r.json", tunables, client.device_id)
    assert loaded.seed(tuner, tunables, Small) == 1
    tuner.execute(client.device_id, client, tunables, (np.zeros(2),))
    assert decisions == [], "the seeded bucket serves n=2 without a tune"


def test_a_record_of_another_schema_version_is_refused_as_another_tunekits(data: ReplayData, tmp_path: Path) -> None:
    """A newer tunekit's record was refused as 'not a valid tunekit record file', as if it were no record."""
    committed(data, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    (tmp_path / "r.json").write_text(json.dumps(doc | {"schema_version": 2}))
    with pytest.raises(tk.RecordMismatch, match="record of schema_version 2, written by another tunekit version"):
        tk.Record.load(tmp_path / "r.json")


@pytest.mark.subprocess
def test_the_tunes_execute_ran_are_committed_and_a_fresh_process_seeds_them_without_tuning(tmp_path: Path) -> None:
    """Regression: a search inside execute (with_search) had no way into a record; only tk.search's result did."""
    tunes: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[RowKey, Any] = tk.LocalTuner("rows", sinks=[tunes.append])
    client = CpuClient()
    tunables = tuner.init(_searched_set.make)
    for n in _searched_set.SIZES:
        tuner.execute(client.device_id, client, tunables, _searched_set.inputs(n))
    record = tk.Record.for_tunables("rows", client.device_id, tunables)
    for tune in tunes:
        record.add_tune(tune, RowKey)
    path = tmp_path / "rows.json"
    record.save(path)
    entries = json.loads(path.read_text())["entries"]
    assert [e["key"] for e in entries] == [{"n": 1024}, {"n": 4096}]
    for entry, tune in zip(entries, tunes, strict=True):
        winner = next(c for c in tune.candidates if c.name == tune.winner)
        assert winner.stats is not None
        assert entry["winner"] == entry["ranking"][0] == tune.winner
        assert entry["median_ns"] == winner.stats.median_ns
        assert entry["config"] == {"CHUNK": int(entry["winner"].split("=")[1])}
        assert (entry["strategy"], entry["evaluations"], entry["stopped_by"]) == ("model_ils", 3, "max_evals")
    env = {**os.environ, "TUNEKIT_CACHE_DIR": str(tmp_path / "production-cache")}  # nothing stored to fall back on
    helper = Path(__file__).resolve().parents[1] / "_searched_set.py"
    done = subprocess.run(
        [sys.executable, str(helper), str(path)], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == {"seeded": 2, "tunes": 0, "warnings": []}


def test_a_tune_is_refused_where_it_answers_another_question(tmp_path: Path) -> None:
    """Another key, tuner or set, a tune that measured nothing and a tk.search's record are refused, naming why."""
    tunes: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[RowKey, Any] = tk.LocalTuner("rows", sinks=[tunes.append])
    client = CpuClient()
    tunables = tuner.init(_searched_set.make)
    tuner.execute(client.device_id, client, tunables, _searched_set.inputs(1000))
    (tune,) = tunes
    record = tk.Record.for_tunables("rows", client.device_id, tunables)
    moved = tune.model_copy(update={"key": {"n": 1000}})
    with pytest.raises(tk.RecordMismatch, match=r"key \{'n': 1000\} is no key bucket here, where it builds RowKey"):
        record.add_tune(moved, RowKey)
    with pytest.raises(tk.RecordMismatch, match="does not build a Shape"):
        record.add_tune(tune.model_copy(update={"key": {"m": 1}}), Shape)
    with pytest.raises(TypeError, match="takes the @tk.autotune_key class"):
        record.add_tune(tune, dict)
    with pytest.raises(TypeError, match=r"is added with record.add_tune\(tune, KeyClass\)"):
        record.add(RowKey(n=1024), tune)  # type: ignore[arg-type]
    with pytest.raises(tk.RecordMismatch, match="this record is for tuner 'other'"):
        tk.Record.for_tunables("other", client.device_id, tunables).add_tune(tune, RowKey)
    edited = tk.Record.for_tunables("rows", client.device_id, _searched_set.make().with_extra("checksum:v", "2"))
    with pytest.raises(tk.RecordMismatch, match="the tune measured a set of checksum"):
        edited.add_tune(tune, RowKey)
    with pytest.raises(ValueError, match="'disabled' record .* has no measured winner"):
        record.add_tune(tune.model_copy(update={"decision": "disabled"}), RowKey)
    inputs = _searched_set.inputs(1000)
    searched_records: list[tk.AutotuneRecord] = []
    searched = tk.search(
        _searched_set.SPACE,
        _searched_set.build,
        client,
        inputs,
        tuner="rows",
        key=RowKey(n=1024),
        sinks=[searched_records.append],
    )
    (searched_record,) = searched_records
    with pytest.raises(tk.RecordMismatch, match="a tk.search is added as the SearchResult it returned"):
        record.add_tune(searched_record, RowKey)
    assert record.add(RowKey(n=1024), searched).winner == searched.best.config.name
    assert record.add_tune(tune, RowKey).winner == tune.winner  # replaces the entry, as add does
    with pytest.raises(TypeError, match=r"a search result is added with record.add\(key, result\)"):
        record.add_tune(searched, RowKey)  # type: ignore[arg-type]
    # Regression: a line of tk.read_records (which the docs offer beside a sink) was refused as "got RecordLine".
    records_file = tmp_path / "records.jsonl"
    records_file.write_text(tune.model_dump_json() + "\n")
    (line,) = tk.read_records(records_file)
    with pytest.raises(
        TypeError, match=r"got RecordLine; tk.read_records yields lines: pass a tk.RecordLine's \.record"
    ):
        record.add_tune(line, RowKey)  # type: ignore[arg-type]
    assert isinstance(line, tk.RecordLine) and record.add_tune(line.record, RowKey).winner == tune.winner


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no process can create a file")
def test_a_record_that_cannot_be_written_is_named_with_what_to_do(data: ReplayData) -> None:
    """Regression: it said "No such file or directory: '/proc/.r.json.86305799eca6.tmp'", a file never asked for."""
    record = tk.Record.for_tunables("replayed", "dev", tk.TunableSet.from_space(data.space, lambda c: c, key=key_of))
    with pytest.raises(OSError, match=r"cannot save the record /proc/r\.json: .*; give a path in a dir") as caught:
        record.save("/proc/r.json")
    assert ".tmp" not in str(caught.value) and caught.value.filename == "/proc/r.json"


def _add_in_child(data: ReplayData, path: Path, n: int, ready: Path, others: list[Path]) -> None:
    """In a forked child: read the record (or start one), wait until every child has, add key ``n``, save."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = (
        tk.Record.load_verified(path, tunables, client.device_id)
        if path.exists()
        else tk.Record.for_tunables("replayed", client.device_id, tunables)
    )
    ready.touch()
    deadline = time.monotonic() + 30
    while not all(p.exists() for p in others) and time.monotonic() < deadline:
        time.sleep(0.005)
    result = tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=n))
    record.add(Shape(n=n), result)
    record.save(path)


@pytest.mark.subprocess
def test_processes_adding_their_keys_to_one_record_at_once_lose_none(data: ReplayData, tmp_path: Path) -> None:
    """Regression: each process read the record, added its key, replaced the file: only the last one's stayed."""
    path = tmp_path / "r.json"
    committed(data, path)  # keys 1024 and 8192 already committed
    sizes = (100, 300, 2000)
    ready = [tmp_path / f"ready.{n}" for n in sizes]
    pids = []
    for n, mine in zip(sizes, ready, strict=True):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                _add_in_child(data, path, n, mine, ready)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    assert all(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in pids)
    keys = [e["key"]["n"] for e in json.loads(path.read_text())["entries"]]
    assert sorted(keys) == [128, 512, 1024, 2048, 8192]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no lock or temporary file left


def test_saving_keeps_the_files_other_keys_and_its_newer_entries_but_replaces_another_sets_record(
    data: ReplayData, tmp_path: Path
) -> None:
    """A fresh record saved over a committed one of the same set dropped every key it did not hold."""
    path = tmp_path / "r.json"
    _, tunables = committed(data, path)
    client = ReplayClient(data)
    first = tk.Record.load_verified(path, tunables, client.device_id)
    second = tk.Record.load_verified(path, tunables, client.device_id)
    retuned = second.add(
        Shape(n=1000), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=1000))
    )
    second.save(path)
    first.add(Shape(n=100), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=100)))
    first.save(path)  # it holds the 1024 entry as it read it, before `second` re-tuned it
    saved = tk.Record.load(path)
    assert sorted(e.key["n"] for e in saved.entries.values()) == [128, 1024, 8192]
    assert saved.get(Shape(n=1000)) == retuned
    assert first.model() == saved.model()  # the record holds what it wrote
    fresh = tk.Record.for_tunables("replayed", client.device_id, tunables)
    fresh.add(Shape(n=5000), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=5000)))
    fresh.save(path)
    assert sorted(e.key["n"] for e in tk.Record.load(path).entries.values()) == [128, 1024, 8192]
    bumped = tk.TunableSet.from_space(data.space, client.kernel, key=key_of, version="2")
    other = tk.Record.for_tunables("replayed", client.device_id, bumped)
    other.add(Shape(n=100), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=100)))
    other.save(path)  # other candidates: the old winners answer another question
    assert [e.key["n"] for e in tk.Record.load(path).entries.values()] == [128]


def test_saving_over_a_file_that_is_no_record_is_refused_and_leaves_it(data: ReplayData, tmp_path: Path) -> None:
    """Regression: record.save(path) replaced whatever the path held: a trial log or a Kernel Tuner cache given by
    mistake was lost."""
    client = ReplayClient(data)
    log = tmp_path / "trials.jsonl"
    tk.search(data.space, client.kernel, client, (), tuner="replayed", max_evals=3, log=log)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema_version": 2, "tuner": "replayed", "device_id": "d", "entries": []}))
    source = tmp_path / "gemm.py"
    source.write_text("print('the kernel')\n")
    kt_cache = write_cache(tmp_path / "kt.json")
    # This version's record, hand-merged with one key twice: it was said to be another version's.
    _, _ = committed(data, tmp_path / "merged.json")
    merged = tmp_path / "merged.json"
    doubled = json.loads(merged.read_text())
    doubled["entries"].append(doubled["entries"][0])
    merged.write_text(json.dumps(doubled))
    says = {
        merged: r"it holds a committed record that does not validate \(tk.Record.load says why",
        log: "it holds a trial log",
        kt_cache: "it holds a Kernel Tuner cache file",
        newer: "it holds a committed record of schema_version 2, written by another tunekit version",
        source: "it holds a file that is no committed record",
    }
    record, _ = committed(data, tmp_path / "r.json")
    for path, what in says.items():
        before = path.read_bytes()
        with pytest.raises(
            FileExistsError, match=rf"not saving the record over {re.escape(str(path))}: {what}.*delete that file first"
        ):
            record.save(path)
        assert path.read_bytes() == before
    empty = tmp_path / "empty.json"
    empty.touch()
    record.save(empty)  # nothing there to lose
    assert tk.Record.load(empty).model() == record.model()


def test_an_entry_deleted_from_a_loaded_record_stays_deleted_when_saved(data: ReplayData, tmp_path: Path) -> None:
    """Regression: save merged the file's entries back, so `del record.entries[k]; record.save(path)` kept k."""
    path = tmp_path / "r.json"
    _, tunables = committed(data, path)
    record = tk.Record.load(path)
    (stale, *kept) = sorted(record.entries)
    assert kept
    del record.entries[stale]
    record.save(path)
    assert sorted(tk.Record.load(path).entries) == kept
    client = ReplayClient(data)
    again = tk.Record.load_verified(path, tunables, client.device_id)
    again.add(Shape(n=100), tk.search(data.space, client.kernel, client, (), tuner="replayed", key=Shape(n=100)))
    again.save(path)  # nothing deleted this time: the file keeps every key it had
    assert len(tk.Record.load(path).entries) == len(kept) + 1


@tk.autotune_key
class _Derived:
    m: int
    n: int
    total: int = dataclasses.field(default=0, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.m * self.n)


def test_a_key_with_a_derived_init_false_field_is_recorded_and_seeded() -> None:
    """Regression: a key was rebuilt from every stored field, and a field(init=False) is no argument."""
    tk.configure(warmup_ms=1.0)
    tunes: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[_Derived, int] = tk.LocalTuner("derived", sinks=[tunes.append])
    tunables = tk.TunableSet(key=lambda xs: _Derived(m=len(xs), n=2)).with_tunables(
        [tk.Tunable("sum", sum), tk.Tunable("loop", lambda xs: sum(x for x in xs))]
    )
    client = CpuClient()
    assert tuner.execute(client.device_id, client, tunables, (list(range(10)),)) == 45
    record = tk.Record.for_tunables("derived", client.device_id, tunables)
    (tune,) = tunes
    assert tune.key == {"m": 10, "n": 2, "total": 20}
    entry = record.add_tune(tune, _Derived)
    assert entry.key == {"m": 10, "n": 2, "total": 20}
    fresh: tk.LocalTuner[_Derived, int] = tk.LocalTuner("derived")
    assert record.seed(fresh, tunables, _Derived) == 1
