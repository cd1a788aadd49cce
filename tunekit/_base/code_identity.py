"""A restriction's identity for the space hash: its normalised source and the data it reads.

A restriction is code, so the hash cannot hold the predicate itself; it holds what decides its
answers instead. The source goes through the AST, so comments, spacing, line breaks and the
statement a lambda sits in do not count. The values of the plain-data names it reads (closure
variables, module globals, default arguments, a bound method's object, ``partial`` arguments)
are added, because a bound kept in a variable decides the answers as much as one written inline;
so are the identities of the module's own functions it calls. Without source text (``python -c``,
a REPL) the compiled code stands in, and the hash then holds for one Python version only.
"""

from __future__ import annotations

import ast
import dis
import functools
import hashlib
import inspect
import numbers
import re
import textwrap
from collections.abc import Callable, Iterator
from types import CodeType, FunctionType, MethodType
from typing import Any

import numpy as np

__all__ = ["code_identity", "restriction_identity"]

Render = Callable[[object], "str | None"]
"""The text a value read by the function adds to its identity; None leaves it out."""

# Finding a lambda's own text parses prefixes of its source line: bounded, so a generated line of
# megabytes, or a line of many lambdas, costs milliseconds before falling back to the code itself.
_MAX_PARSES = 2000
_MAX_LINES = 20
# A value whose text is longer enters the identity as a digest (a table of a million entries
# would otherwise be copied into every trial-log header).
_MAX_VALUE_TEXT = 256
_MAX_DEPTH = 3


def restriction_identity(fn: Callable[..., Any]) -> str:
    """What a restriction contributes to the space hash (also shown by ``space.describe()``)."""
    return _identity(fn, depth=0, seen=set(), render=lambda value: _data_repr(value, 0))


def code_identity(fn: Callable[..., Any]) -> str:
    """A function's code alone: its normalised source and that of its module's functions it calls.

    For a ``build``, whose kernels follow its code: the values it reads are left out, because
    they often differ between processes running the same code (an unseeded array, a path made
    from ``__file__`` in each checkout, a client's clock), and each difference would re-tune.
    """
    return _identity(fn, depth=0, seen=set(), render=lambda value: None)


def _identity(fn: Callable[..., Any], *, depth: int, seen: set[int], render: Render) -> str:
    declared = getattr(fn, "fingerprint", None)
    if isinstance(declared, str):
        # A callable object may name its own identity (a lookup table, say, whose source says nothing of the table).
        return f"fingerprint:{declared}"
    if isinstance(fn, functools.partial):
        bound = {f"arg{i}": v for i, v in enumerate(fn.args)} | dict(fn.keywords)
        inner = _identity(fn.func, depth=depth, seen=seen, render=render)
        return _with(f"partial({inner})", _data(bound, render))
    owner = {"self": fn.__self__} if isinstance(fn, MethodType) else {}
    fn = inspect.unwrap(fn.__func__ if isinstance(fn, MethodType) else fn)
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return _object_identity(fn, render)
    seen.add(id(fn))
    source = _normalised_source(fn, code)
    text = source if source is not None else f"{fn.__qualname__} code:{_code_digest(code)}"
    values: dict[str, object] = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell: assigned after the function was made
            continue
    module = getattr(fn, "__globals__", {})
    helpers = []
    for name in sorted(_globals_read(code)):
        if name not in module:
            continue
        value = module[name]
        if isinstance(value, FunctionType) and value.__module__ == fn.__module__:
            # A helper of the same module decides the answers too; others (numpy, math) are libraries.
            if depth < _MAX_DEPTH and id(value) not in seen:
                helpers.append(f"{name}: {_identity(value, depth=depth + 1, seen=seen, render=render)}")
            continue
        values[name] = value
    for i, value in enumerate(getattr(fn, "__defaults__", None) or ()):
        values[f"default{i}"] = value
    values |= getattr(fn, "__kwdefaults__", None) or {}
    for name, obj in owner.items():
        values |= {f"{name}.{k}": v for k, v in getattr(obj, "__dict__", {}).items()}
    data = _data(values, render)
    return _with(text, ", ".join([*helpers, data] if data else helpers))


def _with(text: str, data: str) -> str:
    return f"{text} with {data}" if data else text


def _data(values: dict[str, object], render: Render) -> str:
    """``name=value`` for every value ``render`` names, sorted; anything else is left out."""
    out = []
    for name, value in sorted(values.items()):
        text = render(value)
        if text is not None:
            if len(text) > _MAX_VALUE_TEXT:
                text = f"<sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]}>"
            out.append(f"{name}={text}")
    return ", ".join(out)


