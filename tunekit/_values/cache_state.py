"""Explicit cache states, for ``match`` in the tuner (and in user tools)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

from tunekit._values.cache_row import CacheValue

__all__ = ["CacheState", "Hit", "Miss", "Pending", "Unchecked"]


@dataclass(frozen=True, slots=True)
class Hit:
    """A validated winner is in memory; ``ranking`` holds tunable indices, fastest first."""

    ranking: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Miss:
    """Nothing usable is stored; ``reason`` says why a stored row was not used, if there was one."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Pending:
    """Another thread is tuning this key; wait on ``future`` for its ranking."""

    future: Future[tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A persistent row exists but was not yet checked against the current tunable set."""

    checksum: str
    value: CacheValue


CacheState = Hit | Miss | Pending | Unchecked
