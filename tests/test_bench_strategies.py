"""benches/strategies.py keeps running as the search API evolves (tunekit side; Kernel Tuner is a bench extra)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from kt_cache import write_cache

ROOT = Path(__file__).resolve().parents[1]


def test_the_strategy_bench_runs_on_a_given_file_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("bench_strategies", ROOT / "benches" / "strategies.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cache = write_cache(tmp_path / "tiny.json")
    results = tmp_path / "results.jsonl"
    args = [str(cache), "--only", str(tmp_path), "--seeds", "3", "--kt", "none", "--tunekit", "auto,random"]
    assert bench.main([*args, "--results", str(results)]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 6
    assert {r["chosen"] for r in rows if r["strategy"] == "auto"} == {"model_ils"}
    assert all(r["evals"] == 6 and 1 <= r["to5"] <= 7 for r in rows), rows
    out = capsys.readouterr().out
    assert f"{tmp_path.name}/tiny: 55 valid configurations" in out and "tk:auto" in out
    assert bench.main([*args, "--results", str(results)]) == 0
    assert len(results.read_text().splitlines()) == 6, "a rerun skips finished runs"
