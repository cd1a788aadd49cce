"""The persistent cache of each directory, opened once per process and shared by every tuner."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tunekit._base import settings as _settings
from tunekit._base.settings_model import Settings
from tunekit._store.cache import PersistentCache, default_cache_dir

__all__ = ["cache_dir", "existing_cache", "persistent_cache"]

_lock = threading.Lock()
_opened: dict[Path, PersistentCache] = {}


def persistent_cache(settings: Settings | None = None) -> PersistentCache | None:
    """The persistent cache the settings point at (shared per directory), or None when disabled."""
    settings = settings or _settings.current()
    if not settings.cache:
        return None
    directory = cache_dir(settings)
    with _lock:
        cache = _opened.get(directory)
        if cache is None:
            cache = _opened[directory] = PersistentCache(directory)
    return cache


def cache_dir(settings: Settings) -> Path:
    """The directory the settings' cache lives in, resolved: one key per cache, however it is spelled."""
    return (settings.cache_dir or default_cache_dir()).expanduser().resolve()


def existing_cache(settings: Settings) -> PersistentCache | None:
    """The persistent cache when its file exists, else None.

    Opening the cache creates its file: a look (a key's state with autotune off, or before anything
    is tuned) opens only a cache that is already there, so it leaves no empty one behind.
    """
    if not settings.cache:
        return None
    try:
        missing = not (cache_dir(settings) / PersistentCache.FILENAME).exists()
    except OSError:  # a directory this process may not look into: opening the cache says why, once
        missing = False
    return None if missing else persistent_cache(settings)


def _renew_lock() -> None:
    global _lock  # held by another thread at fork (opening a cache), it would stay held in the child
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock)
