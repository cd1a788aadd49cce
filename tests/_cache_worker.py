"""A separate interpreter tuning a range of keys against a shared cache (for test_cache_robustness.py)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class IKey:
    i: int


def main() -> None:
    cache_dir, start, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    tk.configure(cache_dir=cache_dir, samples=2, warmup=0, adaptive=False, progress=False)
    # Two samples of two equal candidates are in doubt by design; stderr must hold only cache trouble.
    logging.getLogger("tunekit.doubt").setLevel(logging.ERROR)
    # A new key at every call is this worker's purpose, not a user's mistake: the key-churn note is expected.
    logging.getLogger("tunekit.tuner").addFilter(lambda record: "took a new value at each" not in record.getMessage())
    client = CpuClient()
    stored: list[bool] = []
    tk.add_record_sink(lambda record: stored.append(record.stored))
    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner("shared")
    tunables = tuner.init(
        lambda: tk.TunableSet(key=lambda i: IKey(i=i)).with_tunables(
            [tk.Tunable("double", lambda i: 2 * i), tk.Tunable("twice", lambda i: i + i)]
        )
    )
    wrong = [i for i in range(start, start + count) if tuner.execute(client.device_id, client, tunables, (i,)) != 2 * i]
    json.dump({"tuned": len(stored), "stored": sum(stored), "wrong": wrong}, sys.stdout)


if __name__ == "__main__":
    main()
