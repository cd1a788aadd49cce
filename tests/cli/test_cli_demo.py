"""``tunekit demo`` run as a real subprocess: where its files go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.opencl, pytest.mark.subprocess]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_ENTRY = Path(sys.executable).with_name("tunekit")
COMMAND = [str(_ENTRY)] if _ENTRY.exists() else [sys.executable, "-m", "tunekit"]


def test_with_the_cache_off_the_demo_writes_nothing_into_the_cache_directory(tmp_path: Path) -> None:
    """Regression: with TUNEKIT_CACHE=0 the demo wrote its records, trial log and record into the cache directory
    (and its OpenCL part stopped: it read its results from the cache)."""
    cache_dir, scratch = tmp_path / "cache", tmp_path / "tmp"
    cache_dir.mkdir()
    scratch.mkdir()
    env = {**os.environ, "TUNEKIT_CACHE": "0", "TUNEKIT_CACHE_DIR": str(cache_dir), "TMPDIR": str(scratch)}
    env.pop("TUNEKIT_RECORD", None)
    done = subprocess.run(
        [*COMMAND, "demo"], check=False, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert list(cache_dir.iterdir()) == []
    (directory,) = scratch.glob("tunekit-demo-*")
    written = {p.name for p in directory.iterdir()}
    assert {"pipeline-record.json", "records.jsonl", "report.html"} <= written, written
    assert any(name.startswith("pipeline-trials.") and name.endswith(".jsonl") for name in written), written
    shown = " ".join(done.stdout.split())  # rich wraps long lines at the terminal width
    assert "memory only (TUNEKIT_CACHE=0)" in shown and "the cache is off" in shown, shown
    assert str(cache_dir) not in shown.replace(" ", ""), shown
    assert list(tmp_path.glob("*.json*")) == []  # nor into the working directory


def test_with_autotuning_off_the_demo_says_so_in_one_line(tmp_path: Path) -> None:
    """Regression: under TUNEKIT_AUTOTUNE=0 the demo printed an empty table, then a RuntimeError traceback."""
    env = {**os.environ, "TUNEKIT_AUTOTUNE": "0", "TUNEKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TUNEKIT_RECORD", None)
    done = subprocess.run(
        [*COMMAND, "demo"], check=False, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert done.returncode == 2, (done.stdout[-3000:], done.stderr[-3000:])
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "autotuning is disabled by TUNEKIT_AUTOTUNE=0" in done.stderr
    assert f"no record committed at {tmp_path / 'cache' / 'pipeline-record.json'}" in done.stderr
    assert not (tmp_path / "cache").exists(), "nothing written"


def test_with_autotuning_off_the_demo_serves_the_record_an_earlier_run_committed(tmp_path: Path) -> None:
    """Regression: under TUNEKIT_AUTOTUNE=0 the demo stopped with exit 2 though its committed record could serve."""
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "TUNEKIT_CACHE_DIR": str(cache_dir)}
    for name in ("TUNEKIT_RECORD", "TUNEKIT_AUTOTUNE", "TUNEKIT_CACHE"):
        env.pop(name, None)
    # The search part alone, as `make demo` runs it with autotuning on: it searches and commits the record.
    searched = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo_search.py"), str(cache_dir)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert searched.returncode == 0, (searched.stdout[-3000:], searched.stderr[-3000:])
    assert (cache_dir / "pipeline-record.json").exists()
    before = {p.name: p.read_bytes() for p in cache_dir.iterdir()}

    done = subprocess.run(
        [*COMMAND, "demo"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "TUNEKIT_AUTOTUNE": "0", "COLUMNS": "400"},  # wide enough that rich wraps no table cell
        cwd=tmp_path,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    shown = " ".join(done.stdout.split())
    assert "record verified, no search; production call served from the record, no tune" in shown, shown
    assert "served from the committed record" in shown and "which tune, were skipped" in shown, shown
    assert "Traceback" not in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in cache_dir.iterdir()} == before, "nothing written"
    assert list(tmp_path.iterdir()) == [cache_dir]
