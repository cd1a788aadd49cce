"""Every client of tunekit_backends (CPU, OpenCL, simulated, replay) passes the shipped conformance suite."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kt_cache import write_cache

import tunekit as tk
from tunekit.testing import ClientConformance, ConformanceKey
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.replay import ReplayClient, load_kernel_tuner_cache
from tunekit_backends.simulated import NoiseModel, SimulatedClient


class TestCpuClient(ClientConformance):
    def make(self) -> Any:
        return CpuClient()

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[ConformanceKey], tuple[Any, ...]]]:
        def inputs(key: ConformanceKey) -> tuple[Any, ...]:
            return (np.arange(key.n, dtype=np.float64),)

        return [tk.Tunable("sum", np.sum), tk.Tunable("dot", lambda x: x @ np.ones_like(x))], inputs


@pytest.mark.opencl
@pytest.mark.subprocess  # its tune compiles in worker processes
class TestOpenCLClient(ClientConformance):
    def make(self) -> Any:
        pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")
        return OpenCLClient()

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[ConformanceKey], tuple[Any, ...]]]:
        import pyopencl.array as cla  # noqa: PLC0415 - the optional opencl extra

        def inputs(key: ConformanceKey) -> tuple[Any, ...]:
            x = cla.to_device(client.queue, np.linspace(-1, 1, key.n, dtype=np.float32))
            return x, cla.empty(client.queue, key.n, np.float32), np.int32(key.n)

        template = KernelTemplate(
            TWICE, "twice", {"BLOCK": [32, 64]}, geometry=lambda c, key: ((key.n,), (int(c.BLOCK),))
        )
        return template.tunables(client, lambda x, y, n: ConformanceKey(n=int(n))), inputs


class TestSimulatedClient(ClientConformance):
    def make(self) -> Any:
        return SimulatedClient(NoiseModel(noise=0.05, drift=0.03, cold_factor=3.0), seed=0)

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[ConformanceKey], tuple[Any, ...]]]:
        fast, slow = client.kernel(100_000), client.kernel(300_000)

        def inputs(key: ConformanceKey) -> tuple[Any, ...]:
            return (np.arange(key.n, dtype=np.float64),)

        def candidate(name: str, kernel: Callable[..., None]) -> tk.Tunable[Any]:
            # A simulated kernel only occupies the virtual device; the candidate also computes a result.
            def run(x: np.ndarray) -> np.ndarray:
                kernel(x)
                return 2 * x

            return tk.Tunable(name, run)

        return [candidate("fast", fast), candidate("slow", slow)], inputs


class TestReplayClient(ClientConformance):
    @pytest.fixture(autouse=True)
    def _cache_file(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.path = write_cache(tmp_path_factory.mktemp("replay") / "landscape.json")

    def make(self) -> Any:
        return ReplayClient(load_kernel_tuner_cache(self.path), seed=0)

    def candidates(self, client: Any) -> tuple[list[tk.Tunable[Any]], Callable[[ConformanceKey], tuple[Any, ...]]]:
        recorded = sorted(client.data.samples_ms, key=client.data.space.index)[:2]

        def candidate(config: tk.Config) -> tk.Tunable[Any]:
            kernel = client.kernel(config)

            # A replayed kernel only advances the virtual clock; the candidate also computes a result.
            def run(x: np.ndarray) -> np.ndarray:
                kernel(x)
                return 2 * x

            return tk.Tunable(config.name, run)

        def inputs(key: ConformanceKey) -> tuple[Any, ...]:
            return (np.arange(key.n, dtype=np.float64),)

        return [candidate(config) for config in recorded], inputs


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
