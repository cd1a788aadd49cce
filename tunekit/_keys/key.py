"""Autotune keys: frozen dataclasses whose anchored fields bucket problem sizes."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import operator
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, dataclass_transform, get_args, get_origin

from tunekit._base import settings as _settings
from tunekit._keys.anchor import Anchor

__all__ = [
    "anchored_fields",
    "autotune_key",
    "is_autotune_key",
    "key_fields",
    "key_to_json",
    "key_to_dict",
    "off_buckets",
]

_KEY_MARK = "__tunekit_key__"
_ANCHORS = "__tunekit_anchors__"
_USER_HOOK = "__tunekit_user_post_init__"
_SCALARS = (int, float, str, bool)

C = TypeVar("C", bound=type)


def _check_field_type(cls_name: str, name: str, hint: object) -> None:
    """Refuse at definition time any field type that cannot be written to the cache as JSON."""
    if get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    if hint in _SCALARS:
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
    raise TypeError(
        f"autotune key {cls_name}.{name} has type {hint!r}, which cannot be stored in the tuning "
        "cache as JSON; use int, float, str, bool, an Enum or a Literal of those"
    )


class _Wrong(Exception):
    """A field value of the wrong type (the caller names the key, the field and the value)."""


Coerce = Callable[[object], object]
"""Turns a value that is not already of the field's exact type into one, or raises _Wrong."""


def _to_int(value: object) -> object:
    if isinstance(value, bool):
        raise _Wrong
    try:  # an int subclass (IntEnum) or a numpy integer, as the plain int it stands for
        return operator.index(value)  # type: ignore[arg-type]  # anything that is not raises TypeError
    except TypeError:
        raise _Wrong from None


def _to_float(value: object) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        # 2 and 2.0 are equal keys but write different JSON: stored as 2.0 they share a cache row.
        return float(value)
    raise _Wrong


def _to_str(value: object) -> object:
    if isinstance(value, str):
        return str.__str__(value)
    raise _Wrong


def _to_bool(value: object) -> object:
    if type(value) is bool:  # a numpy bool, once unwrapped; 0, 1 and "yes" are not bools here
        return value
    raise _Wrong


def _to_member(enum_cls: type[enum.Enum]) -> Coerce:
    def coerce(value: object) -> object:
        # A member's value is what the cache and committed records store: a key is rebuilt from it.
        for member in enum_cls:
            if type(member.value) is type(value) and member.value == value:
                return member
        raise _Wrong

    return coerce


def _to_literal(allowed: tuple[object, ...]) -> Coerce:
    # By type as well as value: True == 1, and 1.0 == 1, yet each writes other JSON.
    pairs = {(type(arg), arg) for arg in allowed}

    def coerce(value: object) -> object:
        if (type(value), value) in pairs:
            return value
        raise _Wrong

    return coerce


_SCALAR_COERCE: dict[type, tuple[Coerce, str]] = {
    int: (_to_int, "int (not bool)"),
    float: (_to_float, "float (an int is converted)"),
    str: (_to_str, "str"),
    bool: (_to_bool, "bool"),
}


def _field_check(hint: object) -> tuple[type | None, Coerce, str]:
    """The field's exact type (the fast path; None: always coerce), its coercion and its description."""
    if get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint, _to_member(hint), f"a {hint.__name__} member (or its value)"
    if get_origin(hint) is Literal:
        allowed = get_args(hint)
        return None, _to_literal(allowed), f"one of {', '.join(map(repr, allowed))}"
    assert isinstance(hint, type)  # _check_field_type let only scalars, enums and literals through
    coerce, text = _SCALAR_COERCE[hint]
    return hint, coerce, text


