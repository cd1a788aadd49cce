"""Reading records files (JSONL) back: line by line, a bad line never hides the good ones.

Records files are appended to by live processes, edited by hand and cut short by kills,
so every line is validated on its own against :class:`AutotuneRecord`; a bad line comes
back as a :class:`BadLine` naming its line number and what is wrong with it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tunekit._base.persisted import STORED, other_version
from tunekit._base.validation_text import validation_text
from tunekit._values.records import AutotuneRecord

__all__ = ["HIT_SUMMARY_PREFIX", "NOT_JSON", "BadLine", "RecordLine", "follow_records", "parse_line", "read_records"]

# A record holds every sample of every candidate; a line far past this is not one of ours.
_MAX_LINE = 64 * 1024 * 1024

NOT_JSON = "not valid JSON"
"""How a bad line's reason starts when the line is no JSON at all (not a record of another shape)."""
HIT_SUMMARY_PREFIX = b'{"kind":"hit_summary"'
"""How a cache-hit summary line (``tunekit._observe.hit_count``) starts: ``kind`` is its first field."""


@dataclass(frozen=True, slots=True)
class RecordLine:
    """A valid record and the line it came from (1-based)."""

    line: int
    record: AutotuneRecord


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a valid record, and why, in one line."""

    line: int
    reason: str


def parse_line(number: int, raw: bytes) -> RecordLine | BadLine | None:
    """One line of a records file; None for a blank line."""
    # Blank, or a whole cache-hit summary (tunekit._observe.hit_count), which is no tune record: skipped alike.
    # A summary cut short (a writer killed mid-line) is a bad line like any other, not skipped.
    if not raw.strip() or (raw.startswith(HIT_SUMMARY_PREFIX) and _whole_json(raw)):
        return None
    if len(raw) > _MAX_LINE:
        return BadLine(number, f"line is {len(raw)} bytes, longer than any record")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadLine(number, f"not UTF-8 ({exc.reason} at byte {exc.start})")
    try:
        return RecordLine(number, AutotuneRecord.model_validate_json(text, context=STORED))
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "json_invalid":
            return BadLine(number, f"{NOT_JSON}: {exc.errors()[0]['msg']}")
        if other := other_version(text, AutotuneRecord):  # whole, but of a version this reader cannot read
            return BadLine(number, f"not a record this tunekit reads: {other}")
        return BadLine(number, f"not a valid AutotuneRecord: {validation_text(exc, limit=1)}")


def _whole_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return False
    return True


def read_records(path: str | os.PathLike[str]) -> Iterator[RecordLine | BadLine]:
    """Every non-blank line of ``path``; raises ``OSError`` when the file cannot be opened.

    A last line without its newline is reported as cut short (a writer was killed mid-line).
    """
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed by the with below; opened apart to explain a missing file
    except FileNotFoundError as exc:
        # Expected on a warm run: a cache hit decides nothing, so it writes no record, and no file is made.
        raise FileNotFoundError(
            exc.errno,
            f"no records file at {os.fspath(path)}: records are written where TUNEKIT_RECORD points, once a "
            "tune decides something (a run served from the cache writes none; TUNEKIT_COUNT_HITS=1 counts its hits)",
        ) from None
    with file:
        for number, raw in enumerate(file, start=1):
            parsed = parse_line(number, raw)
            if isinstance(parsed, BadLine) and not raw.endswith(b"\n"):
                parsed = BadLine(number, f"last line is cut short: {parsed.reason}")
            if parsed is not None:
                yield parsed


def follow_records(
    path: str | os.PathLike[str],
    *,
    from_line: int = 1,
    poll_s: float = 0.2,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[RecordLine | BadLine]:
    """Lines of ``path`` as they are appended, from line ``from_line`` on, until ``stop()`` is true.

    A line is read only once its newline has arrived, so a record being written is never
    seen half-written. A file truncated or replaced (log rotation) is followed from its start:
    each of its lines is yielded, ``from_line`` having counted the lines of the file it replaced.
    """
    file_path = Path(path)
    number = 0
    pending = b""
    offset = 0
    identity: tuple[int, int] | None = None
    while not stop():
        try:
            stat = file_path.stat()
        except FileNotFoundError:
            time.sleep(poll_s)
            continue
        if identity is not None and (identity != (stat.st_dev, stat.st_ino) or stat.st_size < offset):
            # ``from_line`` counted the old file's lines: every line of the new one is new.
            number, pending, offset, from_line = 0, b"", 0, 1
        identity = (stat.st_dev, stat.st_ino)
        if stat.st_size == offset:
            time.sleep(poll_s)
            continue
        with open(file_path, "rb") as file:
            file.seek(offset)
            chunk = file.read(stat.st_size - offset)
        offset += len(chunk)
        *complete, pending = (pending + chunk).split(b"\n")
        for raw in complete:
            number += 1
            if number >= from_line:
                parsed = parse_line(number, raw)
                if parsed is not None:
                    yield parsed
