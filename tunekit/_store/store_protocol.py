"""Store: where winners outlive a process, as the tuner sees it.

Two implementations share this protocol and one conformance suite (``tests/store/test_store_conformance.py``):
the embedded SQLite cache of one host (``tunekit._store.sqlite_store``, the default) and a PostgreSQL
database that a whole fleet shares (``tunekit._store.pg_store``, chosen by ``TUNEKIT_CACHE_URL``).
Each row is a winner by *name* with the checksum of the set it was measured against: nothing read
back is executed or unpickled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from tunekit._values.cache_row import CacheRow, CacheValue

__all__ = ["Store", "StoredWinner"]

StoredWinner = tuple[str, CacheValue] | str | None
"""A key's stored (checksum, value); a reason string when its row is unreadable or the store cannot be
reached; None when it has none."""


class Store(Protocol):
    """Winners by (device id, tuner name, key JSON), with one tune per key at a time across processes."""

    @property
    def available(self) -> bool:
        """False while the store cannot be used (memory-only); reads then find nothing and writes store nothing."""
        ...

    def get(self, device_id: str, tuner: str, key: str) -> StoredWinner:
        """The key's stored winner."""
        ...

    def put_if_absent(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> StoredWinner:
        """Store ``value`` unless the key has a winner measured against the same ``checksum``; the winner it has now.

        A row of another checksum (a set since changed) is replaced. The answer is what every
        process reads from then on: ``value`` itself, or the winner of a process that stored first,
        which a loser of the race adopts. None when the store took nothing and has no winner: the
        fleet's store refuses a value tuned before a clear of its key (a host's copy of a winner the
        fleet chose to forget), and the caller tunes the key again.
        """
        ...

    def rows(self, device_id: str | None = None, tuner: str | None = None) -> Iterator[CacheRow | str]:
        """The winners of this major version (optionally one device's or tuner's); unreadable ones as reasons."""
        ...

    def lock(self, device_id: str, tuner: str, key: str, timeout_s: float) -> AbstractContextManager[bool]:
        """Hold the key's tune lock while the block runs; yields whether it is held.

        Not held (False) after ``timeout_s`` of waiting or when the store cannot take it: the caller
        then tunes without it. A process that dies holding it releases it.
        """
        ...

    def delete(self, device_id: str | None = None, tuner: str | None = None, key: str | None = None) -> int | None:
        """Remove winners of this major version (all, or one device's, tuner's, key's); how many, None when refused."""
        ...
