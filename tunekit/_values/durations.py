"""A candidate's timed samples and their statistics."""

from __future__ import annotations

import numbers
import statistics
from collections.abc import Iterable, Mapping, Set as AbstractSet
from dataclasses import dataclass

__all__ = ["BenchmarkDurations"]


@dataclass(frozen=True, slots=True)
class BenchmarkDurations:
    """Timed samples of one candidate, in ns, with their statistics in consistent units.

    ``variance_ns2`` is in ns squared; every other figure in ns.
    """

    samples_ns: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.samples_ns, tuple):
            # Kept as given, an objective's numpy array would fail as "truth value ... is ambiguous",
            # a generator would be kept exhausted (no median), and a list would make the durations
            # unhashable. A dict gives its keys and a set an arbitrary order: neither is a sequence of samples.
            unordered = isinstance(self.samples_ns, Mapping | AbstractSet)
            if unordered or isinstance(self.samples_ns, str | bytes) or not isinstance(self.samples_ns, Iterable):
                raise TypeError(
                    f"BenchmarkDurations takes a tuple of ints (ns), got {type(self.samples_ns).__name__} "
                    f"{self.samples_ns!r}"
                )
            object.__setattr__(self, "samples_ns", tuple(self.samples_ns))
        if not self.samples_ns:
            raise ValueError("BenchmarkDurations needs at least one sample")
        # Checked here, where an objective's measure() builds them: a negative, NaN or fractional
        # sample would otherwise fail the record's or the trial log's validation after the search.
        for sample in self.samples_ns:
            if not isinstance(sample, numbers.Integral) or isinstance(sample, bool) or sample < 0:
                raise ValueError(
                    f"BenchmarkDurations samples must be ints >= 0 (ns, or a lower-is-better cost scaled to "
                    f"integers), got {sample!r} ({type(sample).__name__}) in {self.samples_ns!r}"
                )
        if not all(type(sample) is int for sample in self.samples_ns):  # numpy ints: plain ones, as JSON needs
            object.__setattr__(self, "samples_ns", tuple(int(sample) for sample in self.samples_ns))

    @property
    def min_ns(self) -> int:
        """Fastest sample."""
        return min(self.samples_ns)

    @property
    def median_ns(self) -> float:
        """Median sample: the robust centre used for ranking."""
        return float(statistics.median(self.samples_ns))

    @property
    def mean_ns(self) -> float:
        """Arithmetic mean."""
        return float(statistics.fmean(self.samples_ns))

    @property
    def variance_ns2(self) -> float:
        """Sample variance (ns^2); 0 for a single sample."""
        return float(statistics.variance(self.samples_ns)) if len(self.samples_ns) > 1 else 0.0

    @property
    def score(self) -> float:
        """Lower is better: the median, which one outlier cannot move."""
        return self.median_ns
