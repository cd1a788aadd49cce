"""``--older-than 30d``: an age, and the moment a winner must have been tuned before to be that old."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tunekit._cli.error import CliError

__all__ = ["tuned_before"]

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def tuned_before(age: str | None, *, now: datetime | None = None) -> datetime | None:
    """The moment ``age`` (``30d``, ``12h``, ``90m``, ``45s``, ``2w``) before ``now``; None for no age.

    A usage error for anything else: a bare number would leave its unit to guess, and a clear
    that took minutes for days would remove almost every winner.
    """
    if age is None:
        return None
    match = _AGE.fullmatch(age.strip())
    if match is None:
        raise CliError(f"--older-than takes an age with its unit: s, m, h, d or w (e.g. 30d, 12h), got {age!r}")
    amount, unit = float(match[1]), _UNITS[match[2]]
    return (now or datetime.now(UTC)) - timedelta(**{unit: amount})
