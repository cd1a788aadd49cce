"""Replay client: Kernel Tuner cache files (.json, .json.gz) as a device with a virtual clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kt_cache import BEST, COMPILE_FAILED, PARAMS, RUNTIME_FAILED, allowed, mean_ms, write_cache

import tunekit as tk
from tunekit_backends.replay import ReplayClient, ReplayFailure, load_kernel_tuner_cache

SHARED = Path(__file__).resolve().parents[3] / "shared" / "tuning-data"


@pytest.mark.parametrize("name", ["cache.json", "cache.json.gz"])
def test_loads_the_space_failures_and_samples(tmp_path: Path, name: str) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / name))
    assert data.space.names == ("X", "Y", "Z")
    assert data.space.cartesian_size == 5 * 4 * 3
    expected = {(x, y, z) for x in PARAMS["X"] for y in PARAMS["Y"] for z in PARAMS["Z"] if allowed(x, y, z)}
    assert {c.values_tuple for c in data.space} == expected
    assert {c.values_tuple: r for c, r in data.failures.items()} == {
        COMPILE_FAILED: "CompilationFailedConfig",
        RUNTIME_FAILED: "RuntimeFailedConfig",
    }
    assert len(data.samples_ms) == len(expected) - 2
    assert data.best_ms == pytest.approx(mean_ms(*BEST))
    assert data.gpu == f"{tmp_path.name}/cache"


def test_the_device_id_does_not_depend_on_the_directory_the_file_is_named_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file named from its own folder ("c.json") replayed as device "replay:/c": its logs were refused elsewhere."""
    path = write_cache(tmp_path / "c.json")
    monkeypatch.chdir(tmp_path)
    ids = {
        ReplayClient(load_kernel_tuner_cache(p)).device_id
        for p in ("c.json", "./c.json", path, f"../{tmp_path.name}/c.json")
    }
    assert ids == {f"replay:{tmp_path.name}/c"}


def test_restricted_out_configurations_are_not_in_the_space(tmp_path: Path) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    assert {"X": 16, "Y": 128, "Z": 0} not in data.space
    with pytest.raises(ValueError, match="restricted out"):
        ReplayClient(data).kernel(tk.Config(("X", "Y", "Z"), (16, 128, 0)))


def test_a_required_configuration_the_file_has_no_entry_for_is_refused_naming_the_file(tmp_path: Path) -> None:
    """It was "excluded by the space's restriction #1 of 1 ('fingerprint:replay-keys:...')", naming no file."""
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data)
    with pytest.raises(ValueError, match=r"\{'X': 16, 'Y': 128, 'Z': 0\} has no entry in c\.json: Kernel Tuner's run"):
        tk.search(data.space, client.kernel, client, (), tuner="t", require=[{"X": 16, "Y": 128, "Z": 0}])
    with pytest.raises(ValueError, match=r"X=3 is not one of \[1, 2, 4, 8, 16\]"):
        data.space.config(X=3, Y=16, Z=0)
    assert {"X": 16, "Y": 128, "Z": 0} not in data.space and {"X": 1, "Y": 16, "Z": 0} in data.space


def test_each_run_takes_a_recorded_sample_on_the_virtual_clock(tmp_path: Path) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    config = data.space.config(X=4, Y=32, Z=1)
    client = ReplayClient(data, seed=7)
    kernel = client.kernel(config)
    durations = [client.profile(kernel)[1] for _ in range(20)]
    allowed_ns = {round(t * 1e6) for t in data.samples_ms[config]}
    assert set(durations) <= allowed_ns
    assert len(set(durations)) > 1, "samples are drawn, not the mean repeated"
    again = ReplayClient(data, seed=7)
    assert [again.profile(again.kernel(config))[1] for _ in range(20)] == durations
    other = ReplayClient(data, seed=8)
    assert [other.profile(other.kernel(config))[1] for _ in range(20)] != durations
    assert client.clock_ns == sum(durations)


def test_recorded_failures_fail_again(tmp_path: Path) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data)
    with pytest.raises(ReplayFailure, match="CompilationFailedConfig"):
        client.kernel(data.space.config(dict(zip("XYZ", COMPILE_FAILED, strict=True))))
    runtime = client.kernel(data.space.config(dict(zip("XYZ", RUNTIME_FAILED, strict=True))))
    with pytest.raises(ReplayFailure, match="RuntimeFailedConfig"):
        client.profile(runtime)


def test_a_search_on_the_replay_finds_the_recorded_best(tmp_path: Path) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data)
    result = tk.search(data.space, client.kernel, client, (), tuner="replay")
    assert result.stopped_by == "exhausted"
    assert result.best is not None and result.best.config.values_tuple == BEST
    failed = {t.config.values_tuple for t in result.trials if isinstance(t.outcome, tk.Failed)}
    assert failed == {COMPILE_FAILED, RUNTIME_FAILED}


