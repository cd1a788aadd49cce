"""Replay loader: the Kernel Tuner cache variants other versions and settings write (each test writes its file)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kt_cache import BEST, COMPILE_FAILED, PARAMS, RUNTIME_FAILED, mean_ms, write_cache

import tunekit as tk
from tunekit._search.strategies import ModelGuidedLocalSearch
from tunekit_backends.replay import ReplayClient, ReplayFailure, load_kernel_tuner_cache

INVALID = (8, 128, 0)  # 8 * 128 <= 1024: in the space, so free to mark invalid


def rewrite(path: Path, change: Any) -> Path:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def key(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def test_kernel_tuner_1_5_failures_in_error_without_time_are_failures(tmp_path: Path) -> None:
    """Kernel Tuner 1.5 writes a failure to "__error__" and no "time"; the loader refused the whole file."""

    def to_1_5(doc: dict[str, Any]) -> None:
        doc["cache"][key(INVALID)]["time"] = "InvalidConfig"
        for entry in doc["cache"].values():
            if isinstance(entry["time"], str):
                entry["__error__"] = entry.pop("time")

    data = load_kernel_tuner_cache(rewrite(write_cache(tmp_path / "kt15.json"), to_1_5))
    assert {c.values_tuple: r for c, r in data.failures.items()} == {
        COMPILE_FAILED: "CompilationFailedConfig",
        RUNTIME_FAILED: "RuntimeFailedConfig",
        INVALID: "InvalidConfig",
    }
    client = ReplayClient(data)
    # Kernel Tuner finds a configuration invalid before compiling it, so it fails when built.
    with pytest.raises(ReplayFailure, match="InvalidConfig"):
        client.kernel(data.space.config(dict(zip("XYZ", INVALID, strict=True))))
    result = tk.search(data.space, client.kernel, client, (), tuner="kt15")
    assert result.best is not None and result.best.config.values_tuple == BEST
    assert sum(isinstance(t.outcome, tk.Failed) for t in result.trials) == 3


def test_a_file_tuned_for_gflops_keeps_its_failures_in_that_field_and_replays_time(tmp_path: Path) -> None:
    """A file tuned with objective="GFLOP/s" marks a failure in "GFLOP/s" and has no "time" there: it was refused."""

    def to_gflops(doc: dict[str, Any]) -> None:
        doc["objective"] = "GFLOP/s"
        for entry in doc["cache"].values():
            if isinstance(entry["time"], str):
                entry["GFLOP/s"] = entry.pop("time")
            else:
                entry["GFLOP/s"] = 1.0 / entry["time"]

    data = load_kernel_tuner_cache(rewrite(write_cache(tmp_path / "gflops.json"), to_gflops))
    assert data.objective == "GFLOP/s"
    assert {c.values_tuple for c in data.failures} == {COMPILE_FAILED, RUNTIME_FAILED}
    assert data.best_ms == pytest.approx(mean_ms(*BEST))


def test_a_multi_objective_header_is_read(tmp_path: Path) -> None:
    """Kernel Tuner 1.x tuned with objectives={...} writes a list of objectives; the loader refused the file."""
    path = rewrite(write_cache(tmp_path / "multi.json"), lambda doc: doc.update(objective=["time", "GB/s"]))
    data = load_kernel_tuner_cache(path)
    assert data.objective == "time,GB/s"
    assert len(data.samples_ms) == 55


def test_an_entry_with_neither_time_nor_a_failure_is_refused_naming_file_and_entry(tmp_path: Path) -> None:
    path = rewrite(write_cache(tmp_path / "notime.json"), lambda doc: doc["cache"]["2,16,1"].pop("time"))
    with pytest.raises(ValueError, match=r"notime\.json: entry '2,16,1' has no 'time' and no failure marker"):
        load_kernel_tuner_cache(path)


def test_float32_parameters_keyed_by_their_short_text_are_read(tmp_path: Path) -> None:
    """A np.float32 value is keyed '0.1' but written 0.10000000149011612: every key was 'outside tune_params'."""
    values = [np.float32(v) for v in (0.1, 0.2, 0.3)]
    cache = {
        f"{v!s},{b}": {"alpha": float(v), "b": b, "time": 1.0 + float(v) + b, "times": [1.0 + float(v) + b]}
        for v in values
        for b in (1, 2)
    }
    doc = {
        "device_name": "GPU",
        "kernel_name": "k",
        "tune_params_keys": ["alpha", "b"],
        "tune_params": {"alpha": [float(v) for v in values], "b": [1, 2]},
        "cache": cache,
    }
    path = tmp_path / "f32.json"
    path.write_text(json.dumps(doc))
    data = load_kernel_tuner_cache(path)
    assert data.space.size == 6
    assert min(data.samples_ms, key=data.mean_ms).values_tuple == (float(values[0]), 1)


def test_a_run_killed_between_the_two_closing_braces_keeps_its_last_entry(tmp_path: Path) -> None:
    """Kernel Tuner 1.x closes the file after each entry; a kill after the cache's brace lost the last entry."""
    whole = write_cache(tmp_path / "whole.json")
    doc = json.loads(whole.read_text())
    cache = doc.pop("cache")
    # As its cache/file.py writes: the header with indent=0, then per entry ',\n"key": {...}' and '}\n}'.
    head = json.dumps({**doc, "cache": {}}, indent=0).removesuffix("{}\n}")
    lines = [json.dumps({k: v}, separators=(", ", ": "))[1:-1] for k, v in cache.items()]
    text = head + "{\n" + ",\n".join(lines) + "}\n}"
    assert json.loads(text)["cache"] == cache
    cut = tmp_path / "cut.json"
    cut.write_text(text.removesuffix("\n}"))
    assert len(load_kernel_tuner_cache(cut).samples_ms) == len(load_kernel_tuner_cache(whole).samples_ms)


