"""Property: whatever bytes a records file holds, the reader yields records and named bad lines, never raises."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

import tunekit as tk

GOOD = tk.AutotuneRecord(
    tuner="prop",
    device_id="cpu:test",
    key={"n": 8},
    checksum="c",
    decision="tuned",
    candidates=[tk.CandidateRecord(name="a", status="failed", batch=0, stage="crash", error="crashed: signal 6")],
    winner="a",
    stored=True,
    wall_time_s=0.5,
).model_dump_json()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


def _mutated(fields: dict[str, object]) -> bytes:
    record = json.loads(GOOD)
    record.update(fields)
    return json.dumps(record).encode()


bad_line = st.one_of(
    st.binary(min_size=1, max_size=200).map(lambda b: b.replace(b"\n", b" ") or b"x"),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(sorted(json.loads(GOOD))), json_values, min_size=1, max_size=3).map(_mutated),
    st.integers(1, len(GOOD) - 1).map(lambda cut: GOOD[:cut].encode()),
    st.sampled_from(
        [
            b"[" * 100_000 + b"]" * 100_000,
            b'{"schema_version": 1e999}',
            b'{"tuner": "\\ud800"}',
            GOOD.replace('"schema_version":1', '"schema_version":99').encode(),
            GOOD.encode().replace(b'"prop"', b'"\xff\xfe"'),
            GOOD.encode() + b"\x00",
        ]
    ),
)


@settings(max_examples=80, deadline=None)
@given(lines=st.lists(st.one_of(st.just(None), bad_line), min_size=1, max_size=12), newline_at_end=st.booleans())
def test_any_file_yields_each_good_record_and_names_each_bad_line(
    lines: list[bytes | None], newline_at_end: bool
) -> None:
    raw = [GOOD.encode() if line is None else line for line in lines]
    with tempfile.TemporaryDirectory() as top:
        path = Path(top) / "records.jsonl"
        path.write_bytes(b"\n".join(raw) + (b"\n" if newline_at_end else b""))
        got = list(tk.read_records(path))
    numbered = [(number, line) for number, line in enumerate(raw, start=1) if line.strip()]
    assert [item.line for item in got] == [number for number, _ in numbered], "one result per non-blank line, in order"
    for item, (_, line) in zip(got, numbered, strict=True):
        assert isinstance(item, tk.RecordLine | tk.BadLine)
        if line == GOOD.encode():
            assert isinstance(item, tk.RecordLine) and item.record.tuner == "prop"
        if isinstance(item, tk.BadLine):
            assert item.reason and "\n" not in item.reason
