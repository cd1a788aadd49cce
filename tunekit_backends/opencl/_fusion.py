"""Fused elementwise chains: a registry of ops, each one line of OpenCL C and its numpy twin.

``fuse(["bias_add", "gelu"])`` writes one kernel that loads each element once, applies the
chain in registers and stores once, instead of one kernel (and one round trip to memory)
per op. The eager chain of the same ops is its numpy reference and the baseline it must beat.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

import tunekit as tk
from tunekit import Config
from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._client import OpenCLClient
from tunekit_backends.opencl._template import KernelTemplate
from tunekit_backends.opencl._vector import VECTOR_PREAMBLE

__all__ = ["OPS", "ElementwiseKey", "ElementwiseOp", "FusedChain", "fuse", "register_op"]

Operand = Literal["none", "row", "full", "scalar"]


@dataclass(frozen=True)
class ElementwiseOp:
    """One op of a chain: ``expr`` is OpenCL C over ``v`` (the running value, a VEC-wide float)
    and ``p`` (its operand); ``numpy(v, p)`` computes the same on host arrays.

    ``operand``: ``none``; ``row``, a vector of length ``cols`` broadcast over rows (a bias);
    ``full``, an array shaped like the input (a residual); ``scalar``, one float.
    """

    name: str
    expr: str
    numpy: Callable[[np.ndarray, Any], np.ndarray]
    operand: Operand = "none"


OPS: dict[str, ElementwiseOp] = {}
"""The registry ``fuse`` draws from; add an op with :func:`register_op`."""


def register_op(op: ElementwiseOp) -> ElementwiseOp:
    """Add ``op`` to the registry (a name may be registered once)."""
    if not op.name.isidentifier():
        raise ValueError(f"op name {op.name!r} must be an identifier: it becomes part of the kernel's name")
    if op.name in OPS:
        raise ValueError(f"an op named {op.name!r} is already registered")
    OPS[op.name] = op
    return op


def _gelu(v: np.ndarray, p: Any) -> np.ndarray:
    inner = np.float32(0.7978845608) * (v + np.float32(0.044715) * v * v * v)
    out: np.ndarray = (np.float32(0.5) * v * (np.float32(1) + np.tanh(inner))).astype(v.dtype)
    return out


for _op in (
    ElementwiseOp("bias_add", "v + p", lambda v, p: v + p, "row"),
    ElementwiseOp("residual_add", "v + p", lambda v, p: v + p, "full"),
    ElementwiseOp("scale", "v * p", lambda v, p: v * np.float32(p), "scalar"),
    ElementwiseOp("gelu", "0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)))", _gelu),
    ElementwiseOp("relu", "fmax(v, 0.0f)", lambda v, p: np.maximum(v, np.float32(0))),
    ElementwiseOp("silu", "v / (1.0f + exp(-v))", lambda v, p: v / (np.float32(1) + np.exp(-v))),
    ElementwiseOp("tanh", "tanh(v)", lambda v, p: np.tanh(v)),
    ElementwiseOp("square", "v * v", lambda v, p: v * v),
):
    register_op(_op)


@tk.autotune_key
class ElementwiseKey:
    """Rows bucketed by powers of two; columns exactly, since the vector width must divide them."""

    rows: Annotated[int, tk.Anchor()]
    cols: int


def _load(op: ElementwiseOp, k: int) -> str:
    match op.operand:
        case "row":
            return f"const vt p = LOADV(((i * VEC) % cols) / VEC, p{k});"
        case "full":
            return f"const vt p = LOADV(i, p{k});"
        case "scalar":
            return f"const vt p = (vt)(p{k});"
        case "none":
            return ""


def _source(name: str, ops: Sequence[ElementwiseOp]) -> str:
    params = ["__global const float* restrict x"]
    for k, op in enumerate(ops):
        if op.operand in ("row", "full"):
            params.append(f"__global const float* restrict p{k}")
        elif op.operand == "scalar":
            params.append(f"const float p{k}")
    params += ["__global float* restrict out", "const int cols", "const int n"]
    steps = "\n".join(f"    {{ {_load(op, k)} v = {op.expr}; }}" for k, op in enumerate(ops))
    return f"""{VECTOR_PREAMBLE}
