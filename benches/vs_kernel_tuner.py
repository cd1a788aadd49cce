"""tunekit against Kernel Tuner 1.5: the same SGEMM source and space, on the same OpenCL device.

Run: ``.venv/bin/pip install -e '.[bench]' && .venv/bin/python benches/vs_kernel_tuner.py``
(options: ``--size 512 --rounds 1``).

Each tool tunes in its own fresh process with a fresh, empty ``POCL_CACHE_DIR`` (cold: every
variant really compiles) and an empty tunekit cache; the wall time covers the whole tune,
compiles included. Both tools check every variant against the same float64 reference.
Then each tool's winner is re-timed here by one common timer: event profiling on one
profiling queue, flushed caches, interleaved rounds, median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sgemm_space as space


def tune_tunekit(size: int, compile_in: str) -> dict[str, Any]:
    """Tune the SGEMM space with tunekit in this process; the figures as a JSON-able dict."""
    import pyopencl.array as cla

    import tunekit as tk
    from tunekit_backends.opencl import OpenCLClient

    if os.environ.get("BENCH_ONE_PROGRAM_PER_VARIANT") == "1":  # benches/compile.py's baseline
        import tunekit_backends.opencl._together as together

        together.batchable = lambda source: False

    started = time.perf_counter()
    workers = os.environ.get("BENCH_COMPILE_WORKERS")  # benches/compile.py's scaling rows
    client = OpenCLClient(compile_in=compile_in, compile_workers=int(workers) if workers else None)  # type: ignore[arg-type]
    chosen = client.compile_in
    a, b, expected = space.host_inputs(size)

    def inputs(key: space.GemmKey, *caller: Any) -> tuple[Any, ...]:
        c = cla.empty(client.queue, (size, size), np.float32)
        a_d, b_d = cla.to_device(client.queue, a), cla.to_device(client.queue, b)
        return np.int32(size), np.int32(size), np.int32(size), a_d, b_d, c

    tunables = space.template().tunable_set(
        client,
        key=lambda m, n, k, *rest: space.GemmKey(m=int(m), n=int(n), k=int(k)),
        inputs=inputs,
        reference=lambda *args: expected,
        outputs=[5],
        atol=1e-2,
    )
    records: list[tk.AutotuneRecord] = []
    tk.add_record_sink(records.append)
    tuner: tk.LocalTuner[space.GemmKey, Any] = tk.LocalTuner("bench_sgemm")
    args = inputs(space.GemmKey(m=size, n=size, k=size))
    tuner.execute(client.device_id, client, tunables, args).wait()
    wall = time.perf_counter() - started
    client.close()
    (record,) = records
    winner = next(c for c in record.candidates if c.name == record.winner)
    config = dict(item.split("=") for item in record.winner.partition("[")[2].rstrip("]").split(","))  # type: ignore[union-attr]
    return {
        "wall_s": wall,
        "measured": sum(c.status == "measured" for c in record.candidates),
        "rejected": sum(c.status == "failed" for c in record.candidates),
        "winner": {k: int(v) for k, v in config.items()},
        "own_ns": winner.stats.median_ns if winner.stats else None,
        "device": client.device_id,
        "samples": tk.settings().samples,
        "compile_in": chosen,
        "compile_s": sum(e.wall_time_s for e in record.events if e.kind == "prepare"),  # type: ignore[union-attr]
    }


def _platform_index() -> int:
    """The platform OpenCLClient picks by default, so that both tools use the same device."""
    import pyopencl as cl

    from tunekit_backends.opencl import OpenCLClient

    chosen = OpenCLClient().device.platform.name
    return next(i for i, p in enumerate(cl.get_platforms()) if p.name == chosen and p.get_devices())


def _tune_kernel_tuner(size: int) -> dict[str, Any]:
    import kernel_tuner

    started = time.perf_counter()
    a, b, expected = space.host_inputs(size)
    c = np.zeros_like(expected)
    args = [np.int32(size), np.int32(size), np.int32(size), a, b, c]
    results, env = kernel_tuner.tune_kernel(
        "sgemm",
        space.SOURCE,
        (size, size),
        args,
        space.PARAMS,
        grid_div_x=["block_size_x", "VEC"],
        grid_div_y=["block_size_x", "VEC"],
        restrictions=space.allowed,
        answer=[None, None, None, None, None, expected],
        atol=1e-2,
        lang="OpenCL",
        platform=_platform_index(),
        device=0,
        quiet=True,
    )
    wall = time.perf_counter() - started
    timed = [r for r in results if isinstance(r.get("time"), float)]
    best = min(timed, key=lambda r: r["time"])
    return {
        "wall_s": wall,
        "measured": len(timed),
        "rejected": len(results) - len(timed),
        "winner": {k: int(best[k]) for k in space.PARAMS},
        "own_ns": best["time"] * 1e6,
        "device": f"{env.get('device_name')}",
        "samples": 7,
    }


def run_tool(tool: str, size: int, **extra_env: str) -> dict[str, Any]:
    """Run one tool's tune in a fresh process with cold PoCL and tunekit caches."""
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(
            os.environ,
            **extra_env,
            POCL_CACHE_DIR=str(Path(scratch) / "pocl"),
            TUNEKIT_CACHE_DIR=str(Path(scratch) / "tunekit"),
            TUNEKIT_PROGRESS="0",
        )
        done = subprocess.run(
            [sys.executable, __file__, "--child", tool, "--size", str(size)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{tool} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _retime(winners: dict[str, dict[str, int]], size: int, rounds: int) -> dict[str, float]:
    """Median event time of each winner, interleaved, caches flushed: one timer for all tools."""
    import pyopencl.array as cla

    from tunekit_backends.opencl import OpenCLClient

    client = OpenCLClient()
    template = space.template()
    a, b, expected = space.host_inputs(size)
    key = space.GemmKey(m=size, n=size, k=size)
    args = (
        np.int32(size),
        np.int32(size),
        np.int32(size),
        cla.to_device(client.queue, a),
        cla.to_device(client.queue, b),
        cla.empty(client.queue, (size, size), np.float32),
    )
    fns = {}
    by_name = {t.name: t for t in template.tunables(client, lambda *x: key)}
    for tool, config in winners.items():
        fns[tool] = by_name[template.name_of(template.space.config(config))].fn
        fns[tool](*args).wait()
        np.testing.assert_allclose(args[5].get(), expected, atol=1e-2)
    samples: dict[str, list[int]] = {tool: [] for tool in winners}
    for _ in range(rounds):
        for tool, fn in fns.items():
            client.flush_cache()
            samples[tool].append(client.profile(lambda fn=fn: fn(*args))[1])
    return {tool: float(statistics.median(s)) for tool, s in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=1, help="tunes per tool (alternating order)")
    parser.add_argument("--child", choices=["tunekit", "tunekit-thread", "kernel_tuner"])
    options = parser.parse_args()
    if options.child == "kernel_tuner":
        print(json.dumps(_tune_kernel_tuner(options.size)))
        return 0
    if options.child is not None:
        compile_in = "thread" if options.child == "tunekit-thread" else "auto"
        print(json.dumps(tune_tunekit(options.size, compile_in)))
        return 0

    from rich.console import Console
    from rich.table import Table

    tools = ["kernel_tuner", "tunekit", "tunekit-thread"]
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for round_ in range(options.rounds):
        for tool in tools if round_ % 2 == 0 else reversed(tools):
            runs[tool].append(run_tool(tool, options.size))
            print(f"{tool}: {runs[tool][-1]['wall_s']:.1f} s", file=sys.stderr)
    winners = {tool: r[-1]["winner"] for tool, r in runs.items()}
    common = _retime(winners, options.size, rounds=30)
    kt_wall = statistics.median(r["wall_s"] for r in runs["kernel_tuner"])
    console = Console(width=140)
    table = Table(title=f"SGEMM {options.size}^3, {len(space.configs())} configurations, cold PoCL cache per tool")
    for column in (
        "tool",
        "compile in",
        "tune wall s",
        "vs KT",
        "measured",
        "rejected",
        "winner",
        "winner (common timer)",
    ):
        table.add_column(column)
    for tool in tools:
        wall = statistics.median(r["wall_s"] for r in runs[tool])
        last = runs[tool][-1]
        table.add_row(
            tool,
            last.get("compile_in", "-"),
            f"{wall:.1f}",
            f"{wall / kt_wall:.2f}x",
            str(last["measured"]),
            str(last["rejected"]),
            ",".join(f"{k}={v}" for k, v in last["winner"].items()),
            f"{common[tool] / 1e6:.2f} ms ({space.gflops(options.size, common[tool]):.1f} GFLOP/s)",
        )
    console.print(table)
    console.print(f"device: {runs['tunekit'][-1]['device']}")
    console.print(
        f"samples per configuration: tunekit {runs['tunekit'][-1]['samples']} (+1 warm-up, caches flushed), "
        "kernel_tuner 7; winners re-timed: 30 interleaved rounds, flushed, median"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
