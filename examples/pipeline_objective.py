"""Tune a whole multi-stage numpy pipeline end to end with a caller-measured tk.Objective.

The pipeline smooths a batch of signals (a FIR filter: direct or FFT) and reduces each
to its RMS, summing block-wise. Which filter method, block size and
float width are fastest depends on all three stages together, so the objective times
the whole request, not one kernel. Run it::

    python examples/pipeline_objective.py            # searches, prints the winner, writes a record
    python examples/pipeline_objective.py --length 4096   # another key: its own trial log, added to the record
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient

SPACE = tk.Space(
    METHOD=["direct", "fft"],
    BLOCK=tk.pow2(64, 8192),
    DTYPE=["float32", "float64"],
    BATCH=[1, 4, 16],
    restrict=lambda c: c.METHOD == "fft" or c.BLOCK <= 2048,  # direct filtering of long blocks is pointless
)


@tk.autotune_key
class PipelineKey:
    """The request shape the winner is kept for."""

    signals: Annotated[int, tk.Anchor()]
    length: Annotated[int, tk.Anchor()]


def pipeline(x: np.ndarray, taps: np.ndarray, config: tk.Config) -> np.ndarray:
    """Filter, then each signal's RMS summed block-wise: one request (BLOCK only reorders the sum)."""
    x = x.astype(config.DTYPE, copy=False)
    taps = taps.astype(config.DTYPE, copy=False)
    out = np.empty(x.shape[0], dtype=config.DTYPE)
    for start in range(0, x.shape[0], config.BATCH):
        rows = x[start : start + config.BATCH]
        if config.METHOD == "fft":
            n = rows.shape[1] + taps.size - 1
            filtered = np.fft.irfft(np.fft.rfft(rows, n) * np.fft.rfft(taps, n), n)[:, : rows.shape[1]]
        else:
            filtered = np.stack([np.convolve(r, taps)[: rows.shape[1]] for r in rows])
        usable = filtered.shape[1] // config.BLOCK * config.BLOCK
        if usable == 0:
            raise ValueError(f"BLOCK={config.BLOCK} is longer than the signal ({rows.shape[1]})")
        blocks = filtered[:, :usable].reshape(rows.shape[0], -1, config.BLOCK)
        energy = (blocks * blocks).sum(axis=2).sum(axis=1) + (filtered[:, usable:] ** 2).sum(axis=1)
        out[start : start + rows.shape[0]] = np.sqrt(energy / filtered.shape[1])
    return out


@dataclass
class PipelineObjective:
    """Times the whole pipeline on one request; at most ``budget`` measurements."""

    x: np.ndarray
    taps: np.ndarray
    budget: int = 1_000_000
    samples: int = 3
    used: int = 0

    @property
    def space(self) -> tk.Space:
        """The pipeline's configurations."""
        return SPACE

    def measure(self, config: tk.Config) -> tk.Outcome:
        """Median-of-``samples`` wall time of one request, after a warm-up."""
        self.used += 1
        try:
            reference = pipeline(self.x, self.taps, config)
        except ValueError as exc:
            return tk.Failed(str(exc), "check")
        if not np.all(np.isfinite(reference)):
            return tk.Failed("non-finite output", "check")
        samples = []
        for _ in range(self.samples):
            start = time.perf_counter_ns()
            pipeline(self.x, self.taps, config)
            samples.append(time.perf_counter_ns() - start)
        return tk.Measured(tk.BenchmarkDurations(tuple(samples)))

    def remaining(self) -> int | None:
        """Measurements left in the engine's own budget."""
        return max(0, self.budget - self.used)


def pipeline_key(x: np.ndarray, taps: np.ndarray) -> PipelineKey:
    """The key of one request."""
    return PipelineKey(signals=x.shape[0], length=x.shape[1])


def build(config: tk.Config) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The pipeline at ``config``, as a tunable for production dispatch."""

    def run(x: np.ndarray, taps: np.ndarray) -> np.ndarray:
        return pipeline(x, taps, config)

    return run


def main(argv: list[str] | None = None) -> int:
    """Search the pipeline's space, print the winner against the incumbent, commit a record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signals", type=int, default=16, help="signals per request (default 16)")
    parser.add_argument("--length", type=int, default=16384, help="samples per signal (default 16384)")
    parser.add_argument("--max-evals", type=int, default=24, help="configurations to evaluate (default 24)")
    parser.add_argument(
        "--log", type=Path, help="trial log of this key's search (default: pipeline-trials.<key>.jsonl, one per key)"
    )
    parser.add_argument(
        "--record",
        type=Path,
        default=Path("pipeline-record.json"),
        help="committed record; each run adds its key's winner (default pipeline-record.json)",
    )
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    objective = PipelineObjective(rng.standard_normal((args.signals, args.length)), rng.standard_normal(63))
    incumbent = {"METHOD": "direct", "BLOCK": 1024, "DTYPE": "float64", "BATCH": 1}
    key = pipeline_key(objective.x, objective.taps)
    # A trial log holds one key's search: one shared default would refuse every other --length.
    log = args.log or Path(f"pipeline-trials.signals={key.signals},length={key.length}.jsonl")
    # What the timings depend on: this CPU and numpy stack. A fixed name ("cpu-numpy") would let another
    # machine's record load verified, and its trial log answer this machine's search.
    device = CpuClient().device_id
    result = tk.tune_objective(
        objective,
        tuner="pipeline",
        device_id=device,
        key=key,
        max_evals=args.max_evals,
        require=[incumbent],
        log=log,
    )
    best = result.best
    base = next(t for t in result.trials if t.config.to_dict() == incumbent)
    print(f"searched {result.evaluations} of {SPACE.size} configurations with {result.strategy}")
    print(f"(stopped by {result.stopped_by}; {sum(t.resumed for t in result.trials)} resumed from {log})")
    print(f"incumbent {base.config.name}: {base.score / 1e6:.2f} ms" if base.score else "incumbent failed")
    print(f"winner    {best.config.name}: {best.score / 1e6:.2f} ms")
    tunables = tk.TunableSet.from_space(SPACE, build, key=pipeline_key)
    # Added to the record already there (one entry per key bucket): a fresh one would replace it, losing other keys.
    record = (
        tk.Record.load_verified(args.record, tunables, device, tuner="pipeline")
        if args.record.exists()
        else tk.Record.for_tunables("pipeline", device, tunables)
    )
    record.add(key, result)
    record.save(args.record)
    print(f"record written to {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
