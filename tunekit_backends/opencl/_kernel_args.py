"""A kernel's declared parameter types, read from its source, against the arrays a launch passes.

A float64 array passed to a ``float*`` parameter (or int32 to ``float*``) launches without a
word from the driver: the kernel reads the array's bytes as floats. Unchecked, only a
correctness check would notice, as a wrong result, and a cached winner run on the caller's
arrays not even that.

The types come from the source rather than from ``clGetKernelArgInfo``: that needs a build
(with ``-cl-kernel-arg-info``), and on PoCL the compile workers first-launch a variant before
this process builds it, so a float32 array passed to a ``double*`` output would be reported as
an out-of-bounds write. The source is read conservatively: a parameter whose type this cannot
resolve (a typedef or macro defined twice, a struct, ``#if`` inside the parameter list, a
macro spelling the parameter list) is not checked, so a correct launch is never refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunekit_backends.opencl._batch import without_comments
from tunekit_backends.opencl._cl import pyopencl

__all__ = ["Param", "argument_mismatch", "declared_dtypes", "kernel_params", "kernels_in", "source_aliases"]

# __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void name(
_KERNEL = re.compile(r"\b(?:__kernel|kernel)\s+(?:__attribute__\s*\(\(.*?\)\)\s*)*void\s+([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_TOKEN = re.compile(r"[A-Za-z_]\w*|\*|\S")
_SPACES = {
    "__global": "global",
    "global": "global",
    "__constant": "constant",
    "constant": "constant",
    "__local": "local",
    "local": "local",
    "__private": "private",
    "private": "private",
}
_QUALIFIERS = frozenset(
    {"const", "volatile", "restrict", "__restrict", "__restrict__", "signed"}
    | {"__read_only", "read_only", "__write_only", "write_only", "__read_write", "read_write"}
)
_SCALARS: dict[str, np.dtype[Any]] = {
    "char": np.dtype(np.int8),
    "uchar": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "ushort": np.dtype(np.uint16),
    "int": np.dtype(np.int32),
    "uint": np.dtype(np.uint32),
    "long": np.dtype(np.int64),
    "ulong": np.dtype(np.uint64),
    "half": np.dtype(np.float16),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
}
_VECTOR = re.compile(r"([a-z]+?)(2|3|4|8|16)")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*([^\n]*)$", re.MULTILINE)
_TYPEDEF = re.compile(r"\btypedef\s+([A-Za-z_][\w \t]*?)\s+([A-Za-z_]\w*)\s*;")
_D_OPTION = re.compile(r"-D\s*([A-Za-z_]\w*)(?:=(\S*))?")


def kernels_in(source: str) -> list[str]:
    """The names of the kernels ``source`` defines outside comments, in order."""
    return _KERNEL.findall(without_comments(source))


@dataclass(frozen=True, slots=True)
class Param:
    """One kernel parameter as written: its name, type (without qualifiers), address space, and whether a pointer."""

    name: str
    type_name: str
    space: str
    pointer: bool

    def declaration(self) -> str:
        """The parameter as C spells it, qualifiers aside (``__global float* y``)."""
        space = "" if self.space == "private" else f"__{self.space} "
        return f"{space}{self.type_name}{'*' if self.pointer else ''} {self.name}"


def kernel_params(source: str, kernel_name: str) -> tuple[Param, ...] | None:
    """The parameters of ``__kernel void kernel_name(...)``, or None when the source cannot be read safely."""
    text = without_comments(source)
    found = [m for m in _KERNEL.finditer(text) if m.group(1) == kernel_name]
    if len(found) != 1:  # defined under #if and #else, say: which one builds depends on the defines
        return None
    start = found[0].end()
    depth = 1
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    else:
        return None
    inside = _ATTRIBUTE.sub(" ", text[start:end])
    if "#" in inside:  # a preprocessor line in the parameter list: the parameters depend on the defines
        return None
    if not inside.strip() or inside.strip() == "void":
        return ()
    params = [_param(part) for part in inside.split(",")]
    return None if any(p is None for p in params) else tuple(p for p in params if p is not None)


def _param(text: str) -> Param | None:
    tokens = _TOKEN.findall(text)
    if not tokens or not re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]):
        return None
    name, space, pointers, words = tokens[-1], "private", 0, []
    for token in tokens[:-1]:
        if token in _SPACES:
            space = _SPACES[token]
        elif token == "*":
            pointers += 1
        elif token in _QUALIFIERS:
            continue
        elif re.fullmatch(r"[A-Za-z_]\w*", token):
            words.append(token)
        else:  # an array declarator, a macro call's parentheses: not a plain parameter
            return None
    if pointers > 1 or not words:
        return None
    if words[0] == "unsigned":  # unsigned int -> uint, as OpenCL C names them
        words = ["u" + (words[1] if len(words) > 1 else "int"), *words[2:]]
    return Param(name, " ".join(words), space, pointers == 1)


def source_aliases(source: str, options: Sequence[str]) -> dict[str, str | None]:
    """Names the source or options define as a type, to what; None for a name defined more than one way."""
    aliases: dict[str, str | None] = {}

    def add(name: str, value: str) -> None:
        aliases[name] = value if aliases.get(name, value) == value else None

    text = without_comments(source)
    for match in _DEFINE.finditer(text):
        add(match.group(1), match.group(2).strip())
    for match in _TYPEDEF.finditer(text):
        add(match.group(2), " ".join(match.group(1).split()))
    for match in _D_OPTION.finditer(" ".join(options)):
        add(match.group(1), match.group(2) if match.group(2) is not None else "1")
    return aliases


def declared_dtypes(
    params: Sequence[Param], aliases: Mapping[str, str | None], defines: Mapping[str, str]
) -> tuple[np.dtype[Any] | None, ...]:
    """Each parameter's element dtype (pointee, or scalar), None where unknown or not to be checked.

    ``defines`` are the variant's own ``-D`` values, which a source ``#define`` of the same
    name would clash with: such a name is left unknown.
    """
    return tuple(_dtype_of(p, aliases, defines) for p in params)


def _dtype_of(param: Param, aliases: Mapping[str, str | None], defines: Mapping[str, str]) -> np.dtype[Any] | None:
    if param.space == "local":  # takes a pyopencl.LocalMemory, which has no dtype
        return None
    name = _resolve(param.type_name, aliases, defines)
    if name is None:
        return None
    vector = _VECTOR.fullmatch(name)
    if vector is not None:
        if not param.pointer:  # a vector scalar argument is a structured numpy value; the driver checks its size
            return None
        name = vector.group(1)
    if param.pointer and name in ("char", "uchar"):  # byte pointers view any memory on purpose
        return None
    return _SCALARS.get(name)


def _resolve(name: str, aliases: Mapping[str, str | None], defines: Mapping[str, str]) -> str | None:
    """The builtin type ``name`` stands for (T -> real -> float), or None when unknown or ambiguous."""
    for _ in range(8):  # a cycle gives up
        if name in _SCALARS or _VECTOR.fullmatch(name):
            return name
        if name in defines and name in aliases:  # the source defines it too: which one wins depends on #ifndef
            return None
        value = defines.get(name, aliases.get(name))
        if value is None:
            return None
        words = [w for w in value.split() if w not in _QUALIFIERS]
        if words[:1] == ["unsigned"]:
            words = ["u" + (words[1] if len(words) > 1 else "int"), *words[2:]]
        name = " ".join(words)
    return None


def argument_mismatch(
    variant: str, params: Sequence[Param], dtypes: Sequence[np.dtype[Any] | None], args: Sequence[Any]
) -> str | None:
    """What is wrong with an argument for its declared parameter (its kind or its dtype), or None.

    A raw ``pyopencl.Buffer`` has no dtype and is passed as bytes; so is anything whose
    parameter type is unknown. A count mismatch is left to the caller's own message.
    """
    if len(params) != len(args):
        return None
    cl = pyopencl()
    for position, (param, declared, value) in enumerate(zip(params, dtypes, args, strict=True)):
        if param.pointer and param.space in ("global", "constant") and isinstance(value, np.ndarray):
            return (
                f"{variant}: argument {position} ({param.name}) is a numpy array in host memory, but the kernel "
                f"declares `{param.declaration()}`, a pointer to device memory: copy it to the device, e.g. "
                "pyopencl.array.to_device(client.queue, array)"
            )
        kind = _kind_mismatch(param, declared, value, cl)
        if kind is not None:
            order = ", ".join(p.name for p in params)
            return (
                f"{variant}: argument {position} ({param.name}) is {kind}. The kernel's parameters, in order: {order}"
            )
        if declared is None:
            continue
        if param.pointer and isinstance(value, cl.array.Array):
            passed, what = value.dtype, "a pyopencl array of"
        elif not param.pointer and isinstance(value, np.generic):
            passed, what = value.dtype, "a numpy scalar of"
        elif not param.pointer and type(value) in (bool, int, float):
            # The driver would refuse it with a bare INVALID_VALUE; the declaration says which numpy type fits
            # (a Python 2 for `const float a` is np.float32(2), not the np.int32 its Python type suggests).
            return (
                f"{variant}: argument {position} ({param.name}) is a Python {type(value).__name__} ({value!r}), "
                f"but the kernel declares `{param.declaration()}`: pass np.{declared.name}({value!r}), a numpy "
                "scalar of the parameter's C type (a Python number has none, so the driver refuses it)"
            )
        else:  # a Buffer, or something no parameter takes (argument_hint names it when the launch fails)
            continue
        if _compatible(declared, passed):
            continue
        fix = (
            f"an array of {declared.name} (e.g. pyopencl.array.to_device(queue, host.astype(np.{declared.name}))), "
            "or pass its .data, a raw buffer whose bytes are not checked"
            if param.pointer
            else f"np.{declared.name}(value)"
        )
        return (
            f"{variant}: argument {position} ({param.name}) is {what} {passed}, but the kernel declares "
            f"`{param.declaration()}`, which reads it as {declared.name} ({declared.itemsize} bytes per element): it "
            f"would compute on reinterpreted bytes. Pass {fix}, or change the kernel's parameter type"
        )
    return None


def _kind_mismatch(param: Param, declared: np.dtype[Any] | None, value: Any, cl: Any) -> str | None:
    """A scalar given for a pointer, or an array for a scalar: what was passed and what to pass, else None.

    The driver takes neither with a word that names the argument (``INVALID_ARG_SIZE - when
    processing arg#1``); both are usually arguments given in another order than the kernel's.
    """
    scalar = isinstance(value, np.generic) or type(value) in (bool, int, float)
    if param.pointer and param.space in ("global", "constant") and scalar:
        what = f"numpy scalar of {value.dtype}" if isinstance(value, np.generic) else f"Python {type(value).__name__}"
        return (
            f"a {what} ({value!r}), but the kernel declares `{param.declaration()}`, a pointer to device memory: "
            "pass a pyopencl array made on the client's queue (pyopencl.array.to_device(client.queue, host_array))"
        )
    if not param.pointer and declared is not None and isinstance(value, cl.array.Array | cl.MemoryObjectHolder):
        return (
            f"a pyopencl {'array' if isinstance(value, cl.array.Array) else 'buffer'}, but the kernel declares "
            f"`{param.declaration()}`, a scalar: pass a numpy scalar of its type, np.{declared.name}(value)"
        )
    return None


def _compatible(declared: np.dtype[Any], passed: np.dtype[Any]) -> bool:
    if passed == declared:
        return True
    if passed.fields:  # pyopencl.cltypes.float4 and the like: every field of the declared scalar type
        return all(field[0] == declared for field in passed.fields.values())
    return False
