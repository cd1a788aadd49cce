"""A key field that takes a new value at every tune is named once, before the cache fills with rows no call reads."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import tunekit as tk
from tunekit._tune.key_churn import WINDOW
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class SeedKey:
    n: int
    seed: float


@tk.autotune_key
class ShapeKey:
    rows: int
    cols: int


@pytest.fixture(autouse=True)
def cheap_tunes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hundreds of tunes: the fewest samples the schedule takes, no runoff, the shortest warm-up.
    for name, value in (("TUNEKIT_WARMUP_MS", "1"), ("TUNEKIT_MAX_SAMPLES", "3"), ("TUNEKIT_RUNOFF_PAIRS", "0")):
        monkeypatch.setenv(name, value)
    tk.configure()


def _rows(cache_dir: Path, tuner: str) -> int:
    with sqlite3.connect(cache_dir / "tunekit-cache.sqlite3") as db:
        (count,) = db.execute("SELECT count(*) FROM winners WHERE tuner = ?", (tuner,)).fetchone()
    return int(count)


def _churn_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tunekit.tuner" and "new value at each" in r.message]


def test_a_seed_in_the_key_is_named_once_after_one_window_of_tunes(
    isolated_settings: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A seed in the key made every call tune and store a row no later call read, and nothing said so."""
    tuner: tk.LocalTuner[SeedKey, float] = tk.LocalTuner("churn_seed")
    client = CpuClient()
    x = np.ones(16)

    def make() -> tk.TunableSet[SeedKey, float]:
        return (
            tk.TunableSet(key=lambda x, s: SeedKey(n=x.shape[0], seed=s))
            .with_tunable(tk.Tunable("sum", lambda x, s: float(x.sum())))
            .with_tunable(tk.Tunable("dot", lambda x, s: float(x @ x)))
        )

    calls = 2 * WINDOW + 10
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        for i in range(calls):
            tuner.execute(client.device_id, client, tuner.init(make), (x, i / 7))
            if i == WINDOW - 2:
                assert _churn_warnings(caplog) == []  # not before a whole window of tunes
    warned = _churn_warnings(caplog)
    assert len(warned) == 1, warned  # once per field, not once per window
    assert "'churn_seed'" in warned[0] and "SeedKey.seed" in warned[0] and "SeedKey.n" not in warned[0]
    assert "leave it out of the key" in warned[0] and "tk.Anchor()" in warned[0]
    assert _rows(isolated_settings, "churn_seed") == calls  # what the warning is about: one row per call
    assert tuner.tuner(client.device_id)._churn.checks == 2  # looked at once per window of tunes, not per tune


def test_many_distinct_keys_whose_fields_repeat_are_not_named(caplog: pytest.LogCaptureFixture) -> None:
    """Every key new, but each field's values shared by other keys: a service seeing many shapes, not churn."""
    tuner: tk.LocalTuner[ShapeKey, float] = tk.LocalTuner("churn_shapes")
    client = CpuClient()

    def make() -> tk.TunableSet[ShapeKey, float]:
        return (
            tk.TunableSet(key=lambda x: ShapeKey(rows=x.shape[0], cols=x.shape[1]))
            .with_tunable(tk.Tunable("sum", lambda x: float(x.sum())))
            .with_tunable(tk.Tunable("einsum", lambda x: float(np.einsum("ij->", x))))
        )

    shapes = [(rows, cols) for rows in range(1, 11) for cols in range(1, 22)]  # 210 keys, each field repeats
    with caplog.at_level(logging.WARNING, logger="tunekit.tuner"):
        for rows, cols in shapes:
            tuner.execute(client.device_id, client, tuner.init(make), (np.ones((rows, cols)),))
        for rows, cols in shapes[:50]:  # hits tune nothing, so they count for nothing either way
            tuner.execute(client.device_id, client, tuner.init(make), (np.ones((rows, cols)),))
    assert tuner.tuner(client.device_id)._churn.checks == 2
    assert _churn_warnings(caplog) == []