def test_files_with_nothing_to_replay_say_why(tmp_path: Path) -> None:
    """Every configuration failed, or none was written yet: both read "no configuration has a valid time"."""

    def all_failed(doc: dict[str, Any]) -> None:
        for n, entry in enumerate(doc["cache"].values()):
            entry["time"] = "CompilationFailedConfig" if n % 4 == 0 else "RuntimeFailedConfig"
            entry.pop("times", None)

    path = rewrite(write_cache(tmp_path / "failed.json"), all_failed)
    counts = r"57 configurations failed on the GPU \(42 RuntimeFailedConfig, 15 CompilationFailedConfig\)"
    with pytest.raises(ValueError, match=rf"failed\.json: every one of its {counts}"):
        load_kernel_tuner_cache(path)
    # As Kernel Tuner starts a cache: the header, open, before its first result.
    opened = tmp_path / "opened.json"
    opened.write_text(json.dumps({**json.loads(path.read_text()), "cache": {}}, indent="")[:-3])
    with pytest.raises(ValueError, match=r"opened\.json: its cache holds no configuration"):
        load_kernel_tuner_cache(opened)


def test_string_float_and_bool_parameters_and_a_single_parameter_replay(tmp_path: Path) -> None:
    layouts, alphas, flags = ["row", "col"], [0.5, 1.5], [True, False]
    cache = {}
    for layout in layouts:
        for alpha in alphas:
            for flag in flags:
                t = 1.0 + (layout == "col") + alpha + 0.25 * flag
                cache[f"{layout},{alpha},{flag}"] = {"layout": layout, "alpha": alpha, "tc": flag, "time": t}
    doc = {
        "kernel_name": "k",
        "tune_params_keys": ["layout", "alpha", "tc"],
        "tune_params": {"layout": layouts, "alpha": alphas, "tc": flags},
        "cache": cache,
    }
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(doc))
    data = load_kernel_tuner_cache(path)
    client = ReplayClient(data)
    result = tk.search(data.space, client.kernel, client, (), tuner="mixed")
    assert result.best is not None and result.best.config.to_dict() == {"layout": "row", "alpha": 0.5, "tc": False}
    single = tmp_path / "single.json"
    single.write_text(
        json.dumps(
            {
                "kernel_name": "k",
                "tune_params_keys": ["X"],
                "tune_params": {"X": PARAMS["X"]},
                "cache": {str(x): {"X": x, "time": abs(x - 4) + 1.0} for x in PARAMS["X"]},
            }
        )
    )
    data = load_kernel_tuner_cache(single)
    client = ReplayClient(data)
    result = tk.search(data.space, client.kernel, client, (), tuner="single")
    assert result.best is not None and result.best.config.values_tuple == (4,)


