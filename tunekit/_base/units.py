"""Durations in words a person reads at a glance: the one formatter of the CLI, the report and live progress.

Microseconds are spelt ``µs`` everywhere. Where standard output or standard error cannot encode
``µ`` (a C locale, ``PYTHONIOENCODING=ascii``, an old Windows console), they are spelt ``us``:
a progress line or table that raised ``UnicodeEncodeError`` half-way would show nothing.
"""

from __future__ import annotations

import sys

__all__ = ["ASCII_MICRO", "MICRO", "format_duration_ns", "micro_unit"]

MICRO = "µs"
"""How microseconds are spelt."""

ASCII_MICRO = "us"
"""How microseconds are spelt where the output cannot show ``µ``."""


def micro_unit() -> str:
    """``µs``, or ``us`` when standard output or standard error has an encoding that cannot show ``µ``.

    Asked at each call: the streams are what they are when the text is written (a test or a
    command redirects them); a stream without an encoding (``io.StringIO``) takes any text.
    """
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if not encoding:
            continue
        try:
            MICRO.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            return ASCII_MICRO
    return MICRO


def format_duration_ns(ns: float | None, *, for_file: bool = False) -> str:
    """A duration with a readable unit (``12 ns``, ``4.5 µs``, ``3.25 ms``, ``2 s``); ``-`` when unknown.

    ``for_file`` is for text written to a UTF-8 file (the HTML report, a result's ``str``), not
    to the streams: it always spells ``µs``, whatever the terminal that wrote it could show.
    """
    if ns is None:
        return "-"
    micro = MICRO if for_file else micro_unit()
    for unit, scale in (("s", 1e9), ("ms", 1e6), (micro, 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"
