from __future__ import annotations

import numpy as np
import pytest

import tunekit as tk


@pytest.mark.parametrize(
    ("x", "kwargs", "expected"),
    [
        (1, {}, 1),
        (2, {}, 2),
        (3, {}, 4),
        (1000, {}, 1024),
        (1024, {}, 1024),
        (1025, {}, 2048),
        (5, {"base": 4}, 16),
        (17, {"base": 4}, 64),
        (100_000, {"max": 4096}, 4096),
        (3, {"min": 64}, 64),
        (10_000, {"max": 4096, "min": 4096}, 4096),
        (80, {"base": 3}, 81),
        (3, {"min": 3}, 3),
        (1, {"min": 3}, 3),
        (4, {"min": 3}, 4),
        (5, {"min": 3, "max": 6}, 6),
    ],
)
def test_anchor_formula(x: int, kwargs: dict[str, int], expected: int) -> None:
    assert tk.anchor(x, **kwargs) == expected


@pytest.mark.parametrize(
    ("x", "kwargs", "message"),
    [
        (0, {}, "x >= 1"),
        (-5, {}, "x >= 1"),
        (8, {"base": 1}, "base >= 2"),
        (8, {"base": 0}, "base >= 2"),
        (8, {"min": 64, "max": 16}, "min <= max"),
    ],
)
def test_anchor_rejects_bad_input(x: int, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tk.anchor(x, **kwargs)


def test_anchor_rejects_non_int() -> None:
    with pytest.raises(TypeError):
        tk.anchor(2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got bool"):
        tk.anchor(True)


def test_anchor_takes_a_numpy_integer() -> None:
    # Regression: tk.anchor(np.int64(1000)) was refused ("needs an int, got int64"), though key fields take one.
    assert tk.anchor(np.int64(1000)) == 1024 and type(tk.anchor(np.int32(3))) is int


def test_anchor_marker_validates_at_declaration() -> None:
    with pytest.raises(ValueError, match="base"):
        tk.Anchor(base=1)
    with pytest.raises(ValueError, match="min"):
        tk.Anchor(min=128, max=4)


@pytest.mark.parametrize("kwargs", [{"base": 2.5}, {"max": 1.5}, {"min": 2.0}, {"base": "2"}, {"max": True}])
def test_anchor_marker_takes_only_int_bounds(kwargs: dict[str, object]) -> None:
    """Anchor(base=2.5) made K(n=1000) hold 1525.87...; Anchor(base='2') failed with a bare comparison error."""
    with pytest.raises(TypeError, match=r"needs an int"):
        tk.Anchor(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "marker",
    [
        tk.Anchor(),
        tk.Anchor(min=3),
        tk.Anchor(min=48, max=1000),
        tk.Anchor(max=1000),
        tk.Anchor(min=5, base=3),
        tk.Anchor(min=6, max=6),
    ],
)
@pytest.mark.parametrize("base_exponent", [1, 2])
def test_anchoring_an_anchored_value_keeps_it(marker: tk.Anchor, base_exponent: int) -> None:
    # A key rebuilt from its stored fields must land in its own bucket: Anchor(min=3) sent
    # 1 to 3 and then the stored 3 to 4, so a committed record's key missed its own entry.
    for x in range(1, 2100):
        bucket = marker.apply(x, base_exponent)
        assert marker.apply(bucket, base_exponent) == bucket, (marker, x, bucket)
