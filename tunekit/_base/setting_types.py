"""The types and constants of the settings, shared by the settings model and the code that reads it.

Apart from both: :mod:`tunekit._base.settings_model` validates with them, and
:mod:`tunekit._base.settings` (which loads the model lazily) re-exports them, so neither imports
the other at module level.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["RECORD_STREAMS", "SHORT_CIRCUIT_THRESHOLDS", "AutotuneLevel", "IsolationMode"]

AutotuneLevel = Literal["minimal", "balanced", "extensive", "full"]
IsolationMode = Literal["none", "process"]

RECORD_STREAMS = ("stdout", "stderr")
"""The ``record`` values that name a stream, not a file; matched without regard to case or blanks."""

SHORT_CIRCUIT_THRESHOLDS: dict[AutotuneLevel, float | None] = {
    "minimal": 0.6,
    "balanced": 0.8,
    "extensive": 0.95,
    "full": None,
}
"""Fraction of the roofline a candidate must reach to end its batch early; ``full`` never does."""
