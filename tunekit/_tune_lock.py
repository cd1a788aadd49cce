"""One process at a time tunes a key: the others wait, then read its winner from the cache.

Eight serving processes started together on a fresh machine would otherwise all tune the same
key at once: eight times the start-up time, each process's timings skewed by the other seven
running on the same device, and eight possibly different winners stored one over another.
With this lock the first one tunes; each of the others, once the lock is free, finds the winner
in the persistent cache. The lock is an OS file lock (``filelock``): a process killed while it
holds it releases it, so a waiter never waits on a dead owner.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import filelock

from tunekit._cache import PersistentCache

__all__ = ["tune_lock"]

_log = logging.getLogger("tunekit.tuner")


@contextmanager
def tune_lock(cache: PersistentCache, device_id: str, tuner: str, key_json: str, timeout_s: float) -> Iterator[bool]:
    """Hold the lock on (device, tuner, key) while the block runs; yields whether it is held.

    Not held (False) when the cache directory takes no lock file, or after ``timeout_s`` of
    waiting: the caller then tunes without it, as it would have without this lock.
    """
    digest = hashlib.sha256("\x00".join((device_id, tuner, key_json)).encode()).hexdigest()[:40]
    path = cache.directory / "locks" / f"{digest}.lock"
    try:
        path.parent.mkdir(exist_ok=True)
        lock = filelock.FileLock(str(path), timeout=timeout_s)
        lock.acquire()
    except filelock.Timeout:
        _log.warning(
            "%s: waited %.0f s for another process tuning key %s on %s; tuning it here too",
            tuner,
            timeout_s,
            key_json,
            device_id,
        )
        yield False
        return
    except OSError as exc:
        _log.info("%s: no cross-process tune lock (%s); tuning without it", tuner, exc)
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
