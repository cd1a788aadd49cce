"""The priority plan: which candidates to benchmark first, and which are fallbacks.

CubeCL's ``TunePlan``: the first batch holds every ungrouped tunable plus the highest
within-group tier of the highest-priority group; each later batch is the next tier (then the
next group) and is run only when every candidate of the batches before it failed.
A negative priority, of a group or within it, skips the candidate for that key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tunekit._tunable import Tunable

__all__ = ["plan_batches", "plan_order"]


def plan_batches(key: object, tunables: Sequence[Tunable[object]]) -> list[list[int]]:
    """Indices of ``tunables`` grouped in the order batches are tried; skipped ones are absent."""
    ungrouped: list[int] = []
    # group priority -> within-group priority -> indices, in declaration order
    tiers: dict[int, dict[int, list[int]]] = {}
    for index, tunable in enumerate(tunables):
        if not tunable.groups:
            ungrouped.append(index)
            continue
        for group, within in tunable.groups:
            group_priority = int(group.priority(key))
            within_priority = int(within(key))
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
            fresh = [i for i in batch if i not in seen]
            seen.update(fresh)
            if fresh:
                batches.append(fresh)
    if first and ungrouped:
        batches.append(ungrouped)
    return batches


def plan_order(key: object, tunables: Sequence[Tunable[object]]) -> Iterator[int]:
    """Every planned index, batch after batch: the order used when tuning is disabled."""
    for batch in plan_batches(key, tunables):
        yield from batch
