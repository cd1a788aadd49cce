"""Does the schedule pick the truly fastest candidate, and at what cost? On the simulated device.

Compares three schedules over many seeds and several scenarios (noise levels, and candidate
sets drawn from a real GPU's landscape when ../shared/tuning-data is there), each tuning the
same candidate sets (declared true times) through the public tuner:

  (a) fixed sequential min-of-5  — the naive tuner: 1 warm-up run, 5 samples each, lowest sample wins
  (b) fixed median-of-10         — 1 warm-up run, 10 samples each, one candidate after another
  (c) tunekit default            — device warm-up, interleaved rounds, elimination, paired runoff

Columns: how often the true best was picked, how often the pick was within 1% of it, the mean
and worst regret (% slower than the true best), and the measurement cost: virtual device time
spent running candidates (warm-up runs, samples, runoff), relative to (b). (c) also spends
``warmup_ms`` of device warm-up per tune, shown separately since it does not grow with the
number of candidates.

    .venv/bin/python benches/selection.py [--seeds 300] [--candidates 12]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.simulated import NoiseModel, SimulatedClient, SimulatedKernel


@tk.autotune_key
class BenchKey:
    n: Annotated[int, tk.Anchor()]


@dataclass(frozen=True)
class Schedule:
    label: str
    settings: dict[str, Any]
    pick_by_min: bool = False


SCHEDULES = (
    Schedule("(a) sequential min-of-5", {"adaptive": False, "samples": 5, "warmup": 1}, pick_by_min=True),
    Schedule("(b) sequential median-of-10", {"adaptive": False, "samples": 10, "warmup": 1}),
    Schedule("(c) tunekit default", {"adaptive": True}),
)

LEVELS = {
    "quiet 1%+1%": NoiseModel(noise=0.01, drift=0.01, ramp=0.1, cold_factor=3.0),
    "white 5%, no drift": NoiseModel(noise=0.05, cold_factor=3.0),
    "typical 5%+3%": NoiseModel(noise=0.05, drift=0.03, ramp=0.2, outlier_rate=0.01, cold_factor=3.0),
    "noisy 10%+5%": NoiseModel(noise=0.10, drift=0.05, ramp=0.3, outlier_rate=0.03, cold_factor=3.0),
}


def true_times(seed: int, count: int) -> list[float]:
    """A candidate set: the best at 0.5-2 ms, the others slower by an exponential gap (mean 40%).

    Shuffled, so the best is not always measured first.
    """
    rng = random.Random(seed * 7919 + 13)
    best = rng.uniform(0.5e6, 2e6)
    times = [best] + [best * (1.0 + rng.expovariate(1 / 0.4)) for _ in range(count - 1)]
    rng.shuffle(times)
    return times


LANDSCAPE = Path(__file__).resolve().parents[2] / "shared" / "tuning-data" / "pnpoly" / "RTX_3090.json.gz"


def landscape_times(path: Path) -> Callable[[int, int], list[float]]:
    """Candidate sets drawn from a real GPU's brute-force landscape (a Kernel Tuner cache file).

    Each seed takes ``count`` random valid configurations; a configuration's true time is the
    mean of its recorded samples. This is what a batch of a search over a real space looks like.
    """
    from tunekit_backends.replay import load_kernel_tuner_cache

    data = load_kernel_tuner_cache(path)
    means = sorted(data.mean_ms(c) * 1e6 for c in data.samples_ms)

    def times(seed: int, count: int) -> list[float]:
        return random.Random(seed * 7919 + 13).sample(means, count)

    return times


@dataclass
class Tally:
    picked_best: int = 0
    within_1pct: int = 0
    regrets: list[float] | None = None
    cost_ns: float = 0.0
    warmup_ns: float = 0.0


def tune_once(
    schedule: Schedule, noise: NoiseModel, times_of: Callable[[int, int], list[float]], seed: int, count: int
) -> tuple[float, float, float]:
    """One tune; its regret, candidate-run cost and device warm-up, in virtual ns."""
    client = SimulatedClient(noise, seed=seed)
    times = times_of(seed, count)
    kernels = [client.kernel(t) for t in times]
    tunables = tk.TunableSet(key=lambda n: BenchKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", k) for i, k in enumerate(kernels)]
    )
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[BenchKey, None] = tk.LocalTuner(f"selection-{seed}")
    sink = tk.add_record_sink(records.append)
    try:
        tuner.execute(client.device_id, client, tunables, (1,))
    finally:
        tk.remove_record_sink(sink)
    record = records[0]
    winner = record.winner
    if schedule.pick_by_min:
        measured = [c for c in record.candidates if c.stats is not None]
        winner = min(measured, key=lambda c: c.stats.min_ns if c.stats else 0.0).name
    assert winner is not None
    picked = kernels[int(winner[1:])]
    assert isinstance(picked, SimulatedKernel)
    return picked.true_ns / min(times) - 1.0, client.busy_ns, client.warmup_ns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--candidates", type=int, default=12)
    parser.add_argument(
        "--landscape",
        type=Path,
        default=LANDSCAPE,
        help="a Kernel Tuner cache file whose configurations' times make one more scenario (skipped if missing)",
    )
    args = parser.parse_args()
    scenarios: list[tuple[str, NoiseModel, Callable[[int, int], list[float]]]] = [
        (level, noise, true_times) for level, noise in LEVELS.items()
    ]
    if args.landscape.exists():
        label = f"{args.landscape.parent.name}/{args.landscape.name.split('.')[0]}, typical"
        scenarios.append((label, LEVELS["typical 5%+3%"], landscape_times(args.landscape)))
    else:
        print(f"(no {args.landscape}: the real-landscape scenario is skipped)", file=sys.stderr)
    console = Console(width=150)
    with tempfile.TemporaryDirectory() as cache_dir:
        table = Table(
            title=f"Selection on the simulated device: {args.seeds} seeds x {args.candidates} candidates per scenario"
        )
        for column in ("scenario", "schedule", "picked best", "within 1%", "mean regret", "worst regret"):
            table.add_column(column, justify="right" if column not in ("scenario", "schedule") else "left")
        table.add_column("cost vs (b)", justify="right")
        table.add_column("device warm-up", justify="right")
        for level, noise, times_of in scenarios:
            tallies: dict[str, Tally] = {}
            for schedule in SCHEDULES:
                tk.configure(cache=False, cache_dir=Path(cache_dir), progress=False, **schedule.settings)
                tally = tallies[schedule.label] = Tally(regrets=[])
                for seed in range(args.seeds):
                    regret, cost, warmup = tune_once(schedule, noise, times_of, seed, args.candidates)
                    assert tally.regrets is not None
                    tally.regrets.append(regret)
                    tally.picked_best += regret == 0.0
                    tally.within_1pct += regret <= 0.01
                    tally.cost_ns += cost
                    tally.warmup_ns += warmup
            baseline = tallies[SCHEDULES[1].label].cost_ns
            for index, schedule in enumerate(SCHEDULES):
                tally = tallies[schedule.label]
                assert tally.regrets is not None
                table.add_row(
                    level if index == 0 else "",
                    schedule.label,
                    f"{tally.picked_best / args.seeds:.1%}",
                    f"{tally.within_1pct / args.seeds:.1%}",
                    f"{statistics.fmean(tally.regrets):.2%}",
                    f"{max(tally.regrets):.1%}",
                    f"{tally.cost_ns / baseline:.2f}x",
                    f"{tally.warmup_ns / args.seeds / 1e6:.0f} ms" if tally.warmup_ns else "-",
                )
            table.add_section()
        console.print(table)
    tk.configure()
    sys.exit(0)


if __name__ == "__main__":
    main()
