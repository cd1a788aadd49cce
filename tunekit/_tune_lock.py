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
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from tunekit._cache import PersistentCache

__all__ = ["tune_lock"]

_log = logging.getLogger("tunekit.tuner")


_held = threading.local()
"""Lock paths this thread holds: a tune nested inside a tune of the same key must not wait on itself."""


@contextmanager
def tune_lock(cache: PersistentCache, device_id: str, tuner: str, key_json: str, timeout_s: float) -> Iterator[bool]:
    """Hold the lock on (device, tuner, key) while the block runs; yields whether it is held.

    Not held (False) when the cache directory takes no lock file, or after ``timeout_s`` of
    waiting: the caller then tunes without it, as it would have without this lock. A thread
    that already holds it (a candidate that tunes the same key through another tunable set of
    the same tuner name, which for one key must have the same candidates) goes on at once.
    """
    digest = hashlib.sha256("\x00".join((device_id, tuner, key_json)).encode()).hexdigest()[:40]
    path = cache.directory / "locks" / f"{digest}.lock"
    held: set[Path] = _held.__dict__.setdefault("paths", set())
    if path in held:
        yield True
        return
    lock = _acquire(path, tuner, key_json, device_id, timeout_s)
    if lock is None:
        yield False
        return
    held.add(path)
    try:
        yield True
    finally:
        held.discard(path)
        lock.release()


def _acquire(path: Path, tuner: str, key_json: str, device_id: str, timeout_s: float) -> filelock.FileLock | None:
    """The lock, taken; None when it cannot be made or another process kept it past ``timeout_s``."""
    try:
        path.parent.mkdir(exist_ok=True)
        lock = filelock.FileLock(str(path))
        try:
            lock.acquire(timeout=0)
            return lock
        except filelock.Timeout:
            _log.info("%s: another process is tuning key %s on %s; waiting for its winner", tuner, key_json, device_id)
        lock.acquire(timeout=timeout_s)
        return lock
    except filelock.Timeout:
        _log.warning(
            "%s: waited %.0f s for another process tuning key %s on %s; tuning it here too",
            tuner,
            timeout_s,
            key_json,
            device_id,
        )
    except OSError as exc:
        _log.info("%s: no cross-process tune lock (%s); tuning without it", tuner, exc)
    return None
