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
