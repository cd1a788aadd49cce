"""Every test gets its own cache directory and fresh settings, and starts processes only if marked to."""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

import tunekit as tk
import tunekit._candidates.space


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    cache_dir = tmp_path / "cache"
    for name in (
        "TUNEKIT_AUTOTUNE",
        "TUNEKIT_CACHE",
        "TUNEKIT_CACHE_URL",  # a developer's fleet database is no test's store
        "TUNEKIT_RECORD",
        "TUNEKIT_AUTOTUNE_LEVEL",
        "TUNEKIT_PROGRESS",
    ):
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


class UnmarkedProcess(BaseException):
    """A process started by a test not marked ``subprocess``.

    A BaseException, so that code falling back from a worker it could not start (``except
    Exception``, ``except OSError``) lets it through instead of passing the test in-process.
    """


@pytest.fixture(autouse=True)
def processes_only_when_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test starts processes (a subprocess, a fork, an isolated worker) only under ``@pytest.mark.subprocess``.

    ``make check`` leaves those out to stay fast, so a mark missing would slow it unseen; here it fails the test.
    Module-scoped fixtures are set up before this one and are not held to it.
    """
    if request.node.get_closest_marker("subprocess") is not None:
        return

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise UnmarkedProcess(f"{request.node.nodeid} starts a process: mark it @pytest.mark.subprocess")

    # subprocess binds fork_exec at import; multiprocessing's spawn and forkserver reach it through
    # _posixsubprocess, its fork start method through os.fork.
    monkeypatch.setattr(subprocess, "_fork_exec", refuse)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