def test_compression_is_told_by_content_not_by_name(tmp_path: Path) -> None:
    """A gzip file named .json was read as text ('utf-8' codec can't decode byte 0x8b); a BOM broke the JSON."""
    plain = write_cache(tmp_path / "plain.json")
    expected = load_kernel_tuner_cache(plain).samples_ms
    renamed = tmp_path / "renamed.json"
    renamed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_kernel_tuner_cache(renamed).samples_ms == expected
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert load_kernel_tuner_cache(bom).samples_ms == expected


def test_a_corrupt_gzip_file_is_a_clear_value_error(tmp_path: Path) -> None:
    """A gzip header over garbage escaped as zlib.error, which stopped the whole strategy bench."""
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b'{"cache": {}}')[:10] + b"garbage that is not deflate" * 4)
    with pytest.raises(ValueError, match="broken.json.gz: not a readable Kernel Tuner cache file"):
        load_kernel_tuner_cache(broken)


def test_a_sparse_cache_from_a_run_that_did_not_try_everything_is_counted_walked_and_searched(tmp_path: Path) -> None:
    """A cache of 300 configurations out of 4^20 (a genetic run's) never finished counting, sampling or searching."""
    rng = np.random.default_rng(3)
    params = {f"P{i}": [1, 2, 4, 8] for i in range(20)}
    cache: dict[str, Any] = {}
    while len(cache) < 300:
        values = [int(v) for v in rng.choice([1, 2, 4, 8], size=20)]
        time = 1.0 + 0.01 * sum(abs(v - 2) for v in values)
        cache[",".join(map(str, values))] = {**dict(zip(params, values, strict=True)), "time": time}
    path = tmp_path / "sparse.json"
    path.write_text(
        json.dumps({"kernel_name": "k", "tune_params_keys": list(params), "tune_params": params, "cache": cache})
    )
    data = load_kernel_tuner_cache(path)
    assert data.space.cartesian_size == 4**20 and data.space.size == 300 == data.space.walk_cost
    walked = list(data.space)
    assert [data.space.index(c) for c in walked] == sorted(data.space.index(c) for c in walked), "Cartesian order"
    drawn = data.space.sample(50, 0)
    assert len(set(drawn)) == 50 and all(c in data.samples_ms for c in drawn)
    client = ReplayClient(data)
    for strategy in ("exhaustive", "random", "ils", "genetic", "model_ils", "auto"):
        # Every strategy but exhaustive drew at random until half a walk of the 4^20 product: for hours.
        result = tk.search(
            data.space, client.kernel, client, (), tuner=f"sparse-{strategy}", strategy=strategy, max_evals=60
        )
        assert result.evaluations == 60 and result.best is not None, strategy
    # model_ils ranks guesses over every key: its capped draws of the 4^20 product find almost none, so it walks them
    guided = ModelGuidedLocalSearch(data.space, np.random.default_rng(0))
    assert len(guided._pool_array()) == 300


