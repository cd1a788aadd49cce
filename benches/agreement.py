"""Do repeated tunes of the same OpenCL set agree on a winner? On PoCL (the CPU OpenCL device).

Each kernel below (a 2D 5-point stencil, a tiled transpose, a tree reduction; 20-35 variants
each) is tuned ``--runs`` times (5), each in a fresh process with an empty tunekit cache, through
the public tuner. Then every distinct winner is re-timed together in one more fresh process by
one common timer: ``--rounds`` interleaved rounds (the order rotating each round), the device's
profiling clock, the cache flushed before each sample as the tuner does; the median of each.
The winners agree when the slowest of them is within 1% of the fastest under that timer.

The machine is shared: the load average is printed beside the figures, and everything runs
under ``nice`` (``--nice``, 10 by default).

    .venv/bin/python benches/agreement.py [--quick] [--runs 5] [--rounds 60] [--kernels stencil,transpose,reduce]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np

import tunekit as tk

AGREEMENT = 0.01
"""Winners within this fraction of the fastest of them (under the common timer) agree."""

STENCIL = """
__kernel void stencil(__global const float* restrict x, __global float* restrict y, const int w, const int h) {
    const int gx = get_global_id(0) * PX;
    const int gy = get_global_id(1);
    if (gy < 1 || gy >= h - 1) return;
    for (int p = 0; p < PX; ++p) {
        const int i = gx + p;
        if (i < 1 || i >= w - 1) continue;
        const int c = gy * w + i;
        y[c] = 0.5f * x[c] + 0.125f * (x[c - 1] + x[c + 1] + x[c - w] + x[c + w]);
    }
}
"""

TRANSPOSE = """
__kernel void transpose(__global const float* restrict x, __global float* restrict y, const int n) {
    __local float tile[TILE][TILE + PAD];
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int bx = get_group_id(0) * TILE;
    const int by = get_group_id(1) * TILE;
    for (int r = ty; r < TILE; r += ROWS) {
        const int gx = bx + tx, gy = by + r;
        if (gx < n && gy < n) tile[r][tx] = x[gy * n + gx];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = ty; r < TILE; r += ROWS) {
        const int gx = by + tx, gy = bx + r;
        if (gx < n && gy < n) y[gy * n + gx] = tile[tx][r];
    }
}
"""

REDUCE = """
__kernel void reduce(__global const float* restrict x, __global float* restrict partial, const int n) {
    __local float scratch[WG];
    const int t = get_local_id(0);
    const int base = get_group_id(0) * WG * PER;
    float acc = 0.0f;
    for (int k = 0; k < PER; ++k) {
        const int i = base + k * WG + t;
        if (i < n) acc += x[i];
    }
    scratch[t] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (t < s) scratch[t] += scratch[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) partial[get_group_id(0)] = scratch[0];
}
"""


@tk.autotune_key
class Key:
    n: Annotated[int, tk.Anchor()]


@dataclass(frozen=True)
class Kernel:
    """One tuned operation: its template's pieces and the problem size."""

    name: str
    source: str
    space: dict[str, list[int]]
    size: int
    quick_size: int


KERNELS = {
    "stencil": Kernel("stencil", STENCIL, {"TX": [8, 16, 32, 64], "TY": [1, 2, 4, 8], "PX": [1, 2]}, 2048, 768),
    "transpose": Kernel("transpose", TRANSPOSE, {"TILE": [8, 16, 32], "ROWS": [1, 2, 4, 8], "PAD": [0, 1]}, 2048, 768),
    "reduce": Kernel("reduce", REDUCE, {"WG": [32, 64, 128, 256], "PER": [1, 2, 4, 8, 16]}, 1 << 22, 1 << 20),
}


def _restrict(kernel: str) -> Any:
    if kernel == "stencil":
        return lambda c: c.TX * c.TY <= 256
    return None


def _geometry(kernel: str) -> Any:
    def stencil(config: Any, key: Any) -> tuple[tuple[int, int], tuple[int, int]]:
        tx, ty, px = int(config.TX), int(config.TY), int(config.PX)
        cols = math.ceil(key.n / px)
        return (math.ceil(cols / tx) * tx, math.ceil(key.n / ty) * ty), (tx, ty)

    def transpose(config: Any, key: Any) -> tuple[tuple[int, int], tuple[int, int]]:
        tile, rows = int(config.TILE), int(config.ROWS)
        tiles = math.ceil(key.n / tile)
        return (tiles * tile, tiles * rows), (tile, rows)

    def reduce(config: Any, key: Any) -> tuple[tuple[int], tuple[int]]:
        wg, per = int(config.WG), int(config.PER)
        return (math.ceil(key.n / (wg * per)) * wg,), (wg,)

    return {"stencil": stencil, "transpose": transpose, "reduce": reduce}[kernel]


def _inputs(kernel: str, n: int, queue: Any) -> tuple[Any, ...]:
    import pyopencl.array as cla

    rng = np.random.default_rng(0)
    if kernel == "reduce":
        x = rng.standard_normal(n, dtype=np.float32)
        return cla.to_device(queue, x), cla.zeros(queue, math.ceil(n / 32), np.float32), np.int32(n)
    x = rng.standard_normal((n, n), dtype=np.float32)
    extra = (np.int32(n), np.int32(n)) if kernel == "stencil" else (np.int32(n),)
    return (cla.to_device(queue, x), cla.zeros(queue, (n, n), np.float32), *extra)


