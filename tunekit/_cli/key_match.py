"""``--key FIELD=VALUE``: parsing the filters and matching a stored key against them (cache and records commands)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from tunekit._cli.error import CliError

__all__ = ["fields_match", "held_values_hint", "key_filter", "key_matches", "same_value"]


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


def held_values_hint(held_by: str, keys: Iterable[Mapping[str, object]], wanted: dict[str, str]) -> str:
    """What the ``--key`` fields do hold, for a filter that matched nothing: ``stored n: 1024, 4096; ...``.

    Keys are stored and recorded anchored, so ``--key n=1000`` (the call's size) finds nothing
    where the key holds 1024: the values there show the bucket to ask for. Empty when there is no
    key to name values from.
    """
    held: dict[str, set[str]] = {name: set() for name in wanted}
    seen = False
    for fields in keys:
        seen = True
        for name, values in held.items():
            if name in fields:
                values.add(json.dumps(fields[name]).strip('"'))
    if not seen or not wanted:
        return ""
    parts = []
    for name, values in held.items():
        ordered = sorted(values, key=lambda v: (len(v), v))  # numbers in numeric order, as their text is
        shown = ", ".join(ordered[:12]) + (f", ... {len(ordered) - 12} more" if len(ordered) > 12 else "")
        parts.append(f"{name}: {shown}")
    # Which fields are anchored is not known here: the bucket hint is for a wanted int only.
    sizes = any(value.isdigit() for value in wanted.values())
    bucket = "; anchored fields hold the rounded-up bucket, e.g. 1024 for 1000" if sizes else ""
    return f"{held_by} {'; '.join(parts)}{bucket}"
