"""The store a fleet shares (``TUNEKIT_CACHE_URL``), opened once per process and URL."""

from __future__ import annotations

import threading

from tunekit._base.settings_model import Settings
from tunekit._store.pg_store import PostgresStore
from tunekit._store.store_protocol import Store

__all__ = ["fleet_store"]

_lock = threading.Lock()
_opened: dict[str, Store] = {}


def fleet_store(settings: Settings) -> Store | None:
    """The shared store the settings name, or None (no ``cache_url``, or the cache off).

    Raises ImportError with the install command when the ``postgres`` extra is missing: at the
    first tune that would use it, not at import.
    """
    if not settings.cache or settings.cache_url is None:
        return None
    with _lock:
        store = _opened.get(settings.cache_url)
        if store is None:
            store = _opened[settings.cache_url] = PostgresStore(settings.cache_url)
    return store
