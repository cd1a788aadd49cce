"""The sets ``LocalTuner.init`` built, by what their factory's result can depend on.

A factory takes no argument: what it builds for (the client, a dtype) comes from the values its
closure captured. So one call site, ``TUNER.init(lambda: tunable_set(client))``, builds different
sets for different clients: an OpenCL set binds its kernels to the client's context and queue.
Keyed by the factory's code alone, every client would get the set built for the first one, whose
kernels would then run on the first client's device. The key is therefore the code together with
what it captured (closure cells, defaults, a bound method's object, a ``functools.partial``'s
arguments): a value that compares by value (an int, a str, a dtype, a tuple of them) by equality,
anything else (a client, an array) by identity.

An object named by identity must outlive its entry, or a new object reusing its id would find
the set built for the old one: the entry watches it with a weak reference and is dropped when it
is collected (an array captured per call does not keep its set alive), or holds it when it cannot
be watched. A factory that captures something new at every call builds a set at every call (a
new set costs its checksum, a hit costs a dictionary read): once one call site has built more
than ``MAX_SETS`` sets, the user is warned once, naming the captured variables. Counted per call
site, not by the sets held: an array captured per call dies with the call and takes its set
along, so the sets held never pile up while every call builds one. Past ``MAX_SETS`` held, the
oldest are dropped.
"""

from __future__ import annotations

import functools
import logging
import threading
import types
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from tunekit._candidates.tunable_set import TunableSet

__all__ = ["MAX_SETS", "BuiltSets", "captured_key"]

K = TypeVar("K")
Out = TypeVar("Out")

_log = logging.getLogger("tunekit.tuner")

# Far more than one operation has clients and dtypes; past it, the factory captures per-call values.
MAX_SETS = 64
# A captured function is compared by its code and captures, down to this depth (a recursive helper captures itself).
_MAX_DEPTH = 4
_PLAIN = frozenset({int, float, complex, str, bytes, bool, type(None)})
_EMPTY_CELL = ("empty cell",)


def captured_key(factory: types.FunctionType) -> tuple[int, ...]:
    """A capturing factory's key in ``BuiltSets.captured``: the ids of its code, its captures and its defaults.

    Raises ValueError for a variable captured before it was assigned.
    """
    closure, defaults = factory.__closure__, factory.__defaults__
    if defaults is None and closure is not None and len(closure) == 1:  # one capture, the common case: no loop
        return (id(factory.__code__), id(closure[0].cell_contents))
    return (
        id(factory.__code__),
        *[id(cell.cell_contents) for cell in closure or ()],
        *[id(value) for value in defaults or ()],
    )


def _by_same_objects(value: object) -> bool:
    """Whether the same object as ``value`` stands for the same set as it, whatever happens meanwhile.

    True for what ``_token`` compares by identity (an object compared by identity: a client) and
    for immutable values (an int, a str, a dtype); not for a function, a method or a partial,
    whose own captures may be rebound, nor for other objects compared by value, which may change.
    """
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind in (types.FunctionType, types.MethodType) or isinstance(value, functools.partial):
        return False
    if kind.__eq__ is object.__eq__:
        return True
    return any(c.__module__ == "numpy" and c.__name__ == "dtype" for c in kind.__mro__)


def _captured_code(factory: object) -> types.FunctionType | None:
    """``factory`` when its set can be found again by ``captured_key``, else None.

    A function capturing values (or taking them as defaults) that ``_by_same_objects`` accepts:
    the entry keeps them alive (in its key, or watched), so their ids are not reused while it lives.
    """
    if type(factory) is not types.FunctionType or factory.__kwdefaults__ is not None:
        return None
    try:
        values = [*(cell.cell_contents for cell in factory.__closure__ or ()), *(factory.__defaults__ or ())]
    except ValueError:  # a variable captured before it was assigned
        return None
    if not values or not all(_by_same_objects(v) for v in values):
        return None
    return factory


def _plain_code(factory: object) -> types.CodeType | None:
    """The code of a function whose result its code and module alone decide (no parameters, no captures), else None.

    No defaults either, even unused: an entry found by its code must watch nothing, since only
    a watched object's collection (``_drop``) removes an entry without removing its code from ``plain``.
    """
    if (
        type(factory) is not types.FunctionType
        or factory.__defaults__ is not None
        or factory.__kwdefaults__ is not None
    ):
        return None
    code = factory.__code__
    return code if not (code.co_argcount or code.co_kwonlyargcount or code.co_freevars) else None


