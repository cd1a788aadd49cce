"""Where a tunable set was defined, stored with its winners: an edited set and another set look alike otherwise.

A cache row keeps the checksum of the set that measured it, and a process whose set has another
checksum re-tunes the key: right when the set was edited since. But two different operations
given one tuner name in two programs sharing a cache (two services that each call their kernel
``tk.LocalTuner("matmul")``) also differ in checksum: each re-tunes the key over the other's
winner at every start, and neither ever reuses a winner. Within a process
``tunekit/_tune/names.py`` refuses the second set; across processes only the row can tell. So the row
keeps where its set was defined: the key generator's ``module:qualname`` and the first candidate
names. A row of another checksum is taken for an earlier edit of this set (re-tuned quietly)
when both come from the same key generator and share a candidate name (or, for sets made
from a ``tk.Space``, one's parameters are among the other's); otherwise it
was written by a different operation, and the process warns once, naming both definitions and
the fix. A set whose key generator was renamed or moved warns once, wrongly, then its own row
has the new origin. Rows stored by versions that kept no origin have none and count as edits.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from tunekit._values.set_origin import SetOrigin

if TYPE_CHECKING:
    from tunekit._candidates.tunable_set import TunableSet

__all__ = ["report_stale"]

_log = logging.getLogger("tunekit.tuner")


_warned_lock = threading.Lock()
_warned: set[tuple[str, str, tuple[object, ...], tuple[object, ...]]] = set()


def _definition(origin: SetOrigin) -> tuple[object, ...]:
    """What identifies a set, for saying once per pair: the fields this tunekit knows.

    Not the model itself: its equality takes in the fields a newer tunekit stored in the row
    (kept as extras), and one that differs from row to row would make the warning repeat for every key.
    """
    return (origin.key_fn, origin.candidates, origin.candidate_count)


def report_stale(
    tuner: str, device_id: str, key: object, stored: SetOrigin | None, tunables: TunableSet[Any, Any]
) -> SetOrigin | None:
    """Say why a row of another checksum is re-tuned: the set changed, or another set shares the name (once).

    Returns this set's origin when the row is another set's (for the record's event, which every
    such tune carries, unlike the warning), None for an edit.
    """
    here = SetOrigin.of(tunables)
    if stored is None or _same_operation(stored, here):
        _log.info("%s: the tunable set changed since this key was tuned; re-tuning", tuner)
        return None
    with _warned_lock:
        pair = (tuner, device_id, _definition(stored), _definition(here))
        if pair in _warned:
            return here
        _warned.add(pair)
    _log.warning(
        "%s: key %s on %s was tuned by a different tunable set under the same tuner name (%s); this process "
        "uses %s. The two re-tune the key over each other's winner, so neither keeps one. Give each "
        'operation its own name, e.g. tk.LocalTuner("%s") for one and tk.LocalTuner("%s_2") for the other. '
        "(If this set is that one edited, its key generator renamed or moved, ignore this: the key is tuned "
        "again once.) Said once per pair of sets.",
        tuner,
        key,
        device_id,
        stored.describe(),
        here.describe(),
        tuner,
        tuner,
    )
    return here


def _same_operation(stored: SetOrigin, here: SetOrigin) -> bool:
    """Whether ``stored`` is most likely an earlier version of ``here``: one key generator, a candidate in common.

    Or, for sets made from a ``tk.Space`` (candidates named ``BLOCK=64,VEC=2``), the parameters of
    one a subset of the other's: a parameter added or removed renames every candidate, and a value
    added in front of the first parameter renames every one of the first candidates kept.
    """
    if stored.key_fn != here.key_fn:
        return False
    if not set(stored.candidates).isdisjoint(here.candidates):
        return True
    before, after = _parameters(stored.candidates), _parameters(here.candidates)
    return bool(before) and bool(after) and (before <= after or after <= before)


def _parameters(candidates: tuple[str, ...]) -> frozenset[str]:
    """The space parameters named in candidate names of the form ``NAME=value,NAME=value``; empty for others."""
    found: set[str] = set()
    for name in candidates:
        names = [part.partition("=")[0] for part in name.split(",") if "=" in part]
        if not names or not all(n.isidentifier() for n in names):
            return frozenset()
        found.update(names)
    return frozenset(found)
