"""Tunables (one candidate implementation) and tune groups (priority buckets)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic

from typing_extensions import TypeVar

__all__ = ["PriorityFn", "TuneGroup", "Tunable"]

Out = TypeVar("Out", covariant=True)
# A group's key type: Any when mypy cannot tell it (a module-level `TuneGroup("g", lambda key: ...)`),
# so that lambda's `key.n` type-checks as it did; `TuneGroup[Key]` or a typed function states it.
GroupKey = TypeVar("GroupKey", contravariant=True, default=Any)
# The key type a tunable's priorities read: Any until .group() gives it a group, so that a tunable
# annotated `tk.Tunable[Out]` may hold a typed group (with object, the annotation refused it).
TunableKey = TypeVar("TunableKey", contravariant=True, default=Any)
K2 = TypeVar("K2")

PriorityFn = Callable[[Any], int]
"""Maps a key to a priority: higher runs first, negative skips the candidate for that key."""


@dataclass(frozen=True, eq=False)
class TuneGroup(Generic[GroupKey]):
    """A named bucket of tunables sharing a key-dependent priority.

    Groups are compared by identity: two groups with the same name are distinct buckets.
    The type parameter is the key the priority reads (``tk.TuneGroup[MatKey]``): a tunable
    of a group of another key class is a type error where it joins a set.
    """

    name: str
    priority: Callable[[GroupKey], int]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:  # else TuneGroup(3, ...) would pass, named 3
            raise ValueError(f"TuneGroup needs a non-empty str name, got {self.name!r}")
        if not callable(self.priority):
            raise TypeError(f"TuneGroup {self.name!r}: priority must be a callable key -> int")


@dataclass(frozen=True)
class Tunable(Generic[Out, TunableKey]):
    """One candidate: a name unique within its set, and the function that computes the output.

    The second type parameter is the key its group priorities read (``Any`` until :meth:`group`
    sets it), which a set checks against its own key type.

    ``version`` goes into the set's checksum: bump it when the function's behaviour changes
    and cached winners should be re-measured.

    ``prepare``, when given, is called with the benchmark inputs before anything is timed,
    for every candidate of a batch concurrently: it is where a kernel is compiled (and first
    launched, for drivers that compile lazily). If it raises, the candidate is recorded as
    failed at the ``compile`` stage and never timed.
    """

    name: str
    fn: Callable[..., Out]
    version: str = ""
    # Any, not TunableKey: each group of a tunable may state its key type apart (the last one given is checked).
    groups: tuple[tuple[TuneGroup[Any], PriorityFn], ...] = field(default=())
    prepare: Callable[..., object] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Tunable needs a non-empty str name, got {self.name!r}")
        if not isinstance(self.version, str):  # it is hashed as text: 3 and "3" would be one version
            raise TypeError(
                f"Tunable {self.name!r}: version must be a str, got {self.version!r}; "
                f"pass version={str(self.version)!r}"
            )
        if not callable(self.fn):
            raise TypeError(f"Tunable {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        if self.prepare is not None and not callable(self.prepare):
            raise TypeError(
                f"Tunable {self.name!r}: prepare must be callable or None, got {type(self.prepare).__name__}"
            )

    def group(self, group: TuneGroup[K2], priority: Callable[[K2], int]) -> Tunable[Out, K2]:
        """Return a copy that belongs to ``group`` with a within-group ``priority`` (key -> int).

        Both functions read the group's key type: inside ``tunable_set.with_tunable(...)`` that is
        the set's key type, so a lambda's ``key.field`` is checked against the set's key class.
        """
        if not isinstance(group, TuneGroup):
            raise TypeError(f"Tunable {self.name!r}: group() takes a tk.TuneGroup, got {type(group).__name__}")
        if not callable(priority):
            raise TypeError(f"Tunable {self.name!r}: the within-group priority must be a callable key -> int")
        if any(existing is group for existing, _ in self.groups):
            raise ValueError(f"Tunable {self.name!r} is already in group {group.name!r}")
        # Built, not replace()d: replace() would keep this tunable's key type, the new group's is the one returned.
        return Tunable(self.name, self.fn, self.version, (*self.groups, (group, priority)), self.prepare)
