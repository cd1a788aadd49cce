"""tunekit against Kernel Tuner 1.5 on a suite of five OpenCL kernels, each tuned cold, on the same device.

Run: ``.venv/bin/pip install -e '.[bench]' && nice -n 5 .venv/bin/python benches/vs_kernel_tuner_suite.py``
(options: ``--quick`` for smaller spaces and sizes, ``--kernel stencil`` (repeatable) for some
kernels only, ``--rounds 3`` for more tunes per tool, medians reported).

For each kernel of ``benches/_suite.py`` each tool tunes in its own fresh process with a fresh,
empty ``POCL_CACHE_DIR`` (cold: every variant really compiles) and an empty tunekit cache; the
order of the tools alternates from kernel to kernel and round to round. The wall time covers
the whole tune: creating the client, compiling, checking, timing. Both tools check every
variant against the same float64-derived reference. Then both winners are re-timed here by
one common timer: event profiling on one profiling queue, cold inputs (rotating copies, as cold
as a cache flush before each sample: ``tunekit_backends/opencl/_cold.py``), 100 interleaved
rounds (which goes first alternates). Each winner's time is its median; tunekit's over Kernel
Tuner's is the median of the rounds' paired ratios, with a 95% bootstrap interval: an interval
that holds 1.00 is a tie within the timer's noise.

A third table cuts both tools' walls the same way, so that none of it goes unaccounted: making the
inputs and the reference (the bench's work, the same for both), compiling, checking, timing, and the
rest; with tunekit's timed runs (kept, discarded first runs, runoff) and their device time, and
Kernel Tuner's own per-variant timers.

A kernel whose cold tune is dominated by compiling (tunekit's compile phase over half its wall
time) gets a compile floor measured in the same run: a fresh process builds and first-launches
every variant one at a time with a cold PoCL cache (PoCL generates machine code at a kernel's
first launch), and the floor is that total divided by tunekit's compile workers, plus the
checking, warm-up and timing tunekit did.
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
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _suite
import _suite_more

ALL_KERNELS = {**_suite.KERNELS, **_suite_more.KERNELS}

PHASES = ("compile", "check", "warmup", "measure", "runoff", "other")


def _size(kernel: _suite.SuiteKernel, quick: bool) -> int:
    return kernel.quick_size if quick else kernel.size


def tune_tunekit(kernel: _suite.SuiteKernel, quick: bool, platform: int) -> dict[str, Any]:
    """Tune one kernel of the suite with tunekit in this process; the figures as a JSON-able dict."""
    import pyopencl.array as cla

    import tunekit as tk
    from tunekit_backends.opencl import OpenCLClient

    started = time.perf_counter()
    client = OpenCLClient(platform=platform)  # the platform Kernel Tuner is given: the same knowledge for both
    client_s = time.perf_counter() - started
    size = _size(kernel, quick)
    host, out, expected = kernel.inputs(size)
    inputs_s = time.perf_counter() - started - client_s
    key = _suite.SuiteKey(kernel=kernel.name, size=size)

    def inputs(key: _suite.SuiteKey, *caller: Any) -> tuple[Any, ...]:
        return tuple(cla.to_device(client.queue, a) if isinstance(a, np.ndarray) else a for a in host)

    tunables = kernel.template(size, quick).tunable_set(
        client,
        key=lambda *args: key,
        inputs=inputs,
        reference=lambda *args: expected,
        outputs=[out],
        atol=kernel.atol,
    )
    records: list[tk.AutotuneRecord] = []
    tk.add_record_sink(records.append)
    tuner: tk.LocalTuner[_suite.SuiteKey, Any] = tk.LocalTuner(f"bench_suite_{kernel.name}")
    executing = time.perf_counter()
    tuner.execute(client.device_id, client, tunables, inputs(key)).wait()
    wall = time.perf_counter() - started
    execute_s = time.perf_counter() - executing
    workers = client.compile_pool.workers if client.compile_pool is not None else 1
    client.close()
    (record,) = records
    phases = getattr(record, "phases", None)  # None from a tunekit without phase times (--baseline)
    config = dict(item.split("=") for item in record.winner.partition("[")[2].rstrip("]").split(","))  # type: ignore[union-attr]
    winner = next(c for c in record.candidates if c.name == record.winner)
    return {
        "wall_s": wall,
        "client_s": client_s,
        # The rest of the wall: the inputs and the reference (the bench's, paid by both tools), and what
        # execute() spends outside the record's wall (loading the miss path, the cache, storing the winner).
        "inputs_s": inputs_s,
        "outside_s": execute_s - record.wall_time_s,
        "samples": _samples(record),
        "phases": {p: getattr(phases, f"{p}_s") if phases is not None else math.nan for p in PHASES},
        "measured": sum(c.status == "measured" for c in record.candidates),
        "rejected": sum(c.status == "failed" for c in record.candidates),
        "winner": {k: int(v) for k, v in config.items()},
        "own_ns": winner.stats.median_ns if winner.stats else None,
        "device": client.device_id,
        "workers": workers,
        "flushes": getattr(client, "_flush_count", None),
    }


def _samples(record: Any) -> dict[str, float]:
    """How many timed runs the tune took and their device time: kept, discarded (each first) and the runoff's."""
    kept = [ns for c in record.candidates if c.stats is not None for ns in c.samples_ns]
    discarded = [ns for c in record.candidates for ns in getattr(c, "discarded_ns", [])]
    runoff = [ns for e in record.events if type(e).__name__ == "Runoff" for r in e.rounds_ns for ns in r.values()]
    return {
        "kept": len(kept),
        "discarded": len(discarded),
        "runoff": len(runoff),
        "device_s": (sum(kept) + sum(discarded) + sum(runoff)) / 1e9,
    }


