"""One key of a tuner name, one tunable set: two sets tuning one key would re-tune over each other forever.

The persistent cache keeps one row per (device, tuner name, key), with the checksum of the set
that measured it. Two sets with different candidates tuning one key under one name would each
find the other's row stale, re-tune and overwrite it, and nothing would stay cached; the
cross-process tune lock, keyed the same way, would also make each wait for the other. So within a
process the first set that runs a key claims it (with the name, on its device), and a different
set (another checksum) asking for that key is refused while the first is still alive, with an
error naming both and the fix. Claims are per key, not per name: sets whose keys never meet (one
set per dtype under one tuner, the dtype in the key, as CubeCL's kernels do) share no row and are
allowed.

Rows are not keyed by checksum as well, which would let both sets work: every edit of a set would
then leave its old rows behind for good (nothing tells an abandoned checksum from one in use in
another process), and records, reports, spans and ``tunekit cache`` all name an operation by its
tuner name, so two operations under one name would stay mixed up there anyway.

The claim holds the set weakly: a set that is gone (its ``LocalTuner`` cleared or dropped, a
notebook cell run again) no longer holds its name, so redefining an operation in a running
process re-tunes it, as a changed set does in a new process. Sets of one name on different
devices (a CPU set and an OpenCL set of one operation) never share rows and may differ.
"""

from __future__ import annotations

import gc
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunekit._candidates.tunable_set import TunableSet

__all__ = ["claim_name"]


@dataclass(frozen=True, slots=True)
class _Claim:
    checksum: str
    holder: weakref.ref[TunableSet[Any, Any]]
    description: str


_lock = threading.Lock()
# Keyed by the cache directory too: rows only collide within one cache (and each test has its own).
_claims: dict[tuple[Path, str, str, str], _Claim] = {}


def claim_name(cache_dir: Path, device_id: str, name: str, key_json: str, tunables: TunableSet[Any, Any]) -> None:
    """Let ``tunables`` tune ``key_json`` under ``name`` on ``device_id``; ValueError when a different live set has."""
    scope = (cache_dir, device_id, name, key_json)
    other = _claim(scope, tunables)
    if other is None:
        return
    # The other set may be garbage that only the cycle collector would free (a dropped LocalTuner
    # in a reference cycle): collect before refusing, on this rare path only.
    gc.collect()
    other = _claim(scope, tunables)
    if other is None:
        return
    raise ValueError(
        f"tuner {name!r} on device {device_id!r} already runs key {key_json} in this process with another tunable "
        f"set: {other}; now {_describe(tunables)} asks for the same key under the same name. They would overwrite "
        "each other's "
        "cached winners and re-tune forever. Give each operation its own name, e.g. "
        f'tk.LocalTuner("{name}") for one and tk.LocalTuner("{name}_2") for the other. '
        "(To replace a set in a running process, e.g. a notebook cell run again, call .clear() on its "
        "LocalTuner first.)"
    )


def _claim(scope: tuple[Path, str, str, str], tunables: TunableSet[Any, Any]) -> str | None:
    """Take or keep the claim for ``tunables``; the live other set's description when it cannot."""
    checksum = tunables.checksum()
    with _lock:
        current = _claims.get(scope)
        if current is not None and current.holder() is not None:
            return None if current.checksum == checksum else current.description
        _claims[scope] = _Claim(checksum, weakref.ref(tunables), _describe(tunables))
        return None


def _describe(tunables: TunableSet[Any, Any]) -> str:
    return f"{tunables!r} (key generator {tunables.describe_key_fn()})"
