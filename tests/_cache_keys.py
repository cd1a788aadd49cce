"""The key, tunable set and cache path that the cache robustness and damage tests share."""

from __future__ import annotations

from pathlib import Path

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class IKey:
    i: int


def key(i: int) -> IKey:
    return IKey(i=i)


def tunables() -> tk.TunableSet[IKey, int]:
    return tk.TunableSet(key=key).with_tunables(
        [tk.Tunable("double", lambda i: 2 * i), tk.Tunable("twice", lambda i: i + i)]
    )


def db(cache_dir: Path) -> Path:
    return cache_dir / tk.PersistentCache.FILENAME
