"""How a set's candidates are checked against a reference: the declared spec, refused early when malformed."""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Compare", "Reference", "reference_of"]

Compare = Callable[[Any, Any], bool]
"""A custom check of one output: ``(expected, got) -> bool``; raising says why it failed."""


@dataclass(frozen=True, slots=True)
class Reference:
    """How a set's candidates are checked (see ``TunableSet.with_reference``).

    ``fn`` computes the expected outputs from the inputs (None: the first candidate that runs
    is the reference). ``outputs`` names the argument positions a candidate writes in place;
    None means the candidate's return value is its output. ``rtol``/``atol`` widen the
    dtype-derived tolerance, never narrow it. ``compare`` replaces the elementwise comparison:
    called as ``compare(expected, got)`` for each output, True passes it.
    """

    fn: Callable[..., Any] | None = None
    outputs: tuple[int, ...] | None = None
    rtol: float = 0.0
    atol: float = 0.0
    compare: Compare | None = None

    def __post_init__(self) -> None:
        if self.fn is not None and not callable(self.fn):
            raise TypeError(f"with_reference() takes a callable (*inputs) -> expected, got {type(self.fn).__name__}")
        _check_values("with_reference", self.outputs, self.rtol, self.atol)
        _check_compare("with_reference", self.compare, self.rtol, self.atol)


def reference_of(
    call: str,
    fn: Callable[..., Any] | None,
    outputs: Sequence[int] | None,
    rtol: float,
    atol: float,
    compare: Compare | None = None,
) -> Reference:
    """The check a caller's arguments describe, refused with ``call`` (``with_reference``, ``tk.search``) named."""
    for name, value in (("rtol", rtol), ("atol", atol)):
        # float() would read "1e-3" as a number and fail on "a" naming neither argument
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"{call}({name}=...) takes a number, got {value!r}")
    if outputs is not None and (not isinstance(outputs, Sequence) or isinstance(outputs, str | bytes)):
        # tuple(0) would fail as "'int' object is not iterable", naming neither the argument nor the fix
        raise TypeError(f"{call}(outputs=...) takes a list of argument positions, e.g. outputs=[1], got {outputs!r}")
    positions = None if outputs is None else tuple(outputs)
    _check_values(call, positions, float(rtol), float(atol))
    _check_compare(call, compare, float(rtol), float(atol))
    return Reference(fn, positions, float(rtol), float(atol), compare)


def _check_compare(call: str, compare: object, rtol: float, atol: float) -> None:
    """Refuse a ``compare=`` that cannot be called as ``compare(expected, got)``, here rather than at every check.

    Refused at tuning time instead, it would fail every candidate with the same TypeError, and the
    tune would end in NoValidKernelFound blaming the kernels for the check's signature.
    """
    if compare is None:
        return
    if not callable(compare):
        raise TypeError(f"{call}(compare=...) takes a function (expected, got) -> bool, got {type(compare).__name__}")
    if rtol or atol:
        # Ignored, they would let the caller believe the tolerance applies.
        raise TypeError(
            f"{call}(compare=...) replaces the elementwise comparison that rtol= and atol= widen: apply your "
            "tolerance inside compare (e.g. np.allclose(got, expected, atol=...)) and drop rtol=/atol="
        )
    try:
        signature = inspect.signature(compare)
    except (TypeError, ValueError):  # a builtin without a signature: called as it is
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise TypeError(
            f"{call}(compare=...) is called as compare(expected, got), once per output, but "
            f"{getattr(compare, '__qualname__', repr(compare))}{signature} cannot take those two arguments: "
            "define it as def compare(expected, got) -> bool"
        ) from None


def _check_values(call: str, outputs: tuple[int, ...] | None, rtol: float, atol: float) -> None:
    if outputs is not None and (
        not outputs or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in outputs)
    ):
        raise ValueError(f"{call}(outputs=...) takes argument positions (ints >= 0), got {outputs!r}")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{call}({name}=...) must be a finite number >= 0, got {value!r}")
