"""Anchoring: rounding a key dimension up to a power of a base.

Anchoring buckets nearby problem sizes into one cache entry, so that a tuner
measures once per bucket instead of once per exact shape.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

__all__ = ["Anchor", "anchor", "describe_value"]


def anchor(x: int, *, max: int | None = None, min: int | None = None, base: int = 2) -> int:
    """Return the smallest power of ``base`` that is >= ``x``, clamped to ``max`` then raised to ``min``.

    ``min`` wins over ``max`` when both bind, as in CubeCL's ``anchor``. A value at or below
    ``min`` anchors to ``min`` itself, even when ``min`` is no power of ``base``: otherwise
    ``anchor(anchor(1, min=3), min=3)`` would be 4, and a key rebuilt from its stored
    fields (a committed record, a cache row) would land in another bucket than it was made in.

    Raises:
        ValueError: ``x < 1``, ``base <= 1`` or ``min > max``.
    """
    if type(x) is not int:  # a key field's numpy integer is converted before it gets here; a caller's may not be
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise TypeError(f"anchor() needs an int, got {type(x).__name__} {describe_value(x)}")
        x = int(x)
    if x < 1:
        raise ValueError(f"anchor() needs x >= 1, got {describe_value(x)}: a key dimension must be a positive size")
    if base <= 1:
        raise ValueError(f"anchor() needs base >= 2, got {base}: powers of {base} cannot bucket sizes")
    if max is not None and min is not None and min > max:
        raise ValueError(f"anchor() got min={min} > max={max}: pass min <= max")
    if min is not None and x <= min:
        return min
    power = 1
    while power < x:
        power *= base
    if max is not None and power > max:
        power = max
    if min is not None and power < min:
        power = min
    return power


_LONGEST_REPR = 200


def is_array(value: object) -> bool:
    """Whether ``value`` is an array of one or more dimensions (numpy, or any with its ``shape`` and ``dtype``)."""
    return bool(getattr(value, "shape", ())) and hasattr(value, "dtype")


def describe_value(value: object) -> str:
    """``repr(value)``, or what it is where that fails or would bury the message it is in.

    An int past Python's int-to-str digit limit cannot be printed (an error message that printed it
    would itself raise, hiding the error it was about); an array is given by its shape and dtype, and
    any other repr past 200 characters is cut there.
    """
    if is_array(value):  # its repr is the whole array: many lines of numbers that bury the message
        return f"of shape {value.shape}, dtype {value.dtype}"  # type: ignore[attr-defined]
    try:
        text = repr(value)
    except ValueError:
        if isinstance(value, int):
            return f"<an int of {value.bit_length()} bits, too long to print>"
        return f"<a {type(value).__name__} that cannot be printed>"
    return text if len(text) <= _LONGEST_REPR else f"{text[:_LONGEST_REPR]}... ({len(text)} characters)"


@dataclass(frozen=True, slots=True)
class Anchor:
    """Marks a key field as anchored: ``n: Annotated[int, tk.Anchor(max=4096)]``.

    Validated when declared, so a bad marker fails at import, not at the first call.
    """

    max: int | None = None
    min: int | None = None
    base: int = 2

    def __post_init__(self) -> None:
        for label, value in (("base", self.base), ("max", self.max), ("min", self.min)):
            # A float base or bound would put a float into an int key field (base=2.5: n=1525.87...).
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"Anchor({label}={value!r}) needs an int; anchored key fields hold ints")
        if self.base <= 1:
            raise ValueError(f"Anchor(base={self.base}) needs base >= 2")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"Anchor(min={self.min}, max={self.max}) needs min <= max")
        for label, bound in (("max", self.max), ("min", self.min)):
            if bound is not None and bound < 1:
                raise ValueError(f"Anchor({label}={bound}) needs a positive bound")

    def apply(self, x: int, base_exponent: int = 1) -> int:
        """Anchor ``x``; ``base_exponent`` coarsens the base (the autotune level's doing)."""
        if self.base == 2 and base_exponent == 1 and x >= 1 and (self.min is None or x > self.min):
            # Key construction is on every call's hot path: bit_length avoids the loop.
            power = 1 << (x - 1).bit_length()
            if self.max is not None and power > self.max:
                power = self.max
            if self.min is not None and power < self.min:
                power = self.min
            return power
        return anchor(x, max=self.max, min=self.min, base=self.base**base_exponent)
