"""`tunekit cache clear` on a real cache file: asks on a terminal, refuses without --yes elsewhere, clears part."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest
from _command import run

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()
_ENTRY = Path(sys.executable).with_name("tunekit")
COMMAND = [str(_ENTRY)] if _ENTRY.exists() else [sys.executable, "-m", "tunekit"]


@tk.autotune_key
class ClearKey:
    n: Annotated[int, tk.Anchor()]


def _doubled(x: np.ndarray) -> np.ndarray:
    return x * 2


@pytest.fixture
def cache(isolated_settings: Path) -> tk.PersistentCache:
    """Two tuners of two keys each, tuned on this CPU into the test's cache directory."""
    for name in ("clear_a", "clear_b"):
        tuner: tk.LocalTuner[ClearKey, np.ndarray] = tk.LocalTuner(name)
        tunables = (
            tk.TunableSet(key=lambda x: ClearKey(n=x.shape[0]))
            .with_tunable(tk.Tunable("mul", _doubled))
            .with_tunable(tk.Tunable("add", lambda x: x + x))
        )
        for n in (100, 5000):
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(n),))
    return tk.PersistentCache(isolated_settings)


def _stored(cache: tk.PersistentCache) -> set[tuple[str, str]]:
    return {(row.tuner, row.key) for row in cache.rows() if not isinstance(row, str)}


def test_without_a_terminal_or_yes_it_refuses_and_names_yes(cache: tk.PersistentCache) -> None:
    # Regression: `cache clear` deleted every winner without asking.
    done = run("cache", "clear", check=2)
    assert "cache clear would remove 4 stored winners" in done.stderr and "pass --yes" in done.stderr
    assert len(_stored(cache)) == 4


def test_yes_clears_everything_and_says_how_many(cache: tk.PersistentCache) -> None:
    assert "removed 4 stored winners from" in run("cache", "clear", "--yes").stdout
    assert _stored(cache) == set()
    assert "nothing to clear: no stored winners in" in run("cache", "clear").stdout  # no question over nothing


def test_tuner_and_key_clear_part_only(cache: tk.PersistentCache) -> None:
    done = run("cache", "clear", "-y", "--tuner", "clear_a")
    assert "removed 2 stored winners of tuner 'clear_a' from" in done.stdout
    assert _stored(cache) == {("clear_b", '{"n":128}'), ("clear_b", '{"n":8192}')}
    done = run("cache", "clear", "--yes", "--key", "n=8192")
    assert "removed 1 stored winner with n=8192 from" in done.stdout
    assert _stored(cache) == {("clear_b", '{"n":128}')}
    # A --key that matches nothing removes nothing, and says which values are there.
    assert "nothing to clear" in (nothing := run("cache", "clear", "--yes", "--key", "n=4").stdout)
    assert "(stored n: 128" in nothing
    assert "no stored key has a field named 'm'" in run("cache", "clear", "--yes", "--key", "m=4", check=2).stderr
    assert _stored(cache) == {("clear_b", '{"n":128}')}


def test_delete_winners_removes_one_key_of_one_tuner(cache: tk.PersistentCache) -> None:
    assert cache.delete_winners("clear_a", '{"n":128}') == 1
    assert cache.delete_winners("clear_a", '{"n":128}') == 0
    assert cache.delete_winners(key='{"n":8192}') == 2
    assert _stored(cache) == {("clear_b", '{"n":128}')}
    assert cache.delete_winners() == 1


def _clear_on_a_terminal(answer: bytes, cache_dir: Path) -> tuple[int, str]:
    """`tunekit cache clear` with a pseudo-terminal as its standard input and error, answering ``answer``."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TUNEKIT_CACHE_DIR": str(cache_dir)}
    with subprocess.Popen(
        [*COMMAND, "cache", "clear", "--tuner", "clear_b"],
        stdin=follower,
        stderr=follower,
        stdout=subprocess.PIPE,
        env=env,
    ) as process:
        os.close(follower)
        asked = b""
        while b"[y/N]" not in asked:
            chunk = os.read(leader, 1024)
            assert chunk, asked
            asked += chunk
        os.write(leader, answer)
        out, _ = process.communicate(timeout=60)
    os.close(leader)
    assert b"remove 2 stored winners of tuner 'clear_b'" in asked, asked
    return process.returncode, out.decode()


@pytest.mark.subprocess
def test_on_a_terminal_it_asks_first(cache: tk.PersistentCache, isolated_settings: Path) -> None:
    code, out = _clear_on_a_terminal(b"n\n", isolated_settings)
    assert code == 1 and len(_stored(cache)) == 4
    code, out = _clear_on_a_terminal(b"y\n", isolated_settings)
    assert code == 0 and "removed 2 stored winners of tuner 'clear_b'" in out
    assert {tuner for tuner, _ in _stored(cache)} == {"clear_a"}