__kernel void {name}({", ".join(params)}) {{
    const int i = get_global_id(0);
    if (i >= n / VEC) return;
    vt v = LOADV(i, x);
{steps}
    STOREV(v, i, out);
}}
"""


def _geometry(config: Config, key: ElementwiseKey) -> tuple[tuple[int], tuple[int]]:
    block = int(config.BLOCK)
    items = key.rows * key.cols // int(config.VEC)
    return (math.ceil(items / block) * block,), (block,)


@dataclass(frozen=True)
class FusedChain:
    """A fused kernel for a chain of registered ops, with its reference and tunable set.

    Arguments of the kernel (and of every candidate): ``x``, one operand per op that takes
    one (in chain order), ``out``, then ``cols`` and ``n`` as ``np.int32``.
    """

    ops: tuple[ElementwiseOp, ...]
    template: KernelTemplate[ElementwiseKey]

    @property
    def name(self) -> str:
        """The kernel's name: ``fused_`` and the op names."""
        return self.template.kernel_name

    @property
    def operands(self) -> tuple[ElementwiseOp, ...]:
        """The ops that take an operand, in argument order."""
        return tuple(op for op in self.ops if op.operand != "none")

    @property
    def out_position(self) -> int:
        """Argument position of ``out``."""
        return 1 + len(self.operands)

    def reference(self, x: np.ndarray, *rest: Any) -> np.ndarray:
        """The eager numpy chain on host arrays (``rest``: operands, out, cols, n)."""
        operands = iter(rest[: len(self.operands)])
        cols = int(rest[len(self.operands) + 1])
        v = np.asarray(x, dtype=np.float32).reshape(-1, cols)
        for op in self.ops:
            p = next(operands) if op.operand != "none" else None
            if op.operand == "full":
                p = np.asarray(p).reshape(v.shape)
            v = op.numpy(v, p).astype(np.float32)
        return v.reshape(np.shape(x))

    def host_operands(self, key: ElementwiseKey, rng: np.random.Generator) -> list[Any]:
        """Random operands for ``key``: a row vector, a full array or a scalar per op."""
        out: list[Any] = []
        for op in self.operands:
            match op.operand:
                case "row":
                    out.append(rng.standard_normal(key.cols, dtype=np.float32))
                case "full":
                    out.append(rng.standard_normal((key.rows, key.cols), dtype=np.float32))
                case _:
                    out.append(np.float32(0.5))
        return out

    def tunable_set(self, client: OpenCLClient) -> tk.TunableSet[ElementwiseKey, Any]:
        """Every (VEC, BLOCK) variant, checked against the eager chain before timing."""
        cla = pyopencl().array

        def key(x: Any, *rest: Any) -> ElementwiseKey:
            cols = int(rest[-2])
            return ElementwiseKey(rows=int(rest[-1]) // cols, cols=cols)

        def inputs(k: ElementwiseKey, *caller: Any) -> tuple[Any, ...]:
            rng = np.random.default_rng(0)
            x = cla.to_device(client.queue, rng.standard_normal((k.rows, k.cols), dtype=np.float32))
            operands = [
                cla.to_device(client.queue, p) if isinstance(p, np.ndarray) else p for p in self.host_operands(k, rng)
            ]
            out = cla.empty(client.queue, (k.rows, k.cols), np.float32)
            return (x, *operands, out, np.int32(k.cols), np.int32(k.rows * k.cols))

        return self.template.tunable_set(
            client, key=key, inputs=inputs, reference=self.reference, outputs=[self.out_position]
        )


def fuse(
    names: Sequence[str],
    *,
    vec: Sequence[int] = (1, 2, 4, 8),
    block: Sequence[int] = (64, 128, 256),
) -> FusedChain:
    """The fused kernel of the registered ops ``names``, applied in order.

    Its space is VEC (floats per work-item, loaded as one vector) x BLOCK (work-group size);
    a VEC that does not divide the row length is skipped for that key.
    """
    if not names:
        raise ValueError("fuse() needs at least one op name")
    unknown = [n for n in names if n not in OPS]
    if unknown:
        raise ValueError(f"fuse(): unknown ops {unknown}; registered: {sorted(OPS)} (add one with register_op)")
    ops = tuple(OPS[n] for n in names)
    name = "fused_" + "_".join(names)
    template = KernelTemplate(
        _source(name, ops),
        name,
        {"VEC": list(vec), "BLOCK": list(block)},
        geometry=_geometry,
        applies=lambda config, key: key.cols % int(config.VEC) == 0,
    )
    return FusedChain(ops, template)
