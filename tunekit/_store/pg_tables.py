"""The fleet store's two tables and the statements on them: winners, and the clears that hosts' copies yield to.

``tunekit_winners`` holds one winner per (tunekit major version, device id, tuner, key), as JSON
text with the checksum of the set that measured it. ``tunekit_clears`` holds, per scope a
``tunekit cache clear`` removed (a device, a tuner, a key; ``''`` for every one), when it did, by
the database's clock: a winner tuned before a clear that covers its key is a copy the fleet chose
to forget, and a host that offers it back is refused, so the fleet tunes the key again.
"""

from __future__ import annotations

import hashlib

from tunekit._base.version import MAJOR

__all__ = [
    "CLEARS",
    "CLEARS_SCHEMA",
    "CLEAR_RECORD",
    "GET",
    "PUT",
    "PUT_UNLESS_CLEARED",
    "REPLACE",
    "SCHEMA",
    "WINNERS",
    "filters",
    "lock_id",
]

WINNERS = "tunekit_winners"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {WINNERS} (
    tunekit_major INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    tuner TEXT NOT NULL,
    key TEXT NOT NULL,
    checksum TEXT NOT NULL,
    value TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tunekit_major, device_id, tuner, key)
)
"""
CLEARS = "tunekit_clears"
CLEARS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {CLEARS} (
    tunekit_major INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    tuner TEXT NOT NULL,
    key TEXT NOT NULL,
    cleared DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tunekit_major, device_id, tuner, key)
)
"""

_COLUMNS = "tunekit_major, device_id, tuner, key"
# A row of another checksum is a set since changed: its re-tune replaces it. One of the same checksum stays.
_ON_CONFLICT = (
    f"ON CONFLICT ({_COLUMNS}) DO UPDATE SET checksum = EXCLUDED.checksum, value = EXCLUDED.value, "
    "updated = EXCLUDED.updated WHERE w.checksum <> EXCLUDED.checksum"
)
PUT = f"INSERT INTO {WINNERS} AS w VALUES (%s, %s, %s, %s, %s, %s, %s) {_ON_CONFLICT}"
"""Store a winner unless the key has one of the same checksum; (major, device, tuner, key, checksum, value, now)."""
PUT_UNLESS_CLEARED = (
    f"INSERT INTO {WINNERS} AS w SELECT %s, %s, %s, %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM {CLEARS} c "
    "WHERE c.tunekit_major = %s AND c.device_id IN ('', %s) AND c.tuner IN ('', %s) AND c.key IN ('', %s) "
    f"AND c.cleared > %s) {_ON_CONFLICT}"
)
"""PUT, unless a clear covering the key is later than the winner was tuned; PUT's values, then (major, device,
tuner, key, tuned at)."""
REPLACE = (
    f"INSERT INTO {WINNERS} VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT ({_COLUMNS}) DO UPDATE SET "
    "checksum = EXCLUDED.checksum, value = EXCLUDED.value, updated = EXCLUDED.updated"
)
"""Store a winner whatever the key has: an import, which the user asked for."""
GET = (
    f"SELECT checksum, CASE WHEN octet_length(value) <= %s THEN value END FROM {WINNERS} "
    "WHERE tunekit_major = %s AND device_id = %s AND tuner = %s AND key = %s"
)
CLEAR_RECORD = (
    f"INSERT INTO {CLEARS} VALUES (%s, %s, %s, %s, EXTRACT(EPOCH FROM statement_timestamp())) "
    f"ON CONFLICT ({_COLUMNS}) DO UPDATE SET cleared = EXCLUDED.cleared"
)
"""Note a clear of (major, device or '', tuner or '', key or ''), now by the database's clock."""


def lock_id(device_id: str, tuner: str, key: str) -> int:
    """The advisory lock (a signed 64-bit integer) of a key, the same in every process of every host."""
    text = "\x00".join(("tunekit", str(MAJOR), device_id, tuner, key)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big", signed=True)


def filters(device_id: str | None, tuner: str | None, key: str | None) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause (and its values) of the rows of this major version, and of the device, tuner, key given."""
    clauses: list[str] = ["tunekit_major = %s"]
    params: list[object] = [MAJOR]
    for column, wanted in (("device_id", device_id), ("tuner", tuner), ("key", key)):
        if wanted is not None:
            clauses.append(f"{column} = %s")
            params.append(wanted)
    return " AND ".join(clauses), tuple(params)
