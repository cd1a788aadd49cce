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
import json
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel
from rich.table import Column

from tunekit._base.short_id import short_device_id

__all__ = ["Output", "fixed", "print_json", "terminal_columns"]

_WHOLE_WORD = 12
"""The longest word a narrow table keeps whole; a longer one (a candidate name, a key) folds."""

_FOLDED = 8
"""The width a column of longer words gives way to before a short word anywhere is split."""


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
        lines = text.split("\n") if self.width is None else _wrap(text, max(self.width - indent, 20))
        _write("".join(" " * indent + line + "\n" if line else "\n" for line in lines))

    def fields(self, pairs: Sequence[tuple[str, str]], *, indent: int = 0) -> None:
        """``label: value`` lines, each value wrapped under itself rather than under the label."""
        self.table(
            (fixed(""), ""), [(f"{label}:", value) for label, value in pairs], indent=indent, gap=1, header=False
        )

    def fits(self, headers: Sequence[str | Column], rows: Sequence[Sequence[str]], *, indent: int = 0) -> bool:
        """Whether the table fits the width with no cell wrapped (always, where nothing wraps)."""
        if self.width is None:
            return True
        titles = [_title(h) for h in headers]
        return sum(_natural([titles, *rows])) + 2 * (len(titles) - 1) + indent <= self.width

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

        Rich shared a narrow width out evenly and folded wherever a line ran out, splitting
        ``interleaved`` and ``listing_sum`` while a candidate name too long to keep whole had the
        room. Here each wrapping column keeps its longest word up to :data:`_WHOLE_WORD`
        characters, a column of longer words (a candidate name, a key, a locator) giving way
        first, down to :data:`_FOLDED`; a cell breaks at spaces, then after commas, then after
        ``:`` and ``=``, and folds mid-word only where none of those fit. Never cropped: where
        nothing fits, a line runs long rather than lose what it says.
        """
        titles = [_title(h) for h in headers]
        if self.width is None:  # nothing wraps: plain columns
            _write(_plain(titles, rows, indent=indent, gap=gap, header=header))
            return
        grid = [tuple(titles), *rows] if header else list(rows)
        wraps = [not (isinstance(h, Column) and h.no_wrap) for h in headers]
        widths = _widths(grid, wraps, max(self.width - indent, 20) - gap * (len(titles) - 1))
        text = []
        for line in grid:
            cells = [
                _wrap(cell, w) if wrap else cell.split("\n") for cell, w, wrap in zip(line, widths, wraps, strict=True)
            ]
            for depth in range(max(len(c) for c in cells)):
                parts = [(c[depth] if depth < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)]
                text.append(" " * indent + (" " * gap).join(parts).rstrip() + "\n")
        _write("".join(text))


def _title(header: str | Column) -> str:
    return str(header.header) if isinstance(header, Column) else header


def _natural(grid: Sequence[Sequence[str]]) -> list[int]:
    """Each column's width unwrapped: its widest line."""
    return [max(len(part) for cell in column for part in cell.split("\n")) for column in zip(*grid, strict=True)]


