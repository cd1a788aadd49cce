"""tk.bench against timeit on the same calls, and on OpenCL against the host's time around launch and wait.

Rounds interleave the two timings of each workload, so load that comes and goes falls on both;
the table gives each one's median over the rounds' medians, their ratio, and tk.bench's 95%
interval of the median (as a share of the median) in the last round.

    .venv/bin/python benches/bench_vs_timeit.py [--rounds 5] [--samples 200] [--no-opencl]
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np

import tunekit as tk


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def _host_workloads() -> dict[str, tuple[Callable[..., object], tuple[Any, ...]]]:
    small, large = np.ones((64, 64), np.float32), np.ones((256, 256), np.float32)
    vector = np.ones(1 << 20, np.float32)
    return {
        "python loop, 3000 steps": (_spin, (3000,)),
        "np.add, 1 Mi float32": (np.add, (vector, vector)),
        "np.matmul 64x64": (np.matmul, (small, small)),
        "np.matmul 256x256": (np.matmul, (large, large)),
    }


def _row(name: str, bench_ns: list[float], other_ns: list[float], interval: float, other: str) -> str:
    b, o = statistics.median(bench_ns), statistics.median(other_ns)
    return f"| {name} | {b / 1e3:.1f} us | {o / 1e3:.1f} us ({other}) | {b / o:.2f} | +-{interval:.1%} |"


def _host(rounds: int, samples: int) -> None:
    for name, (fn, args) in _host_workloads().items():
        bench_ns: list[float] = []
        timeit_ns: list[float] = []
        last: tk.BenchResult | None = None
        for _ in range(rounds):
            last = tk.bench(fn, *args, samples=samples, warmup_ms=50)
            bench_ns.append(last.median_ns)
            runs = timeit.repeat(lambda fn=fn, args=args: fn(*args), number=1, repeat=samples)
            timeit_ns.append(statistics.median(runs) * 1e9)
        assert last is not None
        interval = (last.median_high_ns - last.median_low_ns) / 2 / last.median_ns
        print(_row(name, bench_ns, timeit_ns, interval, "timeit"))


def _opencl(rounds: int, samples: int) -> None:
    import pyopencl as cl  # the opencl extra, only when asked for
    import pyopencl.array as cla

    from tunekit_backends.opencl import OpenCLClient

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    source = """
    __kernel void busy(__global float* out, const int iterations) {
        float x = (float)get_global_id(0);
        for (int i = 0; i < iterations; ++i) x = x * 0.999f + 1.0f;
        out[get_global_id(0)] = x;
    }
    """
    busy = cl.Program(client.context, source).build().busy
    out = cla.empty(client.queue, 64, np.float32)
    for iterations in (1, 4000, 16000):

        def launch(out: Any, n: int) -> Any:
            return busy(client.queue, (64,), (64,), out.data, np.int32(n))

        bench_ns: list[float] = []
        host_ns: list[float] = []
        last: tk.BenchResult | None = None
        for _ in range(rounds):
            last = tk.bench(launch, out, iterations, client=client, samples=samples, warmup_ms=50)
            bench_ns.append(last.median_ns)
            around: list[int] = []
            for _ in range(samples):
                started = time.perf_counter_ns()
                launch(out, iterations).wait()
                around.append(time.perf_counter_ns() - started)
            host_ns.append(statistics.median(around))
        assert last is not None
        interval = (last.median_high_ns - last.median_low_ns) / 2 / last.median_ns
        print(_row(f"PoCL kernel, {iterations} steps x 64 items", bench_ns, host_ns, interval, "host, launch + wait"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--no-opencl", action="store_true")
    options = parser.parse_args()
    print("| workload | tk.bench median | other timing, median | ratio | tk.bench 95% CI |")
    print("|---|---|---|---|---|")
    _host(options.rounds, options.samples)
    if not options.no_opencl:
        _opencl(options.rounds, options.samples)


if __name__ == "__main__":
    main()
