"""A database URL as messages and logs may show it: without its password.

One rule for every place that names the fleet's store (the settings' errors, the store's warnings,
the CLI's headers). Text only, never parsed: a malformed URL in a settings error is shown all the
same, password hidden, rather than raising while the error is being written.
"""

from __future__ import annotations

import re

__all__ = ["redacted"]

_USER_PASSWORD = re.compile(r"^([^:/?#]+://[^:/@?#]*):[^@/?#]*@")
"""``scheme://user:PASSWORD@``: libpq's password in the user part."""

_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)
"""``?password=PASSWORD``: the form a unix-socket URL often has (``?host=/run/postgresql&password=...``)."""


def redacted(url: str) -> str:
    """``url`` with its password, in the user part or as a query parameter, shown as ``***``."""
    return _QUERY_PASSWORD.sub(r"\1***", _USER_PASSWORD.sub(r"\1:***@", url, count=1))