def _widths(grid: Sequence[Sequence[str]], wraps: Sequence[bool], room: int) -> list[int]:
    """The columns' widths in ``room`` characters (gaps left out): the widest wrapping column gives way first.

    A column never goes below its floor (:func:`_floors`), so a short word stays whole while a
    column of words that fold anyway has room to spare.
    """
    natural = _natural(grid)
    columns = list(zip(*grid, strict=True))
    longest = [max((len(w) for cell in column for w in _words(cell)), default=1) for column in columns]
    atoms = [max((len(p) for cell in column for w in _words(cell) for p in _atoms(w)), default=1) for column in columns]
    floors = _floors(natural, longest, atoms, wraps, room)
    widths = list(natural)
    excess = sum(widths) - room
    while excess > 0:
        shrinkable = [i for i, wrap in enumerate(wraps) if wrap and widths[i] > floors[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def _floors(
    natural: Sequence[int], longest: Sequence[int], atoms: Sequence[int], wraps: Sequence[bool], room: int
) -> list[int]:
    """The least width of each column: its longest word where the room allows.

    A column whose longest word is over :data:`_WHOLE_WORD` (it is broken anyway) gives up room
    first, down to :data:`_FOLDED`, while keeping whole the parts it breaks into (``"float64",``
    of a key) where they are short; then those parts; only then do the short words fold.
    """
    steps = [(_WHOLE_WORD, cap, True) for cap in range(_WHOLE_WORD, _FOLDED - 1, -1)]
    steps += [(_WHOLE_WORD, _FOLDED, False)]
    steps += [(cap, min(cap, _FOLDED), False) for cap in range(_WHOLE_WORD - 1, 0, -1)]
    floors = list(natural)
    for short, long, whole_parts in steps:
        floors = [
            width
            if not wrap
            else min(word, short)
            if word <= _WHOLE_WORD
            else max(long, atom if whole_parts and atom <= _WHOLE_WORD else 0)
            for width, word, atom, wrap in zip(natural, longest, atoms, wraps, strict=True)
        ]
        if sum(floors) <= room:
            break
    return floors


_WORD_BREAK = re.compile(r"(?<=,)(?=[^,])")
"""Where a word breaks before any fold: after a comma (a JSON key's fields, a list of names)."""

_PART_BREAKS = (re.compile(r"(?<=:)(?=[^:])"), re.compile(r"(?<==)(?=[^=])"))
"""Where a part still too long breaks, in this order: after ``:``, then after ``=`` (``opencl:`` ``platform=0,``)."""


_QUANTITY = re.compile(r"(?<=\d) (?=(?:[kMGT]?(?:op|B)/s|[nµum]?s)\b)")
"""The space between a number and its unit: ``2.2 µs`` is one word, not ``2.2`` over ``µs``."""

_KEPT = "\x00"
"""Stands for a space no line breaks at, while a cell is wrapped."""


def _split(text: str) -> list[str]:
    """The words of ``text``, a quantity and its unit one word."""
    return _QUANTITY.sub(_KEPT, text).split()


def _words(cell: str) -> list[str]:
    """The pieces a cell can be broken into without cutting a word: at spaces and after commas."""
    return [piece for word in _split(cell) for piece in _WORD_BREAK.split(word)]


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken at the most natural point that fits.

    A line is never only punctuation (a lone ``,`` or ``>``): its last word goes down with it.
    """
    lines: list[str] = []
    for paragraph in text.split("\n"):
        tokens = [
            (" " if i == 0 else "", piece) for word in _split(paragraph) for i, piece in enumerate(_pieces(word, width))
        ]
        current: list[tuple[str, str]] = []
        found: list[list[tuple[str, str]]] = []
        for glue, piece in tokens:
            if current and len(_joined(current)) + len(glue) + len(piece) > width:
                found.append(current)
                current = []
            current.append((glue, piece))
        found.append(current)
        for index in range(1, len(found)):
            line, before = found[index], found[index - 1]
            if not _has_word(_joined(line)) and len(before) > 1:
                moved = [before.pop(), *line]
                if len(_joined(moved)) <= width:
                    found[index] = moved
                else:
                    before.append(moved[0])
        lines += [_joined(line).replace(_KEPT, " ") for line in found]
    return lines


def _atoms(word: str) -> list[str]:
    """The parts of a word no natural break divides: the pieces it breaks into at the narrowest width."""
    return _broken(word, 1, (_WORD_BREAK, *_PART_BREAKS), fold=False)


def _pieces(word: str, width: int) -> list[str]:
    """``word`` in pieces of at most ``width`` (the first to be spaced from what comes before, the rest glued).

    Broken after commas, then after ``:`` and ``=``; a piece with none of those is folded, its
    last part never only punctuation (``rect]`` and ``,``, not ``rect]`` then ``,`` alone).
    """
    return _broken(word, width, (_WORD_BREAK, *_PART_BREAKS))


def _broken(part: str, width: int, breaks: Sequence[re.Pattern[str]], *, fold: bool = True) -> list[str]:
    """``part`` broken at the first of ``breaks`` where it is too long, each piece still too long at the next."""
    if len(part) <= width:
        return [part]
    if breaks:
        return [piece for sub in breaks[0].split(part) for piece in _broken(sub, width, breaks[1:], fold=fold)]
    if not fold:
        return [part]
    folds = [part[i : i + width] for i in range(0, len(part), width)]
    while len(folds) > 1 and not _has_word(folds[-1]) and len(folds[-2]) > 1:
        folds[-2], folds[-1] = folds[-2][:-1], folds[-2][-1] + folds[-1]
    return folds


def _joined(tokens: Sequence[tuple[str, str]]) -> str:
    return "".join(glue + piece for glue, piece in tokens).lstrip(" ")


def _has_word(text: str) -> bool:
    return any(c.isalnum() for c in text)


def _plain(titles: Sequence[str], rows: Sequence[Sequence[str]], *, indent: int, gap: int, header: bool) -> str:
    """The table unwrapped: each column as wide as its widest cell, ``gap`` spaces apart."""
    lines = [tuple(titles), *rows] if header else list(rows)
    widths = [max(len(cell) for cell in column) for column in zip(*lines, strict=True)] if lines else []
    return "".join(
        " " * indent + (" " * gap).join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() + "\n"
        for line in lines
    )


def _write(text: str) -> None:
    """``text`` on stdout; a character its encoding cannot show becomes ``?`` rather than an error mid-table."""
    encoding = getattr(sys.stdout, "encoding", None)
    if encoding:
        text = text.encode(encoding, "replace").decode(encoding)
    sys.stdout.write(text)


def print_json(document: BaseModel) -> None:
    """A listing's ``--json`` document on stdout: indented, ASCII (so any encoding takes it), never wrapped."""
    sys.stdout.write(json.dumps(document.model_dump(mode="json"), indent=2) + "\n")
