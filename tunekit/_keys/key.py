"""Autotune keys: frozen dataclasses whose anchored fields bucket problem sizes."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import operator
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, NoReturn, TypeVar, dataclass_transform, get_args, get_origin

from tunekit._base import settings as _settings
from tunekit._keys.anchor import Anchor, describe_value, is_array

__all__ = [
    "anchored_fields",
    "autotune_key",
    "is_autotune_key",
    "key_fields",
    "key_from_dict",
    "key_to_json",
    "key_to_dict",
    "off_buckets",
]

_KEY_MARK = "__tunekit_key__"
_ANCHORS = "__tunekit_anchors__"
_DTYPES = "__tunekit_dtypes__"
_SCALARS = (int, float, str, bool)

C = TypeVar("C", bound=type)
K = TypeVar("K")


def _check_field_type(cls_name: str, name: str, hint: object) -> None:
    """Refuse at definition time any field type that cannot be written to the cache as JSON."""
    if get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    if hint in _SCALARS or _dtype_class(hint) is not None:
        return
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        # The cache stores a member's value and rebuilds the member from it: a tuple value comes
        # back as a JSON list that matches no member, an object() value fails at the first tune.
        for member in hint:
            value = member.value
            if not isinstance(value, _SCALARS) or (isinstance(value, float) and not math.isfinite(value)):
                raise TypeError(
                    f"autotune key {cls_name}.{name} has type {hint.__name__}, whose member {member.name} has the "
                    f"value {value!r} ({type(value).__name__}); the cache stores a member by its value, so every "
                    "value must be a finite int, float, str or bool (e.g. enum.auto() or a name string)"
                )
        return
    if get_origin(hint) is Literal and all(isinstance(a, _SCALARS) for a in get_args(hint)):
        return
    origin = get_origin(hint) or hint
    # A shape is the usual such field: saying how to spell it saves a round of guessing.
    shape = (
        " (for a shape, one int field per dimension, e.g. rows: int and cols: int, each Annotated[int, tk.Anchor()] "
        "to bucket it)"
        if isinstance(origin, type) and issubclass(origin, tuple | list)
        else ""
    )
    raise TypeError(
        f"autotune key {cls_name}.{name} has type {hint!r}, which cannot be stored in the tuning "
        f"cache as JSON; use int, float, str, bool, an Enum or a Literal of those, or np.dtype{shape}"
    )


class _Wrong(Exception):
    """A field value of the wrong type (the caller names the key, the field and the value)."""


Coerce = Callable[[object], object]
"""Turns a value that is not already of the field's exact type into one, or raises _Wrong."""


def _to_int(known: set[type]) -> Coerce:
    def coerce(value: object) -> object:
        if isinstance(value, bool):
            raise _Wrong
        try:  # an int subclass (IntEnum) or a numpy integer, as the plain int it stands for
            plain = operator.index(value)  # type: ignore[arg-type]  # anything that is not raises TypeError
        except TypeError:
            raise _Wrong from None
        if type(value).__module__ == "numpy":
            # numpy's integer scalars always index (its bool does not): the generated __init__ converts
            # them inline from now on, without this slow path (a key taking ks[i] of an int array).
            known.add(type(value))
        return plain

    return coerce


def _to_float(value: object) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        # 2 and 2.0 are equal keys but write different JSON: stored as 2.0 they share a cache row.
        number = float(value)
        # JSON, which the cache and records are written in, has no NaN or infinity (and NaN equals no key).
        if math.isfinite(number):
            return number
    raise _Wrong


class _LoneSurrogate(Exception):
    """A str field value that cannot be encoded as UTF-8 (the caller names the key and field)."""


def _to_str(value: object) -> object:
    if isinstance(value, str):
        text = str.__str__(value)
        if not text.isascii():
            try:  # the cache escapes it, but records are UTF-8 JSON: refused now, not after the tune
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise _LoneSurrogate from None
        return text
    raise _Wrong


def _to_bool(value: object) -> object:
    if type(value) is bool:  # a numpy bool, once unwrapped; 0, 1 and "yes" are not bools here
        return value
    raise _Wrong


