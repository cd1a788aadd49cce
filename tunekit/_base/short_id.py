"""A device id short enough for a table column, the same for the same id on every run and machine.

Device ids name everything that can change which candidate is fastest, so they run long: a
PoCL device id is over 150 characters (platform, its version, device, driver, OpenCL version).
Its short form keeps the start, where the backend and vendor are, and adds a hash of the whole
id, which tells apart ids that start alike (two PoCL devices, two numpy builds).
"""

from __future__ import annotations

import hashlib

__all__ = ["SHORT_ID_HEAD", "short_device_id"]

SHORT_ID_HEAD = 24
"""Characters of the id kept at the start of its short form; an id up to 8 longer is shown whole."""

_HASH_DIGITS = 6


def short_device_id(device_id: str) -> str:
    """``device_id`` itself when at most 32 characters, else its first 24, ``~`` and 6 hex digits of its SHA-256.

    ``opencl:Portable Computing Language|OpenCL 3.0 PoCL ...`` becomes ``opencl:Portable Computin~3f9a1c``.
    A pure function of the id: the same id has the same short form in every listing, run and machine.
    """
    if len(device_id) <= SHORT_ID_HEAD + 1 + _HASH_DIGITS + 1:
        return device_id
    digest = hashlib.sha256(device_id.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_DIGITS]
    return f"{device_id[:SHORT_ID_HEAD].rstrip()}~{digest}"
