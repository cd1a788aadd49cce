"""benches/strategies.py keeps running as the search API evolves (tunekit side; Kernel Tuner is a bench extra)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_module import load_bench
from kt_cache import write_cache


def on_a_tiny_file(tmp_path: Path, tunekit: str, *, seeds: int) -> tuple[Any, Path, Path, list[str]]:
    """The bench, a tiny cache file, its results file, and the arguments that run ``tunekit`` on that file alone."""
    cache = write_cache(tmp_path / "tiny.json")
    results = tmp_path / "results.jsonl"
    args = [str(cache), "--only", str(tmp_path), "--seeds", str(seeds), "--kt", "none", "--tunekit", tunekit]
    return load_bench("strategies.py"), cache, results, [*args, "--results", str(results)]


def test_the_strategy_bench_runs_on_a_given_file_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench, cache, results, args = on_a_tiny_file(tmp_path, "auto,random", seeds=3)
    assert bench.main(args) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 6
    assert {r["chosen"] for r in rows if r["strategy"] == "auto"} == {"model_ils"}
    assert all(r["evals"] == 5 and 1 <= r["to5"] <= 6 for r in rows), rows
    out = capsys.readouterr().out
    assert f"{tmp_path.name}/tiny: 55 valid configurations" in out and "tk:auto" in out
    assert bench.main(args) == 0
    assert len(results.read_text().splitlines()) == 6, "a rerun skips finished runs"
    doc = json.loads(cache.read_text())
    doc["cache"]["4,32,1"]["times"] = [t * 3 for t in doc["cache"]["4,32,1"]["times"]]
    cache.write_text(json.dumps(doc))
    assert bench.main(args) == 0
    assert len(results.read_text().splitlines()) == 12, "an edited file is run again, not read from stale rows"


def test_two_versions_of_a_strategy_run_side_by_side_in_one_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name stood for whichever version the checkout held: a before/after comparison needed two results files."""
    specs = "model_ils,model_ils@gp_guesses=0,model_ils@initial=5+gp_guesses=0"
    bench, _, results, args = on_a_tiny_file(tmp_path, specs, seeds=2)
    assert bench.main(args) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted({r["strategy"] for r in rows}) == sorted(specs.split(",")) and len(rows) == 6
    out = capsys.readouterr().out
    assert "tk:model_ils@gp_guesses=0 " in out and "tk:model_ils@initial=5+gp_guesses=0" in out
    orders = {r["strategy"]: r["order"] for r in rows if r["seed"] == 0}
    assert orders["model_ils@initial=5+gp_guesses=0"] != orders["model_ils@gp_guesses=0"], "the keywords reach it"


def test_old_1e20_failures_are_not_counted_as_valid_configurations(tmp_path: Path) -> None:
    """The bench counted 1e20 entries as valid, so its budget and 'reached' disagreed with tunekit's."""
    bench = load_bench("strategies.py")
    path = write_cache(tmp_path / "old.json")
    doc = json.loads(path.read_text())
    doc["cache"]["1,32,0"]["time"] = 1e20
    path.write_text(json.dumps(doc))
    valid, best, near = bench._file_facts(str(path))
    assert valid == 54 and "1,32,0" not in bench._valid_means(str(path))
    assert (best, near) == (bench._file_facts(str(write_cache(tmp_path / "new.json")))[1], 1)


def test_the_budget_is_rounded_down_as_in_the_kernel_tuner_comparison() -> None:
    """The bench rounded 10 % of the valid configurations up; the Kernel Tuner rows it is compared with round down."""
    bench = load_bench("strategies.py")
    assert [bench._budget(n) for n in (55, 4201, 3774, 15, 5)] == [5, 420, 377, 1, 1]


