"""file_in_the_way names the file that keeps a user-named path from being created."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunekit._base.paths import file_in_the_way


def test_the_file_nearest_the_root_is_named_and_a_creatable_path_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "afile").write_text("")
    assert file_in_the_way(tmp_path / "dir" / "afile" / "deeper" / "records.jsonl") == tmp_path / "dir" / "afile"
    assert file_in_the_way(tmp_path / "dir" / "new" / "records.jsonl") is None
    assert file_in_the_way(tmp_path / "dir" / "afile") is None  # the path itself is its caller's to judge
    monkeypatch.chdir(tmp_path / "dir")
    assert file_in_the_way(Path("afile/records.jsonl")) == Path("afile")
