"""The embedded store: one host's SQLite cache and its file tune locks, behind the Store protocol."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager

from tunekit._store.cache import PersistentCache
from tunekit._store.store_protocol import StoredWinner
from tunekit._store.tune_lock import tune_lock
from tunekit._values.cache_row import CacheRow, CacheValue

__all__ = ["SqliteStore"]


class SqliteStore:
    """A ``PersistentCache`` (rows, salvage, failure memory) and its per-key ``flock`` tune locks, as a Store.

    The cache keeps doing everything it did (records kept in a winner's transaction, failed tunes,
    damaged files moved aside): this adapter only names its winner operations as the protocol does.
    """

    def __init__(self, cache: PersistentCache) -> None:
        self.cache = cache

    @property
    def available(self) -> bool:
        return self.cache.available

    def get(self, device_id: str, tuner: str, key: str) -> StoredWinner:
        return self.cache.get(device_id, tuner, key)

    def put_if_absent(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> StoredWinner:
        return self.cache.put_if_absent(device_id, tuner, key, checksum, value)

    def put(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> bool:
        """Store ``value`` whatever the key has (an import the user asked for); whether the cache took it."""
        return self.cache.put(device_id, tuner, key, checksum, value)

    def rows(self, device_id: str | None = None, tuner: str | None = None) -> Iterator[CacheRow | str]:
        return self.cache.rows(device_id, tuner)

    def lock(self, device_id: str, tuner: str, key: str, timeout_s: float) -> AbstractContextManager[bool]:
        return tune_lock(self.cache, device_id, tuner, key, timeout_s)

    def owners(self) -> set[tuple[str, str]]:
        """(device id, tuner) of every row, readable or not: what ``tunekit cache`` names as there."""
        return self.cache.owners()

    def delete(self, device_id: str | None = None, tuner: str | None = None, key: str | None = None) -> int | None:
        return self.cache.delete(device_id, tuner, key)
