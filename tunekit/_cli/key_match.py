"""``--key FIELD=VALUE``: parsing the filters and matching a stored key against them (cache and records commands)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from tunekit._cli.error import CliError

__all__ = ["fields_match", "key_filter", "key_matches", "same_value"]


def key_filter(pairs: list[str]) -> dict[str, str]:
    """The ``--key`` arguments as field -> value; a usage error for one without ``=``."""
    wanted: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--key takes FIELD=VALUE (e.g. --key n=1024), got {pair!r}")
        wanted[name] = value
    return wanted


def key_matches(key_json: str, wanted: dict[str, str]) -> bool:
    """Whether the key stored as ``key_json`` has every field value of ``wanted``."""
    try:
        fields = json.loads(key_json)
    except json.JSONDecodeError:
        return False
    return isinstance(fields, dict) and fields_match(fields, wanted)


def fields_match(fields: Mapping[str, object], wanted: dict[str, str]) -> bool:
    """Whether a key's fields hold every field value of ``wanted``."""
    return all(name in fields and same_value(fields[name], value) for name, value in wanted.items())


def same_value(stored: object, given: str) -> bool:
    """Whether ``--key FIELD=given`` names the stored field value.

    Compared as text, a float field stored as 2.0 would not match ``alpha=2``, nor a bool stored
    as true ``flag=True``: numbers compare as numbers, bools without regard to case.
    """
    if isinstance(stored, bool) or stored is None:
        return json.dumps(stored) == given.lower()
    if isinstance(stored, int | float):
        for number in (int, float):  # int first: a float would round a large int
            try:
                return number(given) == stored
            except ValueError:
                continue
        return False
    return str(stored) == given
