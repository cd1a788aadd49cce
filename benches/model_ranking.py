"""How early the pairwise model ranks a configuration within 5 % of the best, fitted to a share of what was measured.

For each shared GPU file, ``--draws`` times: measure ``n`` configurations drawn uniformly at random
(their mean times), fit :class:`PairwiseModel` to the fastest ``share`` of them (at least 16), rank
every unmeasured configuration by its prediction, and count the ranks down to the first one within
5 % of the file's best. The table gives the median over the draws that leave one unmeasured, per file,
size and share: a lower rank is a guess that lands sooner. No search runs here: this isolates what
the fitted share does to the model's ranking (``ModelGuidedLocalSearch(fit_share=...)``;
benches/README.md, "Guesses fitted to the fastest two thirds").

    .venv/bin/python benches/model_ranking.py
    .venv/bin/python benches/model_ranking.py --sizes 60,120,240 --shares 1,0.65,0.5 --draws 15
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tunekit._search.strategies.pairwise import PairwiseModel  # noqa: E402 - this checkout's, by the path above
from tunekit._search.strategies.surrogate import _FIT_LEAST  # noqa: E402 - the search's own floor, as above
from tunekit_backends.replay import load_kernel_tuner_cache  # noqa: E402 - as above

SHARED = ROOT.parent / "shared" / "tuning-data"


@functools.cache
def landscape(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Positions and log mean times of the file's valid configurations, and each parameter's width."""
    data = load_kernel_tuner_cache(path)
    configs = list(data.samples_ms)
    xs = np.array([data.space.positions(c) for c in configs], dtype=np.intp)
    ys = np.log([data.mean_ms(c) for c in configs])
    return xs, ys, tuple(len(data.space.domains[name]) for name in data.space.names)


def first_hit_rank(path: Path, n: int, share: float, seed: int) -> int | None:
    """Rank (1-based) of the model's first unmeasured prediction within 5 % of the best; None if none is unmeasured."""
    xs, ys, widths = landscape(path)
    hit = ys <= ys.min() + math.log(1.05)
    measured = np.random.default_rng(seed).choice(len(ys), size=min(n, len(ys) - 1), replace=False)
    if hit.sum() == hit[measured].sum():
        return None  # the draw holds every one: nothing is left to guess
    keep = measured[np.argsort(ys[measured], kind="stable")[: max(_FIT_LEAST, math.ceil(share * len(measured)))]]
    model = PairwiseModel(widths)
    model.fit(xs[keep], ys[keep])
    predicted = model.predict(xs)
    predicted[measured] = np.inf
    ranked = np.argsort(predicted, kind="stable")
    return int(np.flatnonzero(hit[ranked])[0]) + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,120,240", help="random measurements the model is fitted from")
    parser.add_argument("--shares", default="1,0.65,0.5", help="fastest shares of them it is fitted to")
    parser.add_argument("--draws", type=int, default=15, help="random draws per file, size and share (seeds 0..)")
    parser.add_argument("files", nargs="*", type=Path, help="Kernel Tuner cache files (default: ../shared/tuning-data)")
    args = parser.parse_args(argv)
    sizes = [int(v) for v in args.sizes.split(",")]
    shares = [float(v) for v in args.shares.split(",")]
    files = args.files or sorted(p for p in SHARED.rglob("*.json.gz"))
    if not files:
        print(f"no cache files given and none under {SHARED}", file=sys.stderr)
        return 2
    columns = [(n, s) for n in sizes for s in shares]
    print("Median rank of the first prediction within 5 % of the best (lower: found sooner)")
    print(f"{'file':34s}" + "".join(f"{f'{n}/{s:g}':>10s}" for n, s in columns))
    for path in files:
        row = []
        for n, s in columns:
            ranks = [r for seed in range(args.draws) if (r := first_hit_rank(path, n, s, seed)) is not None]
            row.append(f"{statistics.median(ranks):10.0f}" if ranks else f"{'-':>10s}")
        print(f"{path.parent.name + '/' + path.name.removesuffix('.gz'):34s}" + "".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