class _Entry(Generic[K, Out]):
    """One built set, and what its key names by identity."""

    __slots__ = ("captured", "code", "pinned", "tunables", "watchers")

    def __init__(self, tunables: TunableSet[K, Out]) -> None:
        self.tunables = tunables
        self.watchers: list[weakref.ref[Any]] = []
        self.pinned: list[object] = []
        self.code: types.CodeType | None = None
        """The code it is found by in ``BuiltSets.plain``, for a factory that captures nothing."""
        self.captured: tuple[int, ...] | None = None
        """The key it is found by in ``BuiltSets.captured``, for a factory that captures values."""


class BuiltSets(Generic[K, Out]):
    """A ``LocalTuner``'s built sets; lookups take no lock (single dict reads)."""

    def __init__(self, tuner_name: str) -> None:
        self._tuner_name = tuner_name
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry[K, Out]] = {}
        self.plain: dict[int, _Entry[K, Out]] = {}
        """The entries of factories that capture nothing, by ``id()`` of their code: init's hot path, a dict
        lookup with no hashing of the code object (which hashes its constants, nested lambdas' code
        included). The code is in a key of ``_entries`` while its entry is here, so its id is not reused."""
        self.captured: dict[tuple[int, ...], _Entry[K, Out]] = {}
        """The entries of factories that capture values (``lambda: tunable_set(client)``), by ``captured_key``:
        init's hot path for them, with none of ``_token``'s walk. Each id is of an object the entry keeps
        alive (its key holds the code and the values, its watchers drop it with an object they watch), so
        none is reused while the entry is here; the same objects as when it was built find it, equal
        others go the slow way."""
        self._warned = False
        self._built_at: dict[Hashable, int] = {}
        """Sets built per call site (the factory's code), over the tuner's life: what the warning counts."""

    def get(self, factory: Callable[[], TunableSet[K, Out]]) -> TunableSet[K, Out] | None:
        """The set already built for ``factory``, or None."""
        if (
            type(factory) is types.FunctionType
            and factory.__closure__ is None
            and factory.__defaults__ is None
            and factory.__kwdefaults__ is None
        ):  # a lambda capturing nothing, the common case: its code and module are its key (as _function_token says)
            entry = self._entries.get((factory.__code__, ("same object", id(factory.__globals__))))
        else:
            entry = self._entries.get(_token(factory, [], 0))
        return None if entry is None else entry.tunables

    def add(
        self, factory: Callable[[], TunableSet[K, Out]], build: Callable[[], TunableSet[K, Out]]
    ) -> TunableSet[K, Out]:
        """Build ``factory``'s set with ``build`` and keep it, unless another thread kept one first; the set kept."""
        by_identity: list[object] = []
        key = _token(factory, by_identity, 0)  # before building: what the factory had captured when init was called
        # Taken with the key, of the very objects it holds or watches.
        fast = None if (function := _captured_code(factory)) is None else captured_key(function)
        built = build()
        entry: _Entry[K, Out] = _Entry(built)
        with self._lock:
            current = self._entries.get(key)
            if current is not None:
                return current.tunables
            for value in by_identity:
                try:
                    entry.watchers.append(weakref.ref(value, functools.partial(_drop, weakref.ref(self), key, entry)))
                except TypeError:  # a list, a dict: nothing tells when it is gone, so its id stays taken
                    entry.pinned.append(value)
            self._entries[key] = entry
            if (code := _plain_code(factory)) is not None:
                entry.code = code
                self.plain[id(code)] = entry
            elif fast is not None:
                entry.captured = fast
                self.captured[fast] = entry
            site = _site(factory)
            built_here = self._built_at[site] = self._built_at.get(site, 0) + 1
            overflow = len(self._entries) > MAX_SETS
            if overflow:
                _forget_indexed(self, self._entries.pop(next(iter(self._entries))))
            many = overflow or built_here > MAX_SETS
            warn, self._warned = many and not self._warned, self._warned or many
        if warn:
            _log.warning(
                "tuner %r: init() has built more than %d tunable sets; its factory %s captures values that "
                "differ from call to call (%s), and a set is built for each, checksum and all, where a set "
                "built once is a dictionary read. Capture only what the set depends on (the client, a dtype), "
                "not the call's inputs",
                self._tuner_name,
                MAX_SETS,
                _where(factory),
                ", ".join(_captured_names(factory)) or "its arguments",
            )
        return built

    def clear(self) -> None:
        """Forget every built set."""
        with self._lock:
            self._entries.clear()
            self.plain.clear()
            self._built_at.clear()
            self.captured.clear()

    def __len__(self) -> int:
        return len(self._entries)


