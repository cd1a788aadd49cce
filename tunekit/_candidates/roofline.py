"""Roofline bounds as plain data: the least work an operation does, and the time that counts as good enough.

What a ``TunableSet.with_bounds`` function returns (:class:`Bounds`), so it lives with the set, in the
layer of candidates: the set's signature names it, and a type checker holds the function to it. Reading
the device's peaks and the short circuit itself are the measuring layer's (:mod:`tunekit._measure.bounds`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["AutotuneBound", "Bounds", "Peaks", "Thresholds", "Work", "calculate_bounds"]


class Peaks(Protocol):
    """What :meth:`Bounds.limit_ns` reads of a device's peaks (``tunekit.backend.DevicePeaks`` is one)."""

    @property
    def ops_per_s(self) -> float: ...

    @property
    def bytes_per_s(self) -> float: ...

    @property
    def launch_overhead_ns(self) -> float: ...


def _real(owner: str, value: object) -> float:
    """``value`` as a float when it is a real number (numpy scalars included), else a TypeError naming ``owner``."""
    # np.prod(shape) is an np.int64, which isinstance(x, int) refuses: numbers.Real takes every numpy scalar.
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{owner} takes a number, got {type(value).__name__} {value!r}")
    return float(value)


def _check_fraction(name: str, value: float) -> None:
    value = _real(f"Thresholds.{name}", value)
    if not (0 < value <= 1):
        raise ValueError(f"Thresholds.{name} must be in (0, 1] (a fraction of the device's peak), got {value}")


@dataclass(frozen=True, slots=True)
class Work:
    """The least work an operation must do: arithmetic operations and bytes moved to/from memory."""

    compute_ops: float
    bytes: float

    def __post_init__(self) -> None:
        for name in ("compute_ops", "bytes"):
            value = _real(f"Work.{name}", getattr(self, name))
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"Work.{name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, name, value)  # a plain float: numpy scalars do not leak into the sums


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The fraction of peak compute and of peak bandwidth that counts as good enough."""

    compute: float
    memory: float

    def __post_init__(self) -> None:
        _check_fraction("compute", self.compute)
        _check_fraction("memory", self.memory)

    @classmethod
    def uniform(cls, fraction: float) -> Thresholds:
        """The same fraction for compute and memory."""
        return cls(fraction, fraction)


@dataclass(frozen=True, slots=True)
class AutotuneBound:
    """The time limit for one piece of work on one device, with the figures it came from (ns)."""

    compute_ns: float
    memory_ns: float
    limit_ns: float
    binding: Literal["compute", "memory"]


def calculate_bounds(work: Work, thresholds: Thresholds, ops_per_s: float, bytes_per_s: float) -> AutotuneBound:
    """The time limit of ``work``: time at peak of the binding resource over its threshold.

    The binding resource is the one whose time at peak is longer (the roofline). Launch
    overhead is not included; :class:`Bounds` adds it.
    """
    if ops_per_s <= 0 or bytes_per_s <= 0:
        raise ValueError(f"peaks must be positive, got ops_per_s={ops_per_s}, bytes_per_s={bytes_per_s}")
    compute_ns = work.compute_ops / ops_per_s * 1e9
    memory_ns = work.bytes / bytes_per_s * 1e9
    if compute_ns >= memory_ns:
        return AutotuneBound(compute_ns, memory_ns, compute_ns / thresholds.compute, "compute")
    return AutotuneBound(compute_ns, memory_ns, memory_ns / thresholds.memory, "memory")


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a ``TunableSet.with_bounds`` function returns for one key.

    ``bounds`` is the work of each kernel launch the operation makes (one :class:`Work` or a
    sequence); ``launch_overhead`` overrides the device's measured overhead per launch, in ns
    (None: use the measured one).
    """

    bounds: Work | Sequence[Work]
    launch_overhead: float | None = None

    def __post_init__(self) -> None:
        # A str or number here would fail inside tuple() as "'int' object is not iterable", naming nothing.
        if not isinstance(self.bounds, Work | Sequence) or isinstance(self.bounds, str | bytes):
            raise TypeError(
                "Bounds(bounds=...) takes a tk.Work or a non-empty sequence of tk.Work, "
                f"got {type(self.bounds).__name__}"
            )
        works = self.works
        if not works or not all(isinstance(w, Work) for w in works):
            raise TypeError("Bounds(bounds=...) takes a tk.Work or a non-empty sequence of tk.Work")
        if self.launch_overhead is not None:
            overhead = _real("Bounds.launch_overhead", self.launch_overhead)
            if not (math.isfinite(overhead) and overhead >= 0):
                raise ValueError(f"Bounds.launch_overhead must be a finite number of ns >= 0, got {overhead!r}")
            object.__setattr__(self, "launch_overhead", overhead)

    @property
    def works(self) -> tuple[Work, ...]:
        """The work of each launch."""
        return (self.bounds,) if isinstance(self.bounds, Work) else tuple(self.bounds)

    def limit_ns(self, thresholds: Thresholds, peaks: Peaks) -> float:
        """The time limit on ``peaks``: each launch's roofline limit plus its launch overhead."""
        overhead = peaks.launch_overhead_ns if self.launch_overhead is None else self.launch_overhead
        return sum(
            calculate_bounds(w, thresholds, peaks.ops_per_s, peaks.bytes_per_s).limit_ns + overhead for w in self.works
        )
