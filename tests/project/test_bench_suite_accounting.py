"""benches/vs_kernel_tuner_suite.py accounts for the whole of each tool's wall time, not only its phases."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
from bench_module import load_bench

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benches"))
    return load_bench("vs_kernel_tuner_suite.py")


def test_the_wall_split_leaves_nothing_out_for_either_tool() -> None:
    bench = _bench()
    tunekit = {
        "wall_s": 10.0,
        "inputs_s": 1.0,
        "phases": {"compile": 2.0, "check": 0.5, "warmup": 0.1, "measure": 3.0, "runoff": 2.4, "other": 0.0},
        "samples": {"kept": 40, "discarded": 20, "runoff": 100, "device_s": 5.0},
    }
    kernel_tuner = {
        "wall_s": 8.0,
        "inputs_s": 1.0,
        "kt_phases": {"compile": 2.0, "verification": 1.5, "benchmark": 3.0},
    }
    split = bench._wall_split({"tunekit": [tunekit], "kernel_tuner": [kernel_tuner]})
    parts = ("inputs", "compile", "check", "timing", "rest")
    assert split["tunekit"]["timing"] == pytest.approx(5.5)  # warm-up, rounds and runoff
    assert split["kernel_tuner"]["check"] == pytest.approx(1.5)
    for tool, wall in (("tunekit", 10.0), ("kernel_tuner", 8.0)):
        assert math.fsum(split[tool][p] for p in parts) == pytest.approx(wall)
    assert split["tunekit"]["rest"] == pytest.approx(1.0) and split["kernel_tuner"]["rest"] == pytest.approx(0.5)
    assert "60 + 100 runoff" in split["tunekit"]["runs"]


@pytest.mark.opencl
@pytest.mark.slow
@pytest.mark.subprocess
def test_a_cold_tunekit_child_reports_its_inputs_the_time_outside_the_record_and_its_timed_runs() -> None:
    pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")
    bench = _bench()
    result = bench.run_child("tunekit", "axpy", True, bench._platform_index())  # a fresh process, cold caches
    phases = sum(result["phases"].values())
    unaccounted = result["wall_s"] - result["client_s"] - result["inputs_s"] - phases - result["outside_s"]
    assert unaccounted >= 0  # the rest: building the tunable set and its inputs, not a phase counted twice
    samples = result["samples"]
    assert samples["discarded"] == result["measured"]  # each measured variant's first run, timed and left out
    assert samples["kept"] >= result["measured"]
    # The runs' event times lie within the host wall of the phases that took them.
    timing = result["phases"]["warmup"] + result["phases"]["measure"] + result["phases"]["runoff"]
    assert 0 < samples["device_s"] <= timing
