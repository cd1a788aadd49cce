"""Plain aligned columns for CLI output: never wrapped, so it greps and diffs."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["print_table"]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``headers``, each column as wide as its widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    for line in (headers, *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
