"""Autotune keys: frozen dataclasses whose anchored fields bucket problem sizes."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from typing import Any, Literal, TypeVar, dataclass_transform, get_args, get_origin

from tunekit import _settings
from tunekit._anchor import Anchor

__all__ = ["autotune_key", "is_autotune_key", "key_fields", "key_to_json", "key_to_dict"]

_KEY_MARK = "__tunekit_key__"
_ANCHORS = "__tunekit_anchors__"
_SCALARS = (int, float, str, bool)

C = TypeVar("C", bound=type)


def _check_field_type(cls_name: str, name: str, hint: object) -> None:
    """Refuse at definition time any field type that cannot be written to the cache as JSON."""
    if get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    if hint in _SCALARS or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        return
    if get_origin(hint) is Literal and all(isinstance(a, _SCALARS) for a in get_args(hint)):
        return
    raise TypeError(
        f"autotune key {cls_name}.{name} has type {hint!r}, which cannot be stored in the tuning "
        "cache as JSON; use int, float, str, bool, an Enum or a Literal of those"
    )


@dataclass_transform(frozen_default=True)
def autotune_key(cls: C) -> C:
    """Turn a class into a frozen, hashable autotune key dataclass.

    Fields annotated ``Annotated[int, tk.Anchor(...)]`` are anchored when the key is built,
    so ``SumKey(n=1000)`` holds ``n == 1024``. Other fields are part of the key as given.
    """
    if not isinstance(cls, type):
        raise TypeError(f"@autotune_key decorates a class, got {cls!r}")
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        raise TypeError(f"@autotune_key cannot resolve the annotations of {cls.__name__}: {exc}") from exc
    # Inherited fields count too: a key subclass keeps its parent's anchors.
    anchors: list[tuple[str, Anchor]] = []
    for name in hints:
        hint = hints[name]
        if get_origin(hint) is typing.ClassVar:
            continue
        _check_field_type(cls.__name__, name, hint)
        if get_origin(hint) is typing.Annotated:
            base, *extras = get_args(hint)
            for extra in extras:
                if isinstance(extra, Anchor):
                    if base is not int:
                        raise TypeError(f"{cls.__name__}.{name}: tk.Anchor() applies to int fields, not {base!r}")
                    anchors.append((name, extra))
    frozen_anchors = tuple(anchors)

    def __post_init__(self: Any) -> None:
        exponent = _settings.anchor_exponent()
        # Writing through __dict__ skips the frozen dataclass's __setattr__ guard, which is
        # meant for users; this runs on every dispatch, so it has to be cheap.
        fields = self.__dict__
        for field_name, marker in frozen_anchors:
            value = fields[field_name]
            if type(value) is not int:
                raise TypeError(
                    f"{type(self).__name__}.{field_name} is anchored and needs an int, "
                    f"got {type(value).__name__} {value!r}"
                )
            fields[field_name] = marker.apply(value, exponent)

    if frozen_anchors:
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
