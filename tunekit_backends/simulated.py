"""SimulatedClient: a device with a virtual clock, candidates of declared true time, and a noise model.

It runs instantly and deterministically (a seed), so tests and benchmarks can ask what no real
device answers: did the tuner pick the truly fastest candidate, and what did measuring cost?

    client = SimulatedClient(NoiseModel(noise=0.05, drift=0.03), seed=7)
    fast, slow = client.kernel(100_000), client.kernel(150_000)   # true times in ns
    tk.Tunable("fast", fast)                                      # usable as any candidate

A kernel call adds its simulated duration to the virtual clock; ``profile`` reports the
virtual time its ``run`` took. Nothing sleeps.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tunekit.backend import DevicePeaks

__all__ = ["NoiseModel", "SimulatedClient", "SimulatedKernel"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NoiseModel:
    """How a measured time departs from the true time; every figure is relative (0.05 = 5%).

    Attributes:
        noise: standard deviation of the log of a per-run multiplicative factor (white noise).
        drift: amplitude of a slow wander of the device's speed (thermal and boost-clock cycles),
            a sine of period ``drift_period_ms`` whose phase the seed picks. Candidates timed one
            after the other see different phases of it; interleaved candidates share it.
        drift_period_ms: period of that wander, in ms of device time.
        ramp: how much slower a cold device runs at time 0 (clocks not yet ramped up); it decays
            with time constant ``ramp_tau_ms``. A device warm-up absorbs it.
        ramp_tau_ms: time constant of the clock ramp, in ms of device time.
        outlier_rate: probability that a run is disturbed (preemption, an interrupt).
        outlier_factor: a disturbed run takes between 1.5 and this many times as long.
        cold_factor: a kernel's first run ever takes this many times as long (compilation, cold
            caches); the schedule's untimed warm-up run absorbs it.
    """

    noise: float = 0.0
    drift: float = 0.0
    drift_period_ms: float = 200.0
    ramp: float = 0.0
    ramp_tau_ms: float = 100.0
    outlier_rate: float = 0.0
    outlier_factor: float = 4.0
    cold_factor: float = 1.0

    def __post_init__(self) -> None:
        for name in ("noise", "drift", "ramp", "outlier_rate"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"NoiseModel.{name} must be >= 0, got {getattr(self, name)}")
        if self.outlier_rate > 1:
            raise ValueError(f"NoiseModel.outlier_rate is a probability, got {self.outlier_rate}")
        if self.drift_period_ms <= 0 or self.ramp_tau_ms <= 0:
            raise ValueError("NoiseModel.drift_period_ms and ramp_tau_ms must be > 0")
        if self.outlier_factor < 1.5 or self.cold_factor < 1:
            raise ValueError("NoiseModel.outlier_factor must be >= 1.5 and cold_factor >= 1")

    def duration_ns(self, rng: random.Random, true_ns: float, now_ns: float, phase: float, first_run: bool) -> float:
        """One measured duration of a run whose true time is ``true_ns``, starting at ``now_ns``.

        ``phase`` (radians) places the drift's sine; replaying recorded times passes the same one.
        """
        factor = 1.0
        if self.noise:
            factor *= math.exp(rng.gauss(0.0, self.noise))
        if self.drift:
            factor *= 1.0 + self.drift * math.sin(2 * math.pi * now_ns / (self.drift_period_ms * 1e6) + phase)
        if self.ramp:
            factor *= 1.0 + self.ramp * math.exp(-now_ns / (self.ramp_tau_ms * 1e6))
        if self.outlier_rate and rng.random() < self.outlier_rate:
            factor *= rng.uniform(1.5, self.outlier_factor)
        if first_run:
            factor *= self.cold_factor
        return true_ns * factor


class SimulatedKernel:
    """A candidate whose true duration is declared; calling it runs it on its simulated device."""

    __slots__ = ("_client", "calls", "fail_after", "true_ns")

    def __init__(self, client: SimulatedClient, true_ns: float, fail_after: int | None) -> None:
        self._client = client
        self.true_ns = true_ns
        self.fail_after = fail_after
        self.calls = 0

    def __call__(self, *inputs: Any) -> None:
        """Run once: the device's virtual clock advances by the simulated duration."""
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError(f"simulated kernel ({self.true_ns:.0f} ns) failed after {self.fail_after} runs")
        self._client._run(self.true_ns, first_run=self.calls == 0)
        self.calls += 1

    def __repr__(self) -> str:
        return f"SimulatedKernel(true_ns={self.true_ns:.0f})"


class SimulatedClient:
    """A deterministic device with a virtual clock; satisfies ``tk.Client`` and its capabilities.

    ``timed_ns`` (virtual time spent inside ``profile``), ``busy_ns`` (every kernel run, timed
    or not) and ``warmup_ns`` (device warm-up) tell what measuring cost.
    """

    def __init__(
        self,
        noise: NoiseModel | None = None,
        *,
        seed: int = 0,
        device_id: str = "simulated",
        peaks: DevicePeaks | None = None,
    ) -> None:
        self.noise = noise or NoiseModel()
        self._rng = random.Random(seed)
        self._phase = self._rng.uniform(0.0, 2 * math.pi)
        self._device_id = device_id
        self.peaks = peaks or DevicePeaks(ops_per_s=10e12, bytes_per_s=1e12, launch_overhead_ns=5_000.0)
        self.now_ns = 0.0
        self.timed_ns = 0.0
        self.busy_ns = 0.0
        self.warmup_ns = 0.0

    @property
    def device_id(self) -> str:
        """The name given at construction."""
        return self._device_id

    def kernel(self, true_ns: float, *, fail_after: int | None = None) -> SimulatedKernel:
        """A candidate whose true duration is ``true_ns``; it raises from its ``fail_after``-th run on."""
        if not (math.isfinite(true_ns) and true_ns > 0):
            raise ValueError(f"a simulated kernel needs a true time > 0 ns, got {true_ns}")
        return SimulatedKernel(self, float(true_ns), fail_after)

    def _run(self, true_ns: float, *, first_run: bool) -> None:
        duration = self.noise.duration_ns(self._rng, true_ns, self.now_ns, self._phase, first_run)
        self.now_ns += duration
        self.busy_ns += duration

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run``; the virtual time its kernels took."""
        start = self.now_ns
        output = run()
        elapsed = self.now_ns - start
        self.timed_ns += elapsed
        return output, round(elapsed)

    def sync(self) -> None:
        """Nothing is ever in flight."""

    def warm_up(self, duration_ns: int) -> None:
        """Advance the virtual clock: the device ramps without costing real time."""
        self.now_ns += duration_ns
        self.warmup_ns += duration_ns

    def measure_peaks(self) -> DevicePeaks:
        """The declared peaks."""
        return self.peaks
