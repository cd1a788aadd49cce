"""A small Kernel Tuner cache file written by the tests (the shared real ones stay outside the repo)."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

PARAMS = {"X": [1, 2, 4, 8, 16], "Y": [16, 32, 64, 128], "Z": [0, 1, 2]}
COMPILE_FAILED = (16, 16, 2)
RUNTIME_FAILED = (1, 16, 1)
BEST = (4, 32, 1)


def mean_ms(x: int, y: int, z: int) -> float:
    """Multiplicative effects with one optimum at BEST."""
    return 0.5 * (1 + 0.4 * abs(x.bit_length() - 3)) * (1 + 0.5 * abs(y.bit_length() - 6)) * (1 + 0.3 * abs(z - 1))


def allowed(x: int, y: int, z: int) -> bool:
    return x * y <= 1024


def write_cache(path: Path, *, device_name: str = "Test GPU") -> Path:
    cache: dict[str, dict[str, Any]] = {}
    for x, y, z in itertools.product(*PARAMS.values()):
        if not allowed(x, y, z):
            continue
        entry: dict[str, Any] = {"X": x, "Y": y, "Z": z, "compile_time": 1.0, "strategy_time": 0}
        if (x, y, z) == COMPILE_FAILED:
            entry["time"] = "CompilationFailedConfig"
        elif (x, y, z) == RUNTIME_FAILED:
            entry["time"] = "RuntimeFailedConfig"
        else:
            m = mean_ms(x, y, z)
            times = [m * 0.98, m * 1.02, m * 0.99, m * 1.01]
            entry["time"] = sum(times) / len(times)
            entry["times"] = times
        cache[f"{x},{y},{z}"] = entry
    doc = {
        "device_name": device_name,
        "kernel_name": "test_kernel",
        "problem_size": [1024, 1024],
        "tune_params_keys": list(PARAMS),
        "tune_params": PARAMS,
        "objective": "time",
        "cache": cache,
    }
    text = json.dumps(doc)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path
