"""OpenCL C preamble shared by generated kernels: a VEC-wide float type with load/store macros."""

from __future__ import annotations

__all__ = ["VECTOR_PREAMBLE"]

VECTOR_PREAMBLE = """
#define TK_CAT_(a, b) a##b
#define TK_CAT(a, b) TK_CAT_(a, b)
#if VEC == 1
typedef float vt;
#define LOADV(i, p) ((p)[i])
#define STOREV(v, i, p) ((p)[i] = (v))
#else
typedef TK_CAT(float, VEC) vt;
#define LOADV(i, p) TK_CAT(vload, VEC)(i, p)
#define STOREV(v, i, p) TK_CAT(vstore, VEC)(v, i, p)
#endif
"""