def _to_member(enum_cls: type[enum.Enum]) -> Coerce:
    # A member's value is what the cache and committed records store: a key is rebuilt from it. By
    # type as well as value (True == 1), first member first (an alias names the same member anyway);
    # a dict, so that a key given values rather than members costs one lookup, not a loop.
    members: dict[tuple[type, object], enum.Enum] = {}
    for member in enum_cls:
        members.setdefault((type(member.value), member.value), member)

    def coerce(value: object) -> object:
        try:
            return members[(type(value), value)]
        except (KeyError, TypeError):  # no member's value, or unhashable (a list): no member's either
            raise _Wrong from None

    return coerce


def _to_literal(allowed: tuple[object, ...]) -> Coerce:
    # By type as well as value: True == 1, and 1.0 == 1, yet each writes other JSON.
    pairs = {(type(arg), arg) for arg in allowed}

    def coerce(value: object) -> object:
        try:
            if (type(value), value) in pairs:
                return value
        except TypeError:  # unhashable (a list): none of the literals, and said so like any other wrong value
            pass
        raise _Wrong

    return coerce


_SCALAR_COERCE: dict[type, tuple[Coerce, str]] = {
    float: (_to_float, "a finite float (an int is converted)"),
    str: (_to_str, "str"),
    bool: (_to_bool, "bool"),
}


def _dtype_class(hint: object) -> type | None:
    """numpy's ``dtype`` class when ``hint`` is ``np.dtype`` (or ``np.dtype[...]``), else None; imports no numpy."""
    origin = get_origin(hint) or hint
    if isinstance(origin, type) and origin.__module__ == "numpy" and origin.__name__ == "dtype":
        return origin
    return None


def _to_dtype(dtype_cls: type, known: set[type]) -> Coerce:
    def coerce(value: object) -> object:
        if isinstance(value, dtype_cls):  # a dtype class not seen yet: the fast test knows it from now on
            known.add(type(value))
            return value
        # A name is how the cache and records store a dtype: a key is rebuilt from it.
        if isinstance(value, str) or (isinstance(value, type) and value.__module__ == "numpy"):
            try:
                return dtype_cls(value)
            except (TypeError, ValueError):  # not a dtype's name ("float23"), or not even encodable text
                raise _Wrong from None
        raise _Wrong

    return coerce


class _Check(typing.NamedTuple):
    """How a field's value is checked: the fast test's source, its coercion and the type it names in errors."""

    test: str
    """A Python expression, a format of the value's name ``v`` and of the names of ``exact`` and ``known``:
    true when the slow path (coercion) must run."""
    exact: object
    """The field's exact type (a Literal's allowed (type, value) pairs)."""
    coerce: Coerce
    expected: str
    known: set[type] | None = None
    """The types the fast test lets through: a dtype field's dtype classes (growing as it meets them),
    a Literal's value types; with ``convert``, the types it converts (an int field's numpy integers)."""
    convert: str | None = None
    """An expression (a format of ``v``) converting a value of a ``known`` type without the slow path."""


def _field_check(hint: object) -> _Check:
    """The field's fast test, its coercion and its description."""
    if get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    if (dtype_cls := _dtype_class(hint)) is not None:
        # numpy has a dtype class per kind (Float32DType, ...): a set of those seen is faster than isinstance.
        known: set[type] = set()
        return _Check(
            "type({v}) not in {known}", dtype_cls, _to_dtype(dtype_cls, known), "a numpy dtype (or its name)", known
        )
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _Check("type({v}) is not {exact}", hint, _to_member(hint), f"a {hint.__name__} member (or its value)")
    if get_origin(hint) is Literal:
        allowed = get_args(hint)
        # Inline, by type then value: a value of none of the literals' types is never hashed (a list).
        types, pairs = {type(arg) for arg in allowed}, frozenset((type(arg), arg) for arg in allowed)
        return _Check(
            "type({v}) not in {known} or (type({v}), {v}) not in {exact}",
            pairs,
            _to_literal(allowed),
            f"one of {', '.join(map(repr, allowed))}",
            types,
        )
    assert isinstance(hint, type)  # _check_field_type let only scalars, enums, literals and dtypes through
    if hint is int:
        ints: set[type] = set()
        return _Check("type({v}) is not {exact}", int, _to_int(ints), "int (not bool)", ints, "_tk_index({v})")
    coerce, text = _SCALAR_COERCE[hint]
    # A str that is not ASCII may hold a lone surrogate (isascii is O(1): CPython keeps the flag).
    test = "type({v}) is not str or not {v}.isascii()" if hint is str else "type({v}) is not {exact}"
    if hint is float:  # x - x is 0.0 for a finite float only (inf - inf and NaN - NaN are NaN): one subtraction
        test += " or {v} - {v} != 0.0"
    return _Check(test, hint, coerce, text)


