"""benches/launch.py keeps running as the template's launch path changes (it times private methods)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.opencl

pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")

ROOT = Path(__file__).resolve().parents[2]


def test_the_launch_bench_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_launch", ROOT / "benches" / "launch.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_launch"] = bench  # its key class's annotations are resolved through its module
    spec.loader.exec_module(bench)
    bench.main(calls=3, rounds=1)
    out = capsys.readouterr().out
    assert "launch shape" in out and "whole launch" in out
