"""The fixed costs of a cold OpenCL tune that do not depend on the kernel, counted in CPU time, not wall time.

Run: ``nice -n 5 .venv/bin/python benches/cold_start.py [--runs 5]`` (``--imports-only`` leaves out the client table:
against an older tunekit, ``PYTHONPATH=DIR`` with ``git archive REV tunekit tunekit_backends | tar -x -C DIR``)

CPU time (user + system, from ``resource``) is what a busy machine cannot inflate the way it does
wall time, so these figures hold on a loaded VM. Two tables (a third with ``--tune``):

- a compile worker's imports: fresh interpreters running what ``python -m
  tunekit_backends.opencl._compile_worker`` imports before it opens its device: ``-X importtime``'s
  cumulative time for the module, the interpreter's CPU time, and how many tunekit modules came with it;
- the tuning process opening an ``OpenCLClient`` on a fresh, empty PoCL kernel cache, then its
  first device warm-up, with compile workers started as the client opens (the default) and at
  the first compile: CPU time of this process only (its workers' is their own), the probe of its
  device included, and the wall time ``OpenCLClient()`` takes to return.

With ``--tune KERNEL`` (repeatable; a kernel of ``benches/_suite.py``), a third table: whole cold
tunes of that kernel (``--quick`` sizes) by the suite bench's own tunekit child, each in a fresh
process with empty PoCL and tunekit caches: the CPU of the tune with all its compile workers, and
tunekit's phases from the record (wall seconds: trust them on a quiet machine only).

With ``--ready KERNEL`` (repeatable), wall seconds from ``OpenCLClient()`` through the suite bench's own
set-up for that kernel (full size: inputs, reference, tunable set, tuner) to ready to compile: the device
chosen, the inputs on it, one compile worker idle (and both). What the client's start costs a cold tune
before its first compile, in fresh processes with an empty PoCL cache.

Medians over ``--runs`` fresh processes each. The children run with ``python -P``: with
``PYTHONPATH=DIR`` they import DIR's tunekit, not the checkout in the current directory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap

from rich.console import Console
from rich.table import Table

_WORKER = textwrap.dedent(
    """
    import resource, sys
    import tunekit_backends.opencl._compile_worker
    r = resource.getrusage(resource.RUSAGE_SELF)
    ours = [m for m in sys.modules if m == "tunekit" or m.startswith("tunekit.")]
    print("CPU", r.ru_utime + r.ru_stime, len(ours), file=sys.stderr)
    """
)

_CLIENT = textwrap.dedent(
    """
    import json, resource, sys, time
    from tunekit_backends.opencl import OpenCLClient
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    start, started = cpu(), time.perf_counter()
    client = OpenCLClient(flush_cache=False, start_workers=sys.argv[1])
    returned = time.perf_counter() - started
    client.compile_pool  # the device's probe may run after the client returns: its CPU counts as opening
    opened = cpu()
    if client.compile_pool is not None:
        client.compile_pool.wait_for_one(60.0)
    time.sleep(3)  # the workers' first launches after their ready line, as a tune's compile phase would allow
    warm = cpu()
    client.warm_up(1_000_000)
    print(json.dumps({"open": opened - start, "returned": returned, "warm_up": cpu() - warm}))
    client.close()
    """
)


_READY = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, os.path.dirname(sys.argv[2]))
    import numpy as np
    import pyopencl.array as cla
    import tunekit as tk
    from tunekit_backends.opencl import OpenCLClient
    import _suite
    started = time.perf_counter()
    client = OpenCLClient()
    returned = time.perf_counter() - started
    kernel = _suite.KERNELS[sys.argv[1]]
    host, out, expected = kernel.inputs(kernel.size)
    key = _suite.SuiteKey(kernel=kernel.name, size=kernel.size)
    def inputs(key, *caller):
        return tuple(cla.to_device(client.queue, a) if isinstance(a, np.ndarray) else a for a in host)
    tunables = kernel.template(kernel.size, False).tunable_set(
        client, key=lambda *a: key, inputs=inputs, reference=lambda *a: expected, outputs=[out], atol=kernel.atol
    )
    tuner = tk.LocalTuner(f"bench_suite_{kernel.name}")
    set_up = time.perf_counter() - started
    client.device_id, inputs(key)
    pool = client.compile_pool
    while pool is not None and not pool._idle:
        time.sleep(0.002)
    one = time.perf_counter() - started
    while pool is not None and len(pool._idle) < pool.workers:
        time.sleep(0.002)
    every = time.perf_counter() - started
    client.close()
    print(json.dumps({"returned": returned, "set_up": set_up, "one": one, "every": every}))
    """
)


