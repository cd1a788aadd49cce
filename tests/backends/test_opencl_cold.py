"""Cold inputs by rotation, and a warm-up paid once while the device stays busy, on the real OpenCL device."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit.backend import SupportsColdInputs
from tunekit_backends.opencl import KernelTemplate, OpenCLClient, _client as opencl_client
from tunekit_backends.opencl._cold import MAX_COPIES

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")

pytestmark = pytest.mark.opencl

SCALE = """
__kernel void scale(__global const float* x, __global float* y, const float a) {
    const int i = get_global_id(0);
    y[i] = a * x[i] + (float)(BLOCK - BLOCK);
}
"""


@tk.autotune_key
class NoKey:
    """One key for every call."""


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(compile_in="thread")  # flushing: the default, which cold inputs replace
    yield client
    client.close()


def test_cold_inputs_are_equal_copies_rotated_so_each_sees_twice_the_cache_stream_by(client: OpenCLClient) -> None:
    x = cla.to_device(client.queue, np.arange(1 << 20, dtype=np.float32))
    y = cl.Buffer(client.context, cl.mem_flags.READ_WRITE, 4096)
    assert isinstance(client, SupportsColdInputs)
    cold = client.cold_inputs((x, y, np.float32(3)))
    assert cold is not None
    size = x.nbytes + 4096
    count = min(MAX_COPIES, -(-2 * client._cache_bytes() // size) + 1)
    seen = [cold() for _ in range(2 * count)]
    firsts = {id(inputs[0]) for inputs in seen}
    assert len(firsts) == count and id(x) not in firsts  # fresh copies only, each used once per turn
    assert [id(i[0]) for i in seen[:count]] == [id(i[0]) for i in seen[count:]]
    for inputs in seen[:3]:
        np.testing.assert_array_equal(inputs[0].get(), x.get())
        assert isinstance(inputs[1], cl.Buffer) and inputs[1].size == 4096 and inputs[1] is not y
        assert inputs[2] == np.float32(3)


def test_small_inputs_add_a_flush_window_so_the_bytes_between_two_uses_still_cover_the_cache(
    client: OpenCLClient,
) -> None:
    x = cla.to_device(client.queue, np.ones(256, np.float32))  # 1 KiB: MAX_COPIES of them stream far too little
    cold = client.cold_inputs((x,))
    assert cold is not None
    cold()
    (window_buffer,) = [c.cell_contents for c in cold.__closure__ or () if isinstance(c.cell_contents, cl.Buffer)]
    # MAX_COPIES - 1 samples (their copies and windows) pass between two uses of one copy.
    assert window_buffer.size + (MAX_COPIES - 1) * x.nbytes >= 2 * client._cache_bytes()


def test_no_cold_inputs_without_flushing_or_for_an_argument_that_cannot_be_copied(client: OpenCLClient) -> None:
    x = cla.to_device(client.queue, np.ones(1024, np.float32))
    warm = OpenCLClient(flush_cache=False, compile_in="thread")
    assert warm.cold_inputs((x,)) is None
    assert client.cold_inputs((x, [1, 2])) is None  # a list: not copied here, so the sample is flushed instead
    assert client.cold_inputs((np.int32(3),)) is None  # no buffer: nothing to keep out of the cache


def test_a_flushing_tune_times_cold_copies_instead_of_writing_the_flush_buffer_per_sample(
    client: OpenCLClient,
) -> None:
    """Every timed sample wrote twice the last-level cache (960 MiB on a 480 MiB L3): 0.1-0.3 s a sample."""
    template = KernelTemplate(
        SCALE,
        "scale",
        tk.Space(BLOCK=[16, 32, 64]),
        geometry=lambda config, key: ((1 << 16,), (int(config.BLOCK),)),
    )
    x = cla.to_device(client.queue, np.linspace(0, 1, 1 << 16, dtype=np.float32))
    y = cla.zeros(client.queue, 1 << 16, np.float32)
    tunables = template.tunable_set(client, key=lambda *args: NoKey(), reference=lambda x, y, a: a * x, outputs=[1])
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[NoKey, Any] = tk.LocalTuner("opencl-cold", sinks=[records.append])
    flushes = client._flush_count
    tuner.execute(client.device_id, client, tunables, (x, y, np.float32(2))).wait()
    (record,) = records
    assert sum(c.status == "measured" for c in record.candidates) == 3
    assert client._flush_count == flushes  # no whole-cache flush: each sample ran on a cold copy
    np.testing.assert_allclose(y.get(), 2 * x.get())


def test_the_warm_up_is_paid_once_while_the_device_keeps_timing(
    client: OpenCLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each tune of a process warmed the device up again (100-300 ms), even right after the last one's samples."""
    monkeypatch.setattr(opencl_client, "_WARMTH", opencl_client._Warmth())
    monkeypatch.setattr(opencl_client, "_STILL_WARM_S", 0.5)
    x = cla.to_device(client.queue, np.ones(1 << 10, np.float32))

    def timed() -> None:
        client.profile(lambda: cl.enqueue_fill_buffer(client.queue, x.data, np.float32(1), 0, x.nbytes))

    assert client.warm_up(20_000_000) > 0
    timed()
    assert client.warm_up(20_000_000) == 0  # busy a moment ago: still warm
    time.sleep(0.6)  # a pause longer than _STILL_WARM_S: the clocks may have dropped
    timed()
    assert client.warm_up(20_000_000) > 0


def test_a_window_fill_is_not_waited_for_yet_done_before_the_sample_that_follows_it_on_the_queue(
    client: OpenCLClient,
) -> None:
    """The sample's kernel is enqueued after the fill on the same in-order queue: no host wait needed between them."""
    x = cla.to_device(client.queue, np.ones(256, np.float32))
    cold = client.cold_inputs((x,))
    assert cold is not None
    (window_buffer,) = [c.cell_contents for c in cold.__closure__ or () if isinstance(c.cell_contents, cl.Buffer)]
    assert not client.queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    for turn in (1, 2, 3):
        (copy,) = cold()
        window = window_buffer.size // (MAX_COPIES - 1)
        slot = turn % (MAX_COPIES - 1)
        seen = np.empty(window, np.uint8)
        # Enqueued after the fill on the same queue, as the sample's kernel is: it sees the fill done.
        cl.enqueue_copy(client.queue, seen, window_buffer, src_offset=slot * window).wait()
        assert (seen == turn % 251).all()
        np.testing.assert_array_equal(copy.get(), x.get())
