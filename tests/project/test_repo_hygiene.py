"""Regression: a merge-conflict marker once landed in benches/README.md unnoticed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
MARKERS = ("<<<<<<< ", ">>>>>>> ")


def test_no_merge_conflict_markers_in_tracked_files() -> None:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    files = listed.stdout.split() if listed.returncode == 0 else [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md")]
    offenders = []
    for name in files:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ""} or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.startswith(MARKERS):
                offenders.append(f"{name}:{number}")
    assert not offenders, f"merge-conflict markers: {offenders}"
