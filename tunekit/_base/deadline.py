"""A search's deadline: the ``time.monotonic()`` time after which no further candidate starts."""

from __future__ import annotations

import time

__all__ = ["past"]


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` has come; never for None (a search without ``max_seconds``)."""
    return deadline is not None and time.monotonic() >= deadline
