"""Candidates and prepare hooks that execute their own operation for the key being tuned (see test_tuner.py).

At module level so that a spawned worker can rebuild the tune by name with :func:`build`.
"""

from __future__ import annotations

import time
from typing import Any

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: int


TUNER: tk.LocalTuner[NKey, int] = tk.LocalTuner("self-call-spawned")


def _selfish(n: int) -> int:
    return TUNER.execute(CLIENT.device_id, CLIENT, SET, (n,))


def _plain(n: int) -> int:
    time.sleep(0.001)
    return n


SET: tk.TunableSet[NKey, int] = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
    [tk.Tunable("selfish", _selfish), tk.Tunable("plain", _plain)]
)


def build(key: dict[str, Any]) -> tuple[CpuClient, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """The tune, rebuilt from the key's fields in a spawned worker: its candidates are SET's."""
    return CLIENT, SET, (int(key["n"]),)


PREPARE_TUNER: tk.LocalTuner[NKey, int] = tk.LocalTuner("self-call-prepare")


def _prepare_selfish(n: int) -> None:
    PREPARE_TUNER.execute(CLIENT.device_id, CLIENT, PREPARE_SET, (n,))


PREPARE_SET: tk.TunableSet[NKey, int] = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
    [tk.Tunable("prepares-selfishly", lambda n: n, prepare=_prepare_selfish), tk.Tunable("plain", _plain)]
)


def _tunes_another_set(n: int) -> int:
    """The same tuner and key as the tune running this candidate, with a set of other candidates."""
    return TUNER.execute(CLIENT.device_id, CLIENT, OTHER_SET, (n,))


OTHER_SET: tk.TunableSet[NKey, int] = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
    [tk.Tunable("other-plain", _plain), tk.Tunable("other-plain-too", _plain)]
)
SHARING_SET: tk.TunableSet[NKey, int] = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
    [tk.Tunable("tunes-another-set", _tunes_another_set), tk.Tunable("plain", _plain)]
)


def build_sharing(key: dict[str, Any]) -> tuple[CpuClient, tk.TunableSet[NKey, int], tuple[Any, ...]]:
    """SHARING_SET, rebuilt from the key's fields in a spawned worker."""
    return CLIENT, SHARING_SET, (int(key["n"]),)
