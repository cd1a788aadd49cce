"""Fused-and-tuned elementwise chains against the eager chain (one kernel per op), on one device.

Run: ``.venv/bin/python benches/fusion.py`` (options: ``--rows 4096 --cols 4096 --rounds 20``).

For the 2-op chain bias_add -> gelu and the 3-op chain bias_add -> gelu -> residual_add on
float32 ``rows x cols``: the fused kernel is tuned over VEC x BLOCK; the eager chain runs each
op as its own kernel, each tuned over the same space, through intermediate buffers. Both are
then timed by event profiling (the eager chain from its first kernel's start to its last
kernel's end), caches flushed before each run, interleaved rounds, median.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl.array as cla
from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.opencl import FusedChain, OpenCLClient, fuse

CHAINS = (("bias_add", "gelu"), ("bias_add", "gelu", "residual_add"))


def _winner(client: OpenCLClient, chain: FusedChain, args: tuple[Any, ...]) -> tuple[Any, str]:
    """Tune ``chain`` for ``args``; a launcher of its winner and the winner's name."""
    tunables = chain.tunable_set(client)
    tuner: tk.LocalTuner[Any, Any] = tk.LocalTuner(f"bench_{chain.name}")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner.execute(client.device_id, client, tunables, args).wait()
    finally:
        tk.remove_record_sink(sink)
    (fn,) = tuner.tuner(client.device_id).winners[tunables].values()
    return fn, records[-1].winner or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    # A fresh tunekit cache: every kernel is tuned in this run.
    tk.configure(cache_dir=Path(tempfile.mkdtemp(prefix="tunekit-fusion-bench-")))
    rows, cols = options.rows, options.cols
    n = rows * cols
    client = OpenCLClient()
    rng = np.random.default_rng(0)
    q = client.queue
    x = cla.to_device(q, rng.standard_normal((rows, cols), dtype=np.float32))
    bias = cla.to_device(q, rng.standard_normal(cols, dtype=np.float32))
    residual = cla.to_device(q, rng.standard_normal((rows, cols), dtype=np.float32))
    temps = [cla.empty(q, (rows, cols), np.float32) for _ in range(3)]
    operand = {"bias_add": bias, "residual_add": residual}
    sizes = (np.int32(cols), np.int32(n))

    single = {}
    for op in {op for chain in CHAINS for op in chain}:
        args = (x, *([operand[op]] if op in operand else []), temps[0], *sizes)
        single[op] = _winner(client, fuse([op]), args)[0]

    table = Table(title=f"Fused vs eager elementwise chains, float32 {rows}x{cols}, on {client.device.name}")
    for column in ("chain", "eager (1 kernel/op)", "fused + tuned", "speed-up", "fused GB/s", "fused winner"):
        table.add_column(column)
    for chain_ops in CHAINS:
        chain = fuse(list(chain_ops))
        out = temps[2]
        fused_args = (x, *[operand[op] for op in chain_ops if op in operand], out, *sizes)
        fused, winner_name = _winner(client, chain, fused_args)

        def eager(chain_ops: tuple[str, ...] = chain_ops) -> list[Any]:
            events, source = [], x
            for step, op in enumerate(chain_ops):
                target = temps[step % 2]
                events.append(single[op](source, *([operand[op]] if op in operand else []), target, *sizes))
                source = target
            return events

        expected = chain.reference(x.get(), *[operand[op].get() for op in chain_ops if op in operand], None, cols, n)
        fused(*fused_args).wait()
        np.testing.assert_allclose(out.get(), expected, rtol=1e-4, atol=1e-4)
        eager()[-1].wait()
        np.testing.assert_allclose(temps[(len(chain_ops) - 1) % 2].get(), expected, rtol=1e-4, atol=1e-4)
        samples: dict[str, list[int]] = {"eager": [], "fused": []}
        for _ in range(options.rounds):
            client.flush_cache()
            samples["eager"].append(client.profile(eager)[1])
            client.flush_cache()
            samples["fused"].append(client.profile(lambda fused=fused, fused_args=fused_args: fused(*fused_args))[1])
        eager_ns = statistics.median(samples["eager"])
        fused_ns = statistics.median(samples["fused"])
        moved = (2 + sum(op == "residual_add" for op in chain_ops)) * n * 4
        table.add_row(
            " -> ".join(chain_ops),
            f"{eager_ns / 1e6:.2f} ms",
            f"{fused_ns / 1e6:.2f} ms",
            f"{eager_ns / fused_ns:.2f}x",
            f"{moved / fused_ns:.1f}",
            winner_name.partition("[")[2].rstrip("]"),
        )
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
