"""One warning per process when a tune's measurements spread wider than its margin (a busy machine).

A winner chosen inside the noise may be slower than the runner-up by more than the noise
tolerance; the user is told once, with what to do, rather than at every key of a busy run
(the later ones are logged at INFO, and every record keeps its figures for ``records summary``).
"""

from __future__ import annotations

import logging
import threading

from tunekit._values.decision import TuneDecision

__all__ = ["warn_if_untrusted"]

# Its own logger: a busy machine can doubt any tune, and users (and tests) filter it apart from the tuner's.
_log = logging.getLogger("tunekit.doubt")
_lock = threading.Lock()
_warned = False


def warn_if_untrusted(
    tuner: str, key: object, decision: TuneDecision | None, *, overlapped: int = 0, stored: bool = True
) -> bool:
    """Log the decision's warning when it is not trusted: WARNING the first time in this process, then INFO.

    ``overlapped``: how many other tunes of the device this process ran during this one; the
    warning then names them as a likely cause, since they are this process's own doing.
    ``stored``: whether the winner is in the persistent cache (the advice to re-tune depends on it).
    Returns whether the decision was untrusted.
    """
    global _warned
    text = decision.warning(tuner, stored=stored) if decision is not None else None
    if text is None:
        return False
    if overlapped:
        text += (
            f"; {overlapped} other tune{'s' if overlapped > 1 else ''} of this device ran in this process at the "
            "same time (threads that missed different keys at once), timed beside this one: tune the keys one at a "
            "time, e.g. call each from one thread at start-up, or commit a record"
        )
    with _lock:
        first, _warned = not _warned, True
    if first:
        _log.warning("%s %s: %s (told once per process; later ones are logged at INFO)", tuner, key, text)
    else:
        _log.info("%s %s: %s", tuner, key, text)
    return True