def test_malformed_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_kernel_tuner_cache(bad)
    doc = json.loads(write_cache(tmp_path / "c.json").read_text())
    doc["cache"]["1,16,0"]["time"] = "Exploded"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="Exploded"):
        load_kernel_tuner_cache(bad)
    doc["cache"]["1,16,0"]["time"] = 1.0
    doc["cache"]["3,16,0"] = {"time": 1.0}
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="outside tune_params"):
        load_kernel_tuner_cache(bad)


def test_old_caches_mark_failures_with_1e20(tmp_path: Path) -> None:
    path = write_cache(tmp_path / "c.json")
    doc = json.loads(path.read_text())
    doc["cache"]["2,16,0"] = {"time": 1e20}
    path.write_text(json.dumps(doc))
    data = load_kernel_tuner_cache(path)
    assert data.failures[data.space.config(X=2, Y=16, Z=0)] == "RuntimeFailedConfig"


@pytest.mark.skipif(not (SHARED / "pnpoly" / "RTX_3090.json.gz").exists(), reason="needs ../shared/tuning-data")
def test_a_real_gpu_file_matches_its_readme_statistics() -> None:
    data = load_kernel_tuner_cache(SHARED / "pnpoly" / "RTX_3090.json.gz")
    assert len(data.samples_ms) == 3774
    assert len(data.failures) == 318
    assert data.best_ms == pytest.approx(8.714, rel=1e-3)
    assert data.space.size == 4092


def test_tune_params_that_make_no_space_are_refused_naming_the_file(tmp_path: Path) -> None:
    """A parameter the Space refuses raised the Space's error without saying which file."""
    path = write_cache(tmp_path / "badname.json")
    doc = json.loads(path.read_text())
    doc["tune_params_keys"][2] = "values"
    doc["tune_params"]["values"] = doc["tune_params"].pop("Z")
    path.write_text(json.dumps(doc))
    # No renaming of values helps a name that c.<name> cannot read.
    with pytest.raises(ValueError, match=r"badname\.json: its tune_params do not make a search space.*'values'"):
        load_kernel_tuner_cache(path)


def test_a_key_holding_a_comma_in_an_entry_that_does_not_name_its_values_is_refused_clearly(tmp_path: Path) -> None:
    """A tune_params string with ',' splits its key into too many parts; only the entry's own fields can say which."""
    path = write_cache(tmp_path / "comma.json")
    doc = json.loads(path.read_text())
    doc["tune_params"]["Z"] = [*doc["tune_params"]["Z"], "a,b"]
    doc["cache"][f"{PARAMS['X'][0]},{PARAMS['Y'][0]},a,b"] = {"time": 1.0, "times": [1.0]}
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"comma\.json: cache key '1,16,a,b' has 4 values for 3 parameters"):
        load_kernel_tuner_cache(path)
    doc["cache"]["1,16,a,b"].update(X=1, Y=16, Z="a,b")  # as Kernel Tuner writes every entry
    path.write_text(json.dumps(doc))
    assert load_kernel_tuner_cache(path).samples_ms[tk.Config("XYZ", (1, 16, "a%2Cb"))] == (1.0,)


def test_a_cache_left_open_by_a_stopped_kernel_tuner_run_is_read_like_kernel_tuner_reads_it(tmp_path: Path) -> None:
    """A stopped Kernel Tuner run leaves the JSON unclosed; the loader refused such a file as unreadable."""
    closed = write_cache(tmp_path / "closed.json")
    whole = load_kernel_tuner_cache(closed)
    # As Kernel Tuner writes it while tuning: one entry per line, each followed by a comma.
    text = json.dumps(json.loads(closed.read_text())).replace('}, "', '},\n"')
    assert text.endswith("}}}")
    opened = tmp_path / "open.json"
    opened.write_text(text[:-2] + ",\n")
    with pytest.raises(json.JSONDecodeError):
        json.loads(opened.read_text())
    assert load_kernel_tuner_cache(opened).samples_ms == whole.samples_ms
    # A kill in the middle of writing an entry: the entries before it are read.
    lines = text[:-2].splitlines()
    cut = tmp_path / "cut.json"
    cut.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    read = load_kernel_tuner_cache(cut)
    assert len(read.samples_ms) + len(read.failures) == len(whole.samples_ms) + len(whole.failures) - 1


def test_a_replay_client_given_a_path_instead_of_its_data_is_refused(tmp_path: Path) -> None:
    """ReplayClient("gemm.json.gz") was accepted and failed later as "'str' object has no attribute 'gpu'"."""
    path = write_cache(tmp_path / "c.json")
    with pytest.raises(TypeError, match=r"takes the ReplayData that load_kernel_tuner_cache\(path\) returns, got str"):
        ReplayClient(str(path))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ReplayClient\(seed=...\) must be an int, got '1'"):
        ReplayClient(load_kernel_tuner_cache(path), seed="1")  # type: ignore[arg-type]
