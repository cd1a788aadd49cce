"""Compiling variants together on PoCL: one program for many variants, worker processes, crashes contained."""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit._values.records import Prepared
from tunekit_backends.opencl import CompileError, KernelTemplate, OpenCLClient, _selection
from tunekit_backends.opencl._batch import batchable, batched_program
from tunekit_backends.opencl._cl import WARM_UP_KERNEL_FLAG
from tunekit_backends.opencl._compile import CompilePool, InputsFile, WorkerDied, launch_of
from tunekit_backends.opencl._compile_starts import FAILED_STARTS, command_for
from tunekit_backends.opencl._compile_wire import ProgramRequest
from tunekit_backends.opencl._compile_worker import kernel_cache_problem, pocl_cache_dir

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
    client = OpenCLClient(flush_cache=False, compile_in="thread")
    yield client
    client.close()


def _run(client: OpenCLClient, program: Any, name: str, x: np.ndarray) -> np.ndarray:
    x_d = cla.to_device(client.queue, x)
    y_d = cla.zeros(client.queue, x.shape, np.float32)
    cl.Kernel(program, name)(client.queue, (x.size,), None, x_d.data, y_d.data, np.int32(x.size)).wait()
    return np.asarray(y_d.get())


def _same_as_alone(
    client: OpenCLClient, source: str, kernel: str, configs: list[list[tuple[str, str]]], options: list[str]
) -> list[np.ndarray]:
    """Each variant's output from the batched program, asserted equal to its own one-variant build's."""
    batch = batched_program(source, kernel, configs)
    together = cl.Program(client.context, batch.source).build(options=options)
    x = np.arange(10, dtype=np.float32)
    outputs = []
    for pairs, name in zip(configs, batch.kernel_names, strict=True):
        alone = cl.Program(client.context, source).build(options=[f"-D{k}={v}" for k, v in pairs] + options)
        outputs.append(_run(client, together, name, x))
        np.testing.assert_array_equal(outputs[-1], _run(client, alone, kernel, x), err_msg=str(pairs))
    return outputs


@pytest.mark.opencl
def test_variants_in_one_program_compute_what_their_own_builds_compute(client: OpenCLClient) -> None:
    configs = [
        [("FACTOR", "2.0f"), ("WIDE", "0")],
        [("FACTOR", "3.0f"), ("WIDE", "1")],
        [("FACTOR", "1.0f"), ("WIDE", "1")],
    ]
    outputs = _same_as_alone(client, SHAPES, "shapes", configs, ["-cl-mad-enable -DOFFSET=0.5f"])
    x = np.arange(10, dtype=np.float32)  # the second variant by hand: float2 sums both lanes, OFFSET from the options
    np.testing.assert_allclose(outputs[1], 2 * (x * 3.0 + 0.5) * np.array([1, 2, 3] * 4)[:10])


# Found in review: each of these made a batched copy compute something its own build does not.
OPTION_MACRO_REDEFINED = """
#if VEC == 4
#undef SCALE
#define SCALE 4.0f
#endif
__kernel void k(__global const float* x, __global float* y, const int n) {
    int i = get_global_id(0); y[i] = x[i] * SCALE;
}
"""
HEADER_MACRO_FALLBACK = """
#ifndef FLT_EPSILON
#define FLT_EPSILON 1e-3f
#endif
__kernel void k(__global const float* x, __global float* y, const int n) {
    int i = get_global_id(0); y[i] = x[i] + FLT_EPSILON * 1000.0f * VEC;
}
"""
# Batched before only by luck of the regexes: an inline attribute, enumerators, a static table.
DECLARATIONS = """
enum mode { PLAIN = 1, DOUBLED = 2 };
static __constant float bias[2] = {0.5f, 0.25f};
inline float __attribute__((overloadable)) twice(float v) { return 2.0f * v; }
__kernel void k(__global const float* x, __global float* y, const int n) {
    int i = get_global_id(0);
    y[i] = (VEC == DOUBLED ? twice(x[i]) : x[i] * PLAIN) + bias[i % 2];
}
"""


@pytest.mark.opencl
@pytest.mark.parametrize(
    ("source", "options"),
    [(OPTION_MACRO_REDEFINED, ["-DSCALE=1.0f"]), (HEADER_MACRO_FALLBACK, []), (DECLARATIONS, [])],
    ids=["option-macro-redefined", "header-macro-fallback", "declarations"],
)
def test_a_copy_neither_sees_nor_changes_what_the_others_define(
    client: OpenCLClient, source: str, options: list[str]
) -> None:
    _same_as_alone(client, source, "k", [[("VEC", "4")], [("VEC", "2")], [("VEC", "1")]], options)


