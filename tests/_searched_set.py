"""A set searched inside execute (``with_search``), for test_record_file.py.

Its tunes are committed to a record in the test's process; run as a script, it is production in
a fresh interpreter: ``python _searched_set.py RECORD`` seeds the record, executes every size and
prints what it saw as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient

SIZES = (1000, 3000)
SPACE = tk.Space(CHUNK=[64, 256, 1024, 4096])


@tk.autotune_key
class RowKey:
    n: Annotated[int, tk.Anchor()]


def build(config: tk.Config) -> Any:
    def row_sum(x: np.ndarray) -> np.ndarray:
        out = np.zeros(x.shape[0])
        for start in range(0, x.shape[1], config.CHUNK):
            out += x[:, start : start + config.CHUNK].sum(axis=1)
        return out

    return row_sum


def make() -> tk.TunableSet[RowKey, Any]:
    """Four chunk sizes, three searched per key."""
    return tk.TunableSet.from_space(SPACE, build, key=lambda x: RowKey(n=x.shape[1])).with_search(max_evals=3, seed=0)


def inputs(n: int) -> tuple[np.ndarray]:
    return (np.random.default_rng(n).standard_normal((8, n)),)


def production(path: str) -> dict[str, Any]:
    """Seed the committed record, then run every size: what was seeded, tuned and warned."""
    tunes: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[RowKey, Any] = tk.LocalTuner("rows", sinks=[tunes.append])
    client = CpuClient()
    tunables = tuner.init(make)
    record = tk.Record.load_verified(path, tunables, client.device_id)
    seeded = record.seed(tuner, tunables, RowKey)
    for n in SIZES:
        tuner.execute(client.device_id, client, tunables, inputs(n))
    return {"seeded": seeded, "tunes": len(tunes), "warnings": list(record.warnings)}


if __name__ == "__main__":
    print(json.dumps(production(sys.argv[1])))
