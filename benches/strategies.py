"""Search strategies on real GPU landscapes: tunekit's against Kernel Tuner 1.5's, same files, same budget.

For every Kernel Tuner cache file (all of ../shared/tuning-data/ by default, plus any given on
the command line), every strategy runs for ``--seeds`` seeds with a budget of 10 % of the file's
valid configurations, rounded down as in the Kernel Tuner comparison (failed configurations use
the budget too). Counted: the number of
*distinct valid* configurations evaluated before the first one within 5 % (and 1 %) of the
file's best mean time (unreached = budget + 1), the fraction of seeds that get there, and the
strategy's own compute.

tunekit's strategies run through ``tk.search`` on the replay client (candidates timed by the
real schedule from recorded samples: they see noisy medians, not the file's means). Kernel
Tuner's run in its simulation mode on a decompressed copy of the same file, with a restriction
admitting exactly the file's keys. Its ``seed=`` reaches few strategies, so Python's ``random``
and numpy's global state are seeded before each run, and the table says how many seeds gave
distinct evaluation orders; its results list repeats revisits and failures, so only distinct
valid configurations are counted.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benches/strategies.py                      # everything (long: gemm, dedispersion)
    .venv/bin/python benches/strategies.py --seeds 5 --kt none  # tunekit only, quick

The summary takes every file with a budget of at least 20 (no file is called flat) that every
strategy ran on, with the geometric means to 5 % and 1 % and Kernel Tuner's per-file best; then
held-out folds (leave one kernel family out, leave one GPU out) and, per fold, the strategy chosen
on the other files scored on the held-out ones.

Results are appended to ``--results`` (JSON lines) as they finish; a rerun skips finished runs,
so a long run can be stopped and continued. ``--repro N`` runs the first N seeds of each tunekit strategy again on
every file and counts the runs whose whole evaluation order matches the stored row's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import io
import json
import math
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "tuning-data"
if str(ROOT) not in sys.path:  # tunekit from this checkout, in the pool's workers too
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benches") not in sys.path:  # its sibling modules, when imported by a test
    sys.path.insert(0, str(ROOT / "benches"))

import _judge  # noqa: E402 - found through the path set just above
import _strategy_spec  # noqa: E402 - as _judge

TUNEKIT = ["auto", "ils", "genetic", "random"]
KERNEL_TUNER = [
    "random_sample",
    "genetic_algorithm",
    "pso",
    "greedy_ils",
    "dual_annealing",
    "basinhopping",
    "bayes_opt",
]


KT_MAX_POINTS = 10**8  # Cartesian points past which Kernel Tuner's runs are not attempted (hours each)


def _budget(valid: int) -> int:
    """10 % of the valid configurations, rounded down as the Kernel Tuner comparison rounds it (at least 1)."""
    return max(1, math.floor(0.1 * valid))


def _score(order: list[tuple[str, float]], best: float, budget: int) -> dict[str, Any]:
    """Evaluations (distinct valid) until within 5 % / 1 % of ``best``; ``order`` is (key, mean ms)."""
    hit5 = hit1 = budget + 1
    for n, (_, mean) in enumerate(order, start=1):
        if hit5 > budget and mean <= best * 1.05:
            hit5 = n
        if mean <= best * 1.01:
            hit1 = n
            break
    keys = [k for k, _ in order]
    # The fingerprint tells seeds apart early ("distinct orders"); the whole order is what tells two versions
    # of a strategy apart: two drafts with the same first 50 evaluations gave W6600 95.7 % and 95.0 % of seeds.
    fingerprint = hashlib.sha256("|".join(keys[:50]).encode()).hexdigest()[:12]
    whole = hashlib.sha256("|".join(keys).encode()).hexdigest()[:12]
    return {"to5": hit5, "to1": hit1, "valid": len(order), "fingerprint": fingerprint, "order": whole}


def run_tunekit(path: str, strategy: str, seed: int) -> dict[str, Any]:
    """One tunekit search on the replayed file."""
    import tunekit as tk
    from tunekit_backends.replay import ReplayClient, load_kernel_tuner_cache

    tk.configure(cache=False, record=None, progress=False, warmup=0, samples=5)
    data = load_kernel_tuner_cache(path)
    budget = _budget(len(data.samples_ms))
    client = ReplayClient(data, seed=seed)
    records: list[tk.AutotuneRecord] = []
    try:
        result = tk.search(
            data.space,
            client.kernel,
            client,
            (),
            tuner="bench",
            strategy=_strategy_spec.strategy(strategy, budget),
            seed=seed,
            max_evals=budget,
            sinks=[records.append],
        )
    except tk.NoValidKernelFound:
        # The whole budget went to configurations that failed on the GPU (a small budget on a
        # file with many failures): the 5 % mark was not reached, which is a result, not an error.
        ended = next(e for e in records[-1].events if isinstance(e, tk.SearchEnded))
        return {
            **_score([], data.best_ms, budget),
            "evals": ended.evaluations,
            "own_s": ended.strategy_seconds,
            "stopped_by": ended.stopped_by,
            "chosen": ended.strategy,
        }
    order = [(t.config.name, data.mean_ms(t.config)) for t in result.trials if t.config in data.samples_ms]
    return {
        **_score(order, data.best_ms, budget),
        "evals": result.evaluations,
        "own_s": result.strategy_seconds,
        "stopped_by": result.stopped_by,
        "chosen": result.strategy,
    }


_KT_FILES: dict[str, tuple[str, dict[str, Any]]] = {}


def _kt_file(path: str) -> tuple[str, dict[str, Any]]:
    """The file as Kernel Tuner's simulation mode reads it: a plain ``.json`` copy per worker.

    Kernel Tuner takes a file that does not end with its cache for one left open and appends
    the closing braces, so ``cache`` goes last (a file written with sorted keys ends with
    ``tune_params_keys``); it reads ``device_name`` and ``kernel_name``, which older files may
    lack; and it looks entries up by ``str()`` of the values in ``tune_params``, which a float32
    value's key (``0.1`` for ``0.10000000149011612``) does not match, so such keys are rewritten.
    """
    if path not in _KT_FILES:
        from tunekit_backends.replay import read_cache_document

        doc = read_cache_document(path)  # closed, if a stopped Kernel Tuner run left it open
        names = doc["tune_params_keys"]
        texts = {n: {str(v) for v in doc["tune_params"][n]} for n in names}
        cache = {}
        for key, entry in doc.pop("cache").items():
            # A key with a part per parameter, each a listed value's text; else Kernel Tuner's own key (its
            # test fixture open_cache_looks_like_closed.json keys "16,1" for three parameters).
            parts = key.split(",")
            as_listed = len(parts) == len(names) and all(part in texts[n] for n, part in zip(names, parts, strict=True))
            cache[key if as_listed else ",".join(str(entry.get(n)) for n in names)] = entry
        doc = {"device_name": "", "kernel_name": "kernel", **doc, "cache": cache}
        copy = Path(tempfile.mkdtemp(prefix="kt-cache-")) / "cache.json"
        copy.write_text(json.dumps(doc))
        _KT_FILES[path] = (str(copy), doc)
    return _KT_FILES[path]


def run_kernel_tuner(path: str, strategy: str, seed: int) -> dict[str, Any]:
    """One Kernel Tuner simulation-mode run on the same file."""
    copy, doc = _kt_file(path)
    names = doc["tune_params_keys"]
    points = math.prod(len(doc["tune_params"][n]) for n in names)
    if points > KT_MAX_POINTS:
        # Measured: 12 parameters of 4 values (1.7e7 points) took 40 s of CPU per run; 4^20 never ended.
        raise RuntimeError(
            f"{points:.2g} Cartesian points: more than Kernel Tuner's simulation mode can enumerate (it tests "
            f"each against the restriction to build its search space; limit {KT_MAX_POINTS:.0e}); the file holds "
            f"{len(doc['cache'])} configurations"
        )
    import kernel_tuner

    keys = set(doc["cache"])
    valid_means = _valid_means(path)
    best = min(valid_means.values())
    budget = _budget(len(valid_means))

    def restrict(p: Any) -> bool:
        if not isinstance(p, dict):  # Kernel Tuner passes the bare value for a one-parameter space
            p = {names[0]: p}
        return ",".join(str(p[n]) for n in names) in keys

    random.seed(seed)
    np.random.seed(seed)
    started = time.process_time()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        results, _ = kernel_tuner.tune_kernel(
            doc["kernel_name"],
            "",
            doc.get("problem_size", 1),
            [],
            {n: doc["tune_params"][n] for n in names},
            strategy=strategy,
            strategy_options={"max_fevals": budget},
            cache=copy,
            simulation_mode=True,
            restrictions=restrict,
            verbose=False,
            quiet=True,
        )
    own = time.process_time() - started
    seen: set[str] = set()
    order = []
    distinct = 0
    for r in results:
        key = ",".join(str(r[n]) for n in names)
        if key in seen:
            continue
        seen.add(key)
        distinct += 1
        if key in valid_means:
            order.append((key, valid_means[key]))
    return {**_score(order, best, budget), "evals": distinct, "own_s": own, "stopped_by": "", "chosen": strategy}


def _job(args: tuple[str, str, str, int]) -> dict[str, Any]:
    tool, path, strategy, seed = args
    runner = run_tunekit if tool == "tunekit" else run_kernel_tuner
    started = time.perf_counter()
    try:
        out = runner(path, strategy, seed)
    except Exception as exc:  # a strategy that cannot run on a file is reported, not fatal
        out = {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "tool": tool,
        "file": path,
        "strategy": strategy,
        "seed": seed,
        "wall_s": time.perf_counter() - started,
        **out,
    }


def _cache_files(folder: Path) -> list[str]:
    """The Kernel Tuner cache files under ``folder`` (``.json``, ``.json.gz``), sorted."""
    return sorted(str(p.resolve()) for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


def _label(path: str) -> str:
    p = Path(path)
    return f"{p.parent.name}/{p.name.removesuffix('.gz').removesuffix('.json')}"


def _valid_means(path: str) -> dict[str, float]:
    """Mean time per valid configuration, keyed as the file keys them.

    Validity is the replay loader's, for both tools: failure strings and the ``1e20`` of old
    caches are failures, so both count the same valid configurations and budget.
    """
    return _loaded(path)[0]


def _objective(path: str) -> str:
    """What the file was tuned for; both tools are scored on its time whatever it is."""
    return _loaded(path)[1]


def _loaded(path: str) -> tuple[dict[str, float], str]:
    stat = Path(path).stat()
    return _load(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _load(path: str, mtime_ns: int, size: int) -> tuple[dict[str, float], str]:
    # Loaded once per file version and process: every Kernel Tuner run and the report ask again.
    from tunekit_backends.replay import load_kernel_tuner_cache

    data = load_kernel_tuner_cache(path)
    # Keyed as Kernel Tuner keys them: a parameter the replay names by text maps back to the file's values.
    return {data.key_text(c): data.mean_ms(c) for c in data.samples_ms}, data.objective


def _file_facts(path: str) -> tuple[int, float, int]:
    means = list(_valid_means(path).values())
    best = min(means)
    return len(means), best, sum(m <= best * 1.05 for m in means)


MIN_BUDGET = 20
"""Files whose budget is under this many evaluations are left out of the summaries (vector_add: 1 of 15)."""


def _family(path: str) -> str:
    """The kernel a file tuned (its folder, less the ``_milo`` and ``_v1`` of variants): a fold of its own."""
    return Path(path).parent.name.removesuffix("_v1").removesuffix("_milo")


def _gpu(path: str) -> str:
    """The GPU a file was measured on (its file name, lower case): a fold of its own."""
    return Path(path).name.removesuffix(".gz").removesuffix(".json").lower()


def report(rows: list[dict[str, Any]], files: list[str], seeds: int, listed: Sequence[str] = ()) -> str:
    """Tables per file, the summary over every file, and the held-out folds, as text.

    ``listed``: the tunekit strategies in the order given (``--tunekit``); a held-out fold that
    cannot tell two apart takes the first of them.
    """
    out: list[str] = []
    to5: dict[tuple[str, str], float] = {}
    to1: dict[tuple[str, str], float] = {}
    reached: dict[tuple[str, str], float] = {}
    reached1: dict[tuple[str, str], float] = {}
    # Each seed's figures (in seed order), for the seed bootstrap and the miss counts.
    by_seed: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for path in files:
        valid, _, near = _file_facts(path)
        budget = _budget(valid)
        tuned_for = "" if _objective(path) == "time" else f" (tuned for {_objective(path)}; scored on time)"
        out.append(
            f"\n{_label(path)}: {valid} valid configurations, {near} within 5 % of the best, budget {budget}{tuned_for}"
        )
        header = (
            "  strategy                 to 5% (median)  reached  to 1% (median)  reached  own CPU s  distinct orders"
        )
        out.append(header)
        for tool, strategy in sorted({(r["tool"], r["strategy"]) for r in rows if r["file"] == path}):
            runs = [r for r in rows if r["file"] == path and r["strategy"] == strategy and r["tool"] == tool]
            runs = sorted(runs, key=lambda r: r["seed"])[:seeds]
            name = f"{'tk' if tool == 'tunekit' else 'kt'}:{strategy}"
            errors = [r["error"] for r in runs if "error" in r]
            if errors:
                out.append(f"  {name:24s} cannot run here: {errors[0][:80]}")
                continue
            if not runs:
                continue
            m5 = statistics.median(r["to5"] for r in runs)
            m1 = statistics.median(r["to1"] for r in runs)
            got5 = sum(r["to5"] <= budget for r in runs) / len(runs)
            got1 = sum(r["to1"] <= budget for r in runs) / len(runs)
            own = statistics.median(r["own_s"] for r in runs)
            orders = len({r["fingerprint"] for r in runs})
            to5[(name, path)], to1[(name, path)] = m5, m1
            by_seed[(name, path)] = ([r["to5"] for r in runs], [r["to1"] for r in runs])
            reached[(name, path)], reached1[(name, path)] = got5, got1
            out.append(
                f"  {name:24s} {m5:14.1f}  {got5:6.0%}  {m1:14.1f}  {got1:6.0%}  {own:9.3f}  {orders:3d}/{len(runs)}"
            )
    # The Kernel Tuner comparison's convention: no file is called flat; a budget under 20 says nothing.
    scored = [p for p in files if _budget(_file_facts(p)[0]) >= MIN_BUDGET]
    names = sorted({n for n, _ in to5})
    first = {f"tk:{name}": i for i, name in enumerate(listed)}
    ours = sorted((n for n in names if n.startswith("tk:")), key=lambda n: (first.get(n, len(first)), n))
    theirs = [n for n in names if n.startswith("kt:")]
    # Only the files every strategy ran on: a geometric mean over different files compares nothing.
    common = [p for p in scored if all((n, p) in to5 for n in names)]
    if not common:
        return "\n".join(out)
    left = [_label(p) for p in files if p not in common]
    out.append(
        f"\nSummary over {len(common)} files (every file with a budget of at least {MIN_BUDGET} that every strategy "
        f"ran on{'; not ' + ', '.join(left) if left else ''}): geometric mean of the per-file medians to 5 % and to "
        "1 %, and the worst share of seeds reaching 5 % and 1 % on any of them"
    )
    out.append(f"  {'strategy':24s} geomean to 5%  geomean to 1%  worst reached 5%  worst reached 1%")
    table = []
    for name in names:
        table.append(
            (
                _judge.geo([to5[(name, p)] for p in common]),
                _judge.geo([to1[(name, p)] for p in common]),
                name,
                min(reached[(name, p)] for p in common),
                min(reached1[(name, p)] for p in common),
            )
        )
    if theirs:
        best5 = [min(to5[(n, p)] for n in theirs) for p in common]
        best1 = [min(to1[(n, p)] for n in theirs) for p in common]
        table.append((_judge.geo(best5), _judge.geo(best1), "kt: per-file best", math.nan, math.nan))
    for g5, g1, name, w5, w1 in sorted(table):
        worst = "" if math.isnan(w5) else f"{w5:16.0%}  {w1:16.0%}"
        out.append(f"  {name:24s} {g5:13.1f}  {g1:13.1f}  {worst}")
    # Drawn once: the summary's intervals and the held-out ratio's then come from the same resamples.
    draws = _seed_draws(common, names, by_seed)
    out.extend(_uncertainty(common, ours, theirs, {"5": to5, "1": to1}, by_seed, draws))
    if ours and (theirs or len(ours) > 1):
        out.extend(_held_out(common, ours, theirs, to5, to1, reached, draws["5"]))
    return "\n".join(out)


def _seed_draws(
    files: list[str], names: list[str], by_seed: dict[tuple[str, str], tuple[list[float], list[float]]]
) -> dict[str, dict[str, np.ndarray]]:
    """Per mark (``"5"``, ``"1"``) and strategy, the per-file medians of the seed resamples.

    See ``_judge.bootstrap_medians``: the same resamples for every strategy.
    """
    return {
        mark: _judge.bootstrap_medians({n: [by_seed[(n, p)][column] for p in files] for n in names})
        for column, mark in enumerate(("5", "1"))
    }


def _uncertainty(
    files: list[str],
    ours: list[str],
    theirs: list[str],
    point: dict[str, dict[tuple[str, str], float]],
    by_seed: dict[tuple[str, str], tuple[list[float], list[float]]],
    draws: dict[str, dict[str, np.ndarray]],
) -> list[str]:
    """How far the summary's figures would move with other seeds: bootstrap intervals, and miss rates.

    ``point``: the per-file medians to ``"5"`` and ``"1"`` % by (strategy, file); ``draws``: their seed
    resamples (:func:`_seed_draws`). The geometric means get a seed-bootstrap interval, and so do
    their ratios to the first tunekit strategy listed and, when Kernel Tuner ran, to its best single
    strategy over these files. Then, per strategy, the file where the most seeds missed 5 % of the
    best, with the exact interval of its miss rate: a reach of 99 % is shown only where that
    interval tops out under 1 %.
    """
    names = ours + theirs
    geo = {mark: {n: _judge.geo_rows(draws[mark][n]) for n in names} for mark in draws}
    figure = {mark: {n: _judge.geo([point[mark][(n, p)] for p in files]) for n in names} for mark in draws}
    if theirs:
        # The per-file best is chosen again in every resample, as it is on the real seeds.
        for mark in draws:
            geo[mark]["kt: per-file best"] = _judge.geo_rows(np.minimum.reduce([draws[mark][n] for n in theirs]))
            figure[mark]["kt: per-file best"] = _judge.geo([min(point[mark][(n, p)] for n in theirs) for p in files])
    bases = ([ours[0]] if len(ours) > 1 else []) + ([min(theirs, key=figure["5"].__getitem__)] if theirs else [])
    level = f"{_judge.LEVEL * 100:.0f} %"
    seeds = min(len(by_seed[(n, p)][0]) for n in names for p in files)
    out = [
        f"\nSeed bootstrap ({_judge.RESAMPLES} resamples of each file's seeds, the same for every strategy): "
        f"the geometric means with their {level} intervals"
        + "".join(f"; ratio {k + 1}: to 5 %, against {b}" for k, b in enumerate(bases))
    ]
    width = max(24, *(len(n) for n in geo["5"]))
    out.append(
        (
            f"  {'strategy':{width}s}  to 5%  {'interval':14s}  to 1%  {'interval':14s}"
            + "".join(f"  ratio {k + 1}  {'interval':12s}" for k in range(len(bases)))
        ).rstrip()
    )
    for name in geo["5"]:
        line = "  " + f"{name:{width}s}"
        for mark in ("5", "1"):
            low, high = _judge.interval(geo[mark][name])
            line += f"  {figure[mark][name]:5.1f}  {f'[{low:.1f}, {high:.1f}]':14s}"
        for base in bases:
            if name == base:
                line += f"  {'-':>7s}  {'':12s}"
                continue
            low, high = _judge.interval(geo["5"][name] / geo["5"][base])
            # Said in words: an interval holding 1 is a difference the seeds alone could make.
            noise = "~" if low <= 1.0 <= high else " "
            line += f"  {figure['5'][name] / figure['5'][base]:6.2f}x {noise}{f'[{low:.2f}, {high:.2f}]':12s}"
        out.append(line.rstrip())
    if bases:
        out.append("  (~: the ratio's interval holds 1, a difference the seeds alone could make)")
    out.append(
        "\nMisses, per strategy on its worst file: seeds that never came within 5 % of the best, and the exact "
        f"{level} interval of the miss rate ({seeds} seeds; a reach of 99 % is shown once the interval tops out under "
        f"1 %, which takes {_judge.seeds_to_show(0.99)} seeds with none missed)"
    )
    for name in names:
        misses = {p: sum(v > _budget(_file_facts(p)[0]) for v in by_seed[(name, p)][0]) for p in files}
        worst = max(files, key=lambda p: (misses[p], -files.index(p)))
        runs = len(by_seed[(name, worst)][0])
        low, high = _judge.miss_interval(misses[worst], runs)
        out.append(
            f"  {name:{width}s} {_label(worst)}: {misses[worst]} of {runs} missed, miss rate {low:.1%}-{high:.1%}; "
            f"99 % reach {'shown' if high < 0.01 else 'not shown'}"
        )
    return out


def _held_out(
    files: list[str],
    ours: list[str],
    theirs: list[str],
    to5: dict[tuple[str, str], float],
    to1: dict[tuple[str, str], float],
    reached: dict[tuple[str, str], float],
    draws5: dict[str, np.ndarray] | None = None,
) -> list[str]:
    """Each strategy on folds of files left out: by kernel family, and by GPU.

    Per fold, every tunekit strategy on the held-out files against Kernel Tuner's best single
    strategy there and its per-file best at 1 % (when Kernel Tuner ran); then a choice made without
    the fold: the tunekit strategy (and the Kernel Tuner one) with the lowest geometric mean to 5 %
    on the *other* files, scored on the fold's. Over all folds, each file is scored by a choice that
    never saw it. With two tunekit strategies and no Kernel Tuner rows, that choice is the held-out
    judge between two versions of one strategy (``model_ils@gp_guesses=0,auto``). When the other
    files give two of them the same figure, the fold has no evidence either way: the one listed
    first is taken (list the version before first: a tie then keeps it) and the pick is marked
    ``(tie)``, so a change that moves only one family's figures reads as untested there.
    """
    out = []
    width = max(16, *(len(name) for name in ours))
    for fold, key in (("kernel family", _family), ("GPU", _gpu)):
        groups: dict[str, list[str]] = {}
        for p in files:
            groups.setdefault(key(p), []).append(p)
        out.append(
            f"\nLeave one {fold} out ({len(groups)} folds): on the held-out files, geometric means to 5 % and 1 %, "
            "and the worst share of seeds reaching 5 %"
        )
        kt_heading = "| kt best single to 5%       | kt per-file best to 1% | ratio to 5%" if theirs else ""
        out.append(f"  {'held out':18s} {'strategy':{width}s} to 5%   to 1%  reached  {kt_heading}".rstrip())
        chosen: dict[str, tuple[str, str | None]] = {}
        # Folds whose other files cannot tell two tunekit strategies apart: the first listed is taken.
        tied: set[str] = set()
        for group, held in sorted(groups.items()):
            kt_best = min(theirs, key=lambda n: _judge.geo([to5[(n, p)] for p in held])) if theirs else None
            for name in ours:
                g5 = _judge.geo([to5[(name, p)] for p in held])
                g1 = _judge.geo([to1[(name, p)] for p in held])
                worst = min(reached[(name, p)] for p in held)
                line = f"  {group:18s} {name:{width}s} {g5:5.1f}  {g1:6.1f}  {worst:6.0%}"
                if kt_best is not None:
                    kt5 = _judge.geo([to5[(kt_best, p)] for p in held])
                    kt1 = _judge.geo([min(to1[(n, p)] for n in theirs) for p in held])
                    line += f"  | {kt_best:20s} {kt5:5.1f} | {kt1:22.1f} | {g5 / kt5:10.2f}x"
                out.append(line)
            train = [p for p in files if p not in held]
            if train:
                pick, tie = _judge.choose({n: _judge.geo([to5[(n, p)] for p in train]) for n in ours})
                chosen[group] = (
                    pick,
                    min(theirs, key=lambda n: _judge.geo([to5[(n, p)] for p in train])) if theirs else None,
                )
                if tie:
                    tied.add(group)
        if len(chosen) == len(groups):
            per_file = {p: chosen[g] for g, held in groups.items() for p in held}
            tk5 = _judge.geo([to5[(per_file[p][0], p)] for p in files])
            tk1 = _judge.geo([to1[(per_file[p][0], p)] for p in files])
            tk_worst = min(reached[(per_file[p][0], p)] for p in files)
            if theirs:
                kt5 = _judge.geo([to5[(str(per_file[p][1]), p)] for p in files])
                best1 = _judge.geo([min(to1[(n, p)] for n in theirs) for p in files])
                picks = ", ".join(f"{g}: {a}{_judge.TIE * (g in tied)}/{b}" for g, (a, b) in sorted(chosen.items()))
                out.append(
                    f"  chosen without the fold (tunekit/Kernel Tuner: {picks}): tunekit {tk5:.1f} to 5 %, "
                    f"{tk1:.1f} to 1 %, worst reach {tk_worst:.0%}; Kernel Tuner {kt5:.1f} to 5 % (ratio "
                    f"{tk5 / kt5:.2f}x{_held_out_interval(files, per_file, draws5)}); Kernel Tuner's per-file best "
                    f"{best1:.1f} to 1 %"
                )
            else:
                picks = ", ".join(f"{g}: {a}{_judge.TIE * (g in tied)}" for g, (a, _) in sorted(chosen.items()))
                out.append(
                    f"  chosen without the fold ({picks}): {tk5:.1f} to 5 %, {tk1:.1f} to 1 %, "
                    f"worst reach {tk_worst:.0%}"
                )
    return out


def _held_out_interval(
    files: list[str],
    per_file: dict[str, tuple[str, str | None]],
    draws5: dict[str, np.ndarray] | None,
) -> str:
    """``, 95 % interval A-B``: the seed bootstrap of the held-out ratio, each file scored by its fold's picks.

    ``draws5``: the summary's resamples to 5 % (:func:`_seed_draws`), so a ratio there and here move
    together; empty without them.
    """
    if draws5 is None:
        return ""
    ours = np.column_stack([draws5[per_file[p][0]][:, i] for i, p in enumerate(files)])
    theirs = np.column_stack([draws5[str(per_file[p][1])][:, i] for i, p in enumerate(files)])
    low, high = _judge.interval(_judge.geo_rows(ours) / _judge.geo_rows(theirs))
    return f", {_judge.LEVEL * 100:.0f} % interval {low:.2f}-{high:.2f}"


def reproduced(rows: list[dict[str, Any]], files: list[str], strategies: list[str], seeds: int) -> str:
    """Each tunekit strategy's first ``seeds`` seeds run again here, against the stored rows' whole order."""
    stored = {(r["file"], r["strategy"], r["seed"]): r for r in rows if r["tool"] == "tunekit" and "error" not in r}
    out = [f"\nReproducibility: seeds 0-{seeds - 1} of each tunekit strategy run again on every file"]
    for strategy in strategies:
        same = total = 0
        for path in files:
            for seed in range(seeds):
                if (path, strategy, seed) not in stored:
                    continue
                total += 1
                same += run_tunekit(path, strategy, seed)["order"] == stored[(path, strategy, seed)]["order"]
        out.append(f"  tk:{strategy:21s} same evaluation order in {same} of {total} runs")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run what is missing from the results file, then print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "files", nargs="*", help="more Kernel Tuner cache files (.json or .json.gz); --only PATH runs just these"
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--tunekit", default=",".join(TUNEKIT), help="tunekit strategies, comma-separated")
    parser.add_argument("--kt", default=",".join(KERNEL_TUNER), help="Kernel Tuner strategies, or 'none'")
    parser.add_argument("--only", default="", help="run only files whose path contains this")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--results", type=Path, default=ROOT / "benches" / "results" / "strategies.jsonl")
    parser.add_argument(
        "--repro",
        type=int,
        default=0,
        help="run the first N seeds of each tunekit strategy again on every file and compare the whole order",
    )
    args = parser.parse_args(argv)
    import tunekit as tk
    from tunekit_backends.replay import NothingToReplay

    # A misspelt name ran every seed into a stored error row; a zero count printed empty tables.
    unknown = [s for s in args.tunekit.split(",") if s and s.partition("@")[0] not in tk.STRATEGIES]
    if unknown:
        parser.error(f"--tunekit: unknown strategies {unknown}; choose from {','.join(tk.STRATEGIES)}")
    for spec in filter(None, args.tunekit.split(",")):
        try:
            _strategy_spec.strategy(spec, 1)
        except (ValueError, SyntaxError) as exc:
            parser.error(f"--tunekit: {exc}")
    if args.seeds < 1 or args.jobs < 1:
        parser.error(f"--seeds and --jobs take a count >= 1, got --seeds {args.seeds} --jobs {args.jobs}")
    found = _cache_files(SHARED) if SHARED.exists() else []
    for given in map(Path, args.files):
        # A folder stands for the cache files under it, as the shared data folder does.
        found += _cache_files(given) if given.is_dir() else [str(given.resolve())]
    found = list(dict.fromkeys(found))  # a file given twice (or also found in the shared folder) ran twice
    files = [f for f in found if args.only in f]
    if not files:
        if found:
            print(f"no cache file matches --only {args.only!r}; the files: {', '.join(found)}", file=sys.stderr)
        else:
            print(f"no cache files: {SHARED} is missing and none were given", file=sys.stderr)
        return 2
    # Checked before any run: a file that cannot be replayed would fail every run the same way.
    # The others still run; a malformed file makes the exit status 2, one with nothing to search does not.
    nothing: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for f in files:
        try:
            _valid_means(f)
        except NothingToReplay as exc:
            nothing[f] = str(exc)
        except (OSError, ValueError) as exc:
            unreadable[f] = str(exc)
            print(f"cannot replay {f}: {exc}", file=sys.stderr)
    files = [f for f in files if f not in nothing and f not in unreadable]
    if not files:
        for f, why in nothing.items():
            print(f"nothing to search in {f}: {why}", file=sys.stderr)
        return 2
    ours = [s for s in args.tunekit.split(",") if s]
    theirs = [] if args.kt == "none" else [s for s in args.kt.split(",") if s]
    args.results.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    if args.results.exists():
        rows = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    # A row stands for the file's content, not its path: an edited or replaced file is run again.
    digests = {f: hashlib.sha256(Path(f).read_bytes()).hexdigest()[:16] for f in files}
    rows = [r for r in rows if r["file"] in digests and r.get("digest") == digests[r["file"]]]
    # A run that failed (Kernel Tuner not installed yet, say) is tried again, not kept as done.
    rows = [r for r in rows if "error" not in r]
    done = {(r["tool"], r["file"], r["strategy"], r["seed"]) for r in rows}
    # Seed by seed over every file and strategy: a long run stopped early leaves every row with the same seeds.
    jobs = [
        (tool, f, s, seed)
        for seed in range(args.seeds)
        for f in files
        for tool, names in (("tunekit", ours), ("kernel_tuner", theirs))
        for s in names
        if (tool, f, s, seed) not in done
    ]
    print(f"{len(jobs)} runs to do, {len(done)} already in {args.results}", file=sys.stderr)
    with args.results.open("a") as sink, ProcessPoolExecutor(max_workers=args.jobs) as pool:
        finished = pool.map(_job, jobs, chunksize=1) if args.jobs > 1 else map(_job, jobs)
        for n, row in enumerate(finished, start=1):
            row["digest"] = digests[row["file"]]
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            rows.append(row)
            if n % 20 == 0:
                print(f"  {n}/{len(jobs)} runs done", file=sys.stderr)
    wanted = {(t, s) for t, names in (("tunekit", ours), ("kernel_tuner", theirs)) for s in names}
    print(report([r for r in rows if (r["tool"], r["strategy"]) in wanted], files, args.seeds, ours))
    if args.repro:
        print(reproduced(rows, files, ours, min(args.repro, args.seeds)))
    for f, why in {**nothing, **unreadable}.items():
        print(f"\n{_label(f)}: not run ({why})")
    return 2 if unreadable else 0


if __name__ == "__main__":
    raise SystemExit(main())
