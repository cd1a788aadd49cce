"""Compiling variants together on PoCL: one program for many variants, worker processes, crashes contained."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.opencl._batch import batchable, batched_program

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")

# Everything a copy could clash on: a typedef that differs by variant, a helper function, a
# constant table, a macro with a default the build options may set, and the kernel.
SHAPES = """
#ifndef OFFSET
#define OFFSET 0.25f
#endif
#if WIDE
typedef float2 acc_t;
#define SUM(v) ((v).x + (v).y)
#else
typedef float acc_t;
#define SUM(v) (v)
#endif
__constant float weights[3] = {1.0f, 2.0f, 3.0f};
struct pair { float a; float b; };
inline float helper(float x) { return x * FACTOR + OFFSET; }
__kernel void shapes(__global const float* x, __global float* y, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    struct pair p = {x[i], weights[i % 3]};
    acc_t v = (acc_t)(helper(p.a) * p.b);
    y[i] = SUM(v);
}
"""


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(compile_in="thread")
    yield client
    client.close()


def _run(client: OpenCLClient, program: Any, name: str, x: np.ndarray) -> np.ndarray:
    x_d = cla.to_device(client.queue, x)
    y_d = cla.zeros(client.queue, x.shape, np.float32)
    cl.Kernel(program, name)(client.queue, (x.size,), None, x_d.data, y_d.data, np.int32(x.size)).wait()
    return np.asarray(y_d.get())


def test_variants_in_one_program_compute_what_their_own_builds_compute(client: OpenCLClient) -> None:
    configs = [
        [("FACTOR", "2.0f"), ("WIDE", "0")],
        [("FACTOR", "3.0f"), ("WIDE", "1")],
        [("FACTOR", "1.0f"), ("WIDE", "1")],
    ]
    options = ["-DOFFSET=0.5f"]
    batch = batched_program(SHAPES, "shapes", configs, options)
    together = cl.Program(client.context, batch.source).build(options=options)
    x = np.arange(10, dtype=np.float32)
    for pairs, name in zip(configs, batch.kernel_names, strict=True):
        alone = cl.Program(client.context, SHAPES).build(options=[f"-D{k}={v}" for k, v in pairs] + options)
        expected = _run(client, alone, "shapes", x)
        np.testing.assert_array_equal(_run(client, together, name, x), expected)
    factor, wide = 3.0, 2  # the second variant by hand: float2 sums both lanes, OFFSET from the options
    np.testing.assert_allclose(
        _run(client, together, batch.kernel_names[1], x), wide * (x * factor + 0.5) * np.array([1, 2, 3] * 4)[:10]
    )


def test_a_source_that_includes_a_header_is_built_variant_by_variant() -> None:
    assert batchable(SHAPES)
    assert not batchable('#include "common.h"\n' + SHAPES)


CRASHY = """
__kernel void crashy(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if MODE == 1
    this does not compile;
#endif
#if MODE == 2
    y[i + (1 << 30)] = 1.0f;   /* far outside any buffer: kills the process that launches it */
#endif
    y[i] = (float)(MODE + 1) * (float)BLOCK;
}
"""


@tk.autotune_key
class SizeKey:
    n: Annotated[int, tk.Anchor()]


def test_a_variant_that_crashes_its_compile_worker_is_failed_and_the_rest_tune(isolated_settings: Path) -> None:
    pooled = OpenCLClient(compile_in="process", compile_workers=2)
    try:
        template = KernelTemplate(
            CRASHY,
            "crashy",
            {"MODE": [0, 1, 2], "BLOCK": [16, 32]},
            geometry=lambda config, key: ((key.n,), (int(config.BLOCK),)),
        )
        tunables = template.tunable_set(
            pooled,
            key=lambda y, n: SizeKey(n=int(n)),
            inputs=lambda key, *caller: (cla.zeros(pooled.queue, key.n, np.float32), np.int32(key.n)),
        )
        records: list[tk.AutotuneRecord] = []
        sink = tk.add_record_sink(records.append)
        try:
            tuner: tk.LocalTuner[SizeKey, Any] = tk.LocalTuner("opencl-crashy")
            y = cla.zeros(pooled.queue, 64, np.float32)
            tuner.execute(pooled.device_id, pooled, tunables, (y, np.int32(64))).wait()
        finally:
            tk.remove_record_sink(sink)
        by_name = {c.name: c for c in records[-1].candidates}
        for block in (16, 32):
            crashed = by_name[f"crashy[MODE=2,BLOCK={block}]"]
            assert crashed.stage == "compile" and "crashed a compile worker" in (crashed.error or "")
            broken = by_name[f"crashy[MODE=1,BLOCK={block}]"]
            assert broken.stage == "compile" and "build failed in a compile worker" in (broken.error or "")
            assert "error" in (broken.error or "").split("worker:")[1]
            assert by_name[f"crashy[MODE=0,BLOCK={block}]"].status == "measured"
        assert records[-1].winner is not None and records[-1].winner.startswith("crashy[MODE=0,")
        assert set(np.unique(y.get())) <= {16.0, 32.0}
    finally:
        pooled.close()


def test_auto_compiles_in_processes_on_pocl_with_cores_and_its_kernel_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    client = OpenCLClient()
    is_pocl = "Portable Computing Language" in client.device.platform.name
    wanted = "process" if is_pocl and len(os.sched_getaffinity(0)) >= 2 else "thread"
    assert client.compile_in == wanted
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")  # without PoCL's disk cache, a worker's build would be lost
    assert OpenCLClient().compile_in == "thread"
    with pytest.raises(ValueError, match="compile_workers"):
        OpenCLClient(compile_in="process", compile_workers=0)


def test_a_script_without_a_main_guard_compiles_in_processes(tmp_path: Path) -> None:
    # multiprocessing's spawn would re-run this script in every worker; the workers are plain subprocesses.
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import numpy as np, pyopencl.array as cla
            import tunekit as tk
            from tunekit_backends.opencl import KernelTemplate, OpenCLClient

            SOURCE = {CRASHY!r}

            @tk.autotune_key
            class K:
                n: int

            client = OpenCLClient(compile_in="process", compile_workers=2)
            template = KernelTemplate(SOURCE, "crashy", {{"MODE": [0], "BLOCK": [8, 16, 32]}},
                                      geometry=lambda c, key: ((key.n,), (int(c.BLOCK),)))
            tunables = template.tunable_set(client, key=lambda y, n: K(n=int(n)),
                                            inputs=lambda key, y, n: (cla.zeros(client.queue, 64, np.float32), n))
            y = cla.zeros(client.queue, 64, np.float32)
            tk.LocalTuner("unguarded").execute(client.device_id, client, tunables, (y, np.int32(64))).wait()
            print("compiled", len(template.compiled()), "winner output", sorted(set(y.get().tolist())))
            """
        )
    )
    env = dict(os.environ, TUNEKIT_CACHE_DIR=str(tmp_path / "cache"), TUNEKIT_PROGRESS="0")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("compiled 3 winner output") == 1, done.stdout
