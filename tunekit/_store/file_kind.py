"""Which kind of tunekit file a path holds, so a command given the wrong one can say so.

tunekit writes four JSON files that look alike from a distance: records (JSONL of
``AutotuneRecord``), trial logs (JSONL under a header), committed records (one JSON
document, ``tk.Record``) and cache bundles (one JSON document, ``tunekit cache export``).
A command handed one of the others would report every line or field as invalid. It also
reads a fifth kind, Kernel Tuner cache files (``tunekit_backends.replay``), which a kernel
author has at hand and would otherwise see only as dozens of invalid lines.
"""

from __future__ import annotations

import zlib
from importlib.resources.abc import Traversable
from pathlib import Path

from pydantic import ValidationError

from tunekit._base.persisted import STORED
from tunekit._values.bundle import CacheBundle
from tunekit._values.record_file import RecordFile
from tunekit._values.records import AutotuneRecord
from tunekit._values.trial_log import TrialLogHeader

__all__ = ["other_kind", "other_kind_name"]

_KINDS = {
    "trial log": "a trial log (written by tk.search(log=...)); a search's record goes where TUNEKIT_RECORD or "
    "sinks= send records",
    "committed record": "a committed record (tk.Record.save); production loads it with "
    "tk.Record.load_verified(path, tunables, client) and record.seed(...)",
    "cache bundle": "a cache bundle (tunekit cache export); store it in a cache with tunekit cache import",
    "records": "a records file (JSONL of tk.AutotuneRecord); read it with tunekit records summary",
    "kernel tuner cache": "a Kernel Tuner cache file; replay it as a device with "
    "tunekit_backends.replay.load_kernel_tuner_cache(path) (docs/search.md, Replaying a real GPU)",
}

_HEAD = 1 << 16  # a Kernel Tuner cache names its parameters before its (long) cache


def _is_kernel_tuner_cache(data: bytes) -> bool:
    """Whether ``data`` starts like a Kernel Tuner cache file, gzip-compressed (``.json.gz``) or not.

    Only the head is looked at: an unfinished run leaves the JSON open, and a brute-force
    cache can be tens of megabytes.
    """
    if data[:2] == b"\x1f\x8b":
        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, _HEAD)
        except zlib.error:
            return False
    head = data[:_HEAD]
    return head.lstrip().startswith(b"{") and b'"tune_params_keys"' in head and b'"cache"' in head


def other_kind(path: Path | Traversable, expected: str) -> str | None:
    """What ``path`` is, in words with what to do with it, when it is a tunekit file other than ``expected``."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    first = data.split(b"\n", 1)[0]
    checks = (
        # A header's kind has a default, so a committed record on one line (it keeps its space too) would
        # pass: a trial log names its kind.
        (
            "trial log",
            lambda: "kind" in TrialLogHeader.model_validate_json(first, context=STORED).model_fields_set or None,
        ),
        ("records", lambda: AutotuneRecord.model_validate_json(first, context=STORED)),
        ("committed record", lambda: RecordFile.model_validate_json(data, context=STORED)),
        # Every bundle field has a default, so "{}" would pass: a bundle names its entries.
        (
            "cache bundle",
            lambda: "entries" in CacheBundle.model_validate_json(data, context=STORED).model_fields_set or None,
        ),
        ("kernel tuner cache", lambda: _is_kernel_tuner_cache(data) or None),
    )
    for kind, check in checks:
        if kind == expected:
            continue
        try:
            if check() is None:
                continue
        except (ValidationError, ValueError):
            continue
        return _KINDS[kind]
    return None


def other_kind_name(path: Path, expected: str) -> str | None:
    """What ``path`` is, without what to do with it (``a trial log (written by tk.search(log=...))``), or None."""
    kind = other_kind(path, expected)
    return kind.split(";")[0] if kind else None
