"""Many variants of one kernel source in one OpenCL program.

Measured on PoCL 3.1: most of a small build is fixed cost (starting the compiler on a source
with the OpenCL C header in front): 8 one-kernel programs took 0.89 s, one program with the
same 8 kernels 0.08 s; the 29-variant SGEMM space built in 2.7 s one by one and 0.46 s as
one program. So a batch of variants compiles as one program: each copy of the source is
preceded by its parameters as ``#define``s and by renames of the kernel and of every
file-scope name it declares (a typedef that differs between copies would otherwise clash),
and followed by ``#undef``s, so the copies cannot see each other. The code of each kernel is
the code its own one-variant build would give; and every variant is still checked against
the reference before it is timed.

A source this cannot rewrite safely (one with ``#include``: a header guarded against a second
inclusion would see only the first variant's parameters) is not batched; a batch that fails
to build is retried one variant per program, so a variant that does not compile only costs
itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Batch", "batchable", "batched_program"]

_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_TYPEDEF = re.compile(r"\btypedef\b[^;{}]*?\b([A-Za-z_]\w*)[ \t]*(?:\[[^\]]*\])?[ \t]*;")
_TAGGED_TYPEDEF = re.compile(r"\}[ \t]*([A-Za-z_]\w*)[ \t]*;")
_TAG = re.compile(r"\b(?:struct|union|enum)[ \t\n]+([A-Za-z_]\w*)[ \t\n]*\{")
_FUNCTION = re.compile(r"^[ \t]*(?:[A-Za-z_]\w*[ \t\n\*]+)+?([A-Za-z_]\w*)[ \t\n]*\([^;{}]*\)[ \t\n]*\{", re.MULTILINE)
_CONSTANT = re.compile(r"^[ \t]*(?:__)?constant\b[^;=({]*?\b([A-Za-z_]\w*)[ \t]*(?:\[[^\]]*\])*[ \t]*=", re.MULTILINE)
_KEYWORDS = frozenset(
    {"if", "else", "for", "while", "do", "switch", "case", "return", "sizeof", "break", "continue", "goto"}
    | {"default", "typedef", "struct", "union", "enum"}
)
_DEFINE_OPTION = re.compile(r"^-D[ \t]*([A-Za-z_]\w*)")


def batchable(source: str) -> bool:
    """Whether ``source`` can be copied into one program many times (no ``#include``)."""
    return re.search(r"^[ \t]*#[ \t]*include\b", source, re.MULTILINE) is None


def _declared(source: str) -> list[str]:
    """Names the source declares at file scope (a superset is harmless: renames are consistent)."""
    names: set[str] = set()
    for pattern in (_TYPEDEF, _TAGGED_TYPEDEF, _TAG, _FUNCTION, _CONSTANT):
        names.update(match.group(1) for match in pattern.finditer(source))
    return sorted(names - _KEYWORDS)


@dataclass(frozen=True, slots=True)
class Batch:
    """One program holding several variants: its source, and each variant's kernel name in order."""

    source: str
    kernel_names: tuple[str, ...]


def batched_program(
    source: str, kernel_name: str, defines: Sequence[Sequence[tuple[str, str]]], options: Sequence[str] = ()
) -> Batch:
    """One program with a copy of ``source`` per entry of ``defines`` ((name, value) pairs).

    ``options`` are the build options every variant shares: a macro they define is not
    ``#undef``-ed between copies, so a source's ``#ifndef`` default behaves as in its own build.
    """
    from_options = {m.group(1) for option in options if (m := _DEFINE_OPTION.match(option))}
    renamed = sorted(set(_declared(source)) | {kernel_name})
    macros = sorted(set(_MACRO.findall(source)) - from_options)
    parts: list[str] = []
    names: list[str] = []
    for index, pairs in enumerate(defines):
        suffix = f"__tk{index}"
        head = [f"#define {name} {value}" for name, value in pairs]
        head += [f"#define {name} {name}{suffix}" for name in renamed]
        tail = [f"#undef {name}" for name in sorted({name for name, _ in pairs} | set(renamed) | set(macros))]
        parts.append("\n".join(head) + f"\n#line 1\n{source}\n" + "\n".join(tail) + "\n")
        names.append(kernel_name + suffix)
    return Batch("".join(parts), tuple(names))
