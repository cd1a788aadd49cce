"""Does the schedule pick the truly fastest candidate, and at what cost? On the simulated device.

Each scenario is a noise model and a way to draw candidate sets (declared true times); every
schedule tunes the same candidate sets under the same seeded noise:

  min-of-5       300 ms device warm-up (as tunekit's), then each candidate in turn: 1 warm-up run and
                 5 samples; lowest sample wins
  mean-of-7      the same with 7 samples; lowest mean wins
  median-of-25   the same with 25 samples; lowest median wins
  tunekit        the default schedule, through ``tk.LocalTuner``: device warm-up, interleaved rounds,
                 elimination, paired runoff

Columns: how often the pick was the true best and within 1% of it, the mean and worst regret (%
slower than the true best), the kernel runs per tune (warm-up runs and samples: what measuring
costs) and the device time they took relative to median-of-25. tunekit also spends ``warmup_ms``
of device warm-up per tune, which does not grow with the number of candidates and is left out.

Scenarios: the original four noise levels and a real GPU's landscape (12 candidates with
exponential gaps), then each noise class of issue 28 on two layouts: 12 candidates whose best two
are 2% apart, and 30 whose top five lie within 3%; last, 30 candidates of which 16 lie within 0.1%
of each other (the base noise with 1.6% white noise: about 2.3% per pair, as PoCL's convolution
of ``benches/vs_kernel_tuner_suite.py``), where the cost, not the pick, is the question; and two
layouts shaped like that convolution as its rounds see it (30 candidates, 13 within 5% of the best,
the rest up to 28% slower) under 3% white noise, then 6% with heavy tails: what the samples tunekit
spends beyond Kernel Tuner's seven per candidate (mean-of-7) buy there.

    .venv/bin/python benches/selection.py [--seeds 500] [--first-seed 0] [--jobs 2] [--only NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.simulated import NoiseModel, SimulatedClient, SimulatedKernel


@tk.autotune_key
class BenchKey:
    n: Annotated[int, tk.Anchor()]


# A candidate set: its true times, and the white noise of each (None: the model's).
CandidateSet = tuple[list[float], list[float | None]]
Layout = Callable[[int], CandidateSet]


def exponential_gaps(count: int) -> Layout:
    """The best at 0.5-2 ms, the others slower by an exponential gap (mean 40%); shuffled."""

    def draw(seed: int) -> CandidateSet:
        rng = random.Random(seed * 7919 + 13)
        best = rng.uniform(0.5e6, 2e6)
        times = [best] + [best * (1.0 + rng.expovariate(1 / 0.4)) for _ in range(count - 1)]
        rng.shuffle(times)
        return times, [None] * count

    return draw


def close_top(count: int, top: tuple[float, ...], noisy: int | None = None, noise: float = 0.0) -> Layout:
    """The best at 0.5-2 ms, the next ones at the ratios ``top``, the rest 5% or more slower; shuffled.

    ``noisy``: the rank (0: the true best) of the one candidate whose white noise is ``noise``.
    """

    def draw(seed: int) -> CandidateSet:
        rng = random.Random(seed * 7919 + 17)
        best = rng.uniform(0.5e6, 2e6)
        ratios = [1.0, *top] + [1.05 + rng.expovariate(1 / 0.5) for _ in range(count - 1 - len(top))]
        own: list[float | None] = [noise if rank == noisy else None for rank in range(count)]
        order = list(range(count))
        rng.shuffle(order)
        return [best * ratios[i] for i in order], [own[i] for i in order]

    return draw


def near_identical(count: int, tied: int, spread: float) -> Layout:
    """The best at 3-6 ms, ``tied`` - 1 others within ``spread`` of it, the rest 2% or more slower; shuffled.

    Variants no number of rounds tells apart (PoCL's convolution: 13-19 of 30 within 0.1%).
    """

    def draw(seed: int) -> CandidateSet:
        rng = random.Random(seed * 7919 + 23)
        best = rng.uniform(3e6, 6e6)
        ratios = [1.0] + [1.0 + rng.uniform(0.0, spread) for _ in range(tied - 1)]
        ratios += [1.02 + rng.expovariate(1 / 0.1) for _ in range(count - tied)]
        rng.shuffle(ratios)
        return [best * r for r in ratios], [None] * count

    return draw


def spread_out(count: int, close: int, close_within: float, spread: float) -> Layout:
    """The best at 3-6 ms, ``close`` - 1 others within ``close_within``, the rest up to ``spread`` slower; shuffled."""

    def draw(seed: int) -> CandidateSet:
        rng = random.Random(seed * 7919 + 29)
        best = rng.uniform(3e6, 6e6)
        ratios = [1.0] + [1.0 + rng.uniform(0.0, close_within) for _ in range(close - 1)]
        ratios += [1.0 + rng.uniform(close_within, spread) for _ in range(count - close)]
        rng.shuffle(ratios)
        return [best * r for r in ratios], [None] * count

    return draw


LANDSCAPE = Path(__file__).resolve().parents[2] / "shared" / "tuning-data" / "pnpoly" / "RTX_3090.json.gz"


def landscape(path: Path, count: int) -> Layout:
    """``count`` random configurations of a real GPU's brute-force landscape (a Kernel Tuner cache file).

    A configuration's true time is the mean of its recorded samples: one batch of a search over a real space.
    """
    from tunekit_backends.replay import load_kernel_tuner_cache

    data = load_kernel_tuner_cache(path)
    means = sorted(data.mean_ms(c) * 1e6 for c in data.samples_ms)

    def draw(seed: int) -> CandidateSet:
        return random.Random(seed * 7919 + 13).sample(means, count), [None] * count

    return draw


TWELVE = (1.02,)  # 12 candidates, the best two 2% apart
THIRTY = (1.0075, 1.015, 1.0225, 1.03)  # 30 candidates, the top five within 3%
BASE = NoiseModel(noise=0.015, ramp=0.2, cold_factor=3.0)


def base(**changes: Any) -> NoiseModel:
    """The base noise (1.5% white, a 20% clock ramp, a 3x cold first run) with ``changes``."""
    return dataclasses.replace(BASE, **changes)


CLASSES: dict[str, tuple[NoiseModel, int | None]] = {
    # name: (model, rank of the candidate with its own 4x noise)
    "best 4x noisier": (BASE, 0),
    "runner-up 4x noisier": (BASE, 1),
    "heavy tails": (base(noise=0.03, tail_rate=0.1, tail_alpha=1.3), None),
    "clock states": (base(clock_states=(1.0, 1.06), clock_dwell_ms=5.0), None),
    "throttle step": (base(throttle=0.1, throttle_at_ms=320.0), None),
    "periodic interference": (base(interference=0.08, interference_period_ms=7.0, interference_duty=0.3), None),
}
NOISY = 4 * BASE.noise

LEVELS = {
    "quiet 1%+1%": NoiseModel(noise=0.01, drift=0.01, ramp=0.1, cold_factor=3.0),
    "white 5%, no drift": NoiseModel(noise=0.05, cold_factor=3.0),
    "typical 5%+3%": NoiseModel(noise=0.05, drift=0.03, ramp=0.2, outlier_rate=0.01, cold_factor=3.0),
    "noisy 10%+5%": NoiseModel(noise=0.10, drift=0.05, ramp=0.3, outlier_rate=0.03, cold_factor=3.0),
}


@dataclass(frozen=True)
class Scenario:
    name: str
    noise: NoiseModel
    layout: Layout


@functools.cache
def scenarios(landscape_path: Path) -> list[Scenario]:
    found = [Scenario(f"{name} (12, exp. gaps)", noise, exponential_gaps(12)) for name, noise in LEVELS.items()]
    if landscape_path.exists():
        label = f"{landscape_path.parent.name}/{landscape_path.name.split('.')[0]}, typical (12)"
        found.append(Scenario(label, LEVELS["typical 5%+3%"], landscape(landscape_path, 12)))
    else:
        print(f"(no {landscape_path}: the real-landscape scenario is skipped)", file=sys.stderr)
    for name, (noise, noisy) in CLASSES.items():
        found.append(Scenario(f"{name} (12, top 2%)", noise, close_top(12, TWELVE, noisy, NOISY)))
        found.append(Scenario(f"{name} (30, top 5 in 3%)", noise, close_top(30, THIRTY, noisy, NOISY)))
    found.append(Scenario("near-identical (30, 16 within 0.1%)", base(noise=0.016), near_identical(30, 16, 0.001)))
    conv_like = spread_out(30, 13, 0.05, 0.28)
    found.append(Scenario("conv-like 3% (30, 13 within 5%)", base(noise=0.03), conv_like))
    found.append(
        Scenario("conv-like 6%, tails (30, 13 within 5%)", base(noise=0.06, tail_rate=0.1, tail_alpha=1.3), conv_like)
    )
    return found


WARMUP_NS = 300_000_000


@dataclass(frozen=True)
class Fixed:
    """A sequential baseline: each candidate in turn, one warm-up run then ``samples`` timed ones."""

    label: str
    samples: int
    pick: Callable[[list[int]], float]


BASELINES = (
    Fixed("min-of-5", 5, min),
    Fixed("mean-of-7", 7, statistics.fmean),
    Fixed("median-of-25", 25, statistics.median),
)
LABELS = (*(b.label for b in BASELINES), "tunekit")


@dataclass
class Tally:
    regrets: list[float] = field(default_factory=list)
    runs: int = 0
    busy_ns: float = 0.0

    def add(self, regret: float, runs: int, busy_ns: float) -> None:
        self.regrets.append(regret)
        self.runs += runs
        self.busy_ns += busy_ns


def _client(scenario: Scenario, seed: int) -> tuple[SimulatedClient, list[SimulatedKernel], list[float]]:
    client = SimulatedClient(scenario.noise, seed=seed)
    times, noises = scenario.layout(seed)
    return client, [client.kernel(t, noise=n) for t, n in zip(times, noises, strict=True)], times


def run_fixed(baseline: Fixed, scenario: Scenario, seed: int) -> tuple[float, int, float]:
    client, kernels, times = _client(scenario, seed)
    client.warm_up(WARMUP_NS)  # the same device warm-up as tunekit's: the clock ramp is no baseline's undoing
    scores = []
    for kernel in kernels:
        kernel()
        scores.append(baseline.pick([client.profile(kernel)[1] for _ in range(baseline.samples)]))
    picked = kernels[scores.index(min(scores))]
    return picked.true_ns / min(times) - 1.0, sum(k.calls for k in kernels), client.busy_ns


def run_tunekit(scenario: Scenario, seed: int) -> tuple[float, int, float]:
    client, kernels, times = _client(scenario, seed)
    tunables = tk.TunableSet(key=lambda n: BenchKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", k) for i, k in enumerate(kernels)]
    )
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[BenchKey, None] = tk.LocalTuner(f"selection-{seed}", sinks=[records.append])
    tuner.execute(client.device_id, client, tunables, (1,))
    winner = records[0].winner
    assert winner is not None
    picked = kernels[int(winner[1:])]
    return picked.true_ns / min(times) - 1.0, sum(k.calls for k in kernels), client.busy_ns


def run_seeds(job: tuple[Path, int, range, str]) -> dict[str, Tally]:
    """Every schedule on ``seeds`` of one scenario (one unit of work for a worker process).

    The scenario goes by its place in the list, which the worker rebuilds: a layout is a closure.
    """
    landscape_path, number, seeds, cache_dir = job
    scenario = scenarios(landscape_path)[number]
    tk.configure(cache=False, cache_dir=Path(cache_dir), progress=False)
    tallies = {label: Tally() for label in LABELS}
    for seed in seeds:
        for baseline in BASELINES:
            tallies[baseline.label].add(*run_fixed(baseline, scenario, seed))
        tallies["tunekit"].add(*run_tunekit(scenario, seed))
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=500)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="the first seed (fresh seeds, for a change designed on 0-499)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (1: none, all in this one)")
    parser.add_argument("--only", default="", help="only the scenarios whose name contains this")
    parser.add_argument(
        "--landscape",
        type=Path,
        default=LANDSCAPE,
        help="a Kernel Tuner cache file whose configurations' times make one more scenario (skipped if missing)",
    )
    args = parser.parse_args()
    chosen = [n for n, s in enumerate(scenarios(args.landscape)) if args.only in s.name]
    console = Console(width=160)
    table = Table(title=f"Selection on the simulated device: {args.seeds} seeded tunes per scenario")
    for column in ("scenario", "schedule"):
        table.add_column(column)
    for column in ("picked best", "within 1%", "mean regret", "worst regret", "runs/tune", "time vs med-25"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as cache_dir:
        step = max(1, args.seeds // max(1, 4 * args.jobs))
        jobs = [
            (args.landscape, number, range(start, min(start + step, args.first_seed + args.seeds)), cache_dir)
            for number in chosen
            for start in range(args.first_seed, args.first_seed + args.seeds, step)
        ]
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                parts = list(pool.map(run_seeds, jobs))
        else:
            parts = [run_seeds(job) for job in jobs]
    for number in chosen:
        tallies = {label: Tally() for label in LABELS}
        for job, part in zip(jobs, parts, strict=True):
            if job[1] == number:
                for label, tally in part.items():
                    tallies[label].regrets += tally.regrets
                    tallies[label].runs += tally.runs
                    tallies[label].busy_ns += tally.busy_ns
        reference = tallies["median-of-25"].busy_ns
        for index, label in enumerate(LABELS):
            tally = tallies[label]
            count = len(tally.regrets)
            table.add_row(
                scenarios(args.landscape)[number].name if index == 0 else "",
                label,
                f"{sum(r == 0.0 for r in tally.regrets) / count:.1%}",
                f"{sum(r <= 0.01 for r in tally.regrets) / count:.1%}",
                f"{statistics.fmean(tally.regrets):.2%}",
                f"{max(tally.regrets):.1%}",
                f"{tally.runs / count:.0f}",
                f"{tally.busy_ns / reference:.2f}x",
            )
        table.add_section()
    console.print(table)
    tk.configure()
    sys.exit(0)


if __name__ == "__main__":
    main()
