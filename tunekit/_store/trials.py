"""The resumable trial log: one JSON line per measured configuration, under a header.

The header names the tuner, the key, the space (and its hash) and the device: a log
written for anything else is refused, because its timings would answer the wrong
question. Each trial is one ``write`` of a whole line followed by a flush and fsync, so
a killed process leaves at worst a half-written last line, which the next run cuts off.
A lock on the log file itself keeps a second concurrent search off it, by whichever path:
the second waits for the first to end, then resumes the trials it logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from tunekit._base.errors import TrialLogError
from tunekit._base.file_lock import Release, lock_file
from tunekit._base.paths import file_in_the_way
from tunekit._base.persisted import STORED, JsonScalar, Persisted, known_versions
from tunekit._base.validation_text import validation_text
from tunekit._base.version import __version__
from tunekit._candidates.config import Config
from tunekit._candidates.search_spec import check_log_path
from tunekit._candidates.space import Space
from tunekit._candidates.space_model import space_difference
from tunekit._store.file_kind import other_kind_name
from tunekit._values.trial_log import _LINE, TrialEntry, TrialLogHeader

__all__ = ["TrialLog", "key_log_path"]

_log = logging.getLogger("tunekit.trials")


class TrialLog:
    """An open, locked trial log; ``previous`` holds the trials of earlier runs by configuration.

    ``spent_s`` is the time earlier runs spent, as far as their last written trial shows it
    (a batch the kill left unfinished included: that time was spent, though it is measured
    again). The search counts it against ``max_seconds``, as it counts logged trials against
    ``max_evals``, so a killed search resumes with what was left of its time, not all of it.
    """

    def __init__(
        self,
        path: Path,
        header: TrialLogHeader,
        previous: dict[Config, TrialEntry],
        next_batch: int,
        release: Release,
        file: IO[bytes],
        spent_s: float,
    ) -> None:
        self.path = path
        self.header = header
        self.previous = previous
        self.next_batch = next_batch
        self.spent_s = spent_s
        self._release = release
        self._file = file
        self._identity = _identity(file.fileno())
        with _holders_lock:
            _holders[self._identity] = threading.get_ident()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        tuner: str,
        space: Space,
        device_id: str,
        key: dict[str, JsonScalar] | None = None,
        build: str | None = None,
        wait_s: float = 0.0,
    ) -> TrialLog:
        """Open ``path`` for appending, resuming its trials, or start it with a header.

        Another search holding the log is waited for, up to ``wait_s``, and its trials are then
        resumed: two processes that search the same new key with one log (with the cache off,
        no tune lock keeps the second away) would otherwise fail at once, the second with "in use".

        Raises TrialLogError when the log belongs to another tuner, key, space, device or
        build (``build``: a digest of the code that builds the candidates), when a line other
        than the last is corrupt, or when another search holds it past ``wait_s``.
        """
        path = check_log_path(path)
        header = TrialLogHeader(
            tuner=tuner, key=key, device_id=device_id, space_hash=space.hash, space=space.describe(), build=build
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # it says only "[Errno 17] File exists: 'out'", naming neither the log nor the fix
            blocking = file_in_the_way(path)
            why = f"{blocking} is a file, not a directory" if blocking else f"{exc.strerror or exc} ({exc.filename})"
            raise TrialLogError(
                f"cannot create the directory of trial log {path}: {why}; give log= a file path in a directory"
            ) from exc
        # On the file itself, whatever path names it: a lock file beside the path (or beside the real
        # path) is one lock per symlink (or per hard link), and two searches would write one log at once.
        release = _lock(path, wait_s)
        try:
            previous, next_batch, spent_s = cls._resume(path, header, space)
            file = open(path, "ab")  # noqa: SIM115 - owned by the TrialLog until close()
            if file.tell() == 0:
                file.write(header.model_dump_json().encode() + b"\n")
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            release()
            raise
        return cls(path, header, previous, next_batch, release, file, spent_s)

    @staticmethod
    def _resume(path: Path, header: TrialLogHeader, space: Space) -> tuple[dict[Config, TrialEntry], int, float]:
        """The finished trials of earlier runs, the number the next batch written takes, and their time spent."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {}, 0, 0.0
        complete = data[: data.rfind(b"\n") + 1]
        # Checked before anything is cut: a file given as log= by mistake (notes, a config) would lose
        # its last line, and one of a single line without a newline would be overwritten by a header;
        # another search's log is left as it is too.
        first = _read_header(path, complete.split(b"\n", 1)[0] if complete else data, partial=not complete)
        if first is None:
            _cut_half_written_line(path, data, complete)
            return {}, 0, 0.0
        _check_same_search(path, first, header)
        lines = complete.splitlines()
        entries: list[tuple[Config, TrialEntry]] = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():  # an editor's or a shell's `echo >> log` blank line holds no trial
                continue
            try:
                entry = _LINE.validate_json(line, context=STORED)
                if not isinstance(entry, TrialEntry):
                    raise ValueError("a second header")
                config = space.config(entry.config)
            except (ValidationError, ValueError) as exc:
                _check_version(path, number, line, "trial", TrialEntry)
                raise TrialLogError(
                    f"{path}: line {number} is corrupt ({_one_line(exc)}); delete that line to keep the other "
                    "trials (the rest of its batch is dropped too, as an interrupted batch is), or move the log aside "
                    "to start over"
                ) from None
            entries.append((config, entry))
        # Only once every whole line is known good: a log refused for a line of another version or a
        # corrupt one is left exactly as it was, half-written tail included.
        _cut_half_written_line(path, data, complete)
        written: dict[int, int] = {}
        for _, entry in entries:
            if entry.batch is not None:
                written[entry.batch] = written.get(entry.batch, 0) + 1
        previous: dict[Config, TrialEntry] = {}
        unfinished = 0
        for config, entry in entries:
            if entry.batch is not None and entry.batch_size is not None and written[entry.batch] < entry.batch_size:
                unfinished += 1
                continue
            previous[config] = entry
        if unfinished:
            _log.info(
                "%s: %d trials of a batch the interrupted run did not finish are measured again with their batchmates",
                path,
                unfinished,
            )
        spent = max((entry.elapsed_s for _, entry in entries), default=0.0)
        return previous, max(written, default=-1) + 1, spent

    def take_batch(self) -> int:
        """The number of the next batch of trials written to this log."""
        number = self.next_batch
        self.next_batch += 1
        return number

    def append(self, entry: TrialEntry) -> None:
        """Write one trial as one line, durably."""
        self._file.write(entry.model_dump_json().encode() + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file and release the lock."""
        if not self._file.closed:  # a second close must not drop a later holder of the same file
            with _holders_lock:
                _holders.pop(self._identity, None)
        try:
            self._file.close()
        finally:
            self._release()

    def __enter__(self) -> TrialLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


_POLL_S = 0.05
"""How often a search waiting for a log held by another tries its lock again (as the tune lock's waiters do)."""

_holders: dict[tuple[int, int], int] = {}
"""The logs this process's searches hold, by (device, inode), and the thread that opened each."""
_holders_lock = threading.Lock()


def _identity(fd: int) -> tuple[int, int]:
    """The file behind ``fd``, whatever path reached it: (device, inode)."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _lock(path: Path, wait_s: float) -> Release:
    """The log's lock, once another search holding it ends (waiting up to ``wait_s``); TrialLogError otherwise."""
    try:
        release = lock_file(path)
        if release is not None:
            return release
        with open(path, "rb") as file:
            held_by = _holders.get(_identity(file.fileno()))
    except OSError as exc:
        raise TrialLogError(f"cannot open and lock trial log {path}: {exc.strerror or exc}") from exc
    where = "(it may be reached by another path: a symlink or a hard link)"
    if held_by == threading.get_ident():
        # A search nested in one of this thread's own (in a candidate): the holder cannot end while this one waits.
        raise TrialLogError(
            f"trial log {path} is in use by another search that this thread runs {where}, which cannot end while "
            "this one waits for it; give this search another log="
        )
    if wait_s > 0:
        _log.info(
            "trial log %s is in use by another search; waiting up to %g s for it to end, then resuming its trials",
            path,
            wait_s,
        )
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0.0)))
            try:
                release = lock_file(path)
            except OSError as exc:
                raise TrialLogError(f"cannot open and lock trial log {path}: {exc.strerror or exc}") from exc
            if release is not None:
                return release
    waited = f", still after waiting {wait_s:g} s for it (tune_lock_timeout_s)" if wait_s > 0 else ""
    raise TrialLogError(
        f"trial log {path} is in use by another search {where}{waited}; let it end and run this search again, "
        "which resumes the trials it logged (TUNEKIT_TUNE_LOCK_TIMEOUT_S sets how long a search waits for it), "
        "or give this search another log="
    )


