"""On-disk models: code is held to their fields, data read back keeps the fields of a newer tunekit."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

import tunekit as tk
from tunekit._base.persisted import STORED


def test_a_misspelt_field_in_code_is_refused_naming_it_and_the_fields() -> None:
    """Regression: tk.CacheValue(..., reslts=...) kept the typo as an extra field: saved, and results stayed empty."""
    with pytest.raises(
        ValidationError,
        match=r"CacheValue has no field 'reslts'; its fields are schema_version, winner, ranking, results",
    ):
        tk.CacheValue(winner="a", ranking=["a"], reslts=[])  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match=r"RecordEntry has no field 'medain_ns', 'sampels'; its fields are key,"):
        tk.RecordEntry.model_validate(
            {"key": {"n": 8}, "winner": "a", "ranking": ["a"], "medain_ns": 1.0, "sampels": 3}
        )
    # Nested models are held to their fields too.
    with pytest.raises(ValidationError, match=r"results\.0\n.*CandidateResult has no field 'p99'; its fields are name"):
        tk.CacheValue.model_validate({"winner": "a", "ranking": ["a"], "results": [{"name": "a", "p99": 2.0}]})


def test_data_read_back_keeps_the_fields_of_a_newer_tunekit_and_writes_them_back() -> None:
    newer: dict[str, Any] = {
        "winner": "a",
        "ranking": ["a"],
        "results": [{"name": "a", "status": "measured", "p99_ns": 1234.5}],
        "confidence": 0.97,
    }
    for value in (
        tk.CacheValue.model_validate(newer, context=STORED),  # a cache row's value, parsed before it is validated
        tk.CacheValue.model_validate_json(json.dumps(newer)),  # JSON text: read back, also by readers outside tunekit
    ):
        assert value.model_extra == {"confidence": 0.97}
        assert value.results[0].model_extra == {"p99_ns": 1234.5}
        written = json.loads(value.model_dump_json())
        assert written["confidence"] == 0.97 and written["results"][0]["p99_ns"] == 1234.5
    # The same dict built in code is refused: it is not data read back.
    with pytest.raises(ValidationError, match="CacheValue has no field 'confidence'"):
        tk.CacheValue.model_validate(newer)


def test_a_committed_record_built_in_code_keeps_the_newer_fields_it_was_read_with(tmp_path: Any) -> None:
    """Record.model() carries a loaded file's unknown top-level fields over without building them in code."""
    path = tmp_path / "r.json"
    record = tk.Record("t", "cpu:test", "abc")
    record.entries['{"n":8}'] = tk.RecordEntry(
        key={"n": 8}, winner="a", ranking=["a"], median_ns=1.0, samples=3, measured_at=datetime.now(UTC)
    )
    record.save(path)
    doc = json.loads(path.read_text())
    doc["reviewed_by"] = "ci"
    path.write_text(json.dumps(doc))
    loaded = tk.Record.load(path)
    assert loaded.newer_fields == {"reviewed_by": "ci"}
    assert loaded.model().model_extra == {"reviewed_by": "ci"}
