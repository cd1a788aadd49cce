"""The CPU client (tunekit_backends/cpu.py) on the real machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tunekit_backends.cpu import CpuClient

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

_MEASURE = """
import numpy as np
from tunekit_backends.cpu import CpuClient, _best_ns
peak = CpuClient().measure_peaks().ops_per_s
c = np.ones((64, 64), np.float32)
one_core = 2 * 64**3 / (_best_ns(lambda: c @ c, 200) * 1e-9)
print(peak, one_core)
"""


def test_the_compute_peak_holds_on_a_busy_machine() -> None:
    """Regression: under load the peak came out 30-200x low, and the roofline short-circuited slow winners."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * len(os.sched_getaffinity(0)))
    ]
    try:
        done = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True, check=True, timeout=300)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    peak, one_core = map(float, done.stdout.split())
    # Both from one process under the same load: the peak is at least one core's (half: noise between the two).
    assert peak >= one_core / 2, (peak, one_core)


def _peaks_in_a_fresh_process() -> list[float]:
    code = "from tunekit_backends.cpu import CpuClient; print(CpuClient().measure_peaks().bytes_per_s)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return [float(done.stdout)]


def test_the_bandwidth_peak_holds_on_a_busy_machine() -> None:
    """Regression: under load every 64 MiB copy was preempted and the bandwidth peak came out 4-8x low."""
    (quiet,) = _peaks_in_a_fresh_process()
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * len(os.sched_getaffinity(0)))
    ]
    try:
        (busy,) = _peaks_in_a_fresh_process()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    # The machine's peak does not depend on who else runs; a 2x margin absorbs the measurement's noise.
    assert busy >= quiet / 2, (busy, quiet)


def test_device_id_is_kept_on_the_instance_after_its_first_read() -> None:
    """Typed as a property (for pyright), it is a cached value at run time: each execute reads a dict entry."""
    client = CpuClient()
    assert "device_id" not in vars(client)
    first = client.device_id
    assert vars(client)["device_id"] is first and client.device_id is first
