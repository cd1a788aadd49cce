"""Atomic replacement keeps the mode a plain write would give, and never leaves half a file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tunekit._base.atomic import write_atomic


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def plain_write_mode(tmp_path: Path) -> int:
    reference = tmp_path / "plain.txt"
    with open(reference, "w", encoding="utf-8") as f:
        f.write("x")
    return mode(reference)


def test_a_new_file_gets_the_mode_of_a_plain_open(tmp_path: Path) -> None:
    """Regression: files were left 0600 (mkstemp), unreadable to other users and CI containers."""
    write_atomic(tmp_path / "new.json", "{}\n")
    assert mode(tmp_path / "new.json") == plain_write_mode(tmp_path)
    assert (tmp_path / "new.json").read_text(encoding="utf-8") == "{}\n"


@pytest.mark.subprocess
def test_the_umask_in_force_is_applied(tmp_path: Path) -> None:
    # The umask is per process and changing it here would race with other threads: a child sets it.
    script = (
        "import os, stat, sys\n"
        "from tunekit._base.atomic import write_atomic\n"
        "os.umask(0o027)\n"
        "write_atomic(sys.argv[1], 'x')\n"
        "print(oct(stat.S_IMODE(os.stat(sys.argv[1]).st_mode)))\n"
    )
    command = [sys.executable, "-c", script, str(tmp_path / "f")]
    out = subprocess.run(command, check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == oct(0o640)


def test_replacing_a_file_keeps_its_mode(tmp_path: Path) -> None:
    """Regression: replacing a file reset its mode to 0600."""
    target = tmp_path / "r.json"
    target.write_text("old", encoding="utf-8")
    for wanted in (0o644, 0o664, 0o600, 0o444):
        target.chmod(wanted)
        write_atomic(target, f"mode {wanted:o}")
        assert mode(target) == wanted and target.read_text(encoding="utf-8") == f"mode {wanted:o}"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "\ud800")  # a lone surrogate cannot be encoded
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(os.listdir(tmp_path)) == ["r.json"]


def test_a_symlink_is_written_through_not_replaced(tmp_path: Path) -> None:
    """Renaming over a symlinked record replaced the link with a regular file and left its target stale."""
    target = tmp_path / "shared" / "record.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "record.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink()
    assert target.read_text() == "new"


def test_a_directory_is_refused_naming_it_and_nothing_is_written_beside_it(tmp_path: Path) -> None:
    """Record.save('/tmp') wrote a temporary file in '/' and failed naming that file: "'/.tmp.1f2e.tmp' -> '/tmp'"."""
    target = tmp_path / "tuning"
    target.mkdir()
    with pytest.raises(IsADirectoryError, match=r"give a file path in it") as raised:
        write_atomic(target, "{}")
    assert raised.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuning"] and not list(target.iterdir())