def _token(value: object, by_identity: list[object], depth: int) -> Hashable:
    """What identifies ``value`` as a capture of a factory: itself when it compares by value, else its id."""
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    if depth < _MAX_DEPTH:
        if kind is types.FunctionType:
            return _function_token(value, by_identity, depth + 1)  # type: ignore[arg-type]
        if kind is types.MethodType:
            method: types.MethodType = value  # type: ignore[assignment]
            return (kind, _token(method.__func__, by_identity, depth + 1), _token(method.__self__, by_identity, depth))
        if isinstance(value, functools.partial):
            nested = depth + 1
            arguments = tuple([_token(v, by_identity, nested) for v in value.args])
            keywords = tuple([(k, _token(v, by_identity, nested)) for k, v in value.keywords.items()])
            return (kind, _token(value.func, by_identity, nested), arguments, keywords)
    if kind.__eq__ is not object.__eq__:  # compares by value: equal values build the same set
        try:
            hash(value)
        except TypeError:  # mutable (a list, an array): only the same object is known to build the same set
            pass
        else:
            return (kind, value)
    by_identity.append(value)
    return ("same object", id(value))


def _function_token(function: types.FunctionType, by_identity: list[object], nested: int) -> Hashable:
    """A function by its code, its module and its captures.

    The module (its globals, by identity) because code equality leaves out the file: two modules made
    from one template hold equal lambdas at the same line, each calling its own module's functions.
    """
    closure, defaults, keywords = function.__closure__, function.__defaults__, function.__kwdefaults__
    parts: list[Hashable] = [function.__code__, _token(function.__globals__, by_identity, nested)]
    if closure is None and defaults is None and keywords is None:
        return tuple(parts)
    for cell in closure or ():
        parts.append(_token(_cell_contents(cell), by_identity, nested))
    if defaults is not None or keywords is not None:
        parts.extend(_token(v, by_identity, nested) for v in defaults or ())
        parts.extend((k, _token(v, by_identity, nested)) for k, v in (keywords or {}).items())
    return tuple(parts)


def _cell_contents(cell: types.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # a variable captured before it was assigned
        return _EMPTY_CELL


def _drop(owner: weakref.ref[BuiltSets[Any, Any]], key: Hashable, entry: _Entry[Any, Any], _: object) -> None:
    """An object the entry names by identity was collected: its id may be reused, so forget the entry.

    Without the lock, as single dict operations: the collection may run on a thread that holds it.
    """
    sets = owner()
    if sets is not None and sets._entries.get(key) is entry:
        sets._entries.pop(key, None)
        _forget_indexed(sets, entry)


def _forget_indexed(sets: BuiltSets[Any, Any], entry: _Entry[Any, Any]) -> None:
    """Drop ``entry`` from init's hot-path indexes as it leaves ``sets._entries``: the ids they hold may be reused."""
    if entry.code is not None and sets.plain.get(id(entry.code)) is entry:
        sets.plain.pop(id(entry.code), None)
    if entry.captured is not None and sets.captured.get(entry.captured) is entry:
        sets.captured.pop(entry.captured, None)


def _site(factory: object) -> Hashable:
    """The call site a factory comes from: its code (a method's or a partial's function's), else its type."""
    while isinstance(factory, functools.partial | types.MethodType):
        factory = factory.func if isinstance(factory, functools.partial) else factory.__func__
    code = getattr(factory, "__code__", None)
    return code if isinstance(code, types.CodeType) else type(factory).__qualname__


def _where(factory: object) -> str:
    code = getattr(factory, "__code__", None)
    if isinstance(code, types.CodeType):
        return f"at {code.co_filename}:{code.co_firstlineno}"
    return repr(factory)


def _captured_names(factory: object) -> list[str]:
    code = getattr(factory, "__code__", None)
    return list(code.co_freevars) if isinstance(code, types.CodeType) else []