def test_held_out_folds_score_each_file_by_a_choice_made_without_it(tmp_path: Path) -> None:
    """Folds by kernel and by GPU, and the strategy chosen on the other files scored on the held-out one."""
    bench = load_bench("strategies.py")
    files = []
    for kernel, gpu in (("conv_milo", "A100"), ("conv_milo_v1", "W6600"), ("gemm", "A100"), ("pnpoly", "W6600")):
        (tmp_path / kernel).mkdir(exist_ok=True)
        files.append(str(write_cache(tmp_path / kernel / f"{gpu}.json")))
    assert [bench._family(f) for f in files] == ["conv", "conv", "gemm", "pnpoly"]
    assert [bench._gpu(f) for f in files] == ["a100", "w6600", "a100", "w6600"]
    # tk:a is best on the conv files only, tk:b elsewhere: a choice without conv picks b, which conv then scores.
    to5 = {("tk:a", f): 2.0 if i < 2 else 8.0 for i, f in enumerate(files)}
    to5 |= {("tk:b", f): 4.0 for f in files}
    to5 |= {("kt:x", f): 4.0 for f in files}
    lines = bench._held_out(files, ["tk:a", "tk:b"], ["kt:x"], to5, to5, dict.fromkeys(to5, 1.0))
    family = next(line for line in lines if "chosen without the fold" in line and "conv: tk:b/kt:x" in line)
    assert "gemm: tk:a/kt:x" in family and "pnpoly: tk:a/kt:x" in family
    # Held out: conv scored by b (4, 4), gemm and pnpoly by a (8, 8): geometric mean sqrt(32) = 5.66.
    assert "tunekit 5.7 to 5 %" in family and "(ratio 1.41x)" in family
    # With each seed's figures, the held-out ratio gets its seed-bootstrap interval (constant seeds: a point).
    by_seed = {key: ([value] * 5, [value] * 5) for key, value in to5.items()}
    draws5 = bench._seed_draws(files, ["tk:a", "tk:b", "kt:x"], by_seed)["5"]
    lines = bench._held_out(files, ["tk:a", "tk:b"], ["kt:x"], to5, to5, dict.fromkeys(to5, 1.0), draws5)
    family = next(line for line in lines if "chosen without the fold" in line and "conv: tk:b/kt:x" in line)
    assert "(ratio 1.41x, 95 % interval 1.41-1.41)" in family
    # Without Kernel Tuner's rows the same choice judges two tunekit versions against each other.
    lines = bench._held_out(files, ["tk:a", "tk:b"], [], to5, to5, dict.fromkeys(to5, 1.0))
    family = next(line for line in lines if "chosen without the fold" in line and "conv: tk:b," in line)
    assert "gemm: tk:a" in family and "5.7 to 5 %" in family and "worst reach 100%" in family
    assert not any("kt" in line for line in lines)
    assert "(tie)" not in family
    # tk:c differs from tk:b on the conv files only: the folds holding conv out cannot tell them apart.
    to5 |= {("tk:c", f): 3.0 if i < 2 else 4.0 for i, f in enumerate(files)}
    lines = bench._held_out(files, ["tk:b", "tk:c"], [], to5, to5, dict.fromkeys(to5, 1.0))
    family = next(line for line in lines if "chosen without the fold" in line and "conv: tk:b (tie)," in line)
    assert "gemm: tk:c, pnpoly: tk:c)" in family  # chosen with conv, where c is better


