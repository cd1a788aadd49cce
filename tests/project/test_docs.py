"""The docs run: every code block of the quickstart is executed, in order, as a reader would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import tunekit as tk

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


@pytest.mark.subprocess
def test_every_quickstart_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(ROOT / "docs" / "quickstart.md")
    assert len(blocks) >= 5
    module = types.ModuleType("quickstart")  # a real module: key classes resolve their annotations in it
    monkeypatch.setitem(sys.modules, "quickstart", module)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        for number, (language, code) in enumerate(blocks, start=1):
            if language == "python":
                exec(compile(code, f"quickstart.md block {number}", "exec"), module.__dict__)
            elif language == "bash":
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", code],
                    check=False,
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=120,
                )
                assert done.returncode == 0, f"block {number}:\n{code}\n{done.stdout}\n{done.stderr}"
            else:
                pytest.fail(f"quickstart block {number} is {language or 'untagged'}: this test cannot run it")
    finally:
        tk.remove_record_sink(sink)
    assert [r.key for r in records if r.tuner == "row_sum"] == [
        {"n": 1024, "dtype": "float32"},
        {"n": 4096, "dtype": "float32"},
    ]
    (grouped,) = [r for r in records if r.tuner == "quickstart_row_sum"]
    assert {c.name: c.status for c in grouped.candidates} == {"np_sum": "measured", "einsum": "skipped"}
    assert "<svg" in (tmp_path / "report.html").read_text()


def test_the_quickstart_starts_with_the_readme_example() -> None:
    readme = [code for language, code in _blocks(ROOT / "README.md") if language == "python"]
    quickstart = [code for language, code in _blocks(ROOT / "docs" / "quickstart.md") if language == "python"]
    assert readme[0] == quickstart[0], "README and quickstart examples drifted apart"


def test_every_setting_is_documented_with_its_environment_variable() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [
        name for name in tk.Settings.model_fields if f"`{name}`" not in page or f"`TUNEKIT_{name.upper()}`" not in page
    ]
    assert not missing, f"docs/configuration.md lacks a row for: {missing}"


def test_every_docs_page_is_in_the_nav_once() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if f" {p}" not in nav] == []
    # Regression: measurement.md was listed twice under Guides, so the site showed it twice.
    assert [p for p in pages if nav.count(f" {p}\n") > 1] == []


def test_every_logger_is_under_tunekit_and_documented() -> None:
    page = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    names = {
        match.group(1)
        for folder in ("tunekit", "tunekit_backends")
        for source in (ROOT / folder).rglob("*.py")
        for match in re.finditer(r"""getLogger\(["']([^"']+)["']\)""", source.read_text(encoding="utf-8"))
    }
    assert names and all(name.startswith("tunekit.") for name in names), names
    assert sorted(name for name in names if f"`{name}`" not in page) == [], "add them to docs/observability.md"


def test_the_search_page_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/search.md's first block used numpy without importing it (a NameError when copied); the page's blocks
    run here, in order, with the names the page leaves to the reader (build, client, keys, tuners) defined."""
    import logging

    import numpy as np

    from tunekit_backends.cpu import CpuClient

    monkeypatch.chdir(tmp_path)
    blocks = [code for language, code in _blocks(ROOT / "docs" / "search.md") if language == "python"]
    module = types.ModuleType("search_docs")
    monkeypatch.setitem(sys.modules, "search_docs", module)
    exec(compile(blocks[0], "search.md block 1", "exec"), module.__dict__)  # as written: nothing defined before it

    @tk.autotune_key
    class GemmKey:
        m: int
        n: int
        k: int

    def build(config: tk.Config) -> object:
        return lambda x: x * config.VEC

    client = CpuClient()
    module.__dict__.update(
        build=build,
        make_kernel=build,
        client=client,
        device_id=client.device_id,
        inputs=(np.ones(8),),
        GemmKey=GemmKey,
        key=GemmKey(m=4096, n=4096, k=4096),
        my_key=lambda x: GemmKey(m=len(x), n=1, k=1),
        gemm_key=lambda x: GemmKey(m=4096, n=4096, k=4096),
        TUNER=tk.LocalTuner("gemm_execute"),
        GEMM_TUNER=tk.LocalTuner("gemm"),
        log=logging.getLogger("search_docs"),
        samples_ns=[100, 110, 105],
        inputs_per_shape=[np.ones(8), np.ones(16)],
    )
    for number, code in enumerate(blocks[1:7], start=2):  # the last block replays a file of ../shared
        exec(compile(code, f"search.md block {number}", "exec"), module.__dict__)
    assert module.result.tuner == "serve" and (tmp_path / "tuning" / "gemm.json").exists()
    assert (tmp_path / "tuning" / "gemm_searched.json").exists()
