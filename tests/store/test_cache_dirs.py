"""The persistent cache of each directory, shared by every tuner of a process, and by its forked children."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from _procs import in_child

import tunekit as tk
from tunekit._store import cache_dirs


@pytest.mark.subprocess
def test_a_child_forked_while_another_thread_opens_the_cache_opens_its_own(isolated_settings: Path) -> None:
    """Regression: a pool forked while a warm-up thread opened the cache (its first miss) hung in the child's first
    tune, on the lock that thread held when fork() left it behind."""
    opening, forked = threading.Event(), threading.Event()

    def opens_slowly() -> None:
        with cache_dirs._lock:  # as a first open holds it, while SQLite makes the file
            opening.set()
            forked.wait(timeout=60)

    holder = threading.Thread(target=opens_slowly)
    holder.start()
    assert opening.wait(timeout=60)
    try:
        path = in_child(lambda: str(cache_dirs.persistent_cache().path), timeout_s=30)  # type: ignore[union-attr]
    finally:
        forked.set()
        holder.join()
    assert path == str(isolated_settings / tk.PersistentCache.FILENAME)
