"""The kernels of benches/_suite.py (tunekit against Kernel Tuner) build and match their references on PoCL."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tunekit_backends.opencl import OpenCLClient

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
import _suite  # noqa: E402

pytestmark = pytest.mark.opencl


@pytest.mark.parametrize("name", list(_suite.KERNELS))
def test_each_suite_kernel_builds_and_matches_its_reference_at_both_ends_of_its_space(name: str) -> None:
    kernel = _suite.KERNELS[name]
    assert 25 <= len(kernel.configs()) <= 60  # the suite's spaces: 25-60 variants each
    client = OpenCLClient(flush_cache=False, compile_in="thread")
    size = kernel.quick_size
    host, out, expected = kernel.inputs(size)
    configs = kernel.configs(quick=True)
    template = kernel.template(size, quick=True)
    for config in (configs[0], configs[len(configs) // 2], configs[-1]):
        program = cl.Program(client.context, kernel.source).build(
            options=template.build_options(template.space.config(config))
        )
        args = [cla.to_device(client.queue, a) if isinstance(a, np.ndarray) else a for a in host]
        global_size, local_size = _suite.geometry(kernel, config, size)
        launch = getattr(program, kernel.kernel)
        launch(client.queue, global_size, local_size, *(a.data if isinstance(a, cla.Array) else a for a in args)).wait()
        np.testing.assert_allclose(args[out].get(), expected, atol=kernel.atol, err_msg=f"{name} {config}")
