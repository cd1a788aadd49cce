"""tk.bench on the real OpenCL device (PoCL here): device event times, cold inputs, a kernel's relative cost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.opencl import OpenCLClient

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")

pytestmark = pytest.mark.opencl

BUSY = """
__kernel void busy(__global float* out, const int iterations) {
    float x = (float)get_global_id(0);
    for (int i = 0; i < iterations; ++i) x = x * 0.999f + 1.0f;  // each step waits for the last: no shortcut
    out[get_global_id(0)] = x;
}
"""


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(flush_cache=False, compile_in="thread")
    yield client
    client.close()


@pytest.fixture(scope="module")
def busy(client: OpenCLClient) -> Any:
    return cl.Program(client.context, BUSY).build().busy


def test_four_times_the_iterations_measure_about_four_times_slower(client: OpenCLClient, busy: Any) -> None:
    out = cla.empty(client.queue, 64, np.float32)

    def launch(out: Any, iterations: int) -> Any:
        # One work-group: one of PoCL's threads, so the ratio does not depend on whether a busy machine lent the other.
        return busy(client.queue, (64,), (64,), out.data, np.int32(iterations))

    small = tk.bench(launch, out, 4000, client=client, samples=25, warmup_ms=10)
    large = tk.bench(launch, out, 16000, client=client, samples=25, warmup_ms=10)
    assert 2.0 < large.median_ns / small.median_ns < 8.0, (str(small), str(large))
    assert small.timer == "OpenCLClient.profile" and small.device_id == client.device_id
    assert small.warmup_method == "device" and not small.cold  # flush_cache=False: warm samples, and said so


def test_the_samples_are_the_devices_event_times_not_the_hosts(client: OpenCLClient, busy: Any) -> None:
    out = cla.empty(client.queue, 64, np.float32)

    def late_launch(out: Any) -> Any:
        time.sleep(0.02)  # host time before the launch: a host clock would count it, the kernel's events do not
        return busy(client.queue, (64,), None, out.data, np.int32(1))

    result = tk.bench(late_launch, out, client=client, samples=5, warmup_ms=0)
    assert result.max_ns < 20_000_000 / 4, str(result)
    host = tk.bench(lambda: late_launch(out).wait(), samples=5, warmup_ms=0)
    assert host.min_ns >= 20_000_000 and host.timer == "host time.perf_counter_ns"


def test_cold_samples_run_on_fresh_copies_of_the_inputs() -> None:
    client = OpenCLClient(compile_in="thread")  # flushing on: what is under test
    try:
        kernel = cl.Program(client.context, BUSY).build().busy
        out = cla.zeros(client.queue, 256, np.float32)
        seen: list[int] = []

        def launch(out: Any) -> Any:
            seen.append(out.data.int_ptr)
            return kernel(client.queue, (256,), None, out.data, np.int32(10))

        result = tk.bench(launch, out, client=client, samples=4, warmup=1, warmup_ms=0)
        assert result.cold and "4 cold samples" in str(result)
        original = out.data.int_ptr
        assert seen[0] == original  # the untimed run: the caller's buffer
        assert original not in seen[1:] and len(set(seen[1:])) == 4  # each sample its own cold copy
        warm = tk.bench(launch, out, client=client, samples=2, warmup=0, warmup_ms=0, cold=False)
        assert not warm.cold and seen[-2:] == [original, original]
    finally:
        client.close()


def test_a_function_that_returns_no_event_is_refused_naming_what_to_return(client: OpenCLClient) -> None:
    with pytest.raises(TypeError, match="must return the cl.Event of its launch"):
        tk.bench(lambda: None, client=client, warmup_ms=0)
