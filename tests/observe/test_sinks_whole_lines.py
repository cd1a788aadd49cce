"""A records file keeps whole lines: through a full disk, a writer killed mid-line, and a value JSON cannot hold.

The full disk is a real one: a 64 KiB tmpfs mounted by the test (root only; skipped otherwise).
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import tunekit as tk
from tunekit._observe.reader import BadLine, RecordLine, read_records


def _record(n: int, **key: object) -> tk.AutotuneRecord:
    return tk.AutotuneRecord(
        tuner="whole-lines",
        device_id="cpu:test",
        key={"n": n, **key},
        checksum="c" * 32,
        decision="disabled",
        winner="candidate-with-a-longish-name",
        stored=False,
        wall_time_s=0.0,
    )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB filesystem, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a 64 KiB tmpfs (a real full disk) needs root; this test runs as uid " + str(os.geteuid()))
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.mark.subprocess
def test_a_full_disk_tears_no_line_and_warns_once(small_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Regression: a short write on a full disk left a line without its end, so the next process's first record was
    glued onto it and read back as a bad line; and the sink warned once per record (391 warnings)."""
    filler = small_disk / "filler"
    filler.write_bytes(b"x" * 16384)
    path = small_disk / "records.jsonl"
    sink = tk.JsonlSink(path)
    with caplog.at_level(logging.WARNING, logger="tunekit.records"):
        for n in range(400):
            sink.emit(_record(n))
    warnings = [r.getMessage() for r in caplog.records if r.name == "tunekit.records"]
    assert len(warnings) == 1, warnings
    assert "No space left on device" in warnings[0] and "not logged again" in warnings[0]
    kept = list(read_records(path))
    assert [line for line in kept if isinstance(line, BadLine)] == []
    assert 0 < sink.lost < 400 and len(kept) == 400 - sink.lost  # every record is either in the file or counted lost
    assert path.read_bytes().endswith(b"\n")
    filler.unlink()  # room again: another process appends its first record
    tk.JsonlSink(path).emit(_record(-1))
    after = list(read_records(path))
    assert [line for line in after if isinstance(line, BadLine)] == []
    last = after[-1]
    assert isinstance(last, RecordLine) and last.record.key == {"n": -1}


def test_a_line_cut_short_by_a_killed_writer_does_not_swallow_the_next_record(tmp_path: Path) -> None:
    """Regression: the next record was appended to the torn line, and both came back as one bad line."""
    path = tmp_path / "records.jsonl"
    whole = _record(1).model_dump_json() + "\n"
    path.write_text(whole + whole[:40])  # a writer killed mid-line leaves this
    tk.JsonlSink(path).emit(_record(2))
    lines = list(read_records(path))
    assert [type(line).__name__ for line in lines] == ["RecordLine", "BadLine", "RecordLine"]
    assert isinstance(lines[2], RecordLine) and lines[2].record.key == {"n": 2}


def test_a_value_json_cannot_hold_is_written_escaped_with_a_warning_naming_its_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: a lone surrogate in a str key field made the record unserialisable: a logged traceback, the record
    lost."""
    path = tmp_path / "records.jsonl"
    sink = tk.JsonlSink(path)
    with caplog.at_level(logging.WARNING, logger="tunekit.records"):
        sink.emit(_record(1, name="a\ud800b"))
        sink.emit(_record(2, name="c\udfffd"))
    (first, second) = list(read_records(path))
    assert isinstance(first, RecordLine) and first.record.key == {"n": 1, "name": "a\\ud800b"}
    assert isinstance(second, RecordLine) and second.record.key == {"n": 2, "name": "c\\udfffd"}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert "key.name" in messages[0] and "escaped" in messages[0] and not caplog.records[0].exc_info
    assert sink.lost == 0


def test_a_stream_sink_writes_a_value_json_cannot_hold_escaped(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="tunekit.records"):
        tk.StreamSink(stream).emit(_record(1, name="a\ud800b"))
    assert json.loads(stream.getvalue())["key"] == {"n": 1, "name": "a\\ud800b"}
    assert ["key.name" in r.getMessage() for r in caplog.records] == [True]
