"""Records files read back line by line: bad lines are named, good ones still come through."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import jsonschema

import tunekit as tk
from tunekit._observe.event_text import describe_events
from tunekit._observe.reader import BadLine, RecordLine, follow_records, parse_line, read_records
from tunekit._values.records import FallbackBatch, UnknownEvent


def _record(tuner: str = "reader") -> tk.AutotuneRecord:
    return tk.AutotuneRecord(
        tuner=tuner,
        device_id="cpu:test",
        key={"n": 8},
        checksum="c",
        decision="disabled",
        winner="a",
        stored=False,
        wall_time_s=0.0,
    )


def test_each_bad_line_is_named_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    good = _record().model_dump_json()
    path.write_bytes(
        b"\n".join(
            [
                good.encode(),
                b"{not json",
                b"",
                b'{"schema_version": 1}',
                b"\xff\xfe garbage",
                good.replace('"schema_version":1', '"schema_version":2').encode(),
                good.encode(),
                good[:40].encode(),  # a writer killed mid-line
            ]
        )
    )
    lines = list(read_records(path))
    assert [type(x).__name__ for x in lines] == [
        "RecordLine",
        "BadLine",
        "BadLine",
        "BadLine",
        "BadLine",
        "RecordLine",
        "BadLine",
    ]
    reasons = {x.line: x.reason for x in lines if isinstance(x, BadLine)}
    assert reasons[2].startswith("not valid JSON")
    assert reasons[4].startswith("not a valid AutotuneRecord: tuner: Field required; and")
    assert reasons[5].startswith("not UTF-8")
    # another tunekit's whole line, not a damaged one ("schema_version: Input should be 1" read as damage)
    assert reasons[6] == (
        "not a record this tunekit reads: it was written by another tunekit version "
        f"(schema_version 2; tunekit {tk.__version__} reads 1)"
    )
    assert reasons[8].startswith("last line is cut short")
    assert [x.line for x in lines if isinstance(x, RecordLine)] == [1, 7]


def test_a_newline_in_a_bad_key_stays_out_of_the_reason(tmp_path: Path) -> None:
    """Regression: a key holding a newline, named in the validation error, split the BadLine reason over two lines."""
    line = _record("bad").model_dump_json().replace('"key":{', '"key":{"a\\nb":[1],', 1)
    (tmp_path / "r.jsonl").write_text(line + "\n")
    (bad,) = read_records(tmp_path / "r.jsonl")
    assert isinstance(bad, BadLine) and "\n" not in bad.reason and "a\\x0ab" in bad.reason, bad.reason


def test_follow_yields_only_complete_lines_as_they_arrive(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_text(_record("old").model_dump_json() + "\n")
    done = threading.Event()
    seen: list[RecordLine | BadLine] = []

    def follow() -> None:
        for line in follow_records(path, from_line=2, poll_s=0.01, stop=done.is_set):
            seen.append(line)

    follower = threading.Thread(target=follow)
    follower.start()
    text = _record("new").model_dump_json() + "\n"
    with path.open("a") as file:
        file.write(text[:30])
        file.flush()
        time.sleep(0.1)
        assert seen == []  # half a line is not a line
        file.write(text[30:])
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    done.set()
    follower.join()
    assert len(seen) == 1 and isinstance(seen[0], RecordLine)
    assert seen[0].line == 2 and seen[0].record.tuner == "new"


def test_follow_yields_every_line_of_a_file_that_replaced_or_truncated_the_followed_one(tmp_path: Path) -> None:
    """Regression: after a rotation, ``from_line`` still counted the old file, so the new file's first lines were lost.

    ``tunekit records tail`` follows from the line after the last it printed: a file of 1,000 records
    rotated away hid the first 1,000 records of its successor.
    """
    path = tmp_path / "live.jsonl"
    path.write_text("".join(_record(f"old{i}").model_dump_json() + "\n" for i in range(3)))
    done = threading.Event()
    seen: list[str] = []

    def follow() -> None:
        for line in follow_records(path, from_line=4, poll_s=0.01, stop=done.is_set):
            seen.append(line.record.tuner if isinstance(line, RecordLine) else f"bad {line.line}")

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            time.sleep(0.01)

    follower = threading.Thread(target=follow)
    follower.start()
    try:
        with path.open("a") as file:
            file.write(_record("appended").model_dump_json() + "\n")
        wait_for(1)
        rotated = tmp_path / "live.jsonl.new"  # log rotation: a new file moved into place
        rotated.write_text(_record("rotated1").model_dump_json() + "\n" + _record("rotated2").model_dump_json() + "\n")
        rotated.replace(path)
        wait_for(3)
        path.write_text(_record("truncated").model_dump_json() + "\n")  # the same file, emptied and written
        wait_for(4)
    finally:
        done.set()
        follower.join()
    assert seen == ["appended", "rotated1", "rotated2", "truncated"]


def test_a_record_of_a_newer_tunekit_reads_with_its_new_fields_and_event_kinds(tmp_path: Path) -> None:
    """Regression: a field or an event kind added within schema_version 1 made an older reader call the line bad."""
    document = json.loads(_record().model_dump_json())
    document["host"] = "gpu-7"
    document["events"] = [{"kind": "fallback", "batch": 1, "why": "all failed"}, {"kind": "thermal", "temp_c": 91}]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(document) + "\n")
    (line,) = read_records(path)
    assert isinstance(line, RecordLine), line
    fallback, thermal = line.record.events
    assert isinstance(fallback, FallbackBatch) and fallback.batch == 1
    assert isinstance(thermal, UnknownEvent) and thermal.kind == "thermal"
    assert json.loads(line.record.model_dump_json()) == document  # nothing the newer version wrote is lost
    jsonschema.validate(document, tk.AutotuneRecord.model_json_schema())
    assert describe_events(line.record.events)[-1] == 'thermal: {"kind":"thermal","temp_c":91}'


def test_a_hit_summary_cut_short_is_a_bad_line_not_skipped() -> None:
    # Found by the property test: a whole hit summary is skipped, but a torn one is damage to report.
    assert isinstance(parse_line(1, b'{"kind":"hit_summary"'), BadLine)
    assert parse_line(2, b'{"kind":"hit_summary","hits":[]}') is None
