"""``tunekit cache list/clear --older-than AGE`` on a real cache: bounding a cache that many keys keep growing."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import numpy as np
from _command import run

import tunekit as tk
from tunekit._cli.age import tuned_before
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class AgeKey:
    n: Annotated[int, tk.Anchor()]


def _age_rows(cache_dir: Path, keys: list[str], days: int) -> None:
    """Back-date the rows of ``keys`` by ``days``, as rows tuned that long ago would read."""
    when = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    with sqlite3.connect(cache_dir / tk.PersistentCache.FILENAME) as db:
        for key in keys:
            db.execute("UPDATE winners SET value = json_set(value, '$.tuned_at', ?) WHERE key = ?", (when, key))


def test_older_than_lists_and_clears_only_the_winners_tuned_that_long_ago(isolated_settings: Path) -> None:
    """A cache of many keys could only be cleared by tuner or key value, never by age: it grew for good."""
    tuner: tk.LocalTuner[AgeKey, np.ndarray] = tk.LocalTuner("aged")
    tunables = (
        tk.TunableSet(key=lambda x: AgeKey(n=x.shape[0]))
        .with_tunable(tk.Tunable("mul", lambda x: x * 2))
        .with_tunable(tk.Tunable("add", lambda x: x + x))
    )
    for n in (1, 2, 4, 8, 16):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(n),))
    old = ['{"n":1}', '{"n":2}', '{"n":4}']
    _age_rows(isolated_settings, old, days=40)
    run("cache", "verify")  # the back-dated rows are still valid rows (exit 0)

    listed = run("cache", "list", "--older-than", "30d").stdout
    assert all(key in listed for key in old) and '{"n":8}' not in listed and '{"n":16}' not in listed
    assert "no stored winners matching the filters" in run("cache", "list", "--older-than", "50d").stderr

    done = run("cache", "clear", "--older-than", "30d", "--yes")
    assert done.stdout.startswith("removed 3 stored winners tuned over 30d ago from ")
    stored = {row.key for row in tk.PersistentCache(isolated_settings).rows() if not isinstance(row, str)}
    assert stored == {'{"n":8}', '{"n":16}'}
    tuner.clear()  # the cleared keys are tuned again at their next call; the others are read back
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(1),))
    assert '{"n":1}' in {row.key for row in tk.PersistentCache(isolated_settings).rows() if not isinstance(row, str)}


def test_an_age_without_its_unit_is_a_usage_error(isolated_settings: Path) -> None:
    for age in ("30", "30 days", "-1d", "d"):
        done = run("cache", "clear", f"--older-than={age}", "--yes", check=2)
        assert done.stderr.startswith("tunekit: --older-than takes an age with its unit"), (age, done.stderr)


def test_ages_count_back_from_now() -> None:
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    assert tuned_before("30d", now=now) == now - timedelta(days=30)
    assert tuned_before("1.5h", now=now) == now - timedelta(minutes=90)
    assert tuned_before("2w", now=now) == now - timedelta(days=14)
    assert tuned_before(None, now=now) is None
