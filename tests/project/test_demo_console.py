"""The demos print text they did not write (install hints, candidate names, paths) as it is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "opencl"))

from demo_console import demo_console
from demo_opencl import run_opencl_demo


def test_without_pyopencl_the_demo_names_the_whole_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich took `[opencl]` for a style tag: the demo told a user without pyopencl to `pip install 'tunekit'`."""
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # as if the opencl extra were not installed
    console = demo_console()
    with console.capture() as shown:
        assert run_opencl_demo(console) == 0
    assert "OpenCL examples skipped: the OpenCL backend needs pyopencl" in shown.get()
    assert "pip install 'tunekit[opencl]'" in shown.get()


def test_a_lowercase_bracketed_name_in_a_table_cell_is_printed_whole() -> None:
    """A template's candidate `kernel[block=64]` showed as `kernel` in the demo's tables."""
    table = Table("candidate")
    table.add_row("kernel[block=64]")
    console = demo_console()
    with console.capture() as shown:
        console.print(table)
    assert "kernel[block=64]" in shown.get()
