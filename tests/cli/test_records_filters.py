"""``tunekit records summary --tuner/--key`` on a real records file of many keys: one key's figures without the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest
from _command import run

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class GridKey:
    rows: int
    cols: int
    dtype: np.dtype


@pytest.fixture
def many_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """60 keys of two real tuners (40 and 20), recorded to one file."""
    for name, value in (("TUNEKIT_WARMUP_MS", "1"), ("TUNEKIT_MAX_SAMPLES", "3"), ("TUNEKIT_RUNOFF_PAIRS", "0")):
        monkeypatch.setenv(name, value)
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    for name, every in (("grid_sum", 1), ("grid_max", 2)):
        tuner: tk.LocalTuner[GridKey, np.ndarray] = tk.LocalTuner(name)
        tunables = (
            tk.TunableSet(key=lambda x: GridKey(rows=x.shape[0], cols=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("np", lambda x: x.sum(axis=1)))
            .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)))
        )
        for i in range(0, 40, every):
            x = np.ones((1 + i % 4, 1 + i // 4), dtype=(np.float32, np.float64)[i % 2])
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (x,))
    return path


def _rows(text: str, tuner: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{tuner} ")]


def test_tuner_and_key_filters_show_only_the_matching_keys(many_keys: Path) -> None:
    """With thousands of keys, `records summary` printed every one: no way to look at one tuner's or shape's."""
    whole = run("records", "summary", str(many_keys)).stdout
    assert len(_rows(whole, "grid_sum")) == 40 and len(_rows(whole, "grid_max")) == 20

    one_tuner = run("records", "summary", str(many_keys), "--tuner", "grid_max").stdout
    assert one_tuner.startswith(f"{many_keys}: 60 records, 60 keys (20 matching the filters)\n")
    assert len(_rows(one_tuner, "grid_max")) == 20 and _rows(one_tuner, "grid_sum") == []

    shape = run(
        "records", "summary", str(many_keys), "--tuner", "grid_sum", "--key", "cols=3", "--key", "dtype=float64"
    )
    rows = _rows(shape.stdout, "grid_sum")
    assert len(rows) == 2 and all('"cols":3' in r and '"dtype":"float64"' in r for r in rows), rows

    keys = json.loads(run("records", "summary", str(many_keys), "--json", "--key", "rows=1").stdout)["keys"]
    assert len(keys) == 20 and {k["key"]["rows"] for k in keys} == {1}  # 10 of each tuner


def test_a_filter_naming_what_the_file_lacks_is_a_usage_error(many_keys: Path) -> None:
    """A misspelt tuner or field matched nothing and printed an empty summary, exit 0."""
    done = run("records", "summary", str(many_keys), "--tuner", "grid_mean", check=2)
    assert done.stderr == "tunekit: no record of tuner 'grid_mean' in the file (tuners there: grid_max, grid_sum)\n"
    done = run("records", "summary", str(many_keys), "--key", "size=3", check=2)
    assert done.stderr == "tunekit: no recorded key has a field named 'size' (key fields there: cols, dtype, rows)\n"
    assert run("records", "summary", str(many_keys), "--key", "size", check=2).stderr.startswith(
        "tunekit: --key takes FIELD=VALUE"
    )


def test_a_key_filter_of_the_calls_size_points_at_the_recorded_bucket(tmp_path: Path) -> None:
    """`--key n=1000` (the call's size) said only "0 matching the filters", where `cache list` names the bucket."""

    @tk.autotune_key
    class SizeKey:
        n: Annotated[int, tk.Anchor()]

    path = tmp_path / "records.jsonl"
    tunables = (
        tk.TunableSet(key=lambda x: SizeKey(n=len(x)))
        .with_tunable(tk.Tunable("np", lambda x: x.sum()))
        .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("i->", x)))
    )
    tuner: tk.LocalTuner[SizeKey, np.ndarray] = tk.LocalTuner("sized_sum", sinks=[tk.JsonlSink(path)])
    for n in (1000, 3000):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(n),))
    done = run("records", "summary", str(path), "--key", "n=1000")
    assert done.stdout == (
        f"{path}: 2 records, 2 keys (0 matching the filters; recorded n: 1024, 4096; anchored fields hold the "
        "rounded-up bucket, e.g. 1024 for 1000)\n"
    )
    assert '"n":1024' in run("records", "summary", str(path), "--key", "n=1024").stdout