def _coerce(cls_name: str, name: str, coerce: Coerce, expected: str, value: object) -> object:
    """The slow path of a field whose value is not of its exact type: convert it, or refuse it."""
    try:
        return coerce(value)
    except _Wrong:
        pass
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        try:  # a numpy scalar counts as the Python value it holds
            return coerce(value.item())  # type: ignore[attr-defined]
        except _Wrong:
            pass
    raise TypeError(
        f"autotune key {cls_name}: field {name} expects {expected}, got {type(value).__name__} {value!r}; "
        "convert the value before building the key"
    )


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
    value (as the cache stores it).
    """
    if not isinstance(cls, type):
        raise TypeError(f"@autotune_key decorates a class, got {cls!r}")
    # Its own, not inherited: a subclass of a key is decorated again on purpose. Over @dataclass,
    # the existing __init__ would assign to the now frozen fields (FrozenInstanceError at the first
    # key) and skip the checks and anchors; over @dataclass(frozen=True), dataclasses refuse cryptically.
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
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        raise TypeError(f"@autotune_key cannot resolve the annotations of {cls.__name__}: {exc}") from exc
    # Inherited fields count too: a key subclass keeps its parent's anchors.
    anchors: list[tuple[str, Anchor]] = []
    checks: list[tuple[str, type | None, Coerce, str]] = []
    for name, hint in hints.items():
        if get_origin(hint) is typing.ClassVar:
            continue
        _check_field_type(cls.__name__, name, hint)
        if _set_by_init(cls, name):
            exact, coerce, expected = _field_check(hint)
            anchored = get_origin(hint) is typing.Annotated and any(isinstance(a, Anchor) for a in get_args(hint))
            checks.append((name, exact, coerce, expected + ", anchored" if anchored else expected))
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
    frozen_anchors = tuple(anchors)
    exact_types = tuple((name, exact) for name, exact, _, _ in checks)
    slow: dict[str, tuple[Coerce, str]] = {name: (coerce, expected) for name, _, coerce, expected in checks}
    inherited = getattr(cls, "__post_init__", None)
    user_hook: Callable[[Any], None] | None = getattr(inherited, _USER_HOOK, inherited)

    def __post_init__(self: Any) -> None:
        # Writing through __dict__ skips the frozen dataclass's __setattr__ guard, which is
        # meant for users; this runs on every dispatch, so a well-typed value costs one
        # type() comparison per field.
        fields = self.__dict__
        for field_name, exact in exact_types:
            if type(fields[field_name]) is not exact:
                coerce, expected = slow[field_name]
                fields[field_name] = _coerce(type(self).__name__, field_name, coerce, expected, fields[field_name])
        if frozen_anchors:
            exponent = _settings.anchor_exponent()
            for field_name, marker in frozen_anchors:
                fields[field_name] = marker.apply(fields[field_name], exponent)
        if user_hook is not None:
            user_hook(self)

    setattr(__post_init__, _USER_HOOK, user_hook)
    if checks or user_hook is not None:
        cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
    data_cls: Any = dataclasses.dataclass(frozen=True, slots=False)(cls)
    setattr(data_cls, _KEY_MARK, True)
    setattr(data_cls, _ANCHORS, frozen_anchors)
    return data_cls  # type: ignore[no-any-return]


def is_autotune_key(obj: object) -> bool:
    """True for instances of an ``@autotune_key`` class."""
    return getattr(type(obj), _KEY_MARK, False) is True


def key_fields(cls: type) -> tuple[str, ...]:
    """Field names of a key class, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls))


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


def key_to_dict(key: object) -> dict[str, object]:
    """The key as a plain dict of JSON scalars (enums by value)."""
    return {f.name: _json_value(getattr(key, f.name)) for f in dataclasses.fields(key)}  # type: ignore[arg-type]


def key_to_json(key: object) -> str:
    """Canonical JSON of a key: sorted fields, no spaces, so equal keys give equal strings."""
    try:
        return json.dumps(key_to_dict(key), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"key {key!r} has a field value that is not JSON-serialisable ({exc}); "
            "key fields must hold finite int, float, str, bool or Enum values"
        ) from exc