def _coerce(cls_name: str, name: str, coerce: Coerce, expected: str, value: object) -> object:
    """The slow path of a field whose value is not of its exact type: convert it, or refuse it."""
    try:
        return coerce(value)
    except _Wrong:
        pass
    except _LoneSurrogate:
        raise ValueError(
            f"autotune key {cls_name}: field {name} holds a lone surrogate ({value!a}), which cannot be "
            "written to the cache or to records as UTF-8; pass valid text (e.g. bytes decoded with errors='replace')"
        ) from None
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        try:  # a numpy scalar counts as the Python value it holds
            return coerce(value.item())  # type: ignore[attr-defined]
        except _Wrong:
            pass
    # An array here is mostly key=KeyClass given array inputs: the class takes them as its fields.
    fix = (
        "build the key from the array's shape or dtype, not the array: "
        f"key=lambda x, ...: {cls_name}({name}=x.shape[0], ...)"
        if is_array(value)
        else "convert the value before building the key"
    )
    raise TypeError(
        f"autotune key {cls_name}: field {name} expects {expected}, "
        f"got {type(value).__name__} {describe_value(value)}; {fix}"
    )


def _anchor_refused(cls_name: str, name: str, value: int) -> NoReturn:
    """An anchored field given a size below 1: named, with what to do, where anchor() alone names neither."""
    raise ValueError(
        f"autotune key {cls_name}: field {name} is anchored, so it takes a size >= 1, got {describe_value(value)}; "
        "handle an empty (0) or negative dimension before the tuned call, or leave the field unanchored"
    ) from None


def _set_by_init(cls: type, name: str) -> bool:
    """False for a ``field(init=False)``: its value is not the caller's, so it is not checked."""
    default = cls.__dict__.get(name)
    return not (isinstance(default, dataclasses.Field) and not default.init)


