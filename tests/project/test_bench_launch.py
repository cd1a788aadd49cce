"""benches/launch.py keeps running as the template's launch path changes (it times private methods)."""

from __future__ import annotations

import pytest
from bench_module import load_bench

pytestmark = pytest.mark.opencl

pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")


def test_the_launch_bench_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench("launch.py")
    bench.main(calls=3, rounds=1)
    out = capsys.readouterr().out
    assert "launch shape" in out and "whole launch" in out
