"""The base of every model tunekit writes to disk: forward compatible within one ``schema_version``.

Cache rows, failed-tune rows, cache bundles, trial logs, committed records and the records
JSONL outlive the tunekit that wrote them, and several versions share them (two services on
one cache, a record committed by a newer checkout, ``tunekit records summary`` of an older
install). Within one ``schema_version`` a newer tunekit only adds optional fields (the cache
row's ``origin`` came that way); so a reader keeps fields it does not know instead of
refusing the row: refusing a cache row made an older process re-tune the key and overwrite
the newer one's row, back and forth. Unknown fields are kept, not dropped, because some rows
are written back (a demoted winner's row, a cache export and import, a record loaded, added
to and saved): rewriting must not strip what the newer version stored. A change an older
reader would misread (a field's meaning or type, a new value of an existing choice) bumps
``schema_version`` instead, and a row of another ``schema_version`` is handled as before:
refused, and where it is a cache row, re-tuned.

Fields of tunekit's own code stay checked: ``init_forbid_extra`` in the pydantic mypy plugin
makes ``mypy --strict`` refuse an unknown keyword in a constructor, as ``extra="forbid"`` did.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Persisted"]


class Persisted(BaseModel):
    """A frozen on-disk model that keeps (and writes back) fields added by a newer tunekit."""

    model_config = ConfigDict(extra="allow", frozen=True)
