"""BenchResult: what ``tk.bench`` measured of one function, as figures and two readable lines."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Literal

from tunekit._base.units import format_duration_ns
from tunekit._values.decision import median_interval
from tunekit._values.durations import BenchmarkDurations

__all__ = ["BenchResult", "WarmupMethod"]

WarmupMethod = Literal["device", "function", "none"]
"""How the device was warmed before the samples: by the client's own warm-up (``SupportsWarmup``),
by running the function untimed until its speed was steady, or not at all (``warmup_ms=0``)."""


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One function's timed samples and how they were taken; every figure in ns.

    The median is the estimate (one outlier cannot move it); ``median_low_ns`` and
    ``median_high_ns`` bound it with 95% confidence whatever the noise's shape (a pair of order
    statistics), so two results whose intervals do not overlap differ beyond their noise.
    ``q1_ns``/``q3_ns`` are the quartiles, ``spread`` the interquartile range over the median as a
    tune's record gives it (0.05 = 5%).
    """

    durations: BenchmarkDurations
    """The samples, as a tune's candidate has them."""
    device_id: str
    """The client's ``device_id``: which device (and software stack) the figures hold for."""
    timer: str
    """Whose clock timed the samples: the client's ``profile`` (device events on OpenCL), or the host's."""
    warmup_runs: int
    """Untimed runs of the function before the first sample."""
    warmup_ms: float
    """Time spent warming the device up before those runs (as its client reports it)."""
    warmup_method: WarmupMethod
    """How the device was warmed: ``device`` (its client's warm-up), ``function`` (its runs till steady), ``none``."""
    cold: bool
    """Each sample started with cold caches: asked for, from a client that flushes (``SupportsCacheFlush``, and not
    built with its flush off, as ``OpenCLClient(flush_cache=False)`` is)."""
    _interval: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Once: the order statistics' exact binomial sums take up to about 1 ms (2000 samples).
        low, high = median_interval(self.durations.samples_ns)
        object.__setattr__(self, "_interval", (float(low), float(high)))

    @property
    def samples_ns(self) -> tuple[int, ...]:
        """Every timed sample, in the order taken."""
        return self.durations.samples_ns

    @property
    def count(self) -> int:
        """How many samples were timed."""
        return len(self.durations.samples_ns)

    @property
    def median_ns(self) -> float:
        """The estimate: the median sample."""
        return self.durations.median_ns

    @property
    def min_ns(self) -> int:
        """The fastest sample."""
        return self.durations.min_ns

    @property
    def max_ns(self) -> int:
        """The slowest sample."""
        return max(self.durations.samples_ns)

    @property
    def mean_ns(self) -> float:
        """The arithmetic mean (outliers move it; the median is the estimate)."""
        return self.durations.mean_ns

    @property
    def q1_ns(self) -> float:
        """The first quartile."""
        return self._quartiles()[0]

    @property
    def q3_ns(self) -> float:
        """The third quartile."""
        return self._quartiles()[1]

    @property
    def spread(self) -> float:
        """The interquartile range over the median (0.05 = 5%); 0 for one sample."""
        low, high = self._quartiles()
        return (high - low) / self.median_ns if self.median_ns > 0 else 0.0

    @property
    def median_low_ns(self) -> float:
        """The low end of the median's 95% interval."""
        return self._interval[0]

    @property
    def median_high_ns(self) -> float:
        """The high end of the median's 95% interval."""
        return self._interval[1]

    def _quartiles(self) -> tuple[float, float]:
        samples = self.durations.samples_ns
        if len(samples) < 2:
            return float(samples[0]), float(samples[0])
        quartiles = statistics.quantiles(samples, n=4, method="inclusive")  # as SampleStats.of
        return quartiles[0], quartiles[2]

    def __str__(self) -> str:
        """Two lines: the figures, then how they were taken."""

        def ns(value: float) -> str:
            return format_duration_ns(value)

        warmed = {
            "device": f" and {self.warmup_ms:.0f} ms of the device's warm-up",
            "function": f" and {self.warmup_ms:.0f} ms of warm-up running it",
            "none": "",
        }[self.warmup_method]
        return (
            f"{ns(self.median_ns)} median (95% CI {ns(self.median_low_ns)} .. {ns(self.median_high_ns)}), "
            f"IQR {ns(self.q1_ns)} .. {ns(self.q3_ns)} (spread {self.spread:.1%}), min {ns(self.min_ns)}\n"
            f"{self.count} {'cold' if self.cold else 'warm'} sample{'' if self.count == 1 else 's'} "
            f"timed by {self.timer} on {self.device_id}, after {self.warmup_runs} untimed "
            f"run{'' if self.warmup_runs == 1 else 's'}{warmed}"
        )
