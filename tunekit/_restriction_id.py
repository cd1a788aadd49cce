"""A restriction's identity for the space hash: its normalised source and the data it reads.

A restriction is code, so the hash cannot hold the predicate itself; it holds what decides its
answers instead. The source goes through the AST, so comments, spacing, line breaks and the
statement a lambda sits in do not count. The values of the plain-data names it reads (closure
variables, module constants, default arguments) are added, because a bound kept in a variable
decides the answers as much as one written inline. Without source text (``python -c``, a REPL)
the compiled code stands in, and the hash then holds for one Python version only.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import numbers
import re
import textwrap
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

__all__ = ["restriction_identity"]

# A lambda's source line is searched for the lambda's own text by parsing prefixes; a
# generated line of megabytes is not worth that, and falls back to its collapsed text.
_MAX_SEARCHED = 4000
_MAX_LINES = 20


def restriction_identity(fn: Callable[..., Any]) -> str:
    """What a restriction contributes to the space hash (also shown by ``space.describe()``)."""
    declared = getattr(fn, "fingerprint", None)
    if isinstance(declared, str):
        # A callable object may name its own identity (a lookup table, say, whose source says nothing of the table).
        return f"fingerprint:{declared}"
    if isinstance(fn, functools.partial):
        bound = {f"arg{i}": v for i, v in enumerate(fn.args)} | dict(fn.keywords)
        values: dict[str, str] = {}
        for name, value in bound.items():
            _add(values, name, value)
        data = ", ".join(f"{name}={value}" for name, value in sorted(values.items()))
        return f"partial({restriction_identity(fn.func)}) with {data}"
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return _object_identity(fn)
    source = _normalised_source(fn, code)
    text = source if source is not None else f"{fn.__qualname__} code:{_code_digest(code)}"
    data = _data_read(fn, code)
    return f"{text} with {data}" if data else text


def _code_shape(code: CodeType) -> str:
    """Constants and names, recursively: enough to tell which lambda of a line is ``code``."""
    consts = [_code_shape(c) if isinstance(c, CodeType) else repr(c) for c in code.co_consts]
    return f"{code.co_names!r}{consts!r}"


def _code_digest(code: CodeType) -> str:
    parts = [code.co_code.hex(), _code_shape(code)]
    parts += [_code_digest(c) for c in code.co_consts if isinstance(c, CodeType)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _normalised_source(fn: Callable[..., Any], code: CodeType) -> str | None:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    if code.co_name != "<lambda>":
        try:
            return ast.unparse(ast.parse(textwrap.dedent(text)))
        except SyntaxError:
            return re.sub(r"\s+", " ", text).strip()
    try:
        lines, first = inspect.findsource(fn)
    except (OSError, TypeError):
        lines, first = text.splitlines(keepends=True), 0
    # inspect gives a lambda's first line only; one that runs over more lines needs the next ones.
    for extra in range(_MAX_LINES):
        window = "".join(lines[first : first + 1 + extra])
        found = [node for node in _lambdas_in(window) if _compiles_to(node, code)]
        if found:
            return ast.unparse(found[0])
        if first + 1 + extra >= len(lines):
            break
    return re.sub(r"\s+", " ", text).strip() + " " + _code_shape(code)


def _lambdas_in(text: str) -> Iterator[ast.Lambda]:
    """Each lambda expression in ``text``: the longest text from a ``lambda`` keyword that parses as one."""
    if len(text) > _MAX_SEARCHED:
        return
    for match in re.finditer(r"\blambda\b", text):
        fragment = text[match.start() :]
        for end in range(len(fragment), 0, -1):
            try:
                # In brackets, as in the call it came from, the lambda may run over several lines.
                tree = ast.parse(f"({fragment[:end]}\n)", mode="eval")
            except SyntaxError:
                continue
            if isinstance(tree.body, ast.Lambda):
                yield tree.body
                break


def _compiles_to(node: ast.Lambda, code: CodeType) -> bool:
    compiled = compile(ast.fix_missing_locations(ast.Expression(body=node)), "<restriction>", "eval")
    inner = [c for c in compiled.co_consts if isinstance(c, CodeType)]
    return bool(inner) and _code_shape(inner[0]) == _code_shape(code)


def _data_read(fn: Callable[..., Any], code: CodeType) -> str:
    """``name=value`` for every plain-data value the function reads, sorted."""
    values: dict[str, str] = {}
    closure = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars, closure, strict=False):
        try:
            _add(values, name, cell.cell_contents)
        except ValueError:  # an empty cell: assigned after the function was made
            continue
    module = getattr(fn, "__globals__", {})
    for name in sorted(_names_read(code)):
        if name in module:
            _add(values, name, module[name])
    for i, value in enumerate(getattr(fn, "__defaults__", None) or ()):
        _add(values, f"default{i}", value)
    for name, value in (getattr(fn, "__kwdefaults__", None) or {}).items():
        _add(values, name, value)
    return ", ".join(f"{name}={value}" for name, value in sorted(values.items()))


def _names_read(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names_read(const)
    return names


def _add(values: dict[str, str], name: str, value: object) -> None:
    text = _data_repr(value)
    if text is not None:
        values[name] = text


def _data_repr(value: object, depth: int = 0) -> str | None:
    """A stable text of plain data (numbers, strings, and containers of them); None for anything else."""
    if value is None or isinstance(value, bool | str | bytes | numbers.Number):
        return repr(value)
    if depth > 3 or not isinstance(value, tuple | list | set | frozenset | dict | range):
        return None
    if isinstance(value, range):
        return repr(value)
    if isinstance(value, dict):
        items = [(_data_repr(k, depth + 1), _data_repr(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(items, key=str)) + "}"
    parts = [_data_repr(v, depth + 1) for v in value]
    if any(p is None for p in parts):
        return None
    texts = [p for p in parts if p is not None]
    if isinstance(value, set | frozenset):
        texts.sort()  # a set's order changes with the hash seed
    return f"{type(value).__name__}({', '.join(texts)})"


def _object_identity(fn: Callable[..., Any]) -> str:
    """A callable object: its class's source (or name) and its plain-data attributes."""
    cls = type(fn)
    try:
        text = ast.unparse(ast.parse(textwrap.dedent(inspect.getsource(cls))))
    except (OSError, TypeError, SyntaxError):
        text = getattr(fn, "__qualname__", cls.__qualname__)
    values: dict[str, str] = {}
    for name, value in sorted(getattr(fn, "__dict__", {}).items()):
        _add(values, name, value)
    data = ", ".join(f"{name}={value}" for name, value in values.items())
    return f"{text} with {data}" if data else text