@dataclass_transform(frozen_default=True)
def autotune_key(cls: C) -> C:
    """Turn a class into a frozen, hashable autotune key dataclass.

    Fields annotated ``Annotated[int, tk.Anchor(...)]`` are anchored when the key is built,
    so ``SumKey(n=1000)`` holds ``n == 1024``. Other fields are part of the key as given.

    Each value is checked against its field's type when the key is built: ``n: int`` refuses
    ``"5"``, ``5.0`` and ``True`` with a TypeError naming the key, the field and the value. A
    numpy scalar counts as the Python value it holds (``np.int64(5)`` is stored as ``5``), an
    int given to a float field is stored as a float, and an Enum field also takes a member's
    value (as the cache stores it). A field annotated ``np.dtype`` takes an array's ``dtype``
    as it is (``dtype=x.dtype``, no ``str()`` on the hot path) and is stored by its name.

    The class gets ``__slots__`` and an ``__init__`` generated for its fields, with the checks
    and the anchoring inline: every ``execute`` builds a key, so this is on the hot path.
    """
    if not isinstance(cls, type):
        raise TypeError(f"@autotune_key decorates a class, got {cls!r}")
    # Its own, not inherited: a subclass of a key is decorated again on purpose. Over @dataclass,
    # the existing __init__ would skip the checks and anchors; over @dataclass(frozen=True),
    # dataclasses refuse cryptically.
    if cls.__dict__.get(_KEY_MARK) is True:
        # Checked first: a key is a dataclass too, and "remove its @dataclass decorator" would send users
        # hunting for a decorator they never wrote when @tk.autotune_key is simply applied twice.
        raise TypeError(
            f"@autotune_key: {cls.__name__} is already an autotune key; apply @tk.autotune_key once "
            f"(to extend a key, decorate a subclass of it once: `@tk.autotune_key class Extended({cls.__name__}): ...`)"
        )
    if "__dataclass_fields__" in cls.__dict__:
        raise TypeError(
            f"@autotune_key: {cls.__name__} is already a @dataclass; remove its @dataclass decorator, "
            "@tk.autotune_key makes it a frozen dataclass itself"
        )
    if own := [name for name in ("__eq__", "__hash__") if name in cls.__dict__]:
        # The hot path finds winners by (class, *fields), hashed and compared in C: a key's own
        # equality would disagree with it.
        raise TypeError(
            f"@autotune_key: {cls.__name__} defines {' and '.join(own)}; an autotune key compares by its class "
            "and fields, so remove them (or key on the field values you meant to compare)"
        )
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError:
        # Under `from __future__ import annotations` every annotation is a name, and a type defined in
        # the function that defines the key (a test's local Enum) is only in that function's frame.
        local = dict(sys._getframe(1).f_locals)
        try:
            hints = typing.get_type_hints(cls, localns=local, include_extras=True)
        except NameError as exc:
            raise TypeError(
                f"@autotune_key cannot resolve the annotations of {cls.__name__}: {exc}; a field's type must be "
                "importable in the key's module or defined before the key in the same function"
            ) from exc
    # Inherited fields count too: a key subclass keeps its parent's anchors.
    anchors: list[tuple[str, Anchor]] = []
    checks: dict[str, _Check] = {}
    dtypes: list[tuple[str, type]] = []
    for name, hint in hints.items():
        if get_origin(hint) is typing.ClassVar:
            continue
        if name.startswith(_RESERVED):
            raise TypeError(f"autotune key {cls.__name__}.{name}: names starting with {_RESERVED!r} are tunekit's")
        _check_field_type(cls.__name__, name, hint)
        check = _field_check(hint)
        if (dtype_cls := _dtype_class(check.exact)) is not None:
            dtypes.append((name, dtype_cls))
        if _set_by_init(cls, name):
            anchored = get_origin(hint) is typing.Annotated and any(isinstance(a, Anchor) for a in get_args(hint))
            checks[name] = check._replace(expected=check.expected + ", anchored" if anchored else check.expected)
        if get_origin(hint) is typing.Annotated:
            base, *extras = get_args(hint)
            # Neither is silently accepted: the bare class anchors nothing, and two anchors would apply in turn.
            if any(extra is Anchor for extra in extras):
                raise TypeError(
                    f"{cls.__name__}.{name}: write tk.Anchor() with parentheses; the class itself anchors nothing"
                )
            if sum(isinstance(extra, Anchor) for extra in extras) > 1:
                raise TypeError(f"{cls.__name__}.{name}: has more than one tk.Anchor(); give it one")
            for extra in extras:
                if isinstance(extra, Anchor):
                    if base is not int:
                        raise TypeError(f"{cls.__name__}.{name}: tk.Anchor() applies to int fields, not {base!r}")
                    anchors.append((name, extra))
    user_hook: Callable[[Any], None] | None = getattr(cls, "__post_init__", None)
    data_cls: Any = _with_slots(dataclasses.dataclass(frozen=True)(cls))
    fields = dataclasses.fields(data_cls)
    for f in fields:
        if not f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypeError(f"autotune key {cls.__name__}.{f.name}: a field(init=False) needs a default")
    data_cls.__init__ = _generated_init(data_cls, fields, checks, dict(anchors), user_hook)
    setattr(data_cls, _KEY_MARK, True)
    setattr(data_cls, _ANCHORS, tuple(anchors))
    setattr(data_cls, _DTYPES, tuple(dtypes))
    return data_cls  # type: ignore[no-any-return]


