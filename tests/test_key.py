from __future__ import annotations

import enum
from typing import Annotated, Literal

import pytest

import tunekit as tk


@tk.autotune_key
class Key:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(base=4, max=4096)]
    batch: int
    dtype: str


class Layout(enum.Enum):
    ROW = "row"
    COL = "col"


def test_only_annotated_fields_are_anchored() -> None:
    key = Key(n=1000, rows=5, batch=1000, dtype="float32")
    assert (key.n, key.rows, key.batch, key.dtype) == (1024, 16, 1000, "float32")
    assert Key(n=100_000, rows=100_000, batch=3, dtype="f").rows == 4096


def test_keys_in_one_bucket_are_equal_and_hash_alike() -> None:
    a = Key(n=900, rows=10, batch=1, dtype="f")
    b = Key(n=1000, rows=16, batch=1, dtype="f")
    assert a == b
    assert hash(a) == hash(b)
    assert tk.key_to_json(a) == '{"batch":1,"dtype":"f","n":1024,"rows":16}'


def test_key_is_frozen() -> None:
    key = Key(n=1, rows=1, batch=1, dtype="f")
    with pytest.raises(AttributeError):
        key.n = 3  # type: ignore[misc]


def test_anchored_field_needs_an_int() -> None:
    with pytest.raises(TypeError, match="anchored"):
        Key(n="12", rows=1, batch=1, dtype="f")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="x >= 1"):
        Key(n=0, rows=1, batch=1, dtype="f")


def test_enum_and_literal_fields_serialise() -> None:
    @tk.autotune_key
    class LayoutKey:
        layout: Layout
        mode: Literal["fast", "exact"]

    assert tk.key_to_json(LayoutKey(layout=Layout.COL, mode="fast")) == '{"layout":"col","mode":"fast"}'


def test_unserialisable_field_type_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"BadKey\.shape.*JSON"):

        @tk.autotune_key
        class BadKey:
            shape: list[int]


def test_anchor_on_non_int_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="int fields"):

        @tk.autotune_key
        class BadKey:
            size: Annotated[float, tk.Anchor()]


def test_minimal_level_squares_the_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_AUTOTUNE_LEVEL", "minimal")
    tk.configure()
    assert Key(n=1000, rows=5, batch=1, dtype="f").n == 1024
    assert Key(n=1100, rows=5, batch=1, dtype="f").n == 4096
    assert Key(n=1000, rows=5, batch=1, dtype="f").rows == 16
    assert Key(n=1000, rows=17, batch=1, dtype="f").rows == 256


def test_subclass_keeps_parent_anchors() -> None:
    @tk.autotune_key
    class Wider(Key):
        cols: Annotated[int, tk.Anchor(max=64)]

    key = Wider(n=1000, rows=5, batch=1, dtype="f", cols=1000)
    assert (key.n, key.rows, key.cols) == (1024, 16, 64)


def test_defaults_are_anchored_too() -> None:
    @tk.autotune_key
    class WithDefault:
        dtype: str
        n: Annotated[int, tk.Anchor()] = 100

    assert WithDefault(dtype="f").n == 128
