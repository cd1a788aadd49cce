"""A configuration: one value per parameter of a space, immutable, hashable and read by attribute."""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Never, NoReturn

__all__ = ["Config", "ParamValue", "SCALARS", "check_name"]

ParamValue = int | float | str | bool
"""A parameter value: a JSON scalar, so configurations can be logged and committed."""


SCALARS = (bool, int, float, str)


class Config(dict[str, Any]):
    """One point of a space: an immutable, ordered, hashable mapping name -> value.

    Values are also attributes (``c.BLOCK``), so restrictions and builders read naturally.
    A Config is a ``dict`` that refuses every change, so ``json.dumps(config)`` and
    ``json.dumps({"config": config, ...})`` log it as ``{"BLOCK": 64, ...}`` (a plain Mapping
    raises "Object of type Config is not JSON serializable"); ``to_dict()`` gives a plain,
    mutable copy. Two configs are equal when they hold the same names, in the same order, and
    values; a config and a plain dict when their items are.
    """

    __slots__ = ("_hash", "_names", "_values")

    _names: tuple[str, ...]
    _values: tuple[ParamValue, ...]
    _hash: int | None

    def __init__(self, names: Sequence[str], values: Sequence[ParamValue]) -> None:
        # Spaces pass their names tuple and a fresh tuple of values: kept as given, no copies,
        # since a space walk builds a Config per Cartesian point.
        names = names if type(names) is tuple else tuple(names)
        values = values if type(values) is tuple else tuple(values)
        if len(names) != len(values):
            raise ValueError(f"Config needs one value per name, got {len(names)} names and {len(values)} values")
        super().__init__(zip(names, values, strict=True))
        if len(self) != len(names):
            raise ValueError(f"Config needs distinct names, got {list(names)}")
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_hash", None)  # computed when first asked: most walked points never are

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            # config.update(...) on a space without an `update` parameter: say why it is no method.
            why = f" ({_IMMUTABLE})" if name in _DICT_MUTATORS else ""
            raise AttributeError(
                f"configuration has no parameter {name!r}{why}; it has {list(self._names)}", name=name, obj=self
            ) from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Config is immutable")

    # The mutators take arguments typed Never, so a type checker refuses `config["x"] = 1`,
    # `del config["x"]`, `config |= {...}` and `config.update(...)` in the user's code instead of
    # passing them to fail at run time. As a Mapping (what a Config is passed as) it has none of them.
    def __setitem__(self, name: Never, value: Never) -> NoReturn:  # type: ignore[override]
        raise TypeError(_IMMUTABLE)

    def __delitem__(self, name: Never) -> NoReturn:  # type: ignore[override]
        raise TypeError(_IMMUTABLE)

    def __ior__(self, other: Never) -> NoReturn:  # type: ignore[override,misc]  # dict's |= changes it in place
        raise TypeError(_IMMUTABLE)

    if TYPE_CHECKING:
        # At run time these names are hidden (see _DICT_ONLY below) so that they stay free as
        # parameter names; to a type checker they are calls that no argument list satisfies (even
        # `config.clear()` misses the required one, which names why).
        def update(self, config_is_immutable: Never, *args: Never, **kwargs: Never) -> NoReturn: ...  # type: ignore[override]
        def pop(self, config_is_immutable: Never, *args: Never) -> NoReturn: ...  # type: ignore[override]
        def setdefault(self, config_is_immutable: Never, *args: Never) -> NoReturn: ...  # type: ignore[override]
        def clear(self, config_is_immutable: Never) -> NoReturn: ...  # type: ignore[override]
        def popitem(self, config_is_immutable: Never) -> NoReturn: ...  # type: ignore[override]

    def __hash__(self) -> int:  # type: ignore[override]  # dict is unhashable; a Config is immutable, so it is
        if (known := self._hash) is None:
            known = hash((self._names, self._values))
            object.__setattr__(self, "_hash", known)
        return known

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._names == other._names and self._values == other._values
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        # dict's own != compares items in any order: Config(A, B) != Config(B, A) would be False while == is too.
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __repr__(self) -> str:
        return f"Config({', '.join(f'{n}={v!r}' for n, v in zip(self._names, self._values, strict=True))})"

    def __reduce__(self) -> tuple[type[Config], tuple[tuple[str, ...], tuple[ParamValue, ...]]]:
        return (Config, (self._names, self._values))

    @property
    def values_tuple(self) -> tuple[ParamValue, ...]:
        """The values in parameter order."""
        return self._values

    @property
    def name(self) -> str:
        """A stable, readable name: ``BLOCK=64,VEC=2``; used as the tunable's name."""
        return ",".join(f"{n}={v}" for n, v in zip(self._names, self._values, strict=True))

    def to_dict(self) -> dict[str, ParamValue]:
        """A plain, mutable dict, in parameter order."""
        return dict(zip(self._names, self._values, strict=True))


_IMMUTABLE = "Config is immutable; config.to_dict() gives a plain dict to change"


_DICT_MUTATORS = ("clear", "pop", "popitem", "setdefault", "update")


_DICT_ONLY = ("clear", "copy", "fromkeys", "pop", "popitem", "setdefault", "update")
"""dict's attributes that a Mapping lacks: hidden on Config, so they stay free as parameter names.

A Mapping has none of them, so there a parameter named ``copy`` or ``update`` reads as
``c.copy``. Inherited from dict, ``c.update`` would be the method, and such spaces would have
to be refused. A property whose getter raises AttributeError hands the lookup to ``__getattr__``,
which reads the parameter (or says there is none).
"""


def _hidden(name: str) -> property:
    def hide(self: Config) -> Any:
        raise AttributeError(name)

    return property(hide)


_CONFIG_ATTRIBUTES = tuple(sorted(n for n in dir(Config) if not n.startswith("_") and n not in _DICT_ONLY))
"""What ``c.<name>`` already means on a Config, so a parameter of that name would be shadowed."""


def check_name(name: str) -> str:
    """Refuse a parameter name that ``c.<name>`` in a restriction could not read back."""
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise ValueError(
            f"tk.Space parameter name {name!r} is not usable: a parameter is read as c.<name>, so its name must be "
            "a Python identifier that is not a keyword and does not start with '_'; rename it (e.g. BLOCK_M)"
        )
    if name in _CONFIG_ATTRIBUTES:
        raise ValueError(
            f"tk.Space parameter name {name!r} is already an attribute of tk.Config, so c.{name} would not read "
            f"the parameter; rename it (Config's attributes: {', '.join(_CONFIG_ATTRIBUTES)})"
        )
    return name
