"""The base of every model tunekit writes to disk: forward compatible within one ``schema_version``.

Cache rows, failed-tune rows, cache bundles, trial logs, committed records and the records
JSONL outlive the tunekit that wrote them, and several versions share them (two services on
one cache, a record committed by a newer checkout, ``tunekit records summary`` of an older
install). Within one ``schema_version`` a newer tunekit only adds optional fields (the cache
row's ``origin`` is one); so a reader keeps fields it does not know instead of refusing the
row: refusing a cache row would make an older process re-tune the key and overwrite the
newer one's row, back and forth. Unknown fields are kept, not dropped, because some rows
are written back (a demoted winner's row, a cache export and import, a record loaded, added
to and saved): rewriting must not strip what the newer version stored. A change an older
reader would misread (a field's meaning or type, a new value of an existing choice) bumps
``schema_version`` instead, and a row of another ``schema_version`` is refused, and where it
is a cache row, re-tuned.

Only data read back is given that leeway: JSON text (``model_validate_json``, which is how a
reader outside tunekit reads these files too) and whatever is validated with the ``STORED``
context, which every read path of tunekit passes (a cache row's value is parsed before it is
validated). A model built in code (``tk.CacheValue(..., reslts=...)``, ``model_validate`` of a
dict) refuses an unknown field, naming it and the model's fields: kept as an extra, a misspelt
field would be silently saved while the field it meant took its default. ``init_forbid_extra`` in
the pydantic mypy plugin refuses the same keyword before it runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

from tunekit._base.version import __version__

__all__ = ["STORED", "Persisted", "known_versions", "other_version"]

_STORED_MARK = "tunekit:stored"

STORED: Final[Mapping[str, bool]] = MappingProxyType({_STORED_MARK: True})
"""The validation context of data read back (a file, a cache row): ``model_validate_json(data, context=STORED)``."""


class Persisted(BaseModel):
    """A frozen on-disk model that keeps (and writes back) fields added by a newer tunekit."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields_unless_stored(cls, data: Any, info: ValidationInfo) -> Any:
        stored = info.mode == "json" or (isinstance(info.context, Mapping) and info.context.get(_STORED_MARK))
        if stored or not isinstance(data, dict):
            return data
        known = set(cls.model_fields)
        unknown = [name for name in data if name not in known]
        if unknown:
            raise ValueError(
                f"{cls.__name__} has no field {', '.join(map(repr, unknown))}; its fields are "
                f"{', '.join(cls.model_fields)} (only data read back from disk keeps fields it does not know)"
            )
        return data


def known_versions(model: type[Persisted]) -> tuple[object, ...]:
    """The ``schema_version`` values ``model`` reads (its field's Literal), for naming another tunekit's file."""
    return get_args(model.model_fields["schema_version"].annotation)


def other_version(text: str | bytes, model: type[Persisted]) -> str | None:
    """Why ``text`` is no ``model``, when it holds another ``schema_version`` (another tunekit's); else None.

    Said in words: pydantic's ``schema_version: Input should be 1`` reads as a damaged row,
    where the row is whole and only the reader is too old (or too new) for it.
    """
    try:
        fields = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(fields, dict) or "schema_version" not in fields:
        return None
    version = fields["schema_version"]
    known = known_versions(model)
    if version in known:
        return None
    return (
        f"it was written by another tunekit version (schema_version {version!r}; "
        f"tunekit {__version__} reads {' and '.join(map(str, known))})"
    )


JsonScalar = int | float | str | bool | None
