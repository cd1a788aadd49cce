"""Cache bundles: winners exported from one cache as JSON, to commit or carry to another machine.

A bundle row is a cache row as it is stored (device id, tuner, canonical key, checksum,
value), so importing it changes nothing about how the tuner checks it: a row whose
checksum no longer matches the code's tunable set is re-tuned, exactly as on the machine
that measured it. Entries are sorted so a re-export of an unchanged cache diffs empty.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from tunekit._base.persisted import Persisted
from tunekit._base.validation_text import validation_text
from tunekit._base.version import MAJOR, __version__
from tunekit._values.cache_row import CacheRow, CacheValue

__all__ = ["BundleEntry", "CacheBundle"]


class BundleEntry(Persisted):
    """One stored winner with its namespace."""

    device_id: str = Field(min_length=1, max_length=10_000)
    tuner: str = Field(min_length=1, max_length=10_000)
    key: str = Field(max_length=100_000, description="The key's canonical JSON, as the cache stores it.")
    checksum: str = Field(min_length=1, max_length=1000)
    value: CacheValue

    @field_validator("key")
    @classmethod
    def _canonical_key(cls, key: str) -> str:
        try:
            fields = json.loads(key)
        except json.JSONDecodeError as exc:
            raise ValueError(f"key is not JSON: {exc.msg}") from exc
        if not isinstance(fields, dict) or not all(
            isinstance(v, str | int | float | bool) or v is None for v in fields.values()
        ):
            raise ValueError("key must be a JSON object of scalar fields")
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if canonical != key:
            raise ValueError(f"key is not in canonical form (expected {canonical})")
        return key

    @model_validator(mode="after")
    def _winner_ranked(self) -> BundleEntry:
        # Checked in the entry, so `cache import` refuses such a row just as `cache verify` flags it.
        if self.value.winner not in self.value.ranking:
            raise ValueError(f"winner {self.value.winner!r} is not in the ranking {self.value.ranking!r:.200}")
        return self

    @classmethod
    def of(cls, row: CacheRow) -> BundleEntry:
        """The entry of a cache row."""
        return cls(device_id=row.device_id, tuner=row.tuner, key=row.key, checksum=row.checksum, value=row.value)


class CacheBundle(Persisted):
    """Winners moved between caches by ``tunekit cache export`` / ``tunekit cache import``."""

    schema_version: Literal[1] = 1
    tunekit_version: str = __version__
    tunekit_major: int = Field(MAJOR, description="Rows only load into a cache of the same tunekit major version.")
    # No export time: it would make every re-export of an unchanged cache a diff of the committed
    # bundle (a bundle that has an ``exported_at`` reads it as an unknown field, ignored).
    entries: list[BundleEntry] = Field(default_factory=list, max_length=1_000_000)

    @model_validator(mode="after")
    def _one_entry_per_key(self) -> CacheBundle:
        # Two entries for one key (a hand-merged bundle) would both be imported, the last silently winning.
        seen: dict[tuple[str, str, str], int] = {}
        for number, entry in enumerate(self.entries):
            first = seen.setdefault((entry.device_id, entry.tuner, entry.key), number)
            if first != number:
                raise ValueError(
                    f"entries {first} and {number} are both {entry.tuner} {entry.key} on {entry.device_id!r}: keep one"
                )
        return self

    @classmethod
    def of(cls, rows: list[CacheRow]) -> tuple[CacheBundle, list[str]]:
        """A bundle of ``rows``, sorted for stable diffs, and why each row left out could not be exported.

        A row the cache reads can still be no valid entry (a hand-edited key out of canonical
        form, an empty device id): it is left out, named, rather than failing the whole export.
        """
        entries: list[BundleEntry] = []
        left_out: list[str] = []
        for row in rows:
            try:
                entries.append(BundleEntry.of(row))
            except ValidationError as exc:
                left_out.append(f"{row.tuner}/{row.key} on {row.device_id!r}: {validation_text(exc, limit=1)}")
        entries.sort(key=lambda e: (e.tuner, e.device_id, e.key))
        return cls(entries=entries), left_out
