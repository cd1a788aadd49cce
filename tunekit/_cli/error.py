"""The one-line failure every command ends with, and its exit code."""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """A failure to report as one line, with the exit code to end with."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
