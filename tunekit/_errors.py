"""Errors raised by tunekit."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NoValidKernelFound", "TunekitError"]


class TunekitError(Exception):
    """Base class of tunekit's own errors."""


class NoValidKernelFound(TunekitError):
    """Every candidate failed or was skipped for a key; lists each one and why."""

    def __init__(self, tuner: str, key: object, failures: Sequence[tuple[str, str]]) -> None:
        self.tuner = tuner
        self.key = key
        self.failures = tuple(failures)
        lines = "\n".join(f"  - {name}: {reason}" for name, reason in self.failures) or "  (no candidate was planned)"
        super().__init__(f"tuner {tuner!r}: no valid candidate for key {key!r}:\n{lines}")

    def __reduce__(self) -> tuple[type[NoValidKernelFound], tuple[str, object, tuple[tuple[str, str], ...]]]:
        return (type(self), (self.tuner, self.key, self.failures))
