"""Which candidate won a key: what ``LocalTuner.winner`` answers, without running or tuning anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunekit._candidates.config import Config
from tunekit._candidates.tunable_set import TunableSet

__all__ = ["Winner", "winner_at"]


@dataclass(frozen=True, slots=True)
class Winner:
    """A key's winner in a set: its candidate name and, for a set made from a space, its configuration.

    ``config`` is None for a set of hand-written tunables; for ``TunableSet.from_space`` or an
    OpenCL ``KernelTemplate``'s set it is the ``tk.Config`` the winner was built from
    (``winner.config.BLOCK``, ``winner.config.to_dict()``). ``stored``: the winner was read from the
    persistent cache (tuned by an earlier process or another thread), not held in this process's memory.
    """

    name: str
    config: Config | None
    stored: bool = False


def winner_at(tunables: TunableSet[Any, Any], index: int, *, stored: bool) -> Winner:
    """The winner that is ``tunables``' candidate ``index``."""
    tunable = tunables.tunables[index]
    config = getattr(tunable.fn, "config", None)  # a space's candidates carry the configuration they were built from
    return Winner(tunable.name, config if isinstance(config, Config) else None, stored)
