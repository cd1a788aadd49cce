"""Small real landscapes for the strategy bench: slices of the shared GPU files.

Each slice fixes one or more parameters of a brute-force file to the values of one of its
configurations and keeps the files whose slice holds 80-600 valid configurations, so the
bench's budget (10 %) is 8-60 evaluations: the regime where a search's opening matters.
Usage: ``.venv/bin/python benches/make_slices.py OUT_DIR`` then
``.venv/bin/python benches/strategies.py --only OUT_DIR OUT_DIR/*.json``.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "tuning-data"
SOURCES = {
    "W6600": "convolution_milo/W6600.json.gz",
    "A100": "convolution_milo/A100.json.gz",
    "MI250X": "convolution_milo/MI250X.json.gz",
    "dMI": "dedispersion_milo/MI250X.json.gz",
    "gemm": "gemm/RTX_3090.json.gz",
    "p3090": "pnpoly/RTX_3090.json.gz",
    "a4000": "convolution_milo_v1/a4000.json.gz",
}


def _valid(entry: dict[str, object]) -> bool:
    time = entry.get("time")
    return isinstance(time, int | float) and time < 1e19


def main(out: Path, per_file: int = 3, seed: int = 7) -> None:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    for name, rel in SOURCES.items():
        with gzip.open(SHARED / rel, "rt", encoding="utf-8") as f:
            doc = json.load(f)
        multi = [k for k in doc["tune_params_keys"] if len(doc["tune_params"][k]) > 1]
        made = 0
        for _ in range(200):
            if made == per_file:
                break
            fixed = rng.sample(multi, rng.randint(1, max(1, len(multi) - 2)))
            anchor = rng.choice(list(doc["cache"].values()))
            cache = {k: e for k, e in doc["cache"].items() if all(e[p] == anchor[p] for p in fixed)}
            if not 80 <= sum(map(_valid, cache.values())) <= 600:
                continue
            params = {k: [anchor[k]] if k in fixed else v for k, v in doc["tune_params"].items()}
            (out / f"{name}_{made}.json").write_text(json.dumps({**doc, "tune_params": params, "cache": cache}))
            made += 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_slices.py OUT_DIR")
    main(Path(sys.argv[1]))
