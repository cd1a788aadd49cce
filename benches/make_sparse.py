"""A synthetic sparse Kernel Tuner cache file: the shape of a cache from a partial Kernel Tuner run.

Ten parameters of ten values each (a 10^10-point product) and ``N`` configurations, drawn at
random, each with a time that is a product of one factor per parameter value (plus 2 % noise
over five samples), so one configuration or a few lie within 5 % of the best. Not a GPU's
landscape: it measures what a strategy costs and finds when almost no neighbour of a point is
in the file. Usage: ``.venv/bin/python benches/make_sparse.py OUT.json [N]`` then
``.venv/bin/python benches/strategies.py --kt none --only OUT OUT.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def sparse_cache(configurations: int, seed: int = 1) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    names = [f"p{i}" for i in range(10)]
    values = [2**j for j in range(10)]
    factors = rng.normal(size=(10, 10))
    cache: dict[str, dict[str, object]] = {}
    while len(cache) < configurations:
        positions = rng.integers(0, 10, size=10)
        config = {name: values[int(p)] for name, p in zip(names, positions, strict=True)}
        mean = float(np.exp(0.3 * factors[np.arange(10), positions].sum()))
        times = [mean * (1 + 0.02 * rng.random()) for _ in range(5)]
        key = ",".join(str(v) for v in config.values())
        cache[key] = {**config, "time": float(np.mean(times)), "times": times, "compile_time": 1.0}
    return {
        "device_name": "Sparse",
        "kernel_name": "sparse",
        "problem_size": 1,
        "tune_params_keys": names,
        "tune_params": dict.fromkeys(names, values),
        "cache": cache,
    }


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2:
        print("usage: make_sparse.py OUT.json [CONFIGURATIONS (default 2000)]", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(sparse_cache(int(argv[1]) if len(argv) > 1 else 2000)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