def test_a_source_with_an_include_or_a_state_changing_pragma_is_built_variant_by_variant() -> None:
    assert batchable(SHAPES) and batchable("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + SHAPES)
    assert not batchable('#include "common.h"\n' + SHAPES)
    assert not batchable("#if PRECISE\n#pragma OPENCL FP_CONTRACT OFF\n#endif\n" + SHAPES)


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


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_variant_that_crashes_its_compile_worker_is_failed_and_the_rest_tune(pooled: OpenCLClient) -> None:
    y = cla.zeros(pooled.queue, 64, np.float32)
    record = _tune_in_process_mode(
        CRASHY, "crashy", {"MODE": [0, 1, 2], "BLOCK": [16, 32]}, (y, np.int32(64)), pooled, "opencl-crashy"
    )
    by_name = {c.name: c for c in record.candidates}
    for block in (16, 32):
        crashed = by_name[f"crashy[MODE=2,BLOCK={block}]"]
        assert crashed.stage == "compile" and "crashed a compile worker" in (crashed.error or "")
        broken = by_name[f"crashy[MODE=1,BLOCK={block}]"]
        assert broken.stage == "compile" and "build failed in a compile worker" in (broken.error or "")
        assert "error" in (broken.error or "").split("worker:")[1]
        assert by_name[f"crashy[MODE=0,BLOCK={block}]"].status == "measured"
    assert record.winner is not None and record.winner.startswith("crashy[MODE=0,")
    assert set(np.unique(y.get())) <= {16.0, 32.0}


@pytest.mark.opencl
def test_auto_compiles_in_processes_on_pocl_with_cores_and_its_kernel_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    client = OpenCLClient(flush_cache=False, start_workers="first_compile")
    is_pocl = "Portable Computing Language" in client.device.platform.name
    wanted = "process" if is_pocl and len(os.sched_getaffinity(0)) >= 2 else "thread"
    assert client.compile_in == wanted
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")  # without PoCL's disk cache, a worker's build would be lost
    assert OpenCLClient(flush_cache=False).compile_in == "thread"  # and so starts no worker at open
    with pytest.raises(ValueError, match="compile_workers"):
        OpenCLClient(flush_cache=False, compile_in="process", compile_workers=0)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
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

            client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
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


def _tune_in_process_mode(
    source: str, kernel: str, space: dict[str, list[int]], args: tuple[Any, ...], pooled: OpenCLClient, name: str
) -> tk.AutotuneRecord:
    template = KernelTemplate(source, kernel, space, geometry=lambda config, key: ((key.n,), (int(config.BLOCK),)))
    host = [a.get() if isinstance(a, cla.Array) else a for a in args]

    def inputs(key: SizeKey, *caller: Any) -> tuple[Any, ...]:
        return tuple(cla.to_device(pooled.queue, h) if isinstance(h, np.ndarray) else h for h in host)

    tunables = template.tunable_set(pooled, key=lambda *a: SizeKey(n=int(a[-1])), inputs=inputs)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tk.LocalTuner[SizeKey, Any](name).execute(pooled.device_id, pooled, tunables, args).wait()
    finally:
        tk.remove_record_sink(sink)
    record: tk.AutotuneRecord = records[-1]
    return record


@pytest.fixture
def pooled(isolated_settings: Path) -> Iterator[OpenCLClient]:
    # Workers start at the first compile, as these tests of the pool's failures expect (and a test that
    # compiles nothing in workers starts none); starting them as the client opens has its own test.
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2, start_workers="first_compile")
    yield client
    client.close()


LINKED = """
__kernel void walk(__global const int* next, __global float* y, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int steps = 0;
    for (int k = next[i]; k != -1; k = next[k]) steps += STEP;   /* on zeros: 0 -> 0 -> ... forever */
    y[i] = (float)steps;
}
"""


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_workers_first_launch_on_the_tunes_own_inputs(pooled: OpenCLClient) -> None:
    """Regression: workers launched on zero-filled buffers, where this kernel never ends (found in review)."""
    n = 64
    chain = np.append(np.arange(1, n, dtype=np.int32), np.int32(-1))  # i -> i+1 -> ... -> -1
    args = (cla.to_device(pooled.queue, chain), cla.zeros(pooled.queue, n, np.float32), np.int32(n))
    record = _tune_in_process_mode(LINKED, "walk", {"STEP": [1, 2], "BLOCK": [8, 16]}, args, pooled, "linked")
    assert all(c.status == "measured" for c in record.candidates), [c.error for c in record.candidates]


OVERRUN = """
__kernel void over(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n + 8 * MODE) y[i] = (float)BLOCK;   /* MODE 1: 32 bytes past the end of y */
}
"""


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.parametrize("compile_in", ["process", "thread"])
def test_a_variant_that_writes_past_a_buffer_fails_at_its_first_launch(compile_in: str, pooled: OpenCLClient) -> None:
    """Regression: the first launch (in a compile worker, or here on scratch copies) ignored its canary bytes, so a
    variant writing past the end of an output was timed and, with no reference, could win; from a worker it then
    ran in the tuning process (on PoCL, the caller's heap: a longer overrun aborted it)."""
    client = pooled if compile_in == "process" else OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(
        OVERRUN, "over", {"MODE": [0, 1], "BLOCK": [16, 32]}, geometry=lambda c, key: ((key.n + 32,), (c.BLOCK,))
    )

    def inputs(key: SizeKey, *caller: Any) -> tuple[Any, ...]:
        return cla.zeros(client.queue, key.n, np.float32), np.int32(key.n)

    tunables = template.tunable_set(client, key=lambda y, n: SizeKey(n=int(n)), inputs=inputs)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        y = cla.zeros(client.queue, 64, np.float32)
        tk.LocalTuner[SizeKey, Any]("overrun").execute(client.device_id, client, tunables, (y, np.int32(64))).wait()
    finally:
        tk.remove_record_sink(sink)
    by_name = {c.name: c for c in records[-1].candidates}
    for block in (16, 32):
        over = by_name[f"over[MODE=1,BLOCK={block}]"]
        assert over.stage == "compile" and "wrote past the end of argument 0 (a buffer of 256 bytes)" in (
            over.error or ""
        ), over.error
        assert by_name[f"over[MODE=0,BLOCK={block}]"].status == "measured"


