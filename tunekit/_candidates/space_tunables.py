"""The tunables of a set made from a space: made when asked for, not one per configuration up front.

Holding a Config, a LazyBuild and a Tunable per configuration, ``TunableSet.from_space`` over
10^6 configurations would take 0.6 GiB and 4 s before anything runs, though a search measures a
few hundred of them. :class:`SpaceTunables` keeps what names and builds them (the space,
``build``, the version) and which Cartesian points are valid: nothing for a space without
restrictions (position ``i`` is Cartesian point ``i``), an ascending integer array otherwise. A
tunable is made at its first request (by index, by name, by iteration) and kept, so one candidate
is one object, built once, however often it is asked for. Names are worked out from the index
(``BLOCK=64,VEC=2``, joined from a text made once per value) and parsed back for a lookup, so
``index_of`` needs no table of names.

Tunables appended to such a set (``with_tunables``) follow the space's.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import numpy as np

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._candidates.tunable import Tunable

__all__ = ["SpaceNames", "SpaceTunables"]

_CHUNK = 1 << 16
"""Names hashed per update: joined whole, the checksum of 10^6 names would hold them all at once."""


class _Points:
    """The valid configurations of one space, the tunables made of them so far, and how to make one.

    Shared by a set and every set derived from it (``with_search``, ``with_tunables``, ...): a
    tunable made for one is the same object in the others.
    """

    __slots__ = ("cartesian", "made", "make", "positions_of", "space", "strides", "texts", "valid", "version", "widths")

    def __init__(self, space: Space, version: str, make: Callable[[Config, str, str], Tunable[Any, Any]]) -> None:
        self.space = space
        self.version = version
        self.make = make
        self.cartesian = space.cartesian_size
        self.valid = space._valid_indices()  # the walk: every restriction call happens here, once
        names, domains = space.names, space._domain_list
        self.texts = tuple(tuple([f"{n}={v}" for v in domain]) for n, domain in zip(names, domains, strict=True))
        # A value's text is unique within its parameter and holds no ',' or '=' (tk.Space refuses
        # both), so a name splits back into one position per parameter.
        self.positions_of = tuple({text: p for p, text in enumerate(texts)} for texts in self.texts)
        self.strides = space._strides
        self.widths = tuple(len(texts) for texts in self.texts)
        self.made: dict[int, Tunable[Any, Any]] = {}

    def __len__(self) -> int:
        return self.cartesian if self.valid is None else len(self.valid)

    def point(self, index: int) -> int:
        """The Cartesian index of valid configuration ``index`` (0 <= index < len)."""
        return index if self.valid is None else int(self.valid[index])

    def positions(self, index: int) -> list[int]:
        """Each parameter's value position in valid configuration ``index``."""
        point = self.point(index)
        return [(point // s) % w for s, w in zip(self.strides, self.widths, strict=True)]

    def name(self, index: int) -> str:
        return self._name_at(self.positions(index))

    def _name_at(self, positions: list[int]) -> str:
        return ",".join([texts[p] for texts, p in zip(self.texts, positions, strict=True)])

    def tunable(self, index: int) -> Tunable[Any, Any]:
        made = self.made.get(index)
        if made is None:
            positions = self.positions(index)
            config = self.space.from_positions(positions)
            # setdefault: two threads asking at once both make one, and both get the one kept.
            made = self.made.setdefault(index, self.make(config, self._name_at(positions), self.version))
        return made

    def index_of(self, name: object) -> int | None:
        if not isinstance(name, str):
            return None
        parts = name.split(",")
        if len(parts) != len(self.texts):
            return None
        point = 0
        for part, positions, stride in zip(parts, self.positions_of, self.strides, strict=True):
            position = positions.get(part)
            if position is None:
                return None
            point += position * stride
        if self.valid is None:
            return point
        found = int(np.searchsorted(self.valid, point))
        return found if found < len(self.valid) and int(self.valid[found]) == point else None

    def names(self) -> Iterator[str]:
        """Every name in order, without a tunable or a Config: what the checksum hashes."""
        if self.valid is None:
            return map(",".join, itertools.product(*self.texts))
        if self.cartesian <= 4 * len(self.valid):  # dense: walk the product, keep the valid ones
            kept = np.zeros(self.cartesian, dtype=np.uint8)
            kept[self.valid] = 1
            return itertools.compress(map(",".join, itertools.product(*self.texts)), kept.tobytes())
        return map(self.name, range(len(self.valid)))  # sparse (a replayed file's keys): by index


class SpaceTunables(Sequence[Tunable[Any, Any]]):
    """``TunableSet.tunables`` of a set made from a space: indexable, iterable and sized like the tuple it replaces."""

    __slots__ = ("_points", "_tail", "_tail_index")

    def __init__(self, space: Space, version: str, make: Callable[[Config, str, str], Tunable[Any, Any]]) -> None:
        """Walk ``space`` once for its valid points; ``make(config, name, version)`` makes a tunable when asked for."""
        self._points = _Points(space, version, make)
        self._tail: tuple[Tunable[Any, Any], ...] = ()
        self._tail_index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._points) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Tunable[Any, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Tunable[Any, Any], ...]: ...

    def __getitem__(self, index: int | slice) -> Tunable[Any, Any] | tuple[Tunable[Any, Any], ...]:
        if isinstance(index, slice):
            return tuple([self[i] for i in range(*index.indices(len(self)))])
        at = _position(index, len(self), "tunable")
        own = len(self._points)
        return self._points.tunable(at) if at < own else self._tail[at - own]

    def __iter__(self) -> Iterator[Tunable[Any, Any]]:
        # Each tunable is made and kept as it is reached: iterating a 10^6-point set holds them all.
        points = self._points
        yield from map(points.tunable, range(len(points)))
        yield from self._tail

    def __contains__(self, item: object) -> bool:
        index = self.index_of(item.name) if isinstance(item, Tunable) else None
        return index is not None and self[index] == item

    def __repr__(self) -> str:
        return f"<{len(self):,} tunables of {self._points.space!r}>"

    @property
    def ungrouped(self) -> int:
        """How many leading tunables are made by the space, hence in no group: the plan needs not make them."""
        return len(self._points)

    @property
    def names(self) -> SpaceNames:
        """The tunables' names, in order, worked out without making a tunable."""
        return SpaceNames(self._points, tuple([t.name for t in self._tail]))

    def index_of(self, name: str) -> int | None:
        """Position of the tunable called ``name``, or None when it is not a member."""
        found = self._points.index_of(name)
        if found is not None:
            return found
        tail = self._tail_index.get(name)
        return None if tail is None else len(self._points) + tail

    def extended(self, added: tuple[Tunable[Any, Any], ...]) -> SpaceTunables:
        """These tunables with ``added`` after them; the caller has refused duplicate names."""
        new: SpaceTunables = SpaceTunables.__new__(SpaceTunables)
        new._points = self._points
        new._tail = (*self._tail, *added)
        new._tail_index = {t.name: i for i, t in enumerate(new._tail)}
        return new

    def hash_into(self, digest: Any) -> None:
        """Feed ``digest`` what ``TunableSet.checksum`` hashes per tunable, in order, making no tunable.

        The same bytes as ``name\\x00version\\x01`` for each, as a set of plain tunables hashes, so a
        set's checksum does not depend on how it holds its tunables; the space's names in chunks:
        one update per name costs more than naming them.
        """
        end = f"\x00{self._points.version}\x01"
        names = self._points.names()
        while chunk := list(itertools.islice(names, _CHUNK)):
            digest.update((end.join(chunk) + end).encode())
        for tunable in self._tail:
            digest.update(f"{tunable.name}\x00{tunable.version}\x01".encode())


class SpaceNames(Sequence[str]):
    """``TunableSet.names`` of a set made from a space: each name worked out when read.

    Equal to the tuple of the same names, as a plain set's ``names`` is.
    """

    __slots__ = ("_points", "_tail")

    def __init__(self, points: _Points, tail: tuple[str, ...]) -> None:
        self._points = points
        self._tail = tail

    def __len__(self) -> int:
        return len(self._points) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return tuple([self[i] for i in range(*index.indices(len(self)))])
        at = _position(index, len(self), "name")
        own = len(self._points)
        return self._points.name(at) if at < own else self._tail[at - own]

    def __iter__(self) -> Iterator[str]:
        yield from self._points.names()
        yield from self._tail

    def __contains__(self, item: object) -> bool:
        return self._points.index_of(item) is not None or item in self._tail

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpaceNames | tuple):
            return len(self) == len(other) and all(map(operator.eq, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, yet not its hash

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self[:4]))
        return f"<{len(self):,} names: {shown}{', ...' if len(self) > 4 else ''}>"


def _position(index: int, length: int, what: str) -> int:
    """``index`` as a position within ``length`` items, counting from the end when negative, as a tuple does."""
    at = operator.index(index)
    if at < 0:
        at += length
    if not 0 <= at < length:
        raise IndexError(f"{what} index {index} out of range for {length:,} {what}s")
    return at
