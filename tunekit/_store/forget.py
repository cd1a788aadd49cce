"""Removing one tuner's stored winners from the stores a process reads them from (``LocalTuner.clear(stored=True)``)."""

from __future__ import annotations

from tunekit._base.settings_model import Settings
from tunekit._base.url_text import redacted
from tunekit._store.cache_dirs import existing_cache
from tunekit._store.fleet import fleet_store

__all__ = ["forget_winners"]


def forget_winners(settings: Settings, tuner: str) -> None:
    """Remove ``tuner``'s winners, every key on every device, from this host's cache and the fleet's store.

    What ``tunekit cache clear --tuner NAME --yes`` removes from either store (the recorded failed
    tunes of the tuner go with its winners), done on both: the fleet's store (``cache_url``), where
    the clear is recorded so that hosts' older copies are not offered back, and this host's own
    copies, which would be offered back where the fleet's database cannot record clears. Nothing
    with the cache off (``cache=False``); a cache file that does not exist is not created.

    Raises OSError naming the store and why, when one that this process reads winners from could
    not be cleared: its winners would be served again. A cache that fell back to memory-only is not
    read, and is left as it is.
    """
    failed: list[str] = []
    fleet = fleet_store(settings)
    if fleet is not None and fleet.delete(tuner=tuner) is None:
        assert settings.cache_url is not None  # fleet_store opens a store only for a cache_url
        failed.append(f"the fleet store {redacted(settings.cache_url)} (TUNEKIT_CACHE_URL), which did not answer")
    cache = existing_cache(settings)
    if cache is not None and cache.available and cache.delete(tuner=tuner) is None:
        why = cache.write_refused or "the tunekit.cache warning says why"
        failed.append(f"this host's cache {cache.path} ({why})")
    if failed:
        raise OSError(
            f"could not remove the stored winners of tuner {tuner!r} from {'; nor from '.join(failed)}: they may "
            "be served again; once that is fixed, clear again (or run `tunekit cache clear --tuner NAME`)"
        )
