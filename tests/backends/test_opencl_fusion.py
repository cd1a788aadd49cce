"""Fused elementwise chains on PoCL: generated source, reference, key-dependent vector widths."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.opencl import OPS, ElementwiseOp, OpenCLClient, fuse, register_op

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(flush_cache=False)
    yield client
    client.close()


@pytest.mark.opencl
@pytest.mark.subprocess
def test_fused_chain_matches_the_eager_numpy_chain_and_skips_vectors_that_do_not_divide(
    client: OpenCLClient,
) -> None:
    chain = fuse(["bias_add", "gelu", "scale"], vec=[1, 4], block=[32])
    rows, cols = 6, 18  # 18 % 4 != 0: VEC=4 cannot run on this shape
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    bias = rng.standard_normal(cols, dtype=np.float32)
    out = cla.zeros(client.queue, (rows, cols), np.float32)
    args = (cla.to_device(client.queue, x), cla.to_device(client.queue, bias), np.float32(0.5), out)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[Any, Any] = tk.LocalTuner("fusion-test")
        tuner.execute(
            client.device_id, client, chain.tunable_set(client), (*args, np.int32(cols), np.int32(rows * cols))
        ).wait()
    finally:
        tk.remove_record_sink(sink)
    expected = 0.5 * OPS["gelu"].numpy(x + bias, None)
    np.testing.assert_allclose(out.get(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chain.reference(x, bias, np.float32(0.5), None, cols, rows * cols), expected, rtol=1e-6)
    statuses = {c.name: c.status for c in records[-1].candidates}
    assert statuses == {
        "fused_bias_add_gelu_scale[VEC=1,BLOCK=32]": "measured",
        "fused_bias_add_gelu_scale[VEC=4,BLOCK=32]": "skipped",
    }
    assert chain.out_position == 3
    assert "p0" in chain.template.source and "p2" in chain.template.source


def test_unknown_and_duplicate_ops_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown ops \\['gelu2'\\]"):
        fuse(["bias_add", "gelu2"])
    with pytest.raises(ValueError, match="already registered"):
        register_op(ElementwiseOp("gelu", "v", lambda v, p: v))
    with pytest.raises(ValueError, match="needs at least one op"):
        fuse([])


def test_a_new_op_is_one_line() -> None:
    if "negate_test" not in OPS:
        register_op(ElementwiseOp("negate_test", "-v", lambda v, p: -v))
    chain = fuse(["negate_test", "relu"])
    assert "v = -v;" in chain.template.source
    x = np.array([[-1.0, 2.0]], dtype=np.float32)
    np.testing.assert_array_equal(chain.reference(x, None, 2, 2), [[1.0, 0.0]])
