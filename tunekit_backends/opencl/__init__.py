"""The OpenCL backend: real kernels on a real device, through pyopencl.

``pip install 'tunekit[opencl]'`` brings pyopencl and PoCL (a CPU OpenCL device), so kernels
tune on any machine; a GPU driver, when present, is preferred. Importing this package does
not import pyopencl: the client does, on construction.
"""

from tunekit_backends.opencl._cl import CompileError
from tunekit_backends.opencl._client import OpenCLClient, describe_devices
from tunekit_backends.opencl._fusion import OPS, ElementwiseKey, ElementwiseOp, FusedChain, fuse, register_op
from tunekit_backends.opencl._template import Geometry, KernelTemplate

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
