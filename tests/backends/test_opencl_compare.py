"""A custom check on PoCL: a reduction whose partial-sum count depends on the variant, judged by its total."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

# Each work-group reduces BLOCK * ITEMS elements in local memory and writes one partial sum:
# n / (BLOCK * ITEMS) of them, so each variant fills its own prefix of the partial buffer.
PARTIAL_SUMS = """
__kernel void partial_sums(__global const float* x, __global float* partial, const int n) {
    __local float scratch[BLOCK];
    int lid = get_local_id(0);
    int base = get_group_id(0) * BLOCK * ITEMS + lid;
    float v = 0.0f;
    for (int t = 0; t < ITEMS; t++) {
        int i = base + t * BLOCK;
#if LOSES_LAST
        if (i < n - 1) v += x[i];   /* a bound off by one: the last element is never summed */
#else
        if (i < n) v += x[i];
#endif
    }
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = scratch[0];
}
"""


@tk.autotune_key
class SumKey:
    n: int


def _groups(config: tk.Config, n: int) -> int:
    per_group = int(config.BLOCK) * int(config.ITEMS)
    return -(-n // per_group)


TEMPLATE: KernelTemplate[SumKey] = KernelTemplate(
    PARTIAL_SUMS,
    "partial_sums",
    tk.Space(BLOCK=[16, 64], ITEMS=[1, 4], LOSES_LAST=[0, 1], restrict=lambda c: c.LOSES_LAST == 0 or c.ITEMS == 1),
    geometry=lambda c, key: ((_groups(c, key.n) * int(c.BLOCK),), (int(c.BLOCK),)),
)


def _same_total(expected: Any, got: Any) -> bool:
    """The partial sums' total against the reference's, in float64; the unwritten tail holds zeros."""
    total = float(np.sum(got, dtype=np.float64))
    if abs(total - float(expected)) > 1e-5 * abs(float(expected)):
        raise AssertionError(f"partial sums total {total:.7g}, expected {float(expected):.7g}")
    return True


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(flush_cache=False)
    yield client
    client.close()


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_variants_with_their_own_partial_sum_count_pass_by_total_and_a_lost_element_fails(
    client: OpenCLClient,
) -> None:
    n = 4096
    host = np.random.default_rng(1).uniform(0.5, 1.0, n).astype(np.float32)
    x = cla.to_device(client.queue, host)
    partial = cla.zeros(client.queue, n // 16, np.float32)  # room for the most groups any variant launches
    tunables = TEMPLATE.tunable_set(
        client,
        key=lambda x, partial, n: SumKey(n=int(n)),
        reference=lambda x, partial, n: np.sum(x, dtype=np.float64),  # the total, not a buffer's values
        outputs=[1],
        compare=_same_total,
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    tuner: tk.LocalTuner[SumKey, Any] = tk.LocalTuner("opencl-partial-sums")
    try:
        tuner.execute(client.device_id, client, tunables, (x, partial, np.int32(n))).wait()
    finally:
        tk.remove_record_sink(sink)
    record = records[-1]
    by_name = {c.name: c for c in record.candidates}
    for block in (16, 64):
        for items in (1, 4):
            assert by_name[f"partial_sums[BLOCK={block},ITEMS={items},LOSES_LAST=0]"].status == "measured"
        lost = by_name[f"partial_sums[BLOCK={block},ITEMS=1,LOSES_LAST=1]"]
        assert lost.stage in ("check", "compile"), lost  # judged on its first launch, here or in a compile worker
        assert "compare=_same_total raised AssertionError: partial sums total" in (lost.error or "")

    winner = tuner.winner(client.device_id, tunables, inputs=(x, partial, np.int32(n)))
    assert winner is not None and winner.name == record.winner and winner.config is not None
    assert winner.config.LOSES_LAST == 0
    groups = _groups(winner.config, n)  # the winner's own count of partial sums, from its configuration
    written = partial.get()
    assert np.isclose(written[:groups].sum(dtype=np.float64), host.sum(dtype=np.float64), rtol=1e-5)
    assert not written[groups:].any()


@pytest.mark.opencl
def test_a_template_refuses_a_compare_of_the_wrong_arity(client: OpenCLClient) -> None:
    with pytest.raises(TypeError, match=r"is called as compare\(expected, got\), once per output"):
        TEMPLATE.tunable_set(
            client,
            key=lambda x, partial, n: SumKey(n=int(n)),
            reference=lambda x, partial, n: np.sum(x),
            outputs=[1],
            compare=lambda got: True,  # type: ignore[arg-type,misc]
        )
