"""Warns once about a key field that takes a new value at every tune.

Such a field (a seed, an unanchored float, a timestamp) makes every call a miss: each call
tunes again and stores a row that no later call reads, so the cache and the records grow
without bound while nothing is ever reused. Only the last ``WINDOW`` tunes of a tuner are
kept, and they are looked at once every ``WINDOW`` tunes, so the check costs a constant per
tune and never touches the hit path.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque

__all__ = ["WINDOW", "KeyChurn"]

_log = logging.getLogger("tunekit.tuner")

WINDOW = 100
"""Tunes a field must take a new value in, in a row, before it is named: few enough to warn early,
many enough that a service meeting its first hundred shapes does not look like churn."""


class KeyChurn:
    """The last ``WINDOW`` keys one tuner tuned, and the fields already warned about."""

    def __init__(self, tuner: str) -> None:
        self._tuner = tuner
        self._lock = threading.Lock()
        self._recent: deque[object] = deque(maxlen=WINDOW)
        self._tunes = 0
        self._warned: set[tuple[type, str]] = set()
        self.checks = 0
        """Windows looked at (for tests: the check runs once per ``WINDOW`` tunes, not per tune)."""

    def tuned(self, key: object) -> None:
        """Count one tune of ``key``; at each ``WINDOW``-th, name every field new at each of them."""
        with self._lock:
            self._recent.append(key)
            self._tunes += 1
            if self._tunes % WINDOW:
                return
            self.checks += 1
            window = list(self._recent)
        for cls, name, examples in _churning(window):
            with self._lock:
                if (cls, name) in self._warned:
                    continue
                self._warned.add((cls, name))
            _log.warning(
                "tuner %r: key field %s.%s took a new value at each of its last %d tunes (e.g. %s): every call "
                "with a new value tunes again and stores a cache row and a record no later call reads. If the "
                "field does not change which candidate wins, leave it out of the key; if it is a size, anchor it "
                "(Annotated[int, tk.Anchor()]) so that nearby values share one tune (told once per field)",
                self._tuner,
                cls.__name__,
                name,
                WINDOW,
                ", ".join(examples),
            )


def _churning(window: list[object]) -> list[tuple[type, str, list[str]]]:
    """The (key class, field, three example values) of each field whose values in ``window`` all differ."""
    cls = type(window[0])
    if len(window) < WINDOW or any(type(key) is not cls for key in window):
        return []
    out = []
    for field in dataclasses.fields(window[0]):  # type: ignore[arg-type]
        values = [getattr(key, field.name) for key in window]
        try:
            distinct = len(set(values))
        except TypeError:  # an unhashable value cannot be a key's; nothing to say about it
            continue
        if distinct == len(values):
            out.append((cls, field.name, [repr(v) for v in values[-3:]]))
    return out
