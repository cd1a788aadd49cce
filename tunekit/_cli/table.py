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
import copy
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


_WHOLE_WORD = 12
"""The longest word a narrow table keeps whole; a longer one (a candidate name, a key) folds."""


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

    def line(self, text: str = "", *, indent: int = 0) -> None:
        """A line of text, wrapped at word boundaries to the width, every part of it ``indent`` spaces in."""
        self._print(Text(text), indent=indent)

    def fields(self, pairs: Sequence[tuple[str, str]], *, indent: int = 0) -> None:
        """``label: value`` lines, each value wrapped under itself rather than under the label."""
        self.table(
            (fixed(""), ""), [(f"{label}:", value) for label, value in pairs], indent=indent, gap=1, header=False
        )

    def table(
        self,
        headers: Sequence[str | Column],
        rows: Sequence[Sequence[str]],
        *,
        indent: int = 0,
        gap: int = 2,
        header: bool = True,
    ) -> None:
        """``rows`` under ``headers``, columns ``gap`` spaces apart, fitted to the width less ``indent``.

        Rich shares a narrow width out evenly, folding a tuner name or a time in two while a long
        candidate name has room to spare: each wrapping column is given room for its longest word
        up to :data:`_WHOLE_WORD` characters, less where the width cannot hold that. Never cropped:
        where nothing fits, a line runs long rather than lose what it says.
        """
        if self.width is None:  # nothing wraps: plain columns, the same text rich gives, at a fraction of its cost
            _write(_plain(headers, rows, indent=indent, gap=gap, header=header))
            return
        longest = [
            max((len(word) for row in rows for word in row[index].split()), default=1) for index in range(len(headers))
        ]
        text = ""
        for keep in range(_WHOLE_WORD, -1, -1):
            columns = [Column(h) if isinstance(h, str) else copy.copy(h) for h in headers]
            for column, word in zip(columns, longest, strict=True):
                column.overflow = "fold"  # never an ellipsis: what is left out could be what tells two rows apart
                column.header_style = ""
                if keep and not column.no_wrap and column.min_width is None:
                    column.min_width = min(word, keep)
            table = Table(
                *columns,
                box=None,
                padding=(0, gap - gap // 2, 0, gap // 2),
                pad_edge=False,
                show_edge=False,
                expand=False,
                show_header=header,
            )
            for row in rows:
                table.add_row(*(Text(cell) for cell in row))
            text = self._render(table, indent=indent)
            if all(len(line) <= self.width for line in text.splitlines()):
                break
        _write(text)

    def _print(self, renderable: RenderableType, *, indent: int = 0) -> None:
        _write(self._render(renderable, indent=indent))

    def _render(self, renderable: RenderableType, *, indent: int = 0) -> str:
        width = (self.width if self.width is not None else _UNBOUNDED) - indent
        buffer = io.StringIO()
        console = Console(
            file=buffer, width=max(width, 20), color_system=None, highlight=False, markup=False, emoji=False
        )
        console.print(renderable, crop=False)
        return "".join(" " * indent + line + "\n" if line else "\n" for line in _stripped(buffer.getvalue()))


def _plain(
    headers: Sequence[str | Column], rows: Sequence[Sequence[str]], *, indent: int, gap: int, header: bool
) -> str:
    """The table unwrapped: each column as wide as its widest cell, ``gap`` spaces apart."""
    titles = [str(h.header) if isinstance(h, Column) else h for h in headers]
    lines = [tuple(titles), *rows] if header else list(rows)
    widths = [max(len(cell) for cell in column) for column in zip(*lines, strict=True)] if lines else []
    return "".join(
        " " * indent + (" " * gap).join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() + "\n"
        for line in lines
    )


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
