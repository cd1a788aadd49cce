"""Many variants of one kernel source in one OpenCL program.

Measured on PoCL 3.1: most of a small build is fixed cost (starting the compiler on a source
with the OpenCL C header in front): 8 one-kernel programs took 0.89 s, one program with the
same 8 kernels 0.08 s; the 29-variant SGEMM space built in 2.7 s one by one and 0.46 s as
one program. So a batch of variants compiles as one program. Each copy of the source is
wrapped in ``#pragma push_macro``/``pop_macro`` for every name it may touch (its parameters,
the renames, the macros it defines), so it starts from the macros the build options and the
OpenCL headers define and leaves them as it found them; inside, its parameters are
``#define``-d and the kernel and every file-scope name it declares are renamed (a typedef that
differs between copies would otherwise clash). Each kernel then compiles from the same text
its one-variant build compiles; and every variant is still checked against the reference
before it is timed.

A source this cannot wrap safely is not batched: one with ``#include`` (a guarded header would
be seen by the first copy only) or a ``#pragma`` other than ``OPENCL EXTENSION`` (a pragma's
state, say ``FP_CONTRACT``, would carry into the next copy). A batch that fails to build is
retried one variant per program, so a variant that does not compile only costs itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Batch", "batchable", "batched_program", "without_comments"]

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_TYPEDEF = re.compile(r"\btypedef\b[^;{}]*?\b([A-Za-z_]\w*)[ \t]*(?:\[[^\]]*\])?[ \t]*;")
_TAGGED_TYPEDEF = re.compile(r"\}[ \t]*([A-Za-z_]\w*)[ \t]*;")
_TAG = re.compile(r"\b(?:struct|union|enum)[ \t\n]+([A-Za-z_]\w*)[ \t\n]*\{")
_ENUM_BODY = re.compile(r"\benum\b[^{;]*\{([^}]*)\}")
_ENUMERATOR = re.compile(r"(?:^|,)\s*([A-Za-z_]\w*)")
_FUNCTION = re.compile(r"^[ \t]*(?:[A-Za-z_]\w*[ \t\n\*]+)+?([A-Za-z_]\w*)[ \t\n]*\([^;{}]*\)[ \t\n]*\{", re.MULTILINE)
_CONSTANT = re.compile(
    r"^[ \t]*(?:static[ \t]+)?(?:__)?constant\b[^;=({]*?\b([A-Za-z_]\w*)[ \t]*(?:\[[^\]]*\])*[ \t]*=", re.MULTILINE
)
_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma\b(.*)$", re.MULTILINE)
_KEYWORDS = frozenset(
    {"if", "else", "for", "while", "do", "switch", "case", "return", "sizeof", "break", "continue", "goto"}
    | {"default", "typedef", "struct", "union", "enum"}
)


def without_comments(source: str) -> str:
    """``source`` with its C comments blanked out, so a name in a comment is not taken for code."""
    return _COMMENTS.sub(" ", source)


def batchable(source: str) -> bool:
    """Whether ``source`` can be copied into one program many times (no ``#include``, no state-changing pragma)."""
    text = without_comments(source)
    if re.search(r"^[ \t]*#[ \t]*include\b", text, re.MULTILINE):
        return False
    return all(p.split()[:2] == ["OPENCL", "EXTENSION"] for p in (m.group(1) for m in _PRAGMA.finditer(text)))


def _declared(source: str) -> list[str]:
    """Names the source declares at file scope (a superset is harmless: renames are consistent)."""
    text = _ATTRIBUTE.sub(" ", without_comments(source))
    names: set[str] = set()
    for pattern in (_TYPEDEF, _TAGGED_TYPEDEF, _TAG, _FUNCTION, _CONSTANT):
        names.update(match.group(1) for match in pattern.finditer(text))
    for body in _ENUM_BODY.finditer(text):
        names.update(_ENUMERATOR.findall(body.group(1)))
    return sorted(names - _KEYWORDS)


@dataclass(frozen=True, slots=True)
class Batch:
    """One program holding several variants: its source, and each variant's kernel name in order."""

    source: str
    kernel_names: tuple[str, ...]


def batched_program(source: str, kernel_name: str, defines: Sequence[Sequence[tuple[str, str]]]) -> Batch:
    """One program with a copy of ``source`` per entry of ``defines`` ((name, value) pairs)."""
    renamed = sorted(set(_declared(source)) | {kernel_name})
    macros = set(_MACRO.findall(without_comments(source)))
    parts: list[str] = []
    names: list[str] = []
    for index, pairs in enumerate(defines):
        suffix = f"__tk{index}"
        touched = sorted({name for name, _ in pairs} | set(renamed) | macros)
        head = [f'#pragma push_macro("{name}")' for name in touched]
        head += [f"#undef {name}\n#define {name} {value}" for name, value in pairs]
        head += [f"#undef {name}\n#define {name} {name}{suffix}" for name in renamed]
        tail = [f'#pragma pop_macro("{name}")' for name in reversed(touched)]
        parts.append("\n".join(head) + f"\n#line 1\n{source}\n" + "\n".join(tail) + "\n")
        names.append(kernel_name + suffix)
    return Batch("".join(parts), tuple(names))