_RESERVED = "_tk_"
_ID = "_tk_id"
"""The slot holding ``(class, *compared field values)``: the key's hash, equality and hot-path identity."""


def _with_slots(data_cls: type) -> type:
    """``data_cls`` rebuilt with a slot per field and the identity slot, each field a read-only property of its slot.

    The properties make the key frozen without a ``__setattr__`` of its own (a frozen dataclass's),
    so the generated ``__init__`` sets its slots with plain attribute stores, the fastest Python has.
    """
    inherited = {name for klass in data_cls.__mro__[1:] for name in klass.__dict__.get("__slots__", ())}
    fields = [f.name for f in dataclasses.fields(data_cls)]
    namespace = dict(data_cls.__dict__)
    for name in ("__dict__", "__weakref__", "__setattr__", "__delattr__"):
        namespace.pop(name, None)
    for name in fields:
        # A default lives in the field now; the class attribute is the field's read-only property.
        namespace[name] = property(
            operator.attrgetter(_RESERVED + name),
            functools.partial(_frozen_set, name),
            functools.partial(_frozen_delete, name),
        )
    slots = [_RESERVED + name for name in fields] + [_ID]
    namespace["__slots__"] = tuple(n for n in slots if n not in inherited)
    namespace["__eq__"] = _key_eq
    namespace["__hash__"] = _key_hash
    namespace["__reduce__"] = _key_reduce
    slotted: type = type(data_cls)(data_cls.__name__, data_cls.__bases__, namespace)
    slotted.__qualname__ = data_cls.__qualname__
    _retarget_class_cells(namespace, data_cls, slotted)
    return slotted


def _retarget_class_cells(namespace: dict[str, Any], old: type, new: type) -> None:
    """Point the ``__class__`` cell of each method at the rebuilt class, so that ``super()`` in it still works.

    The compiler binds that cell to the class the method was written in; left alone, ``super()``
    in a key's method (a subclass's ``__post_init__`` calling its parent's) raises TypeError, as
    on every instance of ``new`` (which is no ``old``).
    """
    for attribute in namespace.values():
        value = attribute.__func__ if isinstance(attribute, (classmethod, staticmethod)) else attribute
        functions = [value.fget, value.fset, value.fdel] if isinstance(value, property) else [value]
        for function in functions:
            code = getattr(function, "__code__", None)
            closure = getattr(function, "__closure__", None)
            if code is None or closure is None or "__class__" not in code.co_freevars:
                continue
            cell = closure[code.co_freevars.index("__class__")]
            if cell.cell_contents is old:
                cell.cell_contents = new


def _frozen_set(name: str, key: object, value: object) -> None:
    if not hasattr(key, _ID):
        # Still in __init__: a __post_init__ sets a derived field(init=False) with object.__setattr__,
        # as on any frozen dataclass; the identity is taken after it.
        object.__setattr__(key, _RESERVED + name, value)
        return
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}: autotune keys are frozen")


def _frozen_delete(name: str, key: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}: autotune keys are frozen")


def _key_eq(self: Any, other: object) -> object:
    if other.__class__ is self.__class__:
        same: bool = self._tk_id == other._tk_id  # type: ignore[attr-defined]
        return same
    return NotImplemented


def _key_hash(self: Any) -> int:
    return hash(self._tk_id)


def _key_reduce(self: Any) -> tuple[Any, ...]:
    """Copies (``copy``, ``deepcopy``) rebuild the key from its fields: anchoring a bucket again keeps it."""
    return (_rebuild, (type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}))


def _rebuild(cls: type, fields: dict[str, object]) -> object:
    return cls(**fields)


_FACTORY = object()
"""The default of a parameter whose field has a ``default_factory``."""