def key_log_path(base: Path, *, tuner: str, device_id: str, key: Mapping[str, object] | None, checksum: str) -> Path:
    """The trial log of one key's search in a set searched with ``log=base``: beside ``base``, the key in its name.

    A log holds one search (its header names the tuner, key and device, and any other is
    refused), while a set searched inside ``execute`` runs one search per key and device: so
    ``gemm.jsonl`` becomes ``gemm.m=4096,n=4096.1a2b3c4d.jsonl``, the digest (of the tuner, the
    device, the whole key and the set's ``checksum``) telling apart what the readable part cannot
    (devices, tuners, characters a file name cannot hold, keys cut at 80 characters). The checksum
    is there because a log answers its configurations without running them: a set whose kernels or
    version changed must start a new log, or it would be answered with the old code's timings.
    """
    text = ",".join(f"{name}={value}" for name, value in (key or {}).items())
    readable = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)[:80]
    digest = hashlib.sha256(json.dumps([tuner, device_id, key, checksum], sort_keys=True).encode()).hexdigest()[:8]
    stem = base.name[: -len(base.suffix)] if base.suffix else base.name
    return base.with_name(".".join(part for part in (stem, readable, digest) if part) + base.suffix)


def _check_same_search(path: Path, logged: TrialLogHeader, running: TrialLogHeader) -> None:
    """Refuse (TrialLogError) a log written for another tuner, key, device, space or build, naming what differs."""
    for field in ("tuner", "key", "device_id", "space_hash"):
        theirs, ours = getattr(logged, field), getattr(running, field)
        if theirs != ours:
            what = f" ({space_difference(logged.space, running.space)})" if field == "space_hash" else ""
            # One log per key: a shared tk.Budget(log=...) handed to each key's tk.search lands here.
            per_key = (
                ", one per key (a log holds one search; a set's with_search(log=...) makes a file per key itself)"
                if field == "key"
                else ""
            )
            raise TrialLogError(
                f"{path} was written for {field}={theirs!r}, but this search has {field}={ours!r}{what}: "
                f"its trials do not apply here; give this search another log path{per_key} (or delete the old log)"
            )
    # A log whose header has no build (None: written by a tunekit that did not keep it) is resumed:
    # nothing says its kernels differ.
    if logged.build is not None and running.build is not None and logged.build != running.build:
        # An edited kernel would be answered with the old code's timings and failures, and could win on them.
        raise TrialLogError(
            f"{path} was measured with other code: the search's build (or a function of its module that it calls) "
            f"changed since (build {logged.build}, now {running.build}), so its trials timed other kernels; give "
            "this search another log path (or delete the old log)"
        )


