"""Merging the winners jobs send back into committed records, one file per tuner and device kind.

A committed record holds one tuner's winners measured on one device with one set of
candidates (``tk.Record``'s provenance), so a campaign writes one record per tuner and device
kind. Each job's winner is merged into its file as the job finishes, under the directory's
lock and by atomic replacement, so a campaign killed at any point leaves every finished
winner on disk and no half-written file.
"""

from __future__ import annotations

import errno
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from tunekit._base.atomic import write_atomic
from tunekit._base.file_lock import locked_directory
from tunekit._base.persisted import STORED
from tunekit._values.record_file import RecordFile, entry_key

__all__ = ["RecordMerger", "holds", "provenance"]

Provenance = tuple[str, str, str, str | None, str | None]


def provenance(record: RecordFile) -> Provenance:
    """What makes two records answer the same question: tuner, device, candidates, space and level."""
    return (record.tuner, record.device_id, record.checksum, record.space_hash, record.autotune_level)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


class RecordMerger:
    """Writes each job's winner into ``directory/<tuner>.<device kind>.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # The provenance each file took in this run: a second device id (another driver on some worker) or
        # checksum for one tuner and kind goes to its own file instead of replacing the first one's winners.
        self._paths: dict[tuple[str, str], dict[Provenance, Path]] = {}

    def path_for(self, record: RecordFile, device_kind: str) -> Path:
        """The file ``record``'s winners go to in this run."""
        taken = self._paths.setdefault((record.tuner, device_kind), {})
        path = taken.get(provenance(record))
        if path is None:
            stem = f"{_slug(record.tuner)}.{_slug(device_kind)}"
            if taken:
                digest = hashlib.sha256(repr(provenance(record)).encode()).hexdigest()[:8]
                stem += f".{digest}"
            path = taken[provenance(record)] = self.directory / f"{stem}.json"
        return path

    def merge(self, record: RecordFile, device_kind: str) -> Path:
        """Add ``record``'s entries to its file (replacing those keys' entries); the file's path."""
        path = self.path_for(record, device_kind)
        path.parent.mkdir(parents=True, exist_ok=True)
        with locked_directory(path.parent, path.name):
            saved = _read(path)
            entries = (
                {entry_key(e): e for e in saved.entries} if saved and provenance(saved) == provenance(record) else {}
            )
            entries.update((entry_key(e), e) for e in record.entries)
            merged = record.model_copy(update={"entries": [entries[k] for k in sorted(entries)]})
            write_atomic(path, merged.model_dump_json(indent=2) + "\n")
        return path


def _read(path: Path) -> RecordFile | None:
    """The record at ``path``; None when there is none. A file that is no record is refused, never overwritten."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return RecordFile.model_validate_json(data, context=STORED)
    except ValidationError:
        raise FileExistsError(
            errno.EEXIST,
            f"the campaign's record {path} holds something that is no committed record (or another version's); "
            "move it away, or give the campaign another records directory",
            str(path),
        ) from None


def holds(path: Path, key: Mapping[str, object], winner: str) -> bool:
    """Whether the record at ``path`` has ``winner`` for ``key`` (a journaled job whose winner is still committed)."""
    try:
        record = _read(path)
    except OSError:
        return False
    return record is not None and any(e.key == key and e.winner == winner for e in record.entries)