def _generated_init(
    cls: type,
    fields: tuple[dataclasses.Field[Any], ...],
    checks: dict[str, _Check],
    anchors: dict[str, Anchor],
    user_hook: Callable[[Any], None] | None,
) -> Callable[..., None]:
    """The key's ``__init__``: each field checked (one type test when well typed), anchored, set, then the identity.

    Generated as source, like dataclasses' own ``__init__``, so that the hot path has no loop, no
    per-field call and no settings lookup beyond one read when the key has anchored fields.
    """
    glob: dict[str, Any] = {
        "_tk_settings": _settings,
        "_tk_cls": cls,
        "_tk_FACTORY": _FACTORY,
        "_tk_index": operator.index,
    }
    params: list[str] = []
    keyword_only: list[str] = []
    body: list[str] = []
    if anchors:
        body.append("_tk_e = _tk_settings._anchor_exponent")  # 0 until the settings are read

    for i, f in enumerate(fields):
        name = f.name
        if f.init:
            if f.default is not dataclasses.MISSING:
                glob[f"_tk_d{i}"] = f.default
                param = f"{name}=_tk_d{i}"
            elif f.default_factory is not dataclasses.MISSING:
                glob[f"_tk_f{i}"] = f.default_factory
                param = f"{name}=_tk_FACTORY"
                body.append(f"if {name} is _tk_FACTORY: {name} = _tk_f{i}()")
            else:
                param = name
            (keyword_only if f.kw_only else params).append(param)
        elif f.default is not dataclasses.MISSING:
            glob[f"_tk_d{i}"] = f.default
            body.append(f"{name} = _tk_d{i}")
        else:
            glob[f"_tk_f{i}"] = f.default_factory
            body.append(f"{name} = _tk_f{i}()")
        check = checks.get(name)
        if check is not None:
            glob[f"_tk_x{i}"] = check.exact
            glob[f"_tk_k{i}"] = check.known
            glob[f"_tk_c{i}"] = functools.partial(_coerce, cls.__name__, name, check.coerce, check.expected)
            test = check.test.format(v=name, exact=f"_tk_x{i}", known=f"_tk_k{i}")
            if check.convert is None:
                body.append(f"if {test}: {name} = _tk_c{i}({name})")
            else:
                convert = check.convert.format(v=name)
                body.append(f"if {test}: {name} = {convert} if type({name}) in _tk_k{i} else _tk_c{i}({name})")
        marker = anchors.get(name)
        if marker is not None:
            glob[f"_tk_a{i}"] = marker.apply
            glob[f"_tk_r{i}"] = functools.partial(_anchor_refused, cls.__name__, name)
            # apply() refuses only a size below 1; the try costs nothing until it does. The settings are
            # read outside it: a bad TUNEKIT_* value is a SettingsError (a ValueError) of its own.
            slow = [
                "_tk_level = _tk_e or _tk_settings.anchor_exponent()",
                "try:",
                f"    {name} = _tk_a{i}({name}, _tk_level)",
                f"except ValueError: _tk_r{i}({name})",
            ]
            if marker.base & (marker.base - 1) == 0:  # a power of two (2, 4, ...), inline: a shift, not apply()'s loop
                lower = f" and {name} > {marker.min}" if marker.min is not None else ""
                body.append(f"if _tk_e == 1 and {name} >= 1{lower}:")
                step = marker.base.bit_length() - 1  # base == 1 << step: round the bit length up to a multiple
                bits = f"({name} - 1).bit_length()"
                body.append(
                    f"    {name} = 1 << {bits}"
                    if step == 1
                    else f"    {name} = 1 << ({bits} + {step - 1}) // {step} * {step}"
                )
                if marker.max is not None:
                    body.append(f"    if {name} > {marker.max}: {name} = {marker.max}")
                body.append("else:")
                body.extend(f"    {line}" for line in slow)
            else:
                body.extend(slow)
        body.append(f"_tk_self.{_RESERVED}{name} = {name}")
    if user_hook is not None:
        glob["_tk_hook"] = user_hook
        body.append("_tk_hook(_tk_self)")
    compared = [f.name for f in fields if f.compare]
    # Read back from the slots after the hook: it may have set a derived field.
    values = "".join(f"_tk_self.{_RESERVED}{n}, " if user_hook is not None else f"{n}, " for n in compared)
    body.append(f"_tk_self.{_ID} = (_tk_cls, {values})")
    signature = ", ".join(["_tk_self", *params, *(["*", *keyword_only] if keyword_only else [])])
    source = f"def __init__({signature}) -> None:\n" + "".join(f"    {line}\n" for line in body)
    local: dict[str, Any] = {}
    exec(source, glob, local)  # our own source, built from field names the class declared
    init: Callable[..., None] = local["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def key_id(key: object) -> object:
    """What the hot path looks a key up by: ``(class, *fields)``, hashed and compared in C; a non-key as itself."""
    return getattr(key, _ID, key)


def is_autotune_key(obj: object) -> bool:
    """True for instances of an ``@autotune_key`` class."""
    return getattr(type(obj), _KEY_MARK, False) is True


def key_fields(cls: type) -> tuple[str, ...]:
    """Field names of a key class, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls))


def key_from_dict(cls: Callable[..., K], stored: Mapping[str, object]) -> K:
    """The key of class ``cls`` that ``stored`` (a ``key_to_dict``, from a record) describes.

    A ``field(init=False)`` is stored with the rest but is no argument: the key makes it again,
    and a caller that compares ``key_to_json`` of the result with what it read sees whether it agrees.
    Raises TypeError (naming the field) when ``stored`` does not fit ``cls``.
    """
    derived = {f.name for f in dataclasses.fields(cls) if not f.init}  # type: ignore[arg-type]
    return cls(**{name: value for name, value in stored.items() if name not in derived})


def anchored_fields(cls: type) -> tuple[str, ...]:
    """The anchored fields of a key class, sorted: the only ones whose buckets depend on the autotune level."""
    return tuple(sorted(name for name, _ in getattr(cls, _ANCHORS, ())))


def off_buckets(key: object, exponent: int) -> dict[str, int]:
    """The anchored fields of ``key`` whose values are no buckets at ``exponent``, each with the bucket it falls in.

    ``exponent`` is a level's (``level_anchor_exponent``): this asks whether the key could have
    been built at that level, whatever level is in force now.
    """
    out = {}
    for name, marker in getattr(type(key), _ANCHORS, ()):  # one per field: autotune_key refuses two
        value = getattr(key, name)
        bucket = marker.apply(value, exponent)
        if bucket != value:
            out[name] = bucket
    return out


def _json_value(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _dtype_name(key: object, name: str, dtype: Any, dtype_cls: type) -> str:
    """A dtype field's stored name, refused when the name does not rebuild the dtype (a structured dtype)."""
    text = str(dtype)
    try:
        same = bool(dtype_cls(text) == dtype)
    except TypeError:
        same = False
    if not same:
        raise TypeError(
            f"autotune key {type(key).__name__}: field {name} holds the dtype {dtype!r}, whose name {text!r} "
            "does not rebuild it, so it cannot be stored; key on a plain dtype (or on its fields)"
        )
    return text


def _describe_key(key: object) -> str:
    """The key's repr, with each field described safely (an int too long to print says so)."""
    if not dataclasses.is_dataclass(key):
        return describe_value(key)
    fields = ", ".join(f"{f.name}={describe_value(getattr(key, f.name))}" for f in dataclasses.fields(key))
    return f"{type(key).__name__}({fields})"


def key_to_dict(key: object) -> dict[str, object]:
    """The key as a plain dict of JSON scalars (enums by value, dtypes by name)."""
    out = {f.name: _json_value(getattr(key, f.name)) for f in dataclasses.fields(key)}  # type: ignore[arg-type]
    for name, dtype_cls in getattr(type(key), _DTYPES, ()):
        out[name] = _dtype_name(key, name, out[name], dtype_cls)
    return out


def key_to_json(key: object) -> str:
    """Canonical JSON of a key: sorted fields, no spaces, so equal keys give equal strings."""
    try:
        return json.dumps(key_to_dict(key), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"key {_describe_key(key)} has a field value that is not JSON-serialisable ({exc}); "
            "key fields must hold finite int, float, str, bool, Enum or dtype values, and an int at most "
            f"{sys.get_int_max_str_digits() or 'any number of'} digits long"
        ) from exc
