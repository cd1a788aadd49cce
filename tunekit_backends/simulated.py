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

__all__ = ["ClockChain", "NoiseModel", "SimulatedClient", "SimulatedKernel"]

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
        tail_rate: probability that a run draws a heavy-tailed spike: it takes a Pareto-distributed
            factor (shape ``tail_alpha``, at least 1) times as long. Below 2 the spikes' variance is
            infinite: a mean, or a noise estimate from squares, is at the mercy of the largest one.
        tail_alpha: shape of those spikes; smaller is heavier.
        clock_states: duration factors of the device's clock states (``(1.0, 1.06)``: a state 6%
            slower), visited as a Markov chain in device time: each state lasts an exponential time
            of mean ``clock_dwell_ms``, then the device moves to another one. Samples taken close
            together share a state; samples far apart may not.
        clock_dwell_ms: mean time spent in a clock state, in ms of device time; a tuple gives each
            state its own (short bursts of a boost clock between long stretches at nominal speed).
        throttle: a step slowdown (0.1 = every run 10% slower) from ``throttle_at_ms`` of device time
            on: a device that overheats, or a power cap, partway through a tune.
        throttle_at_ms: when the throttle step comes, in ms of device time.
        interference: periodic interference (another process's work, a display refresh): a run that
            starts in the first ``interference_duty`` of each ``interference_period_ms`` takes this
            much longer (0.2 = 20%). The seed picks the phase.
        interference_period_ms: the period of that interference, in ms of device time.
        interference_duty: the share of each period the interference is on.

    A kernel may have noise of its own (``SimulatedClient.kernel(true_ns, noise=...)``): then its
    white noise is that, not ``noise``; everything else is shared with the device.
    """

    noise: float = 0.0
    drift: float = 0.0
    drift_period_ms: float = 200.0
    ramp: float = 0.0
    ramp_tau_ms: float = 100.0
    outlier_rate: float = 0.0
    outlier_factor: float = 4.0
    cold_factor: float = 1.0
    tail_rate: float = 0.0
    tail_alpha: float = 1.5
    clock_states: tuple[float, ...] = ()
    clock_dwell_ms: float | tuple[float, ...] = 20.0
    throttle: float = 0.0
    throttle_at_ms: float = 400.0
    interference: float = 0.0
    interference_period_ms: float = 10.0
    interference_duty: float = 0.3

    def __post_init__(self) -> None:
        for name in ("noise", "drift", "ramp", "outlier_rate", "tail_rate", "throttle", "interference"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"NoiseModel.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("outlier_rate", "tail_rate", "interference_duty"):
            if getattr(self, name) > 1:
                raise ValueError(f"NoiseModel.{name} is a probability or share, at most 1, got {getattr(self, name)}")
        for name in ("drift_period_ms", "ramp_tau_ms", "interference_period_ms", "tail_alpha"):
            if not getattr(self, name) > 0:
                raise ValueError(f"NoiseModel.{name} must be > 0, got {getattr(self, name)}")
        dwell = self.clock_dwell_ms if isinstance(self.clock_dwell_ms, tuple) else (self.clock_dwell_ms,)
        if not all(d > 0 for d in dwell) or (
            isinstance(self.clock_dwell_ms, tuple) and len(dwell) != len(self.clock_states)
        ):
            raise ValueError(
                f"NoiseModel.clock_dwell_ms must be > 0, one number or one per clock state, got {self.clock_dwell_ms}"
            )
        if not self.throttle_at_ms >= 0:
            raise ValueError(f"NoiseModel.throttle_at_ms must be >= 0, got {self.throttle_at_ms}")
        if any(not (math.isfinite(f) and f > 0) for f in self.clock_states):
            raise ValueError(f"NoiseModel.clock_states are duration factors > 0, got {self.clock_states}")
        if self.outlier_factor < 1.5 or self.cold_factor < 1:
            raise ValueError("NoiseModel.outlier_factor must be >= 1.5 and cold_factor >= 1")

    def duration_ns(
        self,
        rng: random.Random,
        true_ns: float,
        now_ns: float,
        phase: float,
        first_run: bool,
        *,
        noise: float | None = None,
        clock: float = 1.0,
    ) -> float:
        """One measured duration of a run whose true time is ``true_ns``, starting at ``now_ns``.

        ``phase`` (radians) places the drift's sine and the interference's period; replaying recorded
        times passes the same one. ``noise`` overrides the white noise (a candidate's own); ``clock``
        is the factor of the clock state the device is in (see :class:`ClockChain`).
        """
        factor = clock
        white = self.noise if noise is None else noise
        if white:
            factor *= math.exp(rng.gauss(0.0, white))
        if self.drift:
            factor *= 1.0 + self.drift * math.sin(2 * math.pi * now_ns / (self.drift_period_ms * 1e6) + phase)
        if self.ramp:
            factor *= 1.0 + self.ramp * math.exp(-now_ns / (self.ramp_tau_ms * 1e6))
        if self.outlier_rate and rng.random() < self.outlier_rate:
            factor *= rng.uniform(1.5, self.outlier_factor)
        if self.tail_rate and rng.random() < self.tail_rate:
            factor *= rng.paretovariate(self.tail_alpha)
        if self.throttle and now_ns >= self.throttle_at_ms * 1e6:
            factor *= 1.0 + self.throttle
        if self.interference:
            period = self.interference_period_ms * 1e6
            position = (now_ns / period + phase / (2 * math.pi)) % 1.0
            if position < self.interference_duty:
                factor *= 1.0 + self.interference
        if first_run:
            factor *= self.cold_factor
        return true_ns * factor


class ClockChain:
    """The device's clock state over device time: a Markov chain over ``NoiseModel.clock_states``.

    Each state lasts an exponential time (mean ``clock_dwell_ms``), then the chain moves to one of
    the other states, each as likely. The first state is drawn at random.
    """

    def __init__(self, noise: NoiseModel, rng: random.Random) -> None:
        self._states = noise.clock_states
        dwell = noise.clock_dwell_ms
        self._dwell_ns = [d * 1e6 for d in dwell] if isinstance(dwell, tuple) else [dwell * 1e6] * len(self._states)
        self._rng = rng
        self._state = rng.randrange(len(self._states)) if self._states else 0
        self._until_ns = rng.expovariate(1 / self._dwell_ns[self._state]) if self._states else math.inf

    def factor(self, now_ns: float) -> float:
        """The duration factor of the state the device is in at ``now_ns`` (1 without clock states)."""
        if not self._states:
            return 1.0
        while now_ns >= self._until_ns:
            if len(self._states) > 1:
                self._state = (self._state + self._rng.randrange(1, len(self._states))) % len(self._states)
            self._until_ns += self._rng.expovariate(1 / self._dwell_ns[self._state])
        return self._states[self._state]


class SimulatedKernel:
    """A candidate whose true duration is declared; calling it runs it on its simulated device."""

    __slots__ = ("_client", "calls", "fail_after", "noise", "true_ns")

    def __init__(self, client: SimulatedClient, true_ns: float, fail_after: int | None, noise: float | None) -> None:
        self._client = client
        self.true_ns = true_ns
        self.fail_after = fail_after
        self.noise = noise
        self.calls = 0

    def __call__(self, *inputs: Any) -> None:
        """Run once: the device's virtual clock advances by the simulated duration."""
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError(f"simulated kernel ({self.true_ns:.0f} ns) failed after {self.fail_after} runs")
        self._client._run(self.true_ns, first_run=self.calls == 0, noise=self.noise)
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
        # Its own generator: adding clock states to a model leaves the other draws of a seed as they were.
        self._clock = ClockChain(self.noise, random.Random(f"clock-{seed}"))
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

    def kernel(self, true_ns: float, *, fail_after: int | None = None, noise: float | None = None) -> SimulatedKernel:
        """A candidate whose true duration is ``true_ns``; it raises from its ``fail_after``-th run on.

        ``noise``: the candidate's own white noise (standard deviation of the log), in place of the
        model's: a kernel whose speed depends on scheduling, contention or data layout more than others'.
        """
        if not (math.isfinite(true_ns) and true_ns > 0):
            raise ValueError(f"a simulated kernel needs a true time > 0 ns, got {true_ns}")
        if noise is not None and not (math.isfinite(noise) and noise >= 0):
            raise ValueError(f"a simulated kernel's own noise must be >= 0, got {noise}")
        return SimulatedKernel(self, float(true_ns), fail_after, noise)

    def _run(self, true_ns: float, *, first_run: bool, noise: float | None = None) -> None:
        clock = self._clock.factor(self.now_ns)
        duration = self.noise.duration_ns(
            self._rng, true_ns, self.now_ns, self._phase, first_run, noise=noise, clock=clock
        )
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
