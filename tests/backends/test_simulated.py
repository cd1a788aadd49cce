"""The simulated device: a virtual clock, declared true times, a seeded noise model."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

import tunekit as tk
from tunekit.backend import DevicePeaks, SupportsCacheFlush, SupportsPeaks, SupportsWarmup
from tunekit_backends.simulated import NoiseModel, SimulatedClient

MS = 1_000_000


def _samples(client: SimulatedClient, true_ns: float, count: int) -> list[int]:
    kernel = client.kernel(true_ns)
    return [client.profile(kernel)[1] for _ in range(count)]


def test_satisfies_the_client_protocol_and_its_capabilities() -> None:
    client = SimulatedClient()
    assert isinstance(client, tk.Client)
    assert isinstance(client, SupportsWarmup)
    assert isinstance(client, SupportsPeaks)
    assert not isinstance(client, SupportsCacheFlush)


def test_noiseless_profile_reports_the_declared_true_time_and_advances_the_clock() -> None:
    client = SimulatedClient()
    kernel = client.kernel(250_000)
    output, duration = client.profile(lambda: kernel(1, 2))
    assert output is None and duration == 250_000
    assert client.now_ns == client.timed_ns == client.busy_ns == 250_000
    kernel()  # an untimed run still occupies the device
    assert client.now_ns == client.busy_ns == 500_000 and client.timed_ns == 250_000
    assert kernel.calls == 2 and kernel.true_ns == 250_000


def test_same_seed_same_samples_other_seed_other_samples() -> None:
    noise = NoiseModel(noise=0.05, drift=0.03, outlier_rate=0.05)
    first = _samples(SimulatedClient(noise, seed=4), MS, 50)
    assert first == _samples(SimulatedClient(noise, seed=4), MS, 50)
    assert first != _samples(SimulatedClient(noise, seed=5), MS, 50)


def test_noise_is_multiplicative_with_the_declared_spread() -> None:
    for true_ns in (10_000, 10 * MS):
        logs = [math.log(s / true_ns) for s in _samples(SimulatedClient(NoiseModel(noise=0.05), seed=0), true_ns, 4000)]
        assert statistics.fmean(logs) == pytest.approx(0.0, abs=0.004)
        assert statistics.stdev(logs) == pytest.approx(0.05, rel=0.05)


def test_cold_first_run_and_rare_outliers() -> None:
    cold = SimulatedClient(NoiseModel(cold_factor=3.0))
    assert _samples(cold, MS, 3) == [3 * MS, MS, MS]
    samples = _samples(SimulatedClient(NoiseModel(outlier_rate=0.02, outlier_factor=4.0), seed=1), MS, 5000)
    outliers = [s for s in samples if s != MS]
    assert 60 <= len(outliers) <= 140
    assert all(1.5 * MS <= s <= 4 * MS for s in outliers)


def test_drift_wanders_slowly_and_ramp_decays_with_device_time() -> None:
    drifting = SimulatedClient(NoiseModel(drift=0.05, drift_period_ms=200.0), seed=2)
    samples = _samples(drifting, MS, 400)  # 400 ms: two periods
    assert max(samples) == pytest.approx(1.05 * MS, rel=0.002)
    assert min(samples) == pytest.approx(0.95 * MS, rel=0.002)
    assert max(abs(a - b) for a, b in itertools.pairwise(samples)) < 0.002 * MS

    ramping = SimulatedClient(NoiseModel(ramp=0.2, ramp_tau_ms=100.0))
    assert _samples(ramping, MS, 1) == [1.2 * MS]
    ramping.warm_up(1000 * MS)  # ten time constants later the clocks have ramped
    assert _samples(ramping, MS, 1)[0] == pytest.approx(MS, rel=1e-4)
    assert ramping.warmup_ns == 1000 * MS


def test_a_kernel_can_fail_after_some_runs() -> None:
    client = SimulatedClient()
    kernel = client.kernel(MS, fail_after=2)
    kernel()
    kernel()
    with pytest.raises(RuntimeError, match="failed after 2 runs"):
        kernel()


def test_bad_parameters_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="noise"):
        NoiseModel(noise=-0.1)
    with pytest.raises(ValueError, match="outlier_rate"):
        NoiseModel(outlier_rate=1.5)
    with pytest.raises(ValueError, match="true time"):
        SimulatedClient().kernel(0)


def test_declared_peaks_are_what_it_measures() -> None:
    peaks = DevicePeaks(ops_per_s=1e12, bytes_per_s=5e11, launch_overhead_ns=2_000.0)
    assert SimulatedClient(peaks=peaks).measure_peaks() == peaks


def test_a_kernel_can_have_noise_of_its_own() -> None:
    client = SimulatedClient(NoiseModel(noise=0.01), seed=0)
    quiet, noisy = client.kernel(MS), client.kernel(MS, noise=0.1)
    spreads = [statistics.stdev(math.log(client.profile(k)[1] / MS) for _ in range(2000)) for k in (quiet, noisy)]
    assert spreads[0] == pytest.approx(0.01, rel=0.1) and spreads[1] == pytest.approx(0.1, rel=0.1)
    with pytest.raises(ValueError, match="own noise"):
        client.kernel(MS, noise=-1.0)


def test_heavy_tailed_spikes_are_rare_and_unbounded() -> None:
    samples = _samples(SimulatedClient(NoiseModel(tail_rate=0.05, tail_alpha=1.3), seed=3), MS, 20_000)
    spikes = [s / MS for s in samples if s != MS]
    assert 800 <= len(spikes) <= 1200 and min(spikes) >= 1.0
    assert max(spikes) > 20  # a Pareto tail of shape 1.3: one spike in thousands is enormous
    assert statistics.median(samples) == MS


def test_clock_states_persist_for_a_while_and_are_all_visited() -> None:
    client = SimulatedClient(NoiseModel(clock_states=(1.0, 1.1), clock_dwell_ms=(5.0, 20.0)), seed=1)
    samples = _samples(client, MS, 5000)  # 5 s of device time
    assert set(samples) == {MS, 1.1 * MS}
    slow_share = samples.count(1.1 * MS) / len(samples)
    assert slow_share == pytest.approx(20 / 25, abs=0.08)
    switches = sum(a != b for a, b in itertools.pairwise(samples))
    assert 100 < switches < 500  # 5 s over a 12.5 ms mean dwell: ~400 switches, never one per run


def test_a_throttle_step_and_periodic_interference_follow_device_time() -> None:
    throttled = SimulatedClient(NoiseModel(throttle=0.1, throttle_at_ms=5.0))
    assert _samples(throttled, MS, 7) == [MS] * 5 + [1.1 * MS] * 2
    interfered = SimulatedClient(NoiseModel(interference=0.2, interference_period_ms=10.0, interference_duty=0.3))
    samples = _samples(interfered, 100_000, 10_000)  # 1 s: a hundred periods
    slowed = [s for s in samples if s > 100_000]
    assert set(slowed) == {120_000} and len(slowed) / len(samples) == pytest.approx(0.3 / (0.3 + 0.7 * 1.2), rel=0.1)


def test_bad_noise_classes_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="tail_rate"):
        NoiseModel(tail_rate=2.0)
    with pytest.raises(ValueError, match="clock_states"):
        NoiseModel(clock_states=(1.0, -1.0))
    with pytest.raises(ValueError, match="clock_dwell_ms"):
        NoiseModel(clock_states=(1.0, 1.1), clock_dwell_ms=(5.0,))
    with pytest.raises(ValueError, match="interference_duty"):
        NoiseModel(interference=0.1, interference_duty=1.5)
    with pytest.raises(ValueError, match="throttle"):
        NoiseModel(throttle=-0.1)
