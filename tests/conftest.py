"""Every test gets its own cache directory and fresh settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tunekit as tk
import tunekit._candidates.space


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    cache_dir = tmp_path / "cache"
    for name in ("TUNEKIT_AUTOTUNE", "TUNEKIT_CACHE", "TUNEKIT_RECORD", "TUNEKIT_AUTOTUNE_LEVEL", "TUNEKIT_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TUNEKIT_SAMPLES", "3")
    # The device warm-up really spins on the CPU client: keep it short so tests stay fast.
    monkeypatch.setenv("TUNEKIT_WARMUP_MS", "5")
    monkeypatch.setenv("TUNEKIT_PROGRESS", "0")
    tk.configure()
    yield cache_dir
    monkeypatch.undo()
    tk.configure()


@pytest.fixture
def few_hopeless_draws(monkeypatch: pytest.MonkeyPatch) -> int:
    """Gives up on a space too big to walk after 20,000 draws that found nothing valid, not 500,000 (~4 s each).

    For tests of what happens at that limit, not of its value: test_space's sampling test keeps the real one.
    """
    draws = 20_000
    monkeypatch.setattr(tunekit._candidates.space, "_HOPELESS_DRAWS", draws)
    return draws
