"""Optional extras (Optuna, OpenTelemetry): looked up without importing, imported at first use.

Importing ``tunekit`` never imports them; a missing one fails where it is first asked for,
with the ``pip install`` command that brings it.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

__all__ = ["import_extra", "install_hint", "require_extra"]


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'tunekit[{extra}]'"


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def require_extra(module: str, extra: str, needs: str) -> None:
    """Raise ImportError ``"{needs}: pip install ..."`` when ``module`` is not installed.

    Looked up, not imported: checking an argument should not pay a second's import.
    """
    if _missing(module):
        raise ImportError(f"{needs}: {install_hint(extra)}")


def import_extra(module: str, extra: str, needs: str) -> ModuleType:
    """``module`` imported, or ImportError ``"{needs}: pip install ..."``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{needs}: {install_hint(extra)}") from None