def _data_repr(value: object, depth: int) -> str | None:
    """A stable text of plain data (numbers, strings, arrays and containers of them); None for anything else."""
    if value is None or isinstance(value, bool | str | bytes | numbers.Number | range):
        return repr(value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return None
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
        return f"array({value.dtype.str}, {value.shape}, {digest})"
    if depth >= _MAX_DEPTH or not isinstance(value, tuple | list | set | frozenset | dict):
        return None
    if isinstance(value, dict):
        items = [(_data_repr(k, depth + 1), _data_repr(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return "{" + ", ".join(sorted(f"{k}: {v}" for k, v in items)) + "}"
    parts = [_data_repr(v, depth + 1) for v in value]
    texts = [p for p in parts if p is not None]
    if len(texts) < len(parts):
        return None
    if isinstance(value, set | frozenset):
        texts.sort()  # a set's order changes with the hash seed
    return f"{type(value).__name__}({', '.join(texts)})"


def _globals_read(code: CodeType) -> set[str]:
    """Names loaded as globals (not attribute names, which share ``co_names``), nested code included."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _globals_read(const)
    return {n for n in names if isinstance(n, str)}


def _shape(code: CodeType) -> str:
    """Names and constants, recursively, free variables counted as names.

    Enough to tell which lambda of a line is ``code``: compiled on its own, a lambda reads its
    closure variables as globals. Sets are sorted: their order changes with the hash seed.
    """
    consts = []
    for c in code.co_consts:
        if isinstance(c, CodeType):
            consts.append(_shape(c))
        elif isinstance(c, frozenset):
            consts.append("frozenset(" + ", ".join(sorted(map(repr, c))) + ")")
        else:
            consts.append(repr(c))
    return f"{sorted(set(code.co_names) | set(code.co_freevars))!r}{consts!r}"


def _code_digest(code: CodeType) -> str:
    parts = [code.co_code.hex(), _shape(code)]
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
    budget = [_MAX_PARSES]
    want = _shape(code)
    # inspect gives a lambda's first line only; one that runs over more lines needs the next ones.
    for extra in range(_MAX_LINES):
        window = "".join(lines[first : first + 1 + extra])
        found = sorted({ast.unparse(node) for node in _lambdas_in(window, budget) if _shape_of(node) == want})
        if len(found) == 1:
            return found[0]
        if found:  # alike lambdas on one line (c.A < c.B, c.A > c.B): only the code tells them apart
            return " | ".join(found) + f" code:{_code_digest(code)}"
        if first + 1 + extra >= len(lines) or budget[0] <= 0:
            break
    return f"{fn.__qualname__} code:{_code_digest(code)}"


def _lambdas_in(text: str, budget: list[int]) -> Iterator[ast.Lambda]:
    """Each lambda expression in ``text``: the longest text from a ``lambda`` keyword that parses as one."""
    for match in re.finditer(r"\blambda\b", text):
        fragment = text[match.start() :]
        # A lambda's text ends where a delimiter, a space, a comment or the line's end follows it.
        ends = [len(fragment), *(i for i in range(len(fragment) - 1, 0, -1) if fragment[i] in " ,)]};#\n")]
        for end in ends:
            if budget[0] <= 0:
                return
            budget[0] -= 1
            try:
                # In brackets, as in the call it came from, the lambda may run over several lines.
                tree = ast.parse(f"({fragment[:end]}\n)", mode="eval")
            except SyntaxError:
                continue
            if isinstance(tree.body, ast.Lambda):
                yield tree.body
                break


def _shape_of(node: ast.Lambda) -> str:
    compiled = compile(ast.fix_missing_locations(ast.Expression(body=node)), "<restriction>", "eval")
    inner = [c for c in compiled.co_consts if isinstance(c, CodeType)]
    return _shape(inner[0]) if inner else ""


def _object_identity(fn: Callable[..., Any], render: Render) -> str:
    """A callable object: its class's source (or name) and its plain-data attributes."""
    cls = type(fn)
    try:
        text = ast.unparse(ast.parse(textwrap.dedent(inspect.getsource(cls))))
    except (OSError, TypeError, SyntaxError):
        text = getattr(fn, "__qualname__", cls.__qualname__)
    return _with(text, _data(dict(getattr(fn, "__dict__", {})), render))
