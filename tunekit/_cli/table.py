"""The CLI's one table style, fitted to where the output goes.

On a terminal, a table fits the terminal's width: a long cell wraps inside its column, and
device ids are shown in their short form (:func:`tunekit._base.short_id.short_device_id`).
Piped or redirected (no terminal, no ``COLUMNS``), nothing wraps: a row stays one line, whole,
for grep and diff, where a width guessed as 80 would cut values in two. ``COLUMNS``, when set,
is the width either way. ``--wide`` shows every value and device id in full, never wrapped.
Plain text, no colour and no box characters: the same bytes on a terminal, in a file and in a
log, on any encoding.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.table import Column, Table
from rich.text import Text

from tunekit._base.short_id import short_device_id

__all__ = ["Output", "fixed", "print_json", "terminal_columns"]

_UNBOUNDED = 100_000
"""The width rich is given where nothing is to wrap: wider than any row a listing prints."""


def terminal_columns() -> int | None:
    """``COLUMNS`` if set, else the terminal's width; None when the output is no terminal."""
    columns = shutil.get_terminal_size((0, 0)).columns
    return columns if columns > 0 else None


def fixed(header: str) -> Column:
    """A column whose cells never wrap (a time, a count): the wrapping columns give way instead."""
    return Column(header, no_wrap=True)


@dataclass(frozen=True, slots=True)
class Output:
    """Where a listing prints, and how wide: ``width`` None prints every line whole."""

    wide: bool = False
    width: int | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> Output:
        """For a command's ``--wide`` (absent: not wide) and this process's terminal or ``COLUMNS``."""
        wide = bool(getattr(args, "wide", False))
        return cls(wide=wide, width=None if wide else terminal_columns())

    def device(self, device_id: str) -> str:
        """The device id as this listing shows it: in full with ``--wide``, else in its short form."""
        return device_id if self.wide else short_device_id(device_id)

    def line(self, text: str = "") -> None:
        """A line of text, wrapped at word boundaries to the width."""
        self._print(Text(text))

    def table(self, headers: Sequence[str | Column], rows: Sequence[Sequence[str]], *, indent: int = 0) -> None:
        """``rows`` under ``headers``, columns two spaces apart, fitted to the width less ``indent``."""
        columns = [Column(h, overflow="fold") if isinstance(h, str) else h for h in headers]
        for column in columns:
            column.overflow = "fold"  # never an ellipsis: what is left out could be what tells two rows apart
            column.header_style = ""
        table = Table(
            *columns,
            box=None,
            padding=(0, 1),
            pad_edge=False,
            show_edge=False,
            expand=False,
        )
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        self._print(table, indent=indent)

    def _print(self, renderable: RenderableType, *, indent: int = 0) -> None:
        width = (self.width if self.width is not None else _UNBOUNDED) - indent
        buffer = io.StringIO()
        console = Console(
            file=buffer, width=max(width, 20), color_system=None, highlight=False, markup=False, emoji=False
        )
        console.print(renderable)
        text = "\n".join(" " * indent + line if line else "" for line in _stripped(buffer.getvalue()))
        _write(text + "\n")


def _stripped(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def _write(text: str) -> None:
    """``text`` on stdout; a character its encoding cannot show becomes ``?`` rather than an error mid-table."""
    encoding = getattr(sys.stdout, "encoding", None)
    if encoding:
        text = text.encode(encoding, "replace").decode(encoding)
    sys.stdout.write(text)


def print_json(document: BaseModel) -> None:
    """A listing's ``--json`` document on stdout: indented, ASCII (so any encoding takes it), never wrapped."""
    sys.stdout.write(json.dumps(document.model_dump(mode="json"), indent=2) + "\n")
