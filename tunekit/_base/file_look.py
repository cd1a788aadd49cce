"""What a file that is no text looks like, from its first bytes, so a command given one can say so in a line.

Handed a SQLite database or a binary blob, a command that reads JSON lines would report every
line of it as invalid (thousands, for a few megabytes of binary).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["binary_kind", "binary_kind_of"]

HEAD = 1 << 16
"""Bytes looked at: enough to tell binary from text, little enough to read for any file."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"%PDF-", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\x93NUMPY", "a NumPy array file (.npy)"),
    *((bytes([0x80, protocol]), "a Python pickle") for protocol in (2, 3, 4, 5)),
)


def binary_kind(head: bytes) -> str | None:
    """What ``head`` (a file's first bytes, up to :data:`HEAD`) looks like when it is not text, in words; else None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if b"\x00" in head:
        return "binary data (not text)"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the end of the head is still text.
        if exc.start < len(head) - 3 or len(head) < HEAD:
            return "binary data (not text)"
    return None


def binary_kind_of(path: Path) -> str | None:
    """:func:`binary_kind` of the file at ``path``; None when it is text or cannot be read."""
    try:
        with open(path, "rb") as file:
            return binary_kind(file.read(HEAD))
    except OSError:
        return None
