"""A space described as data: parameter names, values and restriction identities, kept in logs and records."""

from __future__ import annotations

from typing import Literal

from tunekit._base.persisted import Persisted
from tunekit._candidates.config import (
    ParamValue,
)

__all__ = ["SpaceModel", "space_difference"]


class SpaceModel(Persisted):
    """A space as JSON: its parameters and the source of its restrictions (for logs and records)."""

    schema_version: Literal[1] = 1
    params: dict[str, list[ParamValue]]
    restrictions: list[str]
    hash: str


def space_difference(logged: SpaceModel, running: SpaceModel) -> str:
    """What changed from the ``logged`` space (a trial log's, a record's) to the ``running`` one, in words.

    Two hashes tell nobody what to fix; the trial log and the committed record both say it this way.
    """
    changes = []
    for name in dict.fromkeys([*logged.params, *running.params]):
        before, after = logged.params.get(name), running.params.get(name)
        if before is None:
            changes.append(f"parameter {name} is new")
        elif after is None:
            changes.append(f"parameter {name} is gone")
        elif before != after:
            changes.append(f"{name} was {before}, is {after}")
    if list(logged.params) != list(running.params) and not changes:
        changes.append(f"the parameters were in the order {list(logged.params)}, are {list(running.params)}")
    if logged.restrictions != running.restrictions:
        changes.append(f"the restrictions were {logged.restrictions}, are {running.restrictions}")
    return "; ".join(changes) or "the same parameters and restriction text: data a restriction reads changed"