def test_a_search_of_a_sparse_cache_tests_its_keys_not_every_neighbour_and_ranks_every_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each climb and kick tested every neighbour through the file's restriction (36,128 calls in 60
    evaluations: 6 s of a 200-evaluation run on 2,000 keys of 10^10), and the model ranked a sample of
    4,096 of a 20,000-key file, which missed its best in 3 of 3 seeds."""
    rng = np.random.default_rng(3)
    params = {f"P{i}": [1, 2, 4, 8] for i in range(20)}
    cache: dict[str, Any] = {}
    while len(cache) < 300:
        values = [int(v) for v in rng.choice([1, 2, 4, 8], size=20)]
        cache[",".join(map(str, values))] = {**dict(zip(params, values, strict=True)), "time": 1.0 + sum(values)}
    path = tmp_path / "sparse.json"
    path.write_text(json.dumps({"tune_params_keys": list(params), "tune_params": params, "cache": cache}))
    data = load_kernel_tuner_cache(path)
    known = type(data.space._known)  # type: ignore[attr-defined]
    calls = 0
    restriction = known.__call__

    def counted(self: Any, config: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool(restriction(self, config))

    monkeypatch.setattr(known, "__call__", counted)
    client = ReplayClient(data)
    for strategy in ("model_ils", "ils"):
        calls = 0
        result = tk.search(
            data.space, client.kernel, client, (), tuner=f"s-{strategy}", strategy=strategy, max_evals=60
        )
        assert result.evaluations == 60 and calls <= 60, (strategy, calls)  # one check per proposal
    # a pool of 64 wanted: the 300 keys are ranked whole (a sample of the 4^20 product found a few, then 64 walked)
    assert len(ModelGuidedLocalSearch(data.space, np.random.default_rng(0), pool_max=64)._pool_array()) == 300


def test_a_brute_force_cache_walks_and_samples_as_any_restricted_space(tmp_path: Path) -> None:
    """The replay's own walk must not change what a dense (brute-force) file's searches see."""
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    plain = tk.Space(restrict=lambda c: c.values_tuple in {k.values_tuple for k in data.space}, **PARAMS)
    assert list(data.space) == list(plain)
    assert data.space.sample(10, 4) == plain.sample(10, 4)


def test_a_negative_seed_is_refused_when_the_client_is_made(tmp_path: Path) -> None:
    """ReplayClient(seed=-1) was accepted; every candidate then failed as numpy's "expected non-negative integer"."""
    with pytest.raises(ValueError, match=r"ReplayClient\(seed=...\) must be an int >= 0, got -1"):
        ReplayClient(load_kernel_tuner_cache(write_cache(tmp_path / "c.json")), seed=-1)


def write_doc(path: Path, params: dict[str, list[Any]], cache: dict[str, dict[str, Any]]) -> Path:
    path.write_text(
        json.dumps({"kernel_name": "k", "tune_params_keys": list(params), "tune_params": params, "cache": cache})
    )
    return path


def test_a_mixed_type_parameter_as_in_kernel_tuners_own_test_file_replays_with_its_values_distinct(
    tmp_path: Path,
) -> None:
    """["test", 1, True, 2.45] (Kernel Tuner's strategies test cache): tk.Space refused 1 and True as equal."""
    mixed: list[Any] = ["test", 1, True, 2.45]
    params = {"B": [64, 128], "flag": [True, False], "M": mixed}
    cache = {}
    for b in params["B"]:
        for flag in params["flag"]:
            for rank, m in enumerate(mixed):
                # 1 is the fastest and True (equal to 1 in Python) the slowest: merging them would show.
                t = (5.0, 1.0, 9.0, 3.0)[rank] + 0.5 * (b == 128) + 0.25 * flag
                cache[f"{b},{flag},{m}"] = {"B": b, "flag": flag, "M": m, "time": t, "times": [t, t]}
    data = load_kernel_tuner_cache(write_doc(tmp_path / "kt_strategies.json", params, cache))
    assert data.space.domains["M"] == ("test", "1", "True", "2.45"), "each value named by its key text"
    assert data.space.domains["flag"] == (True, False) and data.space.domains["B"] == (64, 128), "only M is renamed"
    assert data.space.size == len(data.samples_ms) == 16
    assert {data.key_text(c) for c in data.samples_ms} == set(cache)
    one, true = data.file_value("M", "1"), data.file_value("M", "True")
    assert (type(one), type(true)) == (int, bool)
    client = ReplayClient(data)
    result = tk.search(data.space, client.kernel, client, (), tuner="mixed")
    assert result.best is not None and result.best.config.to_dict() == {"B": 64, "flag": False, "M": "1"}
    assert data.key_text(result.best.config) == "64,False,1"
    with pytest.raises(ValueError, match="compare equal"):
        tk.Space(M=mixed)  # a space written by hand still refuses it: there, 1 and True are a mistake