PRINTING = """
__kernel void pk(__global float* y, const float low, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if MODE == 1
    if (i == 0) printf("hello from the kernel\\n");
#endif
#if MODE == 2
    this does not compile;
#endif
    y[i] = fmax((float)(MODE + BLOCK), low);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_kernel_that_prints_and_an_infinite_scalar_do_not_confuse_the_workers(pooled: OpenCLClient) -> None:
    """Regression: printf output broke the reply stream; a -inf argument killed every worker (found in review)."""
    args = (cla.zeros(pooled.queue, 64, np.float32), np.float32(-np.inf), np.int32(64))
    record = _tune_in_process_mode(PRINTING, "pk", {"MODE": [0, 1, 2], "BLOCK": [8, 16]}, args, pooled, "printing")
    by_name = {c.name: c for c in record.candidates}
    for block in (8, 16):
        assert by_name[f"pk[MODE=0,BLOCK={block}]"].status == "measured"
        assert by_name[f"pk[MODE=1,BLOCK={block}]"].status == "measured"
        broken = by_name[f"pk[MODE=2,BLOCK={block}]"]
        assert broken.stage == "compile" and "undeclared identifier" in (broken.error or "")


SCALE = """
__kernel void scale(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (float)BLOCK;
}
"""


@tk.autotune_key
class ExactKey:
    n: int


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_launch_shape_refused_for_one_key_is_tried_again_for_the_next(pooled: OpenCLClient) -> None:
    """Regression: a failure for one key stuck to the variant for every later key (found in review)."""
    template = KernelTemplate(
        SCALE, "scale", {"BLOCK": [16, 48]}, geometry=lambda config, key: ((key.n,), (int(config.BLOCK),))
    )
    tunables = template.tunable_set(
        pooled,
        key=lambda y, n: ExactKey(n=int(n)),
        inputs=lambda key, *caller: (cla.zeros(pooled.queue, key.n, np.float32), np.int32(key.n)),
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[ExactKey, Any] = tk.LocalTuner("sticky")
        for n in (64, 96):
            tuner.execute(pooled.device_id, pooled, tunables, (cla.zeros(pooled.queue, n, np.float32), np.int32(n)))
    finally:
        tk.remove_record_sink(sink)
    first, second = ({c.name: c for c in r.candidates} for r in records)
    assert "is not a multiple of local size" in (first["scale[BLOCK=48]"].error or "")  # 64 % 48: the clear message
    assert second["scale[BLOCK=48]"].status == "measured"  # 96 % 48 == 0


SPIN = """
__kernel void spin(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if MODE == 1
    while (y[i] >= 0.0f) y[i] += 1.0f;   /* never ends on these inputs: 0, 1, 2, ... up to 2^24, then stuck */
#endif
    y[i] = (float)(MODE + BLOCK);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_no_time_limit_means_workers_wait_as_long_as_a_compile_takes(pooled: OpenCLClient) -> None:
    """Regression: candidate_timeout_s=inf (documented as "no limit") overflowed the reply wait."""
    tk.configure(candidate_timeout_s=math.inf)
    args = (cla.zeros(pooled.queue, 64, np.float32), np.int32(64))
    record = _tune_in_process_mode(SPIN, "spin", {"MODE": [0], "BLOCK": [8, 16]}, args, pooled, "no-limit")
    assert all(c.status == "measured" for c in record.candidates), [c.error for c in record.candidates]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_variant_that_hangs_its_worker_fails_after_the_candidate_timeout(pooled: OpenCLClient) -> None:
    # The limit scales with how fast this machine is now: a whole tune of the good variant alone, compiled
    # cold in a worker with no limit, takes longer than its cached rebuild below does, so twice that never
    # fails it however loaded the machine; the spinning variant never finishes, so any limit fails it.
    tk.configure(candidate_timeout_s=math.inf)
    args = (cla.zeros(pooled.queue, 64, np.float32), np.int32(64))
    started = time.perf_counter()
    alone = _tune_in_process_mode(SPIN, "spin", {"MODE": [0], "BLOCK": [8]}, args, pooled, "spin-alone")
    limit_s = max(3, math.ceil(2 * (time.perf_counter() - started)))
    assert alone.winner == "spin[MODE=0,BLOCK=8]"
    tk.configure(candidate_timeout_s=float(limit_s))
    record = _tune_in_process_mode(SPIN, "spin", {"MODE": [0, 1], "BLOCK": [8]}, args, pooled, "spin")
    by_name = {c.name: c for c in record.candidates}
    assert "hung a compile worker" in (by_name["spin[MODE=1,BLOCK=8]"].error or "")
    assert f"within {limit_s} s" in (by_name["spin[MODE=1,BLOCK=8]"].error or "")
    # Regression: its program built (MODE=0 launched from it), so the hang is its first launch's: it was sent alone
    # to a fresh worker all the same, and hung for the whole limit a second time ("while building or first ...").
    assert "at its first launch (its program built)" in (by_name["spin[MODE=1,BLOCK=8]"].error or "")
    assert record.winner == "spin[MODE=0,BLOCK=8]"


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_compile_workers_exit_when_their_parent_dies(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, signal, sys
            import numpy as np, pyopencl.array as cla
            import tunekit as tk
            from tunekit_backends.opencl import KernelTemplate, OpenCLClient

            @tk.autotune_key
            class K:
                n: int

            client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
            template = KernelTemplate({SCALE!r}, "scale", {{"BLOCK": [8, 16]}},
                                      geometry=lambda c, key: ((key.n,), (int(c.BLOCK),)))
            tunables = template.tunable_set(client, key=lambda y, n: K(n=int(n)),
                                            inputs=lambda key, y, n: (cla.zeros(client.queue, 64, np.float32), n))
            y = cla.zeros(client.queue, 64, np.float32)
            tk.LocalTuner("dies").execute(client.device_id, client, tunables, (y, np.int32(64))).wait()
            print(" ".join(str(w.process.pid) for w in client.compile_pool._alive), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
            """
        )
    )
    env = dict(os.environ, TUNEKIT_CACHE_DIR=str(tmp_path / "cache"), TUNEKIT_PROGRESS="0")
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == -9, done.stderr[-2000:]
    pids = [int(p) for p in done.stdout.split()]
    assert pids
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids), "orphaned compile workers kept running"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


LOCAL = """
__kernel void stage(__global const float* x, __global float* y, __local float* tile, const int n) {
    int i = get_global_id(0), l = get_local_id(0);
    tile[l] = i < n ? x[i] * (float)SCALE : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n) y[i] = tile[l];
}
"""


@pytest.mark.slow
@pytest.mark.opencl
def test_an_argument_a_worker_cannot_take_compiles_in_the_tuning_process(
    pooled: OpenCLClient, caplog: pytest.LogCaptureFixture
) -> None:
    template = KernelTemplate(
        LOCAL, "stage", {"SCALE": [1, 2], "BLOCK": [8, 16]}, geometry=lambda c, key: ((key.n,), (int(c.BLOCK),))
    )
    x = cla.to_device(pooled.queue, np.arange(64, dtype=np.float32))

    def inputs(key: SizeKey, *caller: Any) -> tuple[Any, ...]:
        return x, cla.zeros(pooled.queue, 64, np.float32), cl.LocalMemory(4 * 16), np.int32(64)

    tunables = template.tunable_set(pooled, key=lambda *a: SizeKey(n=int(a[-1])), inputs=inputs)
    y = cla.zeros(pooled.queue, 64, np.float32)
    with caplog.at_level("INFO", logger="tunekit.opencl"):
        tk.LocalTuner[SizeKey, Any]("local-memory").execute(
            pooled.device_id, pooled, tunables, (x, y, cl.LocalMemory(4 * 16), np.int32(64))
        ).wait()
    assert "cannot be sent to a compile worker; compiling in this process" in caplog.text
    assert len(template.compiled()) == 4
    assert any(np.array_equal(y.get(), x.get() * scale) for scale in (1, 2))


WORK = """
__kernel void work(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < REPEAT; ++k) acc = sin(acc + (float)k);   /* REPEAT=1 wins by far, on any device */
    y[i] = (float)REPEAT + acc * 0.0f;
}
"""


def _tune_work(client: OpenCLClient, name: str) -> list[tk.AutotuneRecord]:
    """Two tunes (two keys) of a space whose winner is not a matter of timing noise; each output checked."""
    template = KernelTemplate(WORK, "work", {"REPEAT": [1, 1000, 3000]}, geometry=lambda c, key: ((key.n,), None))
    tunables = template.tunable_set(
        client,
        key=lambda y, n: SizeKey(n=int(n)),
        inputs=lambda key, y, n: (cla.zeros(client.queue, key.n, np.float32), np.int32(key.n)),
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[SizeKey, Any] = tk.LocalTuner(name)
        for n in (64, 128):
            y = cla.zeros(client.queue, n, np.float32)
            tuner.execute(client.device_id, client, tunables, (y, np.int32(n))).wait()
            assert set(y.get().tolist()) == {1.0}, name
    finally:
        tk.remove_record_sink(sink)
    for record in records:
        assert all(c.status == "measured" for c in record.candidates), [c.error for c in record.candidates]
    assert len(template.compiled()) == 3
    return records


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.slow
@pytest.mark.opencl
def test_an_unwritable_temporary_directory_compiles_in_the_tuning_process_and_warns_once(
    client: OpenCLClient,
    pooled: OpenCLClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The workers' copy of the inputs cannot be written: same winners as compile_in='thread', one warning."""
    threaded = [r.winner for r in _tune_work(client, "fallback-thread")]
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))  # what TMPDIR sets; Python caches it here
    with caplog.at_level("INFO"):
        records = _tune_work(pooled, "fallback-process")
    assert [r.winner for r in records] == threaded == ["work[REPEAT=1]"] * 2
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings  # not once per tune, and no traceback from the prepare phase
    assert warnings[0].startswith("tunekit.opencl: ") and "Not a directory" in warnings[0]
    assert "TMPDIR" in warnings[0] and "compile_in='thread'" in warnings[0]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.parametrize(
    "executable",
    ["", "/nonexistent/bin/python", shutil.which("false") or "/bin/false"],
    ids=["empty", "missing", "exits-at-once"],
)
def test_a_compile_worker_that_cannot_start_compiles_in_the_tuning_process_and_warns_once(
    pooled: OpenCLClient, executable: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: a worker that could not start raised through the prepare phase, with a traceback per tune."""
    monkeypatch.setattr(sys, "executable", executable)  # embedded interpreters: '' or the host program
    with caplog.at_level("INFO"):
        records = _tune_work(pooled, "no-worker")
    assert [r.winner for r in records] == ["work[REPEAT=1]"] * 2
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "compile worker" in warnings[0] and "compiling in this process" in warnings[0]
    assert "compile_in='thread'" in warnings[0]


def _wrapper(tmp_path: Path, body: str) -> str:
    """An executable standing in for sys.executable: ``body`` runs first (sh), then the real Python."""
    script = tmp_path / "python-wrapper"
    script.write_text(f'#!/bin/sh\n{body}\nexec {shlex.quote(sys.executable)} "$@"\n')
    script.chmod(0o755)
    return str(script)


def _compiled_in_process(records: list[tk.AutotuneRecord]) -> list[str | None]:
    return [e.compiled_in_process for r in records for e in r.events if isinstance(e, Prepared)]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_worker_killed_before_it_is_ready_is_not_blamed_on_the_variant(
    pooled: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: a worker killed by a signal at start-up failed the variant sent to it as 'crashed a worker'."""
    monkeypatch.setattr(sys, "executable", _wrapper(tmp_path, "kill -KILL $$"))
    with caplog.at_level("INFO"):
        records = _tune_work(pooled, "killed-at-start")  # asserts every variant measured
    assert [r.winner for r in records] == ["work[REPEAT=1]"] * 2
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "killed by signal 9 (SIGKILL) before it was ready" in warnings[0], warnings
    notes = _compiled_in_process(records)
    assert len(notes) == 2 and all(n and n.startswith("no compile worker could start: ") for n in notes), notes


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_worker_killed_once_at_start_up_is_replaced_and_the_batch_still_compiles_in_workers(
    pooled: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "killed-once"
    monkeypatch.setattr(sys, "executable", _wrapper(tmp_path, f"mkdir {shlex.quote(str(marker))} && kill -KILL $$"))
    with caplog.at_level("INFO"):
        records = _tune_work(pooled, "killed-once")
    assert marker.is_dir(), "the first worker should have been killed"
    assert _warnings(caplog) == []
    assert _compiled_in_process(records) == [None, None]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_worker_killed_while_idle_is_replaced_without_blaming_the_next_variant(pooled: OpenCLClient) -> None:
    _tune_work(pooled, "idle-kill-first")
    assert pooled.compile_pool is not None
    for worker in list(pooled.compile_pool._alive):
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
    records = _tune_work(pooled, "idle-kill-again")  # new keys: asserts every variant measured
    assert _compiled_in_process(records) == [None, None]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_workers_that_cannot_fill_pocls_kernel_cache_warn_once(
    pooled: OpenCLClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: with PoCL's kernel cache off, every worker build was wasted without a word."""
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")  # read by the workers started from here on
    with caplog.at_level("INFO"):
        _tune_work(pooled, "no-kernel-cache")
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "POCL_KERNEL_CACHE=0" in warnings[0] and "compile_in='thread'" in warnings[0]


def test_the_kernel_cache_probe_writes_where_pocl_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pocl = "Portable Computing Language"
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "kcache"))
    assert kernel_cache_problem(pocl) is None and (tmp_path / "kcache").is_dir()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("POCL_CACHE_DIR", str(blocker / "kcache"))  # unwritable even for root
    problem = kernel_cache_problem(pocl)
    assert problem is not None and str(blocker / "kcache") in problem and "not writable" in problem, problem
    assert kernel_cache_problem("NVIDIA CUDA") is None  # its cache is not ours to check


BOOT = "__kernel void boot(__global int* x) { x[0] = 1; }"


def _counted(tmp_path: Path, body: str) -> tuple[str, Path]:
    """A stand-in for sys.executable that notes each start in a file, then runs ``body`` (see _wrapper)."""
    starts = tmp_path / "starts"
    return _wrapper(tmp_path, f"echo start >> {shlex.quote(str(starts))}\n{body}"), starts


def _failing_starts(
    client: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ProgramRequest, str, Path]:
    """A request for ``client``'s device, with every worker start from here on failing (exit 3) and counted.

    Returns the request, the real Python (to restore a working start) and the file the starts go to.
    """
    platform, device = client.device.platform.name, client.device.name
    request = ProgramRequest(platform=platform, device=device, source=BOOT, options=(), launches=())
    python = sys.executable
    executable, starts = _counted(tmp_path, "exit 3")
    monkeypatch.setattr(sys, "executable", executable)
    return request, python, starts


def _starts(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_pool_whose_workers_cannot_start_stops_starting_them_for_a_while(
    client: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: every request started two new workers however many had failed before (2 x 120 s when they hung)."""
    request, python, starts = _failing_starts(client, tmp_path, monkeypatch)
    platform, device = request.platform, request.device
    pool = CompilePool(2, platform, device, pause_s=1.0)
    try:
        for _ in range(5):  # five batches' worth of requests
            with pytest.raises(WorkerDied) as died:
                pool.run(request, 60.0)
            assert not died.value.started
        assert _starts(starts) == 2
        assert "exited with status 3" in str(died.value), died.value
        assert "after 2 failed starts in a row, no compile worker is started for 1 s" in str(died.value)
        time.sleep(1.2)  # past the pause: one worker is tried, and the next pause is twice as long
        with pytest.raises(WorkerDied, match="no compile worker is started for 2 s"):
            pool.run(request, 60.0)
        assert _starts(starts) == 3
        monkeypatch.setattr(sys, "executable", python)  # the machine is fixed: after this pause, workers start again
        time.sleep(2.2)
        assert pool.run(request, 60.0).build_error is None
    finally:
        pool.close()


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_worker_start_that_hangs_is_waited_for_once(
    client: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a request waited the ready timeout for a hung worker, then for a second one, batch after batch."""
    platform, device = client.device.platform.name, client.device.name
    request = ProgramRequest(platform=platform, device=device, source=BOOT, options=(), launches=())
    executable, starts = _counted(tmp_path, "exec sleep 600")
    monkeypatch.setattr(sys, "executable", executable)
    pool = CompilePool(1, platform, device, ready_timeout_s=1.0)
    try:
        with pytest.raises(WorkerDied, match="not ready within 1 s; no compile worker is started for 120 s"):
            pool.run(request, 60.0)
        with pytest.raises(WorkerDied, match="no compile worker is started"):
            pool.run(request, 60.0)
        assert _starts(starts) == 1
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_compile_workers_that_keep_failing_to_start_are_tried_twice_not_per_batch(
    pooled: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: each batch of each tune started 2 x compile_workers workers that could not start."""
    executable, starts = _counted(tmp_path, "exit 3")
    monkeypatch.setattr(sys, "executable", executable)
    with caplog.at_level("INFO"):
        records = _tune_work(pooled, "keeps-failing")  # two tunes; asserts every variant measured
    assert _starts(starts) == 2  # before: 4 per tune
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "no compile worker is started for 120 s" in warnings[0] and "compiling in this process" in warnings[0]
    notes = _compiled_in_process(records)
    assert len(notes) == 2 and all(n and n.startswith("no compile worker could start: ") for n in notes), notes


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_closing_the_client_during_a_tune_stops_it_without_blaming_the_variant_being_built(
    pooled: OpenCLClient, isolated_settings: Path
) -> None:
    """Regression: close() from another thread killed a busy compile worker, and the tune failed the variant it was
    building ("crashed a compile worker") and stored a winner without it."""
    tk.configure(candidate_timeout_s=600.0)
    template = KernelTemplate(SPIN, "spin", {"MODE": [0, 1], "BLOCK": [8]}, geometry=lambda c, key: ((key.n,), (8,)))
    tunables = template.tunable_set(
        pooled,
        key=lambda y, n: SizeKey(n=int(n)),
        inputs=lambda key, y, n: (cla.zeros(pooled.queue, key.n, np.float32), np.int32(key.n)),
    )
    y = cla.zeros(pooled.queue, 64, np.float32)
    errors: list[BaseException] = []

    def tune() -> None:
        try:
            tk.LocalTuner[SizeKey, Any]("closed-mid-tune").execute(
                pooled.device_id, pooled, tunables, (y, np.int32(64))
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=tune)
    thread.start()
    pool = pooled.compile_pool
    assert pool is not None
    deadline = time.monotonic() + 120
    while not any(w.busy for w in list(pool._alive)) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # MODE=1's first launch never ends: its worker is still busy with it
    pooled.close()  # as a user would, from another thread
    thread.join(timeout=120)
    assert not thread.is_alive()
    [error] = errors
    assert isinstance(error, tk.ClientClosed), error
    assert "OpenCLClient.close()" in str(error) and pooled.device.name in str(error), error
    assert "spin[" not in str(error)
    cache = tk.PersistentCache(isolated_settings)
    assert list(cache.rows()) == []  # no winner that left MODE=1 out ...
    assert cache.get_failure(pooled.device_id, "closed-mid-tune", key_to_json(SizeKey(n=64))) is None  # nor a failure


@pytest.mark.opencl
@pytest.mark.subprocess
def test_failed_starts_pause_every_pool_of_the_process_that_starts_workers_the_same_way(
    client: OpenCLClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the pause after failed starts was per client: each new client paid two failed starts again."""
    request, python, starts = _failing_starts(client, tmp_path, monkeypatch)
    clients: list[OpenCLClient] = []
    try:
        # Each client is opened once the pools before it have seen their starts fail: a client opened while the
        # first client's workers are still starting (as it opens, in the background) knows of no failure yet and
        # starts its own, so opening both first made the count depend on how fast `exit 3` ran (4 under load).
        for _ in range(2):
            clients.append(OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2))
            pool = clients[-1].compile_pool
            assert pool is not None
            for _ in range(3):
                with pytest.raises(WorkerDied, match="no compile worker is started for 120 s"):
                    pool.run(request, 60.0)
        pools = [c.compile_pool for c in clients]
        assert pools[1] is not None and pools[0] is not pools[1]
        assert _starts(starts) == 2  # the second client's pool started none (before: 2 more)
        monkeypatch.setenv("TUNEKIT_TEST_FIXED", "1")  # another environment is another way to start: tried at once
        with pytest.raises(WorkerDied, match="exited with status 3"):
            pools[1].run(request, 60.0)
        assert _starts(starts) == 4  # two, in a row: the first is replaced once for the request
        monkeypatch.setattr(sys, "executable", python)  # a working Python starts at once
        assert pools[1].run(request, 60.0).build_error is None
    finally:
        for each in clients:
            each.close()


@pytest.mark.subprocess
def test_inputs_files_left_by_killed_tunes_are_removed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a tune killed while compiling (SIGKILL) left its copy of the inputs in the temporary directory
    for good, one file as large as the batch's buffers per kill (and /tmp is often memory)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True
    )
    dead = int(ended.stdout)
    orphan = tmp_path / f"tunekit-inputs-{dead}-abc.bin"
    orphan.write_bytes(b"\0" * 1024)
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))
    # A dead pid's fresh file may be a live tune's in another PID namespace sharing /tmp: kept.
    recent = tmp_path / f"tunekit-inputs-{dead}-ghi.bin"
    recent.write_bytes(b"\0")
    live = tmp_path / f"tunekit-inputs-{os.getpid()}-def.bin"  # another tune of a live process: kept
    live.write_bytes(b"\0")
    unrelated = tmp_path / "tunekit-inputs-notapid.bin"
    unrelated.write_bytes(b"\0")
    files = InputsFile([np.float32(1)])
    try:
        written = Path(files.path)
        assert written.parent == tmp_path and written.name.startswith(f"tunekit-inputs-{os.getpid()}-")
        assert not orphan.exists() and live.exists() and unrelated.exists() and recent.exists()
    finally:
        files.close()
    assert not Path(files.path).exists()