_HEADER_START = b'{"kind":"header"'


def _read_header(path: Path, first: bytes, *, partial: bool) -> TrialLogHeader | None:
    """The header on ``first``, the log's first line; None when the file holds no whole line.

    Raises TrialLogError when the file is no trial log of this schema version. ``partial``: no
    whole line, as a run killed while writing the header leaves; only the start of a header
    is taken for one.
    """
    if partial:
        if first.startswith(_HEADER_START) or _HEADER_START.startswith(first):
            return None
        raise TrialLogError(
            f"{path} is not a tunekit trial log ({_what_it_is(path, 'it does not start with a trial-log header')}) and "
            "was left as it is; give log= a new path or an earlier search's log"
        )
    try:
        return TrialLogHeader.model_validate_json(first, context=STORED)
    except ValidationError as exc:
        _check_version(path, 1, first, "header", TrialLogHeader)
        what = _what_it_is(path, f"its first line is no trial-log header: {exc.errors()[0]['msg']}")
        raise TrialLogError(
            f"{path} is not a tunekit trial log ({what}) and was left as it is; give log= a new path or an earlier "
            "search's log"
        ) from None


def _what_it_is(path: Path, otherwise: str) -> str:
    """What the file that is no trial log holds, when it is another tunekit file; else ``otherwise``."""
    # Named, so a committed record given as log= is not refused as "the first line is not a trial-log
    # header (Invalid JSON: EOF while parsing an object)": its first line is "{" of an indented document.
    kind = other_kind_name(path, "trial log")
    return f"it is {kind}" if kind else otherwise


def _check_version(path: Path, number: int, line: bytes, kind: str, model: type[Persisted]) -> None:
    """Refuse a line that failed validation by its other schema version: another tunekit's, not a corrupt one."""
    try:
        fields = json.loads(line)
    except ValueError:
        return  # not JSON: validation names it
    if not isinstance(fields, dict) or fields.get("kind") != kind:
        return
    version = fields.get("schema_version")
    known = known_versions(model)
    if version not in known:
        raise TrialLogError(
            f"{path}: line {number} is a {kind} of schema_version {version!r}, which this tunekit "
            f"({__version__}) does not read (it reads {' and '.join(map(str, known))}): it was written by another "
            "tunekit version; resume it with that version, or give this search another log path"
        )


def _one_line(exc: ValueError) -> str:
    """A validation error as one line: each field and what is wrong, without pydantic's input dump and URL."""
    if isinstance(exc, ValidationError):
        return validation_text(exc, whole="the line")
    return str(exc)


def _cut_half_written_line(path: Path, data: bytes, complete: bytes) -> None:
    """Drop an interrupted run's half-written last line, durably."""
    if len(complete) == len(data):
        return
    _log.warning(
        "%s: cutting off a half-written last line (%d bytes) from an interrupted run", path, len(data) - len(complete)
    )
    with open(path, "r+b") as f:
        f.truncate(len(complete))
        f.flush()
        os.fsync(f.fileno())
