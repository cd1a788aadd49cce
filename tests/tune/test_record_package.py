"""A library ships its committed records as package data and reads them with importlib.resources."""

from __future__ import annotations

import importlib
import shutil
import stat
import sys
import zipfile
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from kt_cache import write_cache

import tunekit as tk
from tunekit._observe.sinks import CallbackSink
from tunekit_backends.replay import ReplayClient, ReplayData, load_kernel_tuner_cache


@tk.autotune_key
class Shape:
    n: Annotated[int, tk.Anchor()]


def key_of(x: np.ndarray) -> Shape:
    return Shape(n=len(x))


@pytest.fixture
def data(tmp_path: Path) -> ReplayData:
    return load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))


def ship(data: ReplayData, root: Path, package: str) -> tuple[ReplayClient, tk.TunableSet[Shape, Any]]:
    """Tune offline, commit the record into ``package``'s ``tuning/`` folder under ``root``."""
    client = ReplayClient(data)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=key_of)
    record = tk.Record.for_tunables("shipped", client, tunables)
    record.add(Shape(n=1000), tk.search(data.space, client.kernel, client, (), tuner="shipped", key=Shape(n=1000)))
    (root / package / "tuning").mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    record.save(root / package / "tuning" / "r.json")
    return client, tunables


def read_only(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def serves_without_tuning(client: ReplayClient, tunables: tk.TunableSet[Shape, Any], record: tk.Record[Shape]) -> None:
    decisions: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[Shape, None] = tk.LocalTuner("shipped", sinks=[CallbackSink(decisions.append)])
    assert record.seed(tuner, tunables, Shape) == 1
    tuner.execute(client.device_id, client, tunables, (np.zeros(1000),))
    assert decisions == [], "a shipped key is never tuned"


def test_a_record_in_read_only_package_data_is_loaded_from_its_resource(
    data: ReplayData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, tunables = ship(data, tmp_path / "site", "shipping_lib_dir")
    read_only(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    try:
        resource = files("shipping_lib_dir") / "tuning" / "r.json"
        record = tk.Record.load_verified(resource, tunables, client, tuner="shipped")
        assert record.warnings == ()
        serves_without_tuning(client, tunables, record)
        assert sorted(p.name for p in (tmp_path / "site" / "shipping_lib_dir").rglob("*")) == [
            "__init__.py",
            "r.json",
            "tuning",
        ], "loading writes nothing beside the record"
    finally:
        (tmp_path / "site").chmod(0o755)
        for path in (tmp_path / "site").rglob("*"):
            path.chmod(0o755)


def test_a_record_in_a_zipped_package_is_loaded_and_named_by_its_resource_path(
    data: ReplayData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: load took str | Path, so a zipped package's resource raised TypeError from pathlib."""
    client, tunables = ship(data, tmp_path / "src", "shipping_lib_zip")
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted((tmp_path / "src").rglob("*")):
            if path.is_file():
                zipped.write(path, path.relative_to(tmp_path / "src").as_posix())
    shutil.rmtree(tmp_path / "src")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    try:
        tuning = files("shipping_lib_zip") / "tuning"
        assert not isinstance(tuning, Path), "the resource is inside the zip, not a file on disk"
        record = tk.Record.load_verified(tuning / "r.json", tunables, client, tuner="shipped")
        serves_without_tuning(client, tunables, record)
        with pytest.raises(FileNotFoundError, match=r"no committed record at .*lib\.zip/shipping_lib_zip/tuning/gone"):
            tk.Record.load(tuning / "gone.json")
        with pytest.raises(tk.RecordMismatch, match=r"lib\.zip/shipping_lib_zip/tuning/r\.json does not apply here"):
            tk.Record.load_verified(tuning / "r.json", tunables, client, tuner="another")
    finally:
        sys.modules.pop("shipping_lib_zip", None)


def test_a_record_source_that_is_neither_path_nor_resource_is_named() -> None:
    with pytest.raises(TypeError, match=r"takes the record's file path or a package resource .*got bytes"):
        tk.Record.load(b"r.json")  # type: ignore[arg-type]