def test_values_whose_key_texts_collide_or_hold_separators_replay_from_the_entries_own_fields(tmp_path: Path) -> None:
    """1 and "1", strings holding ',' or '=', None and a value listed twice made the file unreplayable."""
    strings = ["a,b", "a%2Cb", "c=d", None]
    params: dict[str, list[Any]] = {"A": [1, "1"], "S": strings, "D": [2, 2, 4]}
    cache = {}
    for a in params["A"]:
        for rank, s in enumerate(strings):
            for d in (2, 4):
                # Kernel Tuner keys by str(): A=1 and A="1" share a key, so the file keeps the last one tuned.
                t = 1.0 + rank + d
                cache[f"{a},{s},{d}"] = {"A": a, "S": s, "D": d, "time": t}
    data = load_kernel_tuner_cache(write_doc(tmp_path / "odd.json", params, cache))
    assert data.space.domains == {"A": ("1", "'1'"), "S": ("a%2Cb", "a%252Cb", "c%3Dd", "None"), "D": (2, 4)}
    assert {c["A"] for c in data.samples_ms} == {"'1'"} and data.file_value("A", "'1'") == "1"
    assert [data.file_value("S", v) for v in data.space.domains["S"]] == strings
    assert {data.key_text(c) for c in data.samples_ms} == set(cache)
    client = ReplayClient(data)
    result = tk.search(data.space, client.kernel, client, (), tuner="odd")
    assert result.best is not None and result.best.config.to_dict() == {"A": "'1'", "S": "a%2Cb", "D": 2}


def test_kernel_tuners_t4_results_and_t1_input_files_are_named_with_what_to_pass_instead(tmp_path: Path) -> None:
    """A T4 results file (store_output_file) or a T1 input file was refused as three pydantic 'Field required'."""
    t4 = tmp_path / "t4.json"
    result = {"configuration": {"X": 1}, "times": {"runtimes": [1.0]}, "invalidity": "correct", "correctness": 1}
    t4.write_text(json.dumps({"schema_version": "1.0.0", "metadata": {}, "results": [result]}))
    with pytest.raises(ValueError, match=r"t4\.json: a T4 results file .* not a Kernel Tuner cache file; .*cache=PATH"):
        load_kernel_tuner_cache(t4)
    t1 = tmp_path / "t1.json"
    t1_doc = {"General": {}, "ConfigurationSpace": {"TuningParameters": []}, "KernelSpecification": {}}
    t1.write_text(json.dumps(t1_doc))
    with pytest.raises(ValueError, match=r"t1\.json: a T1 input file \(the description of a tuning problem"):
        load_kernel_tuner_cache(t1)


def test_an_object_valued_parameter_left_out_of_the_keys_is_read_from_each_entry(tmp_path: Path) -> None:
    """Kernel Tuner's open_cache_looks_like_closed.json lists object_param: [{}] and keys "16,1": it was refused."""
    params: dict[str, list[Any]] = {"bx": [16, 32], "by": [1, 2], "object_param": [{}]}
    cache = {f"16,{by}": {"bx": 16, "by": by, "time": 1.0 + by, "object_param": {}} for by in (1, 2)}
    data = load_kernel_tuner_cache(write_doc(tmp_path / "object.json", params, cache))
    assert data.space.domains["object_param"] == ("{}",) and data.file_value("object_param", "{}") == {}
    assert sorted(data.mean_ms(c) for c in data.samples_ms) == [2.0, 3.0]
