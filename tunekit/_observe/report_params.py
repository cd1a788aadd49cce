"""The parameters of a space's candidates, read back from their names, for the report's parameter views.

A record keeps candidates by name only. A space names each configuration ``A=1,B=64``
(``Config.name``), a kernel template ``kernel[A=1,B=64]``; a space refuses string values holding
``,`` or ``=``, so such a name splits back into its parameters unambiguously. A name that does
not read that way (a hand-written tunable) has no parameters, and the report shows no
parameter view for its tune.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tunekit._values.records import CandidateRecord

__all__ = ["ParamPoint", "ParamTable", "param_table", "parse_params"]

_BRACKETED = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<body>[^\[\]]*)\]$")
_PARAM = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^,=]*)$")

ParamValue = int | float | str


def _value(text: str) -> ParamValue:
    """The value as the space held it where that is unambiguous: numbers sort as numbers, the rest as text."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def parse_params(name: str) -> tuple[str, dict[str, ParamValue]] | None:
    """``(prefix, {parameter: value})`` of a configuration's name; None when the name is not one.

    ``"BLOCK=64,VEC=2"`` -> ``("", {"BLOCK": 64, "VEC": 2})``; ``"gelu[VEC=8]"`` -> ``("gelu", {"VEC": 8})``.
    """
    prefix, body = "", name
    if match := _BRACKETED.match(name):
        prefix, body = match["prefix"], match["body"]
    params: dict[str, ParamValue] = {}
    for part in body.split(","):
        found = _PARAM.match(part)
        if found is None or found["name"] in params:
            return None
        params[found["name"]] = _value(found["value"])
    return prefix, params


@dataclass(frozen=True, slots=True)
class ParamPoint:
    """One measured configuration: its parameters and its median time."""

    name: str
    params: dict[str, ParamValue]
    median_ns: float


@dataclass(frozen=True, slots=True)
class ParamTable:
    """The measured configurations of one tune whose candidates are a space's, with each parameter's values."""

    names: tuple[str, ...]
    """The parameters, in the order the names give them."""
    values: dict[str, tuple[ParamValue, ...]]
    """Each parameter's distinct values among the candidates, sorted (numbers by value)."""
    points: tuple[ParamPoint, ...]
    failed: tuple[dict[str, ParamValue], ...]
    """The parameters of candidates that failed: shown as such in the heat maps, not as gaps."""

    @property
    def varied(self) -> tuple[str, ...]:
        """The parameters that take more than one value: those a plot against them can show."""
        return tuple(n for n in self.names if len(self.values[n]) > 1)


def _sort_key(value: ParamValue) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def param_table(candidates: Sequence[CandidateRecord]) -> ParamTable | None:
    """The parameter table of a tune's candidates; None unless every candidate is a configuration of one space.

    One space: the same prefix and the same parameters in the same order for every candidate.
    """
    parsed = [(c, parse_params(c.name)) for c in candidates]
    if not parsed or any(p is None for _, p in parsed):
        return None
    shapes = {(p[0], tuple(p[1])) for _, p in parsed if p is not None}
    if len(shapes) != 1:
        return None
    ((_, names),) = shapes
    points: list[ParamPoint] = []
    failed: list[dict[str, ParamValue]] = []
    for candidate, found in parsed:
        assert found is not None  # checked above
        if candidate.stats is not None:
            points.append(ParamPoint(candidate.name, found[1], candidate.stats.median_ns))
        elif candidate.status == "failed":
            failed.append(found[1])
    values = {n: tuple(sorted({p[1][n] for _, p in parsed if p is not None}, key=_sort_key)) for n in names}
    return ParamTable(names, values, tuple(points), tuple(failed))