def ready(kernel: str) -> dict[str, float]:
    """One fresh process on an empty PoCL cache: wall s from OpenCLClient() to ready to compile ``kernel``."""
    suite = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_suite.py")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, POCL_CACHE_DIR=cache)
        done = subprocess.run(
            [sys.executable, "-P", "-c", _READY, kernel, suite], capture_output=True, text=True, env=env, check=True
        )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def worker_imports() -> tuple[float, float, int]:
    """One fresh interpreter: -X importtime's cumulative ms for the worker module, its CPU s, tunekit modules."""
    done = subprocess.run(
        [sys.executable, "-P", "-X", "importtime", "-c", _WORKER], capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    module = next(line for line in lines if line.rstrip().endswith("| tunekit_backends.opencl._compile_worker"))
    _, cpu, ours = next(line for line in lines if line.startswith("CPU ")).split()
    return int(module.split("|")[1]) / 1000, float(cpu), int(ours)


def client_open(mode: str) -> dict[str, float]:
    """One fresh process on an empty PoCL cache: CPU s to open the client, and for its first warm-up."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, POCL_CACHE_DIR=cache)
        done = subprocess.run(
            [sys.executable, "-P", "-c", _CLIENT, mode], capture_output=True, text=True, env=env, check=True
        )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_PHASES = ("compile", "check", "warmup", "measure", "runoff", "other")


def cold_tune(kernel: str) -> dict[str, float]:
    """One cold quick tune of a suite kernel in a fresh process: its CPU (workers included) and its phases."""
    suite = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vs_kernel_tuner_suite.py")
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(
            os.environ,
            POCL_CACHE_DIR=os.path.join(scratch, "pocl"),
            TUNEKIT_CACHE_DIR=os.path.join(scratch, "tunekit"),
            TUNEKIT_PROGRESS="0",
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        command = [sys.executable, suite, "--child", "tunekit", "--kernel", kernel, "--quick"]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"cpu": cpu, "wall": result["wall_s"], "client": result["client_s"], **result["phases"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tune", action="append", default=[], metavar="KERNEL", help="cold tunes of this kernel")
    parser.add_argument("--ready", action="append", default=[], metavar="KERNEL", help="start to ready to compile")
    parser.add_argument(
        "--imports-only",
        action="store_true",
        help="leave out the client table (for a tunekit from before start_workers)",
    )
    options = parser.parse_args()
    runs = options.runs
    console = Console(width=160)

    imports = [worker_imports() for _ in range(runs)]
    table = Table(title=f"A compile worker's imports, median of {runs} fresh interpreters")
    for column in ("-X importtime, ms", "interpreter CPU, s", "tunekit modules"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{statistics.median(i[0] for i in imports):.0f}",
        f"{statistics.median(i[1] for i in imports):.3f}",
        f"{statistics.median(i[2] for i in imports):.0f}",
    )
    console.print(table)
    if options.tune:
        table = Table(title=f"Cold quick tunes, median of {runs}: CPU (workers included) and phases, s")
        for column in ("kernel", "CPU", "wall", "client", *_PHASES):
            table.add_column(column, justify="right")
        for kernel in options.tune:
            tunes = [cold_tune(kernel) for _ in range(runs)]
            medians = [statistics.median(t[c] for t in tunes) for c in ("cpu", "wall", "client", *_PHASES)]
            table.add_row(kernel, *(f"{m:.2f}" for m in medians))
        console.print(table)
    if options.ready:
        table = Table(title=f"From OpenCLClient() to ready to compile, wall s, median of {runs}")
        for column in ("kernel", "OpenCLClient() returns", "set-up done", "one worker idle", "every worker idle"):
            table.add_column(column, justify="right")
        for kernel in options.ready:
            figures = [ready(kernel) for _ in range(runs)]
            medians = [statistics.median(f[c] for f in figures) for c in ("returned", "set_up", "one", "every")]
            table.add_row(kernel, *(f"{m:.2f}" for m in medians))
        console.print(table)
    if options.imports_only:
        return 0

    table = Table(title=f"The tuning process's CPU on a cold PoCL cache, s, median of {runs}")
    for column in ("start_workers", "open the client", "OpenCLClient() returns, wall s", "first warm-up"):
        table.add_column(column, justify="right")
    for mode in ("first_compile", "open"):
        figures = [client_open(mode) for _ in range(runs)]
        table.add_row(
            mode,
            f"{statistics.median(f['open'] for f in figures):.3f}",
            f"{statistics.median(f['returned'] for f in figures):.3f}",
            f"{statistics.median(f['warm_up'] for f in figures):.3f}",
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
