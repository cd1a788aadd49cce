"""Durations in words a person reads at a glance, for the CLI, the report and live progress."""

from __future__ import annotations

__all__ = ["format_duration_ns"]


def format_duration_ns(ns: float | None, *, micro: str = "us") -> str:
    """A duration with a readable unit; '-' when unknown.

    ``micro`` spells microseconds: plain ``us`` where output is grepped and diffed, ``µs`` on a terminal.
    """
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), (micro, 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"