def _template(kernel: Kernel) -> Any:
    from tunekit_backends.opencl import KernelTemplate

    return KernelTemplate(
        kernel.source,
        kernel.name,
        kernel.space,
        restrict=_restrict(kernel.name),
        geometry=_geometry(kernel.name),
    )


def tune_once(kernel: Kernel, n: int) -> dict[str, Any]:
    """Child process: tune ``kernel`` once (cold cache: the parent gives each run its own) and say what won."""
    from tunekit_backends.opencl import OpenCLClient

    client = OpenCLClient()
    template = _template(kernel)
    tuner: tk.LocalTuner[Any, Any] = tk.LocalTuner(f"agreement_{kernel.name}")
    inputs = _inputs(kernel.name, n, client.queue)
    tunables = tuner.init(lambda: template.tunable_set(client, key=lambda *args: Key(n=int(args[-1]))))
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    started = time.perf_counter()
    try:
        tuner.execute(client.device_id, client, tunables, inputs).wait()
    finally:
        tk.remove_record_sink(sink)
    record = next(r for r in records if r.decision == "tuned")
    decision = tk.decision_of(record)
    return {
        "winner": record.winner,
        "variants": len(record.candidates),
        "seconds": time.perf_counter() - started,
        "decision": decision.text(),
    }


def retime(kernel: Kernel, n: int, names: list[str], rounds: int) -> dict[str, float]:
    """Child process: every name timed in ``rounds`` interleaved rounds by one timer; the median of each."""
    import pyopencl as cl

    from tunekit_backends.opencl import OpenCLClient

    client = OpenCLClient()
    template = _template(kernel)
    inputs = _inputs(kernel.name, n, client.queue)
    key = type("Key", (), {"n": n})()
    configs = {template.name_of(c): c for c in template.configs}
    launches = []
    for name in names:
        config = configs[name]
        program = cl.Program(client.context, kernel.source).build(options=template.build_options(config))
        fn = getattr(program, kernel.name)
        global_size, local_size = template.geometry(config, key)
        args = [a.data if hasattr(a, "data") and not isinstance(a, np.generic) else a for a in inputs]
        launches.append(lambda fn=fn, g=global_size, w=local_size, a=args: fn(client.queue, g, w, *a))
    for launch in launches:  # warm-up: first launches compile and page in
        for _ in range(3):
            launch().wait()
    samples: list[list[int]] = [[] for _ in names]
    for number in range(rounds):
        shift = number % len(names)
        for index in [*range(shift, len(names)), *range(shift)]:
            client.flush_cache()
            samples[index].append(client.profile(launches[index])[1])
    return {name: float(statistics.median(s)) for name, s in zip(names, samples, strict=True)}


def _child(args: list[str], cache_dir: str) -> dict[str, Any]:
    env = dict(os.environ, TUNEKIT_CACHE_DIR=cache_dir, TUNEKIT_RECORD="", TUNEKIT_PROGRESS="0")
    done = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"child {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller problems and 30 rounds (the runs stay 5)")
    parser.add_argument("--runs", type=int, default=None, help="tunes per kernel, each in a fresh process (5)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds of the common timer (60)")
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated: " + ", ".join(KERNELS))
    parser.add_argument("--nice", type=int, default=10, help="niceness of this process and its children")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # ["tune", kernel, n] or ["retime", kernel, n, rounds, name...]
        kernel, n = KERNELS[args.child[1]], int(args.child[2])
        if args.child[0] == "tune":
            print(json.dumps(tune_once(kernel, n)))
        else:
            print(json.dumps(retime(kernel, n, args.child[4:], int(args.child[3]))))
        return 0
    os.nice(args.nice)
    runs = args.runs or 5
    rounds = args.rounds or (30 if args.quick else 60)
    print(f"agreement bench: {runs} cold tunes per kernel, winners re-timed in {rounds} interleaved rounds")
    print(f"load average before: {_load()} ({os.cpu_count()} CPUs)")
    failed = 0
    for name in args.kernels.split(","):
        kernel = KERNELS[name]
        n = kernel.quick_size if args.quick else kernel.size
        winners = []
        for run in range(runs):
            with tempfile.TemporaryDirectory(prefix="tunekit-agreement-") as cache_dir:
                result = _child(["--child", "tune", name, str(n)], cache_dir)
            winners.append(result["winner"])
            print(
                f"  {name} n={n} run {run + 1}: {result['winner']} ({result['variants']} variants, "
                f"{result['seconds']:.1f} s); {result['decision']}  [load {_load()}]"
            )
        distinct = sorted(set(winners))
        with tempfile.TemporaryDirectory(prefix="tunekit-agreement-") as cache_dir:
            medians = _child(["--child", "retime", name, str(n), str(rounds), *distinct], cache_dir)
        fastest = min(medians.values())
        spread = max(medians.values()) / fastest - 1.0
        agree = spread <= AGREEMENT
        failed += not agree
        print(f"{name}: {len(distinct)} distinct winner(s) of {runs}; common timer (median of {rounds} rounds):")
        for winner in distinct:
            print(
                f"    {winner:<40} {medians[winner] / 1e3:10.1f} us  {medians[winner] / fastest - 1:+7.2%}  "
                f"won {winners.count(winner)}x"
            )
        print(f"  spread {spread:.2%}: {'AGREE' if agree else 'DISAGREE'} (within {AGREEMENT:.0%})  [load {_load()}]")
    print(f"load average after: {_load()}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
