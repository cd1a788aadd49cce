"""A process forked from one holding an OpenCLClient (a DataLoader-style pool) fails clearly where OpenCL would hang."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

pytestmark = [pytest.mark.opencl, pytest.mark.subprocess, pytest.mark.slow]

DOUBLE = """
__kernel void double_it(__global const float* x, __global float* y) {
    y[get_global_id(0)] = 2.0f * x[get_global_id(0)];
}
"""


@tk.autotune_key
class LenKey:
    n: int


TEMPLATE = KernelTemplate(DOUBLE, "double_it", {"BLOCK": [16, 32]}, geometry=lambda c, key: ((key.n,), (c.BLOCK,)))
TUNER: tk.LocalTuner[LenKey, Any] = tk.LocalTuner("forked_double")
_client: OpenCLClient | None = None


def _double(client: OpenCLClient, x: Any) -> np.ndarray:
    tunables = TUNER.init(lambda: TEMPLATE.tunable_set(client, key=lambda x, y: LenKey(n=x.size)))
    y = cla.empty_like(x)
    TUNER.execute(client.device_id, client, tunables, (x, y)).wait()
    return np.asarray(y.get())


def _outcome(use: str) -> str:
    """In a pool worker: what using OpenCL there came to (the error's type and text), never a hang."""
    try:
        if use == "numpy":
            return str(float(np.ones(4).sum()))
        assert _client is not None
        if use == "the parent's client":
            return str(_client.queue)  # what a tuned call or cla.to_device(client.queue, ...) reads first
        if use == "the parent's tuned op":
            return str(_double(_client, _x)[:2])
        OpenCLClient(flush_cache=False)
        return "opened"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


_x: Any = None


def test_a_worker_forked_from_a_process_holding_a_client_gets_an_error_naming_the_fix_instead_of_hanging() -> None:
    """Regression: a pool forked after an OpenCL tune hung for ever at the worker's first use of OpenCL (PoCL)."""
    global _client, _x  # what the forked workers inherit
    _client = OpenCLClient(flush_cache=False)
    try:
        _x = cla.to_device(_client.queue, np.arange(64, dtype=np.float32))
        assert list(_double(_client, _x)[:2]) == [0.0, 2.0]  # tuned: the winner is in memory
        with multiprocessing.get_context("fork").Pool(2) as pool:
            uses = ["numpy", "the parent's client", "the parent's tuned op", "a new client"]
            pending = {use: pool.apply_async(_outcome, (use,)) for use in uses}
            outcome = {use: result.get(timeout=60) for use, result in pending.items()}
        assert outcome["numpy"] == "4.0"  # a worker that leaves OpenCL alone is not disturbed
        for use in ("the parent's client", "the parent's tuned op"):
            assert outcome[use].startswith("ClientClosed: OpenCLClient("), outcome[use]
            assert "is a fork of it" in outcome[use] and "'spawn'" in outcome[use], outcome[use]
        assert outcome["a new client"].startswith("RuntimeError: cannot open an OpenCL client"), outcome
        assert f"it is a fork of process {os.getpid()}" in outcome["a new client"], outcome
        # The parent's client, its workers and its winner are untouched by the workers' errors and exits.
        assert list(_double(_client, _x * 2)[:2]) == [0.0, 4.0]
        assert list(_double(_client, cla.to_device(_client.queue, np.ones(128, dtype=np.float32)))[:1]) == [2.0]
    finally:
        _client.close()