def _platform_index() -> int:
    """The platform OpenCLClient picks by default, so that both tools use the same device.

    By its locator, not its name: two PoCL installations (pip's and the distribution's) share one name.
    """
    from tunekit_backends.opencl import OpenCLClient

    locator = OpenCLClient(flush_cache=False, compile_in="thread").locator  # opencl:platform=P,device=D
    return int(locator.split("platform=")[1].split(",")[0])


def tune_kernel_tuner(kernel: _suite.SuiteKernel, quick: bool, platform: int) -> dict[str, Any]:
    """Tune one kernel of the suite with Kernel Tuner in this process.

    ``platform`` comes from the parent: finding it here would open a client and load PoCL's
    compiler inside Kernel Tuner's timed wall (about 1 s on a cold cache).
    """
    import kernel_tuner

    started = time.perf_counter()
    size = _size(kernel, quick)
    host, out, expected = kernel.inputs(size)
    inputs_s = time.perf_counter() - started
    answer: list[Any] = [None] * len(host)
    answer[out] = expected
    params = kernel.space_params(quick)
    results, env = kernel_tuner.tune_kernel(
        kernel.kernel,
        kernel.source,
        kernel.problem(size),
        host,
        params,
        grid_div_x=kernel.grid_div_x,
        grid_div_y=kernel.grid_div_y,
        restrictions=kernel.allowed,
        answer=answer,
        atol=kernel.atol,
        lang="OpenCL",
        platform=platform,
        device=0,
        quiet=True,
    )
    wall = time.perf_counter() - started
    timed = [r for r in results if isinstance(r.get("time"), float)]
    best = min(timed, key=lambda r: r["time"])
    return {
        "wall_s": wall,
        # Kernel Tuner's own per-variant timers (ms): build, check (its first launch, where PoCL generates the
        # code, and the comparison), benchmark (a warm-up launch and seven timed ones).
        "kt_phases": {
            phase: sum(r.get(f"{phase}_time", 0) for r in results) / 1e3
            for phase in ("compile", "verification", "benchmark")
        },
        "inputs_s": inputs_s,
        "measured": len(timed),
        "rejected": len(results) - len(timed),
        "winner": {k: int(best[k]) for k in params},
        "own_ns": best["time"] * 1e6,
        "device": f"{env.get('device_name')}",
    }


