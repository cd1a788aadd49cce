"""Which tunes of one device ran at the same time in this process.

Threads that miss different keys at once tune them side by side on one device: each tune's
samples are timed while the others run, a busy machine of the process's own making. The
measurements are what they are; a doubtful decision says why (``doubt.py``), with the fix.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Span", "measuring"]


class Span:
    """One tune's measurement; ``others`` counts the tunes of its device that ran during it."""

    __slots__ = ("others",)

    def __init__(self, others: int) -> None:
        self.others = others


_lock = threading.Lock()
_running: dict[str, list[Span]] = {}


@contextmanager
def measuring(device_id: str) -> Iterator[Span]:
    """Mark a tune's measurement of ``device_id`` as running, counting every other one that overlaps it."""
    with _lock:
        peers = _running.setdefault(device_id, [])
        span = Span(len(peers))
        for peer in peers:
            peer.others += 1
        peers.append(span)
    try:
        yield span
    finally:
        with _lock:
            peers.remove(span)
            if not peers:
                del _running[device_id]
