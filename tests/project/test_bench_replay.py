"""benches/strategy_replay.py: a quick run stops at 1 % of the best and counts exactly what a whole run counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_module import load_bench
from kt_cache import write_cache

from tunekit_backends.replay import load_kernel_tuner_cache


def test_a_quick_run_counts_what_a_whole_run_counts_and_stops_at_one_percent(tmp_path: Path) -> None:
    replay = load_bench("strategy_replay.py")
    data = load_kernel_tuner_cache(write_cache(tmp_path / "tiny.json"))
    for spec in ("random", "model_ils", "model_ils@gp_guesses=0"):
        for seed in range(6):
            whole = replay.run_one(data, spec, seed)
            quick = replay.run_one(data, spec, seed, quick=True)
            assert quick[:3] == whole[:3], (spec, seed, quick, whole)


def widened(path: Path) -> None:
    """The test cache with a fourth parameter of 6 values: 330 entries, so a budget of 33 (the summary needs 20)."""
    doc = json.loads(path.read_text())
    doc["tune_params"]["W"] = list(range(6))
    doc["tune_params_keys"].append("W")
    cache = {}
    for key, entry in doc["cache"].items():
        for w in range(6):
            wide = {**entry, "W": w}
            if "times" in entry:
                wide["times"] = [t * (1 + 0.1 * abs(w - 2)) for t in entry["times"]]
                wide["time"] = sum(wide["times"]) / len(wide["times"])
            cache[f"{key},{w}"] = wide
    doc["cache"] = cache
    path.write_text(json.dumps(doc))


@pytest.mark.subprocess
def test_two_jobs_and_quick_runs_print_the_counts_one_whole_run_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay = load_bench("strategy_replay.py")
    replay.SHARED = tmp_path
    (tmp_path / "k").mkdir()
    for gpu in ("A", "B"):
        widened(write_cache(tmp_path / "k" / f"{gpu}.json"))
    outputs = []
    for extra in ([], ["--jobs", "2", "--quick"]):
        assert replay.main(["--strategies", "random,model_ils", "--seeds", "0-6", *extra]) == 0
        lines = capsys.readouterr().out.splitlines()
        # Each row without its CPU column, which a quick run leaves partial.
        outputs.append([line.rsplit("%", 1)[0] for line in lines if line.startswith(("random", "model_ils"))])
        ratio = next(line for line in lines if line.startswith("  model_ils / random, to 5 %: "))
        point, bounds = ratio.split(": ")[1].split("x, 95 % seed-bootstrap interval ")
        low, high = (float(v) for v in bounds.split(":")[0].split("-"))
        assert bounds.endswith(": holds 1, a difference the seeds alone could make") == (low <= 1.0 <= high)
        assert low <= float(point) <= high, ratio
    assert len(outputs[0]) == 4 and outputs[0] == outputs[1], outputs


def test_a_fold_whose_other_files_tie_keeps_the_first_strategy_and_says_so() -> None:
    """A change that moved one family only read as chosen, or rejected, on the folds holding it out."""
    replay = load_bench("strategy_replay.py")
    labels = ["conv/A100", "conv/W6600", "gemm/A100", "pnpoly/W6600"]
    family = lambda f: f.split("/")[0]  # noqa: E731 - the bench's folds are such lambdas too
    # new differs from old on the conv files only (better there); elsewhere the two tie.
    to5 = {("old", f): 40.0 for f in labels} | {("new", f): 40.0 for f in labels}
    to5 |= {("new", "conv/A100"): 20.0, ("new", "conv/W6600"): 30.0}
    picks, tied = replay.held_out_picks("old", "new", labels, family, to5)
    assert picks == {"conv": "old", "gemm": "new", "pnpoly": "new"} and tied == {"conv"}
    picks, tied = replay.held_out_picks("new", "old", labels, family, to5)
    assert picks["conv"] == "new" and tied == {"conv"}  # a tie keeps whichever is listed first
