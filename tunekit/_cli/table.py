"""Plain aligned columns for CLI output: never wrapped, so it greps and diffs."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_duration_ns", "print_table"]


def format_duration_ns(ns: float | None) -> str:
    """A duration with a readable unit; '-' when unknown."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``headers``, each column as wide as its widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    for line in (headers, *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
