"""A count in words, ``1 job`` or ``3 jobs``: the one place the CLI, progress and reports spell a plural."""

from __future__ import annotations

__all__ = ["counted", "plural"]


def plural(number: int, noun: str, nouns: str | None = None) -> str:
    """``noun`` when ``number`` is 1, else its plural: ``nouns`` where given, ``-y`` as ``-ies``, else ``-s``."""
    if number == 1:
        return noun
    if nouns is not None:
        return nouns
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"


def counted(number: int, noun: str, nouns: str | None = None, *, thousands: bool = False) -> str:
    """``number`` and the noun that agrees with it (``1 sample``, ``0 samples``); ``thousands``: ``1,024``."""
    shown = f"{number:,}" if thousands else str(number)
    return f"{shown} {plural(number, noun, nouns)}"
