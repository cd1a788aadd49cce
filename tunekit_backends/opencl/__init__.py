"""The OpenCL backend: real kernels on a real device, through pyopencl.

``pip install 'tunekit[opencl]'`` brings pyopencl and PoCL (a CPU OpenCL device), so kernels
tune on any machine; a GPU driver, when present, is preferred. Importing this package does
not import pyopencl: the client does, on construction.

Nothing is imported with the package itself: a name loads its module at first use. A compile
worker (``python -m tunekit_backends.opencl._compile_worker``) imports this package first, and
would otherwise pay for the client, the templates and ``tunekit.backend`` (about 0.2 s of CPU
measured here) at every start, before it can open its device.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the private module defining it; type checkers read the imports below.
_EXPORTS: dict[str, str] = {
    "OPS": "tunekit_backends.opencl._fusion",
    "CompileError": "tunekit_backends.opencl._cl",
    "ElementwiseKey": "tunekit_backends.opencl._fusion",
    "ElementwiseOp": "tunekit_backends.opencl._fusion",
    "FusedChain": "tunekit_backends.opencl._fusion",
    "Geometry": "tunekit_backends.opencl._template",
    "KernelTemplate": "tunekit_backends.opencl._template",
    "OpenCLClient": "tunekit_backends.opencl._client",
    "describe_devices": "tunekit_backends.opencl._client",
    "fuse": "tunekit_backends.opencl._fusion",
    "register_op": "tunekit_backends.opencl._fusion",
}

if TYPE_CHECKING:
    from tunekit_backends.opencl._cl import CompileError as CompileError
    from tunekit_backends.opencl._client import OpenCLClient as OpenCLClient, describe_devices as describe_devices
    from tunekit_backends.opencl._fusion import (
        OPS as OPS,
        ElementwiseKey as ElementwiseKey,
        ElementwiseOp as ElementwiseOp,
        FusedChain as FusedChain,
        fuse as fuse,
        register_op as register_op,
    )
    from tunekit_backends.opencl._template import Geometry as Geometry, KernelTemplate as KernelTemplate

__all__ = [
    "OPS",
    "CompileError",
    "ElementwiseKey",
    "ElementwiseOp",
    "FusedChain",
    "Geometry",
    "KernelTemplate",
    "OpenCLClient",
    "describe_devices",
    "fuse",
    "register_op",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tunekit_backends.opencl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("_")})
