"""Every client passes the same checks: subclass ClientConformance for a new backend."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._measure.client import require_client
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class WorkKey:
    n: Annotated[int, tk.Anchor()]


class ClientConformance:
    """The contract of ``tk.Client`` as the tuner relies on it."""

    def make(self) -> Any:
        raise NotImplementedError

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[WorkKey], tuple[Any, ...]]]:
        """Two real candidates computing the same thing, and an input generator."""
        raise NotImplementedError

    def test_is_a_client_with_a_stable_specific_id(self) -> None:
        client = self.make()
        assert isinstance(client, tk.Client)
        assert isinstance(client.device_id, str) and len(client.device_id) > 8
        assert self.make().device_id == client.device_id

    def test_a_device_model_is_a_stable_non_empty_str_when_supported(self) -> None:
        client = self.make()
        if isinstance(client, tk.SupportsDeviceModel):
            # Compared with a committed record's: an empty or unstable one would match other models' records, or none.
            assert isinstance(client.device_model, str) and client.device_model
            assert self.make().device_model == client.device_model

    def test_passes_the_up_front_client_check_of_execute(self) -> None:
        require_client(self.make(), "conformance")  # raises TypeError naming what a client lacks

    def test_profile_returns_the_output_and_a_device_duration(self) -> None:
        client = self.make()
        (tunable, *_), inputs = self.candidates(client)
        args = inputs(WorkKey(n=1 << 12))
        output, ns = client.profile(lambda: tunable.fn(*args))
        client.sync()
        assert output is not None
        assert isinstance(ns, int) and ns > 0

    def test_flush_runs_outside_timing_when_supported(self) -> None:
        client = self.make()
        if isinstance(client, tk.SupportsCacheFlush):
            client.flush_cache()
            client.sync()

    def test_warm_up_and_peaks_when_supported(self) -> None:
        client = self.make()
        if isinstance(client, tk.SupportsWarmup):
            client.warm_up(1_000_000)  # what the schedule does before the first timed sample
            client.sync()
        if isinstance(client, tk.SupportsPeaks):
            peaks = client.measure_peaks()
            assert peaks.ops_per_s > 0 and peaks.bytes_per_s > 0 and peaks.launch_overhead_ns >= 0

    def test_tunes_end_to_end_and_records_its_device(self) -> None:
        client = self.make()
        tunables, inputs = self.candidates(client)
        records: list[tk.AutotuneRecord] = []
        sink = tk.add_record_sink(records.append)
        try:
            tuner: tk.LocalTuner[WorkKey, Any] = tk.LocalTuner(f"conformance-{type(self).__name__}")
            tunable_set = tk.TunableSet(key=lambda *args: WorkKey(n=1 << 12), inputs=lambda key, *a: inputs(key))
            tuner.execute(client.device_id, client, tunable_set.with_tunables(tunables), inputs(WorkKey(n=1 << 12)))
        finally:
            tk.remove_record_sink(sink)
        assert records[-1].device_id == client.device_id
        assert {c.status for c in records[-1].candidates} == {"measured"}


class TestCpuClient(ClientConformance):
    def make(self) -> Any:
        return CpuClient()

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[WorkKey], tuple[Any, ...]]]:
        def inputs(key: WorkKey) -> tuple[Any, ...]:
            return (np.arange(key.n, dtype=np.float64),)

        return [tk.Tunable("sum", np.sum), tk.Tunable("dot", lambda x: x @ np.ones_like(x))], inputs


@pytest.mark.opencl
@pytest.mark.subprocess  # its tune compiles in worker processes
class TestOpenCLClient(ClientConformance):
    def make(self) -> Any:
        pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")
        from tunekit_backends.opencl import OpenCLClient

        return OpenCLClient()

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[WorkKey], tuple[Any, ...]]]:
        import pyopencl.array as cla

        from tunekit_backends.opencl import KernelTemplate

        def inputs(key: WorkKey) -> tuple[Any, ...]:
            x = cla.to_device(client.queue, np.linspace(-1, 1, key.n, dtype=np.float32))
            return x, cla.empty(client.queue, key.n, np.float32), np.int32(key.n)

        template = KernelTemplate(
            TWICE, "twice", {"BLOCK": [32, 64]}, geometry=lambda c, key: ((key.n,), (int(c.BLOCK),))
        )
        return template.tunables(client, lambda x, y, n: WorkKey(n=int(n))), inputs


class TestSimulatedClient(ClientConformance):
    def make(self) -> Any:
        from tunekit_backends.simulated import NoiseModel, SimulatedClient

        return SimulatedClient(NoiseModel(noise=0.05, drift=0.03, cold_factor=3.0), seed=0)

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[WorkKey], tuple[Any, ...]]]:
        fast, slow = client.kernel(100_000), client.kernel(300_000)

        def inputs(key: WorkKey) -> tuple[Any, ...]:
            return (np.arange(key.n, dtype=np.float64),)

        def candidate(name: str, kernel: Callable[..., None]) -> tk.Tunable[Any]:
            # A simulated kernel only occupies the virtual device; the candidate also computes a result.
            def run(x: np.ndarray) -> np.ndarray:
                kernel(x)
                return 2 * x

            return tk.Tunable(name, run)

        return [candidate("fast", fast), candidate("slow", slow)], inputs


TWICE = """
__kernel void twice(__global const float* x, __global float* y, const int n) {
    const int i = get_global_id(0);
    if (i < n) y[i] = 2.0f * x[i];
}
"""


@pytest.mark.subprocess
def test_importing_the_opencl_backend_does_not_import_pyopencl() -> None:
    code = "import sys, tunekit_backends.opencl; print('pyopencl' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.subprocess
def test_a_missing_pyopencl_names_the_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['pyopencl'] = None\n"
        "from tunekit_backends.opencl import OpenCLClient\n"
        "try:\n    OpenCLClient()\nexcept ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'tunekit[opencl]'" in done.stdout
