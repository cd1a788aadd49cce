from __future__ import annotations

import json
import logging
import time
import typing
from pathlib import Path
from typing import Annotated

import jsonschema
import pytest

import tunekit as tk
from tunekit._values.records import _KINDS, RecordEvent, UnknownEvent
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


CLIENT = CpuClient()


def _boom(n: int) -> int:
    raise RuntimeError("nope")


def _tune(name: str) -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner(name)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [
            tk.Tunable("ok", lambda n: n),
            tk.Tunable("boom", _boom),
            tk.Tunable("sleepy", lambda n: time.sleep(0.001) or n),
        ]
    )
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (3,))


def test_record_validates_against_published_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv("TUNEKIT_RECORD", str(path))
    tk.configure()
    _tune("schema")
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    document = json.loads(lines[0])
    jsonschema.validate(document, tk.AutotuneRecord.model_json_schema())
    assert document["schema_version"] == 1
    assert document["winner"] in {"ok", "sleepy"}
    statuses = {c["name"]: c["status"] for c in document["candidates"]}
    assert statuses == {"ok": "measured", "boom": "failed", "sleepy": "measured"}
    record = tk.AutotuneRecord.model_validate_json(lines[0])
    assert record.stored
    assert record.candidates[0].stats is not None
    assert record.candidates[0].stats.count == tk.settings().samples


def test_schema_rejects_unknown_version() -> None:
    with pytest.raises(ValueError, match="schema_version"):
        tk.AutotuneRecord.model_validate(
            {
                "schema_version": 99,
                "tuner": "t",
                "device_id": "d",
                "key": {},
                "checksum": "c",
                "decision": "tuned",
                "winner": None,
                "stored": False,
                "wall_time_s": 0,
            }
        )


def test_stdout_sink(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_RECORD", "stdout")
    tk.configure()
    _tune("stdout")
    record = tk.AutotuneRecord.model_validate_json(capsys.readouterr().out.strip())
    assert record.tuner == "stdout"


def test_logging_sink(caplog: pytest.LogCaptureFixture) -> None:
    sink = tk.add_record_sink(tk.LoggingSink())
    try:
        with caplog.at_level(logging.INFO, logger="tunekit.records"):
            _tune("logged")
    finally:
        tk.remove_record_sink(sink)
    assert any("logged" in message and "winner" in message for message in caplog.messages)


def test_failing_sink_never_breaks_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def broken(record: tk.AutotuneRecord) -> None:
        raise OSError("disk full")

    sink = tk.add_record_sink(broken)
    try:
        _tune("brokensink")
    finally:
        tk.remove_record_sink(sink)
    assert "failed" in caplog.text


def test_every_event_kind_is_routed_to_its_model_and_only_unknown_kinds_to_unknown_event() -> None:
    """The union's tags, the kinds told apart from unknown ones and each model's kind must agree."""
    union, _ = typing.get_args(RecordEvent)
    tagged = {typing.get_args(member)[1].tag: typing.get_args(member)[0] for member in typing.get_args(union)}
    assert tagged.pop("unknown") is UnknownEvent
    assert {tag: model.model_fields["kind"].default for tag, model in tagged.items()} == {t: t for t in tagged}
    assert set(tagged) == _KINDS
