"""A strategy alone on the shared GPU files, without tk.search: the quick replay its design was judged on.

Each strategy is driven directly (batches of 8, budget 10 % of the valid configurations rounded
down, as in ``benches/strategies.py``); a configuration is scored by the median of 5 of its
recorded samples drawn with replacement, a failed one by None (it uses the budget). Counted as
in ``benches/strategies.py``: distinct valid configurations until one within 5 % (1 %) of the
file's best mean, unreached = budget + 1, median over seeds, geometric mean over the files with
a budget of at least 20, and each strategy's ratio to the first listed with a seed-bootstrap
interval (``benches/_judge.py``: the same resamples for every strategy). Then, for every pair of
strategies, the held-out choice: per fold (one kernel family, one GPU) the one with the lower
geometric mean on the *other* files, scored on the fold's. Seeds here are the design's (40 and
up); ``benches/strategies.py`` runs seeds 0-19.

    .venv/bin/python benches/strategy_replay.py --strategies model_ils,portfolio --seeds 40-100
    .venv/bin/python benches/strategy_replay.py --strategies model_ils,portfolio:0.15   # the wide floor
    .venv/bin/python benches/strategy_replay.py --strategies model_ils,model_ils@cap=0.5 --seeds 1000-1160
    .venv/bin/python benches/strategy_replay.py --strategies model_ils --seeds 100-300 --only W6600,pnpoly
    .venv/bin/python benches/strategy_replay.py --strategies model_ils,model_ils@gp_guesses=0 --quick --jobs 2

A name is any of ``tk.STRATEGIES`` but ``auto``; ``portfolio:F`` is the portfolio with the wide
climber's floor at F; ``NAME@key=value+key=value`` is the strategy with constructor arguments
changed (``model_ils@cap=0.5``: its guesses fitted to log times capped at their median).
"""

from __future__ import annotations

import argparse
import itertools
import math
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benches") not in sys.path:  # its sibling modules, when imported by a test
    sys.path.insert(0, str(ROOT / "benches"))

import _judge  # noqa: E402 - found through the path set just above
import _strategy_spec  # noqa: E402 - as _judge

from tunekit._search.strategies import make_strategy  # noqa: E402 - this checkout's, by the path above

SHARED = ROOT.parent / "shared" / "tuning-data"
BATCH = 8


def _factory(spec: str, budget: int) -> Any:
    from tunekit._search.strategies import Portfolio

    name, _, floor = spec.partition(":")
    if name == "portfolio" and floor:
        return lambda space, rng: Portfolio(space, rng, max_evals=budget, floors=(0.0, float(floor)))
    chosen = _strategy_spec.strategy(spec, budget)
    return make_strategy(chosen, budget) if isinstance(chosen, str) else chosen


def run_one(data: Any, spec: str, seed: int, *, quick: bool = False) -> tuple[int, int, int, float]:
    """Evaluations to 5 % and 1 % of the best mean, the budget, and the strategy's own CPU seconds.

    ``quick``: the run stops at its first configuration within 1 % of the best, which both counts
    are known by then; the rest of the budget cannot change them, only the CPU total.
    """
    budget = max(1, math.floor(0.1 * len(data.samples_ms)))
    means = {c: math.fsum(s) / len(s) for c, s in data.samples_ms.items()}
    best = min(means.values())
    strategy = _factory(spec, budget)(data.space, np.random.default_rng(seed))
    draws = np.random.default_rng(seed + 10_000)
    seen: set[Any] = set()
    order: list[float] = []
    own = 0.0
    while len(seen) < budget:
        started = time.thread_time()
        proposals = strategy.propose(min(BATCH, budget - len(seen)))
        own += time.thread_time() - started
        if not proposals:
            break
        for config in proposals:
            if config in seen:
                raise AssertionError(f"{spec} proposed {config} twice")
            seen.add(config)
            samples = data.samples_ms.get(config)
            score = None if samples is None else float(np.median(draws.choice(np.array(samples), size=5)))
            if samples is not None:
                order.append(means[config])
                if quick and means[config] <= best * 1.01:
                    break
            started = time.thread_time()
            strategy.observe(config, score)
            own += time.thread_time() - started
        if quick and order and order[-1] <= best * 1.01:
            break
    to5 = next((n for n, m in enumerate(order, 1) if m <= best * 1.05), budget + 1)
    to1 = next((n for n, m in enumerate(order, 1) if m <= best * 1.01), budget + 1)
    return min(to5, budget + 1), min(to1, budget + 1), budget, own


def held_out_picks(
    a: str, b: str, labels: list[str], key: Callable[[str], str], to5: dict[tuple[str, str], float]
) -> tuple[dict[str, str], set[str]]:
    """Per fold (``key`` of a file), the strategy with the lower geometric mean to 5 % on the other files.

    Also the folds whose other files tie: they have no evidence either way and keep ``a``, the one
    listed first (list the version before first).
    """
    picks: dict[str, str] = {}
    tied: set[str] = set()
    for group in {key(f) for f in labels}:
        train = [f for f in labels if key(f) != group]
        picks[group], tie = _judge.choose({s: _judge.geo([to5[s, f] for f in train]) for s in (a, b)})
        if tie:
            tied.add(group)
    return picks, tied


