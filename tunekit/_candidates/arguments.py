"""Checks of user-given values that several search arguments share: whole numbers, callables' arity."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from typing import TypeGuard

__all__ = ["is_int", "unbindable"]


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a whole number and not a bool.

    ``numbers.Integral``: numpy integers (a seed drawn from a Generator) are ints here too.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def unbindable(fn: Callable[..., object], arity: int) -> tuple[str, TypeError] | None:
    """``fn``'s name and why it cannot take ``arity`` positional arguments; None when it can or cannot be told."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without one: its call will tell
        return None
    try:
        signature.bind(*([None] * arity))
    except TypeError as exc:
        return getattr(fn, "__qualname__", type(fn).__qualname__), exc
    return None
