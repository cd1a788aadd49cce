"""Validation errors of files the user gave, each on one line: where and what, no input dump, no URL."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from tunekit._base.validation_text import validation_text


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a: int
    b: int
    c: int
    d: int


def _error(payload: str, model: type[BaseModel] = _Row) -> ValidationError:
    with pytest.raises(ValidationError) as raised:
        model.model_validate_json(payload)
    return raised.value


def test_the_first_errors_are_listed_then_counted() -> None:
    exc = _error('{"a": "x", "b": "y", "c": "z", "d": "w", "e": 1}')
    assert validation_text(exc) == (
        "a: Input should be a valid integer, unable to parse string as an integer; "
        "b: Input should be a valid integer, unable to parse string as an integer; "
        "c: Input should be a valid integer, unable to parse string as an integer; and 2 more"
    )
    assert validation_text(exc, limit=1).endswith("; and 4 more")


def test_an_error_about_the_whole_input_is_located_as_told() -> None:
    exc = _error("[1]")
    assert validation_text(exc, whole="the file") == "the file: Input should be an object"
    assert validation_text(exc) == "Input should be an object"


def test_a_key_from_the_file_with_control_characters_stays_on_one_line() -> None:
    exc = _error('{"a": 1, "b": 2, "c": 3, "d": 4, "bad\\nkey": 5}')
    text = validation_text(exc)
    assert "\n" not in text and text.startswith("bad\\x0akey: Extra inputs are not permitted")
