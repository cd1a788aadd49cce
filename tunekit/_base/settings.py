"""Settings: the one place where tunekit reads the environment and config files.

Sources, highest first: keyword overrides given to :func:`configure`, ``TUNEKIT_*``
environment variables, ``tunekit.toml`` in the working directory, then
``[tool.tunekit]`` in ``pyproject.toml``.

This module holds the settings in force and what the hit path reads of them (the anchor
exponent); the model that validates them is :mod:`tunekit._base.settings_model`, loaded when they
are first read (the first anchored key, the first tune). Importing tunekit so never loads
pydantic-settings, which costs about 140 ms (benches/import_time.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Unpack

from tunekit._base.setting_types import (
    RECORD_STREAMS,
    SHORT_CIRCUIT_THRESHOLDS,
    AutotuneLevel,
    IsolationMode,
    SettingsOverrides,
)

if TYPE_CHECKING:
    from tunekit._base.settings_model import Settings

__all__ = [
    "RECORD_STREAMS",
    "SHORT_CIRCUIT_THRESHOLDS",
    "AutotuneLevel",
    "IsolationMode",
    "SettingsOverrides",
    "anchor_exponent",
    "configure",
    "current",
    "on_configure",
]

_lock = threading.Lock()
_current: Settings | None = None
# 0 until the settings are read: a key's generated __init__ reads this alone on its hot path, and a 0
# sends it to anchor_exponent(), which reads them (reporting bad settings at the first key).
_anchor_exponent = 0
_watchers: list[Callable[[Settings], None]] = []


def on_configure(watcher: Callable[[Settings], None]) -> None:
    """Call ``watcher(settings)`` after each :func:`configure`, once the new settings are current.

    For state kept across calls that the settings decide: the tuner's plan orders, used while
    autotuning was off, are dropped when it is back on. Read the settings at each use instead
    wherever that is cheap enough.
    """
    _watchers.append(watcher)


def current() -> Settings:
    """The settings in force, read from the environment on first use."""
    settings = _current
    if settings is None:
        settings = configure()
    return settings


def configure(**overrides: Unpack[SettingsOverrides]) -> Settings:
    """Re-read the environment and config files, apply ``overrides``, and make the result current.

    Each call starts afresh: overrides given to an earlier call are dropped, not merged. The
    keywords are typed (``SettingsOverrides``): a type checker refuses a misspelt setting or a
    value of another type; at run time each is validated, and a bad one is a ``tk.SettingsError``.
    """
    global _current, _anchor_exponent
    # Imported here, at the first read of the settings, not with this module: the model's
    # pydantic-settings would make every `import tunekit` ~140 ms slower (see the module docstring).
    from tunekit._base.settings_model import read  # noqa: PLC0415 - see above

    settings = read(dict(overrides))
    with _lock:
        _current = settings
        _anchor_exponent = level_anchor_exponent(settings.autotune_level)
    for watcher in _watchers:
        watcher(settings)
    return settings


def level_anchor_exponent(level: AutotuneLevel) -> int:
    """Power applied to every anchor base at ``level``: 2 at minimal, else 1 (CubeCL's coarsening)."""
    return 2 if level == "minimal" else 1


def anchor_exponent() -> int:
    """Power applied to every anchor base: 2 at the minimal level, else 1 (CubeCL's coarsening)."""
    if _current is None:
        current()
    return _anchor_exponent