_FILES: dict[str, Any] = {}
"""The files of this run by label, set before the workers fork."""


def _run_job(job: tuple[str, str, int, bool]) -> tuple[int, int, int, float]:
    spec, label, seed, quick = job
    return run_one(_FILES[label], spec, seed, quick=quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--strategies", default="model_ils,portfolio")
    parser.add_argument("--seeds", default="40-60", help="a range A-B (B excluded)")
    parser.add_argument("--only", default="", help="comma-separated substrings: only files whose label has one")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="stop each run at its first configuration within 1 %% (same counts; the CPU column is then partial)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (forked processes)")
    args = parser.parse_args(argv)
    from tunekit_backends.replay import load_kernel_tuner_cache

    lo, hi = (int(x) for x in args.seeds.split("-"))
    specs = [s for s in args.strategies.split(",") if s]
    paths = sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    files = {}
    wanted = [w for w in args.only.split(",") if w]
    for p in paths:
        if wanted and not any(w in f"{p.parent.name}/{p.name}" for w in wanted):
            continue
        data = load_kernel_tuner_cache(p)
        if math.floor(0.1 * len(data.samples_ms)) >= 20:
            files[f"{p.parent.name}/{p.name.split('.')[0]}"] = data
    to5: dict[tuple[str, str], float] = {}
    to1: dict[tuple[str, str], float] = {}
    reach: dict[tuple[str, str], float] = {}
    print(f"{'strategy':20s} {'file':32s} to 5%  to 1%  reached 5%  own CPU s (median, max)")
    _FILES.clear()
    _FILES.update(files)
    jobs = [(spec, label, seed, args.quick) for spec in specs for label in files for seed in range(lo, hi)]
    if args.jobs > 1:
        # Forked, so the workers find the loaded files in _FILES instead of each loading all of them again.
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            done = dict(zip(jobs, pool.map(_run_job, jobs, chunksize=4), strict=True))
    else:
        done = {job: _run_job(job) for job in jobs}
    for spec in specs:
        for label in files:
            runs = [done[spec, label, seed, args.quick] for seed in range(lo, hi)]
            to5[spec, label] = statistics.median(r[0] for r in runs)
            to1[spec, label] = statistics.median(r[1] for r in runs)
            reach[spec, label] = sum(r[0] <= r[2] for r in runs) / len(runs)
            own = [r[3] for r in runs]
            print(
                f"{spec:20s} {label:32s} {to5[spec, label]:5.1f} {to1[spec, label]:6.1f} {reach[spec, label]:9.0%}"
                f"   {statistics.median(own):.3f}, {max(own):.3f}"
            )
    labels = list(files)
    print(f"\nOver {len(labels)} files, seeds {lo}-{hi - 1}: geometric means to 5 % and 1 %, worst share reaching 5 %")
    for spec in specs:
        g5 = _judge.geo([to5[spec, f] for f in labels])
        g1 = _judge.geo([to1[spec, f] for f in labels])
        print(f"  {spec:20s} {g5:6.1f} {g1:6.1f} {min(reach[spec, f] for f in labels):6.0%}")
    if len(specs) > 1:
        # The same resamples of each file's seeds for every strategy: the ratio keeps no noise of drawing them apart.
        draws = _judge.bootstrap_medians(
            {s: [[done[s, f, seed, args.quick][0] for seed in range(lo, hi)] for f in labels] for s in specs}
        )
        base = _judge.geo_rows(draws[specs[0]])
        for spec in specs[1:]:
            low, high = _judge.interval(_judge.geo_rows(draws[spec]) / base)
            ratio = _judge.geo([to5[spec, f] for f in labels]) / _judge.geo([to5[specs[0], f] for f in labels])
            noise = ": holds 1, a difference the seeds alone could make" if low <= 1.0 <= high else ""
            print(
                f"  {spec} / {specs[0]}, to 5 %: {ratio:.3f}x, {_judge.LEVEL * 100:.0f} % seed-bootstrap interval "
                f"{low:.3f}-{high:.3f}{noise}"
            )
    folds: dict[str, Callable[[str], str]] = {
        "kernel family": lambda f: f.split("/")[0].removesuffix("_v1").removesuffix("_milo"),
        "GPU": lambda f: f.split("/")[1].lower(),
    }
    for a, b in itertools.combinations(specs, 2):
        for fold, key in folds.items():
            if len({key(f) for f in labels}) < 2:
                # One family (or GPU) only: a choice made without it has no files to be made on.
                print(f"  held out by {fold}, {a} or {b}: no fold (every file is one {fold})")
                continue
            picks, tied = held_out_picks(a, b, labels, key, to5)
            chosen = {f: picks[key(f)] for f in labels}
            said = ", ".join(f"{g} {s}{_judge.TIE * (g in tied)}" for g, s in sorted(picks.items()))
            print(
                f"  held out by {fold}, {a} or {b}: {_judge.geo([to5[chosen[f], f] for f in labels]):.1f} to 5 %, "
                f"{_judge.geo([to1[chosen[f], f] for f in labels]):.1f} to 1 %, worst reach "
                f"{min(reach[chosen[f], f] for f in labels):.0%} (picks: {said})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