def test_a_file_that_cannot_be_replayed_stops_the_bench_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run recorded the same load error, then the report crashed with a traceback."""
    bench = load_bench("strategies.py")
    cache = tmp_path / "broken.json"
    cache.write_text('{"kernel_name": "k"}')
    results = tmp_path / "results.jsonl"
    args = [str(cache), "--only", str(tmp_path), "--seeds", "2", "--kt", "none", "--results", str(results)]
    assert bench.main(args) == 2
    assert f"cannot replay {cache}: {cache}: not a Kernel Tuner cache file" in capsys.readouterr().err
    assert not results.exists()


def test_a_failed_run_is_tried_again_and_bad_arguments_stop_the_bench(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error row (Kernel Tuner not installed yet) counted as done, so installing it changed nothing; --tunekit
    with a misspelt name stored an error row per seed; --only matching nothing said the data folder was missing."""
    bench = load_bench("strategies.py")
    cache = write_cache(tmp_path / "tiny.json")
    results = tmp_path / "results.jsonl"
    args = [str(cache), "--only", str(tmp_path), "--seeds", "1", "--kt", "none", "--results", str(results)]
    assert bench.main([*args, "--tunekit", "random"]) == 0
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    failed = {k: v for k, v in row.items() if k in ("tool", "file", "strategy", "seed", "digest", "wall_s")}
    results.write_text(json.dumps({**failed, "error": "ModuleNotFoundError: No module named 'kernel_tuner'"}) + "\n")
    capsys.readouterr()
    assert bench.main([*args, "--tunekit", "random"]) == 0
    assert "cannot run here" not in capsys.readouterr().out
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 2 and "to5" in rows[1]
    for bad, message in (
        (["--tunekit", "anneal"], "--tunekit: unknown strategies ['anneal']"),
        (["--tunekit", "auto", "--seeds", "0"], "--seeds and --jobs take a count >= 1"),
        (["--tunekit", "anneal@x=1"], "--tunekit: unknown strategies ['anneal@x=1']"),
        (["--tunekit", "model_ils@gp_guesses"], "'gp_guesses' is not KEY=VALUE"),
        (["--tunekit", "auto@gp_guesses=0"], "auto is resolved per space and takes no keywords"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            bench.main([*args, *bad])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert bench.main([str(cache), "--only", "no-such-file", "--kt", "none", "--results", str(results)]) == 2
    assert "no cache file matches --only 'no-such-file'" in capsys.readouterr().err


def test_a_budget_spent_on_failed_configurations_is_unreached_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget of 1 that drew a failed configuration raised NoValidKernelFound: every tunekit row read 'cannot run'."""
    bench = load_bench("strategies.py")
    path = write_cache(tmp_path / "failing.json")
    doc = json.loads(path.read_text())
    for k, entry in doc["cache"].items():
        if k not in ("4,32,1", "2,16,0"):
            entry["time"] = "RuntimeFailedConfig"
            entry.pop("times", None)
    path.write_text(json.dumps(doc))
    results = tmp_path / "results.jsonl"
    args = [str(path), "--only", str(tmp_path), "--seeds", "4", "--kt", "none", "--tunekit", "random"]
    assert bench.main([*args, "--results", str(results)]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert all("error" not in r and r["evals"] == 1 for r in rows), rows
    assert any(r["to5"] == 2 and r["valid"] == 0 for r in rows), "some seed drew a failed configuration"
    assert "cannot run here" not in capsys.readouterr().out


def test_folders_repeats_and_files_with_nothing_to_search_do_not_stop_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file where every configuration failed stopped the whole bench; a folder argument was read as one file and a
    file given twice ran every seed twice."""
    bench = load_bench("strategies.py")
    folder = tmp_path / "caches"
    folder.mkdir()
    good = write_cache(folder / "good.json.gz")
    failed = folder / "failed.json"
    doc = json.loads(write_cache(failed).read_text())
    for entry in doc["cache"].values():
        entry["__error__"] = "CompilationFailedConfig"
        entry.pop("time"), entry.pop("times", None)
    failed.write_text(json.dumps(doc))
    (folder / "notes.txt").write_text("not a cache")
    results = tmp_path / "results.jsonl"
    args = [str(folder), str(good), "--only", str(tmp_path), "--seeds", "2", "--kt", "none", "--tunekit", "random"]
    assert bench.main([*args, "--results", str(results)]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 2 and {r["file"] for r in rows} == {str(good.resolve())}
    out = capsys.readouterr().out
    assert "caches/good: 55 valid configurations" in out
    assert "caches/failed: not run (" in out and "every one of its 57 configurations failed" in out
    broken = folder / "broken.json"
    broken.write_text('{"kernel_name": "k"}')
    assert bench.main([*args, "--results", str(results)]) == 2, "a malformed file is an error, after the others ran"
    captured = capsys.readouterr()
    assert "caches/good: 55 valid configurations" in captured.out
    assert f"cannot replay {broken}: {broken}: not a Kernel Tuner cache file" in captured.err


def test_a_file_tuned_for_another_objective_says_so_and_kernel_tuner_gets_the_fields_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kernel Tuner's runs on a file without device_name all failed with KeyError: 'device_name'."""
    bench = load_bench("strategies.py")
    path = write_cache(tmp_path / "gflops.json")
    doc = json.loads(path.read_text())
    doc["objective"] = "GFLOP/s"
    del doc["device_name"]
    path.write_text(json.dumps(doc))
    copy, read = bench._kt_file(str(path))
    assert json.loads(Path(copy).read_text())["device_name"] == "" == read["device_name"]
    args = [str(path), "--only", str(tmp_path), "--seeds", "1", "--kt", "none", "--tunekit", "random"]
    assert bench.main([*args, "--results", str(tmp_path / "results.jsonl")]) == 0
    assert "budget 5 (tuned for GFLOP/s; scored on time)" in capsys.readouterr().out


def test_kernel_tuners_copy_ends_with_its_cache_and_is_keyed_as_kernel_tuner_looks_up(tmp_path: Path) -> None:
    """A file whose last field was not "cache" (sorted keys) got braces appended by Kernel Tuner and failed to parse;
    float32 values keyed '0.1' but listed as 0.10000000149011612 left Kernel Tuner no configuration to run."""
    bench = load_bench("strategies.py")
    path = write_cache(tmp_path / "sorted.json")
    doc = json.loads(path.read_text())
    doc["tune_params"]["F"] = [float(np.float32(0.1)), 0.5]
    doc["tune_params_keys"].append("F")
    doc["cache"] = {f"{k},0.1": {**entry, "F": float(np.float32(0.1))} for k, entry in doc["cache"].items()}
    path.write_text(json.dumps(doc, sort_keys=True))
    copy, read = bench._kt_file(str(path))
    text = Path(copy).read_text()
    assert text.endswith("}}}") and list(json.loads(text))[-1] == "cache"
    assert set(read["cache"]) == {
        f"{k},{float(np.float32(0.1))}" for k in json.loads(write_cache(tmp_path / "c.json").read_text())["cache"]
    }
    assert set(bench._valid_means(str(path))) <= set(read["cache"])


def test_kernel_tuner_is_not_run_on_a_cartesian_product_it_cannot_enumerate(tmp_path: Path) -> None:
    """Kernel Tuner's run on a sparse cache of a 4^20 space never ended (it tests every Cartesian point)."""
    bench = load_bench("strategies.py")
    params = {f"P{i}": [1, 2, 4, 8] for i in range(20)}
    cache = {",".join(["1"] * 20): {**dict.fromkeys(params, 1), "time": 1.0}}
    path = tmp_path / "sparse.json"
    path.write_text(
        json.dumps({"kernel_name": "k", "tune_params_keys": list(params), "tune_params": params, "cache": cache})
    )
    with pytest.raises(RuntimeError, match=r"^1.1e\+12 Cartesian points: more than Kernel Tuner's simulation mode"):
        bench.run_kernel_tuner(str(path), "random_sample", 0)


def test_a_mixed_type_parameter_runs_and_is_scored_by_kernel_tuners_key_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kernel Tuner's strategies test cache (M: ["test", 1, True, 2.45]) was "not run": tk.Space refused 1 and True."""
    bench = load_bench("strategies.py")
    path = write_cache(tmp_path / "mixed.json")
    doc = json.loads(path.read_text())
    doc["tune_params_keys"].append("M")
    doc["tune_params"]["M"] = ["test", 1, True, 2.45]
    doc["cache"] = {f"{k},{m}": {**entry, "M": m} for k, entry in doc["cache"].items() for m in doc["tune_params"]["M"]}
    path.write_text(json.dumps(doc))
    # Kernel Tuner's runs are scored by str() of their values: the tunekit side must key them the same way.
    means = bench._valid_means(str(path))
    assert len(means) == 4 * 55 and {k.rsplit(",", 1)[1] for k in means} == {"test", "1", "True", "2.45"}
    args = [str(path), "--only", str(tmp_path), "--seeds", "2", "--kt", "none", "--tunekit", "auto"]
    assert bench.main([*args, "--results", str(tmp_path / "results.jsonl")]) == 0
    assert "mixed: 220 valid configurations" in capsys.readouterr().out


def test_kernel_tuners_copy_rekeys_a_key_with_too_few_parts_as_kernel_tuner_looks_up(tmp_path: Path) -> None:
    """Keys "16,1" for three parameters passed as listed, so the bench's restriction admitted nothing (max_fevals 0)."""
    bench = load_bench("strategies.py")
    params: dict[str, list[Any]] = {"bx": [16, 32], "by": [1, 2], "obj": [{}]}
    cache = {f"16,{by}": {"bx": 16, "by": by, "obj": {}, "time": 1.0 + by} for by in (1, 2)}
    path = tmp_path / "short_keys.json"
    path.write_text(
        json.dumps({"kernel_name": "k", "tune_params_keys": list(params), "tune_params": params, "cache": cache})
    )
    _, read = bench._kt_file(str(path))
    assert set(read["cache"]) == {"16,1,{}", "16,2,{}"} == set(bench._valid_means(str(path)))


def test_a_run_records_a_digest_of_its_whole_order_besides_the_first_50() -> None:
    """Two versions that differ only after 50 evaluations had the same digest: a comparison mixed them unseen."""
    bench = load_bench("strategies.py")
    first = [(f"k{i}", 2.0) for i in range(80)]
    later = [*first[:60], ("other", 2.0), *first[61:]]
    a, b = bench._score(first, 1.0, 100), bench._score(later, 1.0, 100)
    assert a["fingerprint"] == b["fingerprint"] and a["order"] != b["order"]
    assert bench._score(list(first), 1.0, 100)["order"] == a["order"]


def test_repro_runs_seeds_again_and_says_when_a_stored_order_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--repro N reruns each tunekit strategy's first N seeds; a stored row of another order is counted as different."""
    bench = load_bench("strategies.py")
    cache = write_cache(tmp_path / "tiny.json")
    results = tmp_path / "results.jsonl"
    args = [str(cache), "--only", str(tmp_path), "--seeds", "3", "--kt", "none", "--tunekit", "portfolio,random"]
    assert bench.main([*args, "--results", str(results), "--repro", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "tk:portfolio same evaluation order in 2 of 2 runs" in out
    assert "tk:random same evaluation order in 2 of 2 runs" in out
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    for row in rows:
        if row["strategy"] == "random" and row["seed"] == 0:
            row["order"] = "0" * 12  # as a row of another version of the strategy would be
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert bench.main([*args, "--results", str(results), "--repro", "2"]) == 0
    assert "tk:random same evaluation order in 1 of 2 runs" in " ".join(capsys.readouterr().out.split())


def test_the_summary_gives_seed_bootstrap_intervals_of_its_means_and_ratios_and_the_worst_miss_rate(
    tmp_path: Path,
) -> None:
    """A ratio of 0.96x between two versions said nothing of whether other seeds would keep it under 1."""
    bench = load_bench("strategies.py")
    files = []
    for kernel in ("conv", "gemm"):
        (tmp_path / kernel).mkdir()
        files.append(str(write_cache(tmp_path / kernel / "A100.json")))
    budget = bench._budget(bench._file_facts(files[0])[0])
    a = [[2.0, 3.0, 4.0, 2.0, 5.0, 3.0, 4.0, 2.0, 3.0, float(budget + 1)], [1.0, 2.0, 1.0, 3.0, 2.0] * 2]
    runs = {"tk:a": a, "tk:copy": a, "kt:x": [[2 * v for v in f] for f in a], "kt:y": [[3 * v for v in f] for f in a]}
    by_seed = {(n, p): (f, f) for n, per_file in runs.items() for p, f in zip(files, per_file, strict=True)}
    point = {(n, p): float(np.median(f)) for (n, p), (f, _) in by_seed.items()}
    draws = bench._seed_draws(files, list(runs), by_seed)
    lines = bench._uncertainty(files, ["tk:a", "tk:copy"], ["kt:x", "kt:y"], {"5": point, "1": point}, by_seed, draws)
    heading = next(line for line in lines if line.startswith("\nSeed bootstrap"))
    assert "ratio 1: to 5 %, against tk:a; ratio 2: to 5 %, against kt:x" in heading
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("\nMisses"))]
    row = {line.split()[0]: line for line in table if line.startswith(("  tk:", "  kt:"))}
    # The copy ran on the same seeds: the same resamples make it 1.00x in every one of them.
    copy = row["tk:copy"].split()
    assert copy[1] == row["tk:a"].split()[1] and "1.00x ~[1.00, 1.00]" in " ".join(copy)
    assert "  (~: the ratio's interval holds 1, a difference the seeds alone could make)" in lines
    # Kernel Tuner's best single strategy here is x, at twice tk:a's figures: 0.50x, exactly, in every resample.
    assert "0.50x  [0.50, 0.50]" in row["tk:a"]
    per_file_best = next(line for line in lines if "kt: per-file best" in line)
    assert per_file_best.split()[3] == row["kt:x"].split()[1], "x is best on both files"
    low, high = (float(v) for v in row["tk:a"].split("[")[1].split("]")[0].split(","))
    assert low <= float(row["tk:a"].split()[1]) <= high
    missed = next(line for line in lines if line.startswith("  tk:a ") and "missed" in line)
    assert "conv/A100: 1 of 10 missed, miss rate 0.3%-44.5%; 99 % reach not shown" in missed