def compile_each(kernel: _suite.SuiteKernel, quick: bool, platform: int) -> dict[str, Any]:
    """Build and first-launch every variant one at a time in this process (cold cache): the total compile time.

    The first launch counts: PoCL generates a kernel's machine code for its work-group size
    there, not in ``clBuildProgram``.
    """
    import pyopencl as cl
    import pyopencl.array as cla

    from tunekit_backends.opencl import OpenCLClient

    client = OpenCLClient(flush_cache=False, compile_in="thread", platform=platform)
    size = _size(kernel, quick)
    template = kernel.template(size, quick)
    host, _, _ = kernel.inputs(size)
    args = [cla.to_device(client.queue, a).data if isinstance(a, np.ndarray) else a for a in host]
    total = 0.0
    for config in kernel.configs(quick):
        started = time.perf_counter()
        program = cl.Program(client.context, kernel.source).build(
            options=template.build_options(template.space.config(config))
        )
        global_size, local_size = _suite.geometry(kernel, config, size)
        getattr(program, kernel.kernel)(client.queue, global_size, local_size, *args).wait()
        total += time.perf_counter() - started
    return {"compile_total_s": total, "variants": len(template.configs)}


def run_child(mode: str, kernel: str, quick: bool, platform: int, baseline: str | None = None) -> dict[str, Any]:
    """Run one child in a fresh process with cold PoCL and tunekit caches (tunekit from ``baseline`` if given)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = {"PYTHONPATH": os.pathsep.join(filter(None, [baseline, os.environ.get("PYTHONPATH")]))}
        env = dict(
            os.environ,
            **(path if baseline else {}),
            POCL_CACHE_DIR=str(Path(scratch) / "pocl"),
            TUNEKIT_CACHE_DIR=str(Path(scratch) / "tunekit"),
            TUNEKIT_PROGRESS="0",
        )
        command = [
            sys.executable,
            __file__,
            "--child",
            mode,
            "--kernel",
            kernel,
            "--platform",
            str(platform),
            *(["--quick"] if quick else []),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} on {kernel} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def retime(kernel: _suite.SuiteKernel, quick: bool, winners: dict[str, dict[str, int]], rounds: int) -> dict[str, Any]:
    """Both winners timed by one timer: interleaved rounds on cold inputs, one profiling queue.

    Returns each winner's median event time (``ns``) and tunekit's time over Kernel Tuner's as
    the median of the rounds' paired ratios with a 95% bootstrap interval (``ratio``, ``low``,
    ``high``): the two samples of a round share the device's state, so drift between rounds
    (40% between two re-timings on this VM) cancels in the ratio, and the interval says whether
    a ratio is within the timer's noise.
    """
    import pyopencl.array as cla

    from tunekit_backends.opencl import OpenCLClient

    client = OpenCLClient(compile_in="thread")
    try:
        size = _size(kernel, quick)
        template = kernel.template(size, quick)
        host, out, expected = kernel.inputs(size)
        key = _suite.SuiteKey(kernel=kernel.name, size=size)
        args = tuple(cla.to_device(client.queue, a) if isinstance(a, np.ndarray) else a for a in host)
        by_name = {t.name: t for t in template.tunables(client, lambda *x: key)}
        fns = {}
        for tool, config in winners.items():
            fns[tool] = by_name[template.name_of(template.space.config(config))].fn
            fns[tool](*args).wait()
            np.testing.assert_allclose(args[out].get(), expected, atol=kernel.atol)
        samples: dict[str, list[int]] = {tool: [] for tool in winners}
        cold = client.cold_inputs(args)  # as cold as a flush before each sample (see tunekit_backends/opencl/_cold.py)
        for number in range(rounds):
            # Alternating which goes first: a round's second sample would otherwise always follow the same kernel.
            for tool in list(fns) if number % 2 == 0 else reversed(list(fns)):
                if cold is None:
                    client.flush_cache()
                inputs = args if cold is None else cold()
                samples[tool].append(client.profile(lambda fn=fns[tool], inputs=inputs: fn(*inputs))[1])
    finally:
        client.close()
    ratios = np.array(samples["tunekit"], float) / np.array(samples["kernel_tuner"], float)
    medians = _median_resamples(ratios)
    return {
        "ns": {tool: float(statistics.median(s)) for tool, s in samples.items()},
        "ratio": float(np.median(ratios)),
        "low": float(np.quantile(medians, 0.025)),
        "high": float(np.quantile(medians, 0.975)),
    }


def _median_resamples(ratios: np.ndarray) -> np.ndarray:
    """Medians of 2000 bootstrap resamples of ``ratios`` (seeded: the same rounds give the same interval)."""
    medians: np.ndarray = np.median(np.random.default_rng(0).choice(ratios, size=(2000, ratios.size)), axis=1)
    return medians


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", action="append", choices=list(ALL_KERNELS), help="only these kernels")
    parser.add_argument(
        "--more", action="store_true", help="the three kernels of benches/_suite_more.py instead of the suite's five"
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes and spaces (for development)")
    parser.add_argument("--rounds", type=int, default=1, help="tunes per tool and kernel (alternating order)")
    parser.add_argument("--retime-rounds", type=int, default=100, help="interleaved rounds of the common timer")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also tune with the tunekit in DIR (`git archive REV tunekit tunekit_backends | tar -x -C DIR`)",
    )
    parser.add_argument("--child", choices=["tunekit", "kernel_tuner", "compile"])
    parser.add_argument("--platform", type=int, help=argparse.SUPPRESS)  # a child's OpenCL platform, from the parent
    options = parser.parse_args()
    names = options.kernel or list(_suite_more.KERNELS if options.more else _suite.KERNELS)
    if options.child is not None:
        kernel = ALL_KERNELS[names[0]]
        child = {"tunekit": tune_tunekit, "kernel_tuner": tune_kernel_tuner, "compile": compile_each}[options.child]
        print(json.dumps(child(kernel, options.quick, options.platform)))
        return 0
    platform = _platform_index()

    from rich.console import Console
    from rich.table import Table

    tools = ["kernel_tuner", "tunekit", *(["baseline"] if options.baseline else [])]
    rows: list[dict[str, Any]] = []
    loads: list[float] = []
    turn = 0
    for name in names:
        kernel = ALL_KERNELS[name]
        runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
        for _ in range(options.rounds):
            for tool in tools if turn % 2 == 0 else reversed(tools):
                loads.append(os.getloadavg()[0])
                if tool == "baseline":
                    runs[tool].append(run_child("tunekit", name, options.quick, platform, options.baseline))
                else:
                    runs[tool].append(run_child(tool, name, options.quick, platform))
                print(f"{name} {tool}: {runs[tool][-1]['wall_s']:.1f} s", file=sys.stderr)
            turn += 1
        tk_last = runs["tunekit"][-1]
        tk_wall = statistics.median(r["wall_s"] for r in runs["tunekit"])
        phases = {p: statistics.median(r["phases"][p] for r in runs["tunekit"]) for p in PHASES}
        floor = None
        if phases["compile"] > 0.5 * tk_wall:
            compiled = run_child("compile", name, options.quick, platform)
            floor = compiled["compile_total_s"] / tk_last["workers"] + sum(
                phases[p] for p in ("check", "warmup", "measure", "runoff")
            )
        winners = {tool: runs[tool][-1]["winner"] for tool in ("kernel_tuner", "tunekit")}
        common = retime(kernel, options.quick, winners, options.retime_rounds)
        rows.append(
            {
                "kernel": name,
                "character": kernel.character,
                "variants": len(kernel.configs(options.quick)),
                "kt_s": statistics.median(r["wall_s"] for r in runs["kernel_tuner"]),
                "tk_s": tk_wall,
                "baseline_s": statistics.median(r["wall_s"] for r in runs["baseline"]) if options.baseline else None,
                "client_s": statistics.median(r["client_s"] for r in runs["tunekit"]),
                "phases": phases,
                "floor_s": floor,
                "winners": winners,
                "common": common,
                "rejected": {tool: runs[tool][-1]["rejected"] for tool in tools},
                "device": tk_last["device"],
                "flushes": tk_last["flushes"],
                "wall_split": _wall_split(runs),
            }
        )

    console = Console(width=170)
    table = Table(title="tunekit vs Kernel Tuner 1.5, cold tunes (fresh processes, empty PoCL and tunekit caches)")
    columns = ["kernel", "variants", "KT s", "tunekit s", "ratio", "floor s", "KT winner", "tunekit winner"]
    if options.baseline:
        columns.insert(5, "baseline s")
    for column in columns:
        table.add_column(column)
    for row in rows:
        common = row["common"]
        kt_ns, tk_ns = common["ns"]["kernel_tuner"], common["ns"]["tunekit"]
        cells = [
            row["kernel"],
            str(row["variants"]),
            f"{row['kt_s']:.1f}",
            f"{row['tk_s']:.1f}",
            f"{row['tk_s'] / row['kt_s']:.2f}x",
            "-" if row["floor_s"] is None else f"{row['floor_s']:.1f} ({row['tk_s'] / row['floor_s']:.2f}x)",
            f"{_config(row['winners']['kernel_tuner'])}: {kt_ns / 1e3:.1f} us",
            f"{_config(row['winners']['tunekit'])}: {tk_ns / 1e3:.1f} us ({common['ratio']:.2f}x, "
            f"{common['low']:.2f}-{common['high']:.2f})",
        ]
        if options.baseline:
            cells.insert(5, f"{row['baseline_s']:.1f} ({row['baseline_s'] / row['kt_s']:.2f}x)")
        table.add_row(*cells)
    console.print(table)
    phases_table = Table(title="tunekit's wall time per phase, s (client: creating the OpenCLClient)")
    for column in ("kernel", "client", *PHASES, "flushes"):
        phases_table.add_column(column)
    for row in rows:
        phases_table.add_row(
            row["kernel"],
            f"{row['client_s']:.2f}",
            *(f"{row['phases'][p]:.2f}" for p in PHASES),
            str(row["flushes"]),
        )
    console.print(phases_table)
    split_table = Table(
        title="Where each tool's wall time goes, s (medians over the tunes; runs: timed kernel runs, their device time)"
    )
    for column in ("kernel", "tool", "wall", "inputs+reference", "compile", "check", "timing", "rest", "runs"):
        split_table.add_column(column)
    for row in rows:
        for tool, split in row["wall_split"].items():
            split_table.add_row(
                row["kernel"],
                tool,
                *(f"{split[c]:.2f}" for c in ("wall", "inputs", "compile", "check", "timing", "rest")),
                split["runs"],
            )
    console.print(split_table)
    ratio = _geomean([row["tk_s"] / row["kt_s"] for row in rows])
    console.print(f"geometric mean of the wall-time ratios: {ratio:.2f}x")
    console.print(f"device: {rows[0]['device']}")
    console.print(
        f"load average (1 min) while tuning: median {statistics.median(loads):.1f}, max {max(loads):.1f}; "
        f"winners re-timed: {options.retime_rounds} interleaved rounds, cold inputs; each time the median, "
        "tunekit's over KT's the median of the rounds' paired ratios (95% bootstrap interval)"
    )
    print(json.dumps(rows), file=sys.stderr)
    return 0


def _wall_split(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each tool's wall time cut the same way (medians over its tunes), so that nothing is left unaccounted.

    inputs: making the inputs and the float64 reference (the bench's own work, the same for both);
    compile; check; timing (tunekit: warm-up, rounds and runoff; Kernel Tuner: its benchmark);
    rest: everything else (tunekit: creating the client, loading the miss path, storing the winner).
    """
    split: dict[str, dict[str, Any]] = {}
    for tool, tunes in runs.items():
        if not tunes or "inputs_s" not in tunes[0]:
            continue

        def median(f: Any, tunes: list[dict[str, Any]] = tunes) -> float:
            return float(statistics.median(f(t) for t in tunes))

        if tool == "kernel_tuner":
            parts = {
                "inputs": median(lambda t: t["inputs_s"]),
                "compile": median(lambda t: t["kt_phases"]["compile"]),
                "check": median(lambda t: t["kt_phases"]["verification"]),
                "timing": median(lambda t: t["kt_phases"]["benchmark"]),
            }
            runs_cell = "1 check + 7 timed a variant"
        else:
            parts = {
                "inputs": median(lambda t: t["inputs_s"]),
                "compile": median(lambda t: t["phases"]["compile"]),
                "check": median(lambda t: t["phases"]["check"]),
                "timing": median(lambda t: sum(t["phases"][p] for p in ("warmup", "measure", "runoff"))),
            }
            samples = tunes[-1]["samples"]
            runs_cell = (
                f"{samples['kept'] + samples['discarded']} + {samples['runoff']} runoff "
                f"({median(lambda t: t['samples']['device_s']):.2f} s of device time)"
            )
        wall = median(lambda t: t["wall_s"])
        split[tool] = {"wall": wall, **parts, "rest": wall - sum(parts.values()), "runs": runs_cell}
    return split


def _config(config: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


if __name__ == "__main__":
    raise SystemExit(main())
