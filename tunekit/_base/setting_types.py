"""The types and constants of the settings, shared by the settings model and the code that reads it.

Apart from both: :mod:`tunekit._base.settings_model` validates with them, and
:mod:`tunekit._base.settings` (which loads the model lazily) re-exports them, so neither imports
the other at module level.
"""

from __future__ import annotations

import os
from typing import Literal, TypedDict

__all__ = ["RECORD_STREAMS", "SHORT_CIRCUIT_THRESHOLDS", "AutotuneLevel", "IsolationMode", "SettingsOverrides"]

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


class SettingsOverrides(TypedDict, total=False):
    """The keywords of ``tk.configure``: every setting, typed, so a type checker refuses a misspelt one or a wrong type.

    The settings model (:class:`tunekit._base.settings_model.Settings`) validates the same names at
    run time, from every source; a test holds the two to the same fields.
    """

    autotune: bool
    cache: bool
    cache_dir: str | os.PathLike[str] | None
    cache_url: str | None
    record: str | os.PathLike[str] | None
    autotune_level: AutotuneLevel
    warmup: int
    samples: int
    adaptive: bool
    warmup_ms: float
    min_samples: int
    max_samples: int
    speed_factor: float
    runoff_pairs: int
    compile_workers: int | None
    progress: bool
    progress_delay_s: float
    count_hits: bool
    count_hits_interval_s: float
    isolation: IsolationMode
    candidate_timeout_s: float
    tune_lock_timeout_s: float
    failed_tune_retry_s: float