UNGUARDED = """
__kernel void wide(__global float* y, const int n) {
    y[get_global_id(0)] = (float)BLOCK;   /* no bounds guard: the rounded-up work-group writes past n */
}
"""


@pytest.mark.opencl
def test_an_overrun_of_a_whole_work_group_lands_in_the_canary_and_is_remembered_at_its_shape() -> None:
    """Regression: with compile_in="thread" 64 canary bytes followed an output, so a kernel without a bounds guard
    wrote most of its extra work-group (384 bytes here) into the tuning process's memory, and the overrun, once
    caught, was launched again at every later prepare of the same launch shape."""
    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(
        UNGUARDED, "wide", {"BLOCK": [256]}, geometry=lambda c, key: ((-(-key.n // c.BLOCK) * c.BLOCK,), (c.BLOCK,))
    )
    n = 4000  # 16 work-groups of 256 items: 4096 items, 96 floats (384 bytes) past the end
    args = (cla.zeros(client.queue, n, np.float32), np.int32(n))
    scratch = client.check_buffers(args, [0])
    assert scratch.args[0].base_data.size >= n * 4 + 384  # the buffer the first launch, and the check, run on
    tunable = template.tunables(client, lambda y, n: SizeKey(n=int(n)))[0]
    assert tunable.prepare is not None
    says = re.escape("wide[BLOCK=256]: wrote past the end of argument 0 (a buffer of 16000 bytes) at its first launch")
    with pytest.raises(CompileError, match=says):
        tunable.prepare(*args)
    variant: Any = tunable.fn
    assert not variant.needs_first_launch(args)  # remembered: not first-launched here again
    with pytest.raises(CompileError, match=says):
        tunable.prepare(*args)
    client.close()


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_workers_first_launch_leaves_the_work_group_function_this_process_then_uses(pooled: OpenCLClient) -> None:
    """PoCL generates a kernel's code at its first launch, per local size: the worker's launch must be that one.

    Structural, not timed: after the worker's first launch the cache holds the work-group
    function for the variant's local size, and this process's own build and launch of the same
    variant add none and rewrite none (PoCL writes a new file, so a regenerated one has a new inode).
    """
    if pooled.compile_pool is None or kernel_cache_problem(pooled.device.platform.name) is not None:
        pytest.skip("needs PoCL with a writable kernel cache")
    name = f"wg_{uuid.uuid4().hex[:12]}"  # a kernel no earlier run left in the (shared) kernel cache
    source = (
        f"__kernel void {name}(__global float* y, const int n) "
        "{ int i = get_global_id(0); if (i < n) y[i] = 2.0f * i; }"
    )
    y = cla.zeros(pooled.queue, 64, np.float32)
    files = InputsFile((y, np.int32(64)))
    try:
        request = ProgramRequest(
            platform=pooled.device.platform.name,
            device=pooled.device.name,
            source=source,
            options=(),
            data_file=files.path,
            launches=(launch_of(name, (64,), (16,), files),),
        )
        reply = pooled.compile_pool.run(request, 60.0)
    finally:
        files.close()
    assert reply.build_error is None and reply.launch_errors == (None,), reply
    cache = pocl_cache_dir()
    made = sorted(cache.glob(f"*/*/{name}/*/*.so"))
    assert [p.parent.name.split("-")[:3] for p in made] == [["16", "1", "1"]], made
    before = made[0].stat()

    program = cl.Program(pooled.context, source).build()
    getattr(program, name)(pooled.queue, (64,), (16,), y.data, np.int32(64)).wait()
    np.testing.assert_array_equal(y.get(), 2.0 * np.arange(64, dtype=np.float32))
    assert sorted(cache.glob(f"*/*/{name}/*/*.so")) == made
    after = made[0].stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_workers_start_as_the_client_opens_and_serve_the_first_compile(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched_at_probe: list[int] = []
    ready_at_probe: list[int] = []
    probe = _selection.probe

    def watched(cl_: Any, context: Any) -> str | None:
        pool = pools[-1] if pools else None
        launched_at_probe.append(-1 if pool is None else pool._starting + len(pool._alive))
        ready_at_probe.append(-1 if pool is None else len(pool._alive))
        return probe(cl_, context)

    pools: list[CompilePool] = []
    new_pool = CompilePool.__init__

    def recorded(self: CompilePool, *args: Any, **kwargs: Any) -> None:
        new_pool(self, *args, **kwargs)
        pools.append(self)

    monkeypatch.setattr(_selection, "probe", watched)
    monkeypatch.setattr(CompilePool, "__init__", recorded)
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        pool = client.compile_pool
        assert pool is not None and pools == [pool]
        # Both launched before this process probed its device, and one had built the probe's kernel into PoCL's
        # cache (its first build) before the probe here: this process need not load the compiler.
        assert launched_at_probe == [2] and ready_at_probe[0] >= 1
        deadline = time.monotonic() + 120
        while len(pool._idle) < 2 and time.monotonic() < deadline:  # ready, before any compile was asked for
            time.sleep(0.05)
        started = {id(w): w.process.pid for w in pool._alive}
        assert len(pool._idle) == 2 and len(started) == 2
        n = 64
        args = (cla.zeros(client.queue, n, np.float32), np.int32(n))
        record = _tune_in_process_mode(OVERRUN, "over", {"MODE": [0], "BLOCK": [8, 16]}, args, client, "eager")
        assert all(c.status == "measured" for c in record.candidates), [c.error for c in record.candidates]
        assert {id(w): w.process.pid for w in pool._alive} == started  # the first compile started none of its own
    finally:
        client.close()


@pytest.mark.opencl
def test_a_client_started_workers_first_compile_starts_none_as_it_opens() -> None:
    # Not marked subprocess: a process started here fails the test.
    client = OpenCLClient(flush_cache=False, compile_in="process", start_workers="first_compile")
    assert client.compile_pool is not None and not client.compile_pool._alive and not client.compile_pool._starting
    client.close()
    with pytest.raises(ValueError, match=r"start_workers=\.\.\.\) takes 'open' or 'first_compile', got 'now'"):
        OpenCLClient(start_workers="now")  # type: ignore[arg-type]


@pytest.mark.subprocess
def test_a_compile_worker_imports_neither_tunekit_nor_the_client() -> None:
    # Its start-up is paid by every cold tune; tunekit.backend and the client cost ~0.2 s of CPU there.
    code = "import sys, tunekit_backends.opencl._compile_worker; print(' '.join(sorted(sys.modules)))"
    modules = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    ours = {m for m in modules if m.split(".")[0] in ("tunekit", "tunekit_backends")}
    assert ours == {
        "tunekit_backends",
        "tunekit_backends.opencl",
        "tunekit_backends.opencl._cl",
        "tunekit_backends.opencl._compile_wire",
        "tunekit_backends.opencl._compile_worker",
        "tunekit_backends.opencl._overrun",
    }


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_checkout_in_the_current_directory_does_not_shadow_the_workers_tunekit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: `python -m` put the current directory first, so a bench comparing two trees from one of them
    # ran the other tree's tuning process with this tree's compile workers.
    decoy = tmp_path / "tunekit_backends"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy tunekit_backends in the current directory')\n")
    monkeypatch.chdir(tmp_path)
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=1, start_workers="first_compile")
    try:
        n = 64
        args = (cla.zeros(client.queue, n, np.float32), np.int32(n))
        record = _tune_in_process_mode(OVERRUN, "over", {"MODE": [0], "BLOCK": [8, 16]}, args, client, "decoy")
        assert all(c.status == "measured" for c in record.candidates), [c.error for c in record.candidates]
        assert _compiled_in_process([record]) == [None]  # in the worker, which started
    finally:
        client.close()


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_only_a_pools_first_worker_builds_the_warm_up_kernel(isolated_settings: Path) -> None:
    # Two workers starting together both built it cold, 0.15 s of CPU each while the CPUs are busiest.
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        pool = client.compile_pool
        assert pool is not None
        deadline = time.monotonic() + 120
        while len(pool._idle) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        told = [w for w in pool._idle if w.process.args[-1] == WARM_UP_KERNEL_FLAG]
        assert len(pool._idle) == 2 and len(told) == 1
    finally:
        client.close()


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_workers_started_at_open_leave_the_probe_and_the_warm_up_kernel_in_pocls_cache(tmp_path: Path) -> None:
    # A client that only opens (no probe of its own needed, no warm-up run): whatever of the client's own kernels is
    # in the fresh cache afterwards, its workers put there, so the client's probe and warm-up find them cached.
    code = textwrap.dedent(
        """
        import os, pathlib, time
        from tunekit_backends.opencl import OpenCLClient
        client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=1)
        cache = pathlib.Path(os.environ["POCL_CACHE_DIR"])
        deadline = time.monotonic() + 120  # the warm-up kernel's first launch follows the worker's ready line
        while not list(cache.rglob("tunekit_fma/*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        client.close()
        """
    )
    cache = tmp_path / "pocl"
    env = dict(os.environ, POCL_CACHE_DIR=str(cache))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    launched = [p.relative_to(cache) for p in cache.rglob("tunekit_fma/*")]
    assert len(launched) == 1 and launched[0].name.endswith("-goffs0-smallgrid"), launched


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_closing_a_client_whose_workers_are_still_starting_stops_them_and_counts_no_failed_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2, start_workers="first_compile")
    pool = client.compile_pool
    assert pool is not None
    slow = tmp_path / "slow-python"  # a worker that takes a minute to start: still starting at close()
    slow.write_text(f'#!/bin/sh\nsleep 60\nexec {shlex.quote(sys.executable)} "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(slow))
    pool.start_all()  # what the client does as it opens, with start_workers="open"
    with pool._ready:
        workers = set(pool._launched)
    assert len(workers) == 2
    how = command_for(*pool._where)
    client.close()
    assert all(w.process.poll() is not None for w in workers)  # killed, not left to finish a start nobody needs
    # The threads that awaited them see the kill at once: not when the wrapper's `sleep 60`, which holds
    # the workers' stdout, ends (the test waited for it, and failed when a loaded machine lost the race).
    deadline = time.monotonic() + 10
    while pool._starting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool._starting == 0
    assert FAILED_STARTS.state(how) == (0, None)  # and the kill is no failure of the way workers start


def _worker_environ(client: OpenCLClient) -> dict[str, str]:
    pool = client.compile_pool
    assert pool is not None
    assert pool.wait_for_one(60)
    with pool._ready:
        (worker, *_) = pool._alive
    raw = Path(f"/proc/{worker.process.pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads a process's environment from /proc")
def test_compile_workers_start_numpy_without_blas_threads_unless_the_user_chose_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=1)
    try:
        assert _worker_environ(client)["OPENBLAS_NUM_THREADS"] == "1"
    finally:
        client.close()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=1)
    try:
        assert _worker_environ(client)["OPENBLAS_NUM_THREADS"] == "3"
    finally:
        client.close()
