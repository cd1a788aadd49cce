"""The priority plan: which candidates to benchmark first, and which are fallbacks.

CubeCL's ``TunePlan``: the first batch holds every ungrouped tunable plus the highest
within-group tier of the highest-priority group; each later batch is the next tier (then the
next group) and is run only when every candidate of the batches before it failed.
A negative priority, of a group or within it, skips the candidate for that key.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from tunekit._candidates.space_tunables import SpaceTunables
from tunekit._candidates.tunable import Tunable
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import is_autotune_key

__all__ = ["SaysWhySkipped", "plan_batches", "plan_order", "skip_reason"]

NEGATIVE_PRIORITY = "negative priority for this key"


@runtime_checkable
class SaysWhySkipped(Protocol):
    """A priority function that can say, in the user's terms, why it skips a key (``KernelTemplate(applies=)``)."""

    def __call__(self, key: Any) -> int: ...

    def why_skipped(self, key: Any) -> str:
        """Why the candidate is skipped for ``key`` (it returned a negative priority)."""
        ...


def plan_batches(key: object, tunables: Sequence[Tunable[object, Any]] | TunableSet[Any, Any]) -> list[list[int]]:
    """Indices of ``tunables`` (a set, or its tunables) grouped in the order batches are tried; skipped ones absent.

    ``key`` is an ``@tk.autotune_key`` instance, as the set's key generator builds it; anything
    else is refused with a TypeError saying what to pass.
    """
    if not is_autotune_key(key):
        # Let through, it reaches the priority functions, which fail on it far from here, or plans for
        # a key no tune ever sees (an int where the key has anchored fields, the key class itself).
        raise TypeError(_not_a_key(key))
    if isinstance(tunables, TunableSet):  # the set itself, which is not iterable
        tunables = tunables.tunables
    # A space's tunables are in no group: planned without making each (10^6 of them for one search).
    start = tunables.ungrouped if isinstance(tunables, SpaceTunables) else 0
    ungrouped: list[int] = list(range(start))
    # group priority -> within-group priority -> indices, in declaration order
    tiers: dict[int, dict[int, list[int]]] = {}
    for index in range(start, len(tunables)):
        tunable = tunables[index]
        if not tunable.groups:
            ungrouped.append(index)
            continue
        for group, within in tunable.groups:
            group_priority = _priority(group.priority, key, f"the priority of TuneGroup {group.name!r}")
            within_priority = _priority(within, key, f"tunable {tunable.name!r}'s priority within group {group.name!r}")
            if group_priority < 0 or within_priority < 0:
                continue
            tiers.setdefault(group_priority, {}).setdefault(within_priority, []).append(index)
    batches: list[list[int]] = []
    seen: set[int] = set()
    first = True
    for group_priority in sorted(tiers, reverse=True):
        for within_priority in sorted(tiers[group_priority], reverse=True):
            batch = (ungrouped if first else []) + tiers[group_priority][within_priority]
            first = False
            fresh = [i for i in dict.fromkeys(batch) if i not in seen]  # in two groups of one tier: listed once
            seen.update(fresh)
            if fresh:
                batches.append(fresh)
    if first and ungrouped:
        batches.append(ungrouped)
    return batches


def _not_a_key(key: object) -> str:
    """What plan_batches was given instead of a key, and what to pass."""
    if isinstance(key, TunableSet):
        got = "the TunableSet as its key: the key comes first, tk.plan_batches(key, tunables)"
    elif isinstance(key, type):
        fields = ", ".join(f"{f.name}=..." for f in dataclasses.fields(key)) if dataclasses.is_dataclass(key) else ""
        got = f"the class {key.__qualname__} itself, not an instance of it ({key.__qualname__}({fields}))"
    else:
        got = f"{type(key).__name__} {key!r}"[:300] + ", not an @tk.autotune_key instance"
    return (
        f"plan_batches() got {got}; pass the key the set's key generator builds for a call's inputs, "
        "e.g. tk.plan_batches(tunables.key(*inputs), tunables)"
    )


def _priority(fn: Callable[[Any], object], key: object, what: str) -> int:
    """``fn(key)`` as an int priority; anything else is the priority function's mistake, named.

    Not ``int()``: it would turn -0.5 into 0 (so a candidate meant to be skipped runs), "5"
    into 5, and fail on "high" as "invalid literal for int()", naming no group. A bool is
    refused too: False reads as "skip" but is priority 0, which runs. An exception keeps its
    type and gains a note naming the function and the key, which a bare one names neither of.
    """
    try:
        value = fn(key)
    except Exception as exc:
        exc.add_note(f"tunekit: raised by {what} for key {key!r}")
        raise
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):  # an int or a numpy integer
        return int(value)
    raise TypeError(
        f"{what} returned {value!r} ({type(value).__name__}), not an int: "
        "return a higher int to run first, a negative one (-1) to skip the candidate for this key"
    )


def plan_order(key: object, tunables: Sequence[Tunable[object, Any]]) -> Iterator[int]:
    """Every planned index, batch after batch: the order used when tuning is disabled."""
    for batch in plan_batches(key, tunables):
        yield from batch


def skip_reason(key: object, tunable: Tunable[object, Any]) -> str:
    """Why the plan skips ``tunable`` for ``key``: its priority function's own words, else a negative priority."""
    for group, within in tunable.groups:
        for fn in (group.priority, within):
            if isinstance(fn, SaysWhySkipped) and _priority(fn, key, "a priority") < 0:
                return fn.why_skipped(key)
    return NEGATIVE_PRIORITY
