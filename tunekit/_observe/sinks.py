"""Where records go: a JSONL file, a stream, Python logging, or any callable."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic_core import PydanticSerializationError

from tunekit._base import settings as _settings
from tunekit._base.paths import file_in_the_way
from tunekit._observe.callback_error import detach_from
from tunekit._observe.record_sink import CallbackSink, RecordSink, as_sink, as_sinks
from tunekit._values.records import AutotuneRecord

__all__ = [
    "CallbackSink",
    "JsonlSink",
    "LoggingSink",
    "RecordSink",
    "StreamSink",
    "add_record_sink",
    "as_sink",
    "as_sinks",
    "record_line",
    "remove_record_sink",
    "sink_from_setting",
]

_log = logging.getLogger("tunekit.records")


def _escaped(value: Any, where: str, found: list[str]) -> Any:
    """``value`` (a dumped record) with each str UTF-8 cannot encode escaped; their paths go in ``found``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            found.append(where or "(the record)")
            return value.encode("utf-8", "backslashreplace").decode("ascii")
        return value
    if isinstance(value, dict):
        return {
            _escaped(k, f"{where}.<a name>" if where else "<a name>", found): _escaped(
                v, f"{where}.{k}" if where else str(k), found
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_escaped(v, f"{where}[{i}]", found) for i, v in enumerate(value)]
    return value


def record_line(record: AutotuneRecord) -> tuple[str, list[str]]:
    """``record`` as one JSON line (without its newline), and the fields that had to be escaped to be written.

    A str JSON cannot hold (a lone surrogate, as ``os.fsdecode`` makes of a file name's stray byte) is written
    with the character escaped as text (``\\ud800``), so the record is kept, readable, under a key that says
    what it was; refused, the whole record would be lost.
    """
    try:
        return record.model_dump_json(), []
    except PydanticSerializationError:
        found: list[str] = []
        dumped = _escaped(record.model_dump(mode="json"), "", found)
        if not found:  # something else the JSON serialiser refuses: let the sink report it
            raise
        return json.dumps(dumped, ensure_ascii=False, separators=(",", ":")), found


class _Complaints:
    """Warns once per sink and cause: a full disk would otherwise log one warning per record (hundreds)."""

    def __init__(self) -> None:
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def first(self, cause: str) -> bool:
        """True the first time ``cause`` is met."""
        with self._lock:
            if cause in self._said:
                return False
            self._said.add(cause)
            return True


def _escaped_warning(where: str, record: AutotuneRecord, fields: list[str], complaints: _Complaints) -> None:
    cause = "escaped:" + ",".join(fields)
    if complaints.first(cause):
        _log.warning(
            "%s: a tuning record of tuner %r holds text JSON cannot hold (a lone surrogate) at %s; it is written "
            "escaped (\\udXXX), so the record is kept but that value no longer reads back as it was "
            "(not logged again for this field)",
            where,
            record.tuner,
            ", ".join(fields),
        )


if sys.platform == "win32":  # pragma: no cover - tested on POSIX only

    def _take_turns(fd: int) -> None:
        """No flock on Windows: each append is still a single write."""

else:
    import fcntl

    def _take_turns(fd: int) -> None:
        """Lock the file exclusively until ``fd`` is closed: the ending checked is the one appended to."""
        with contextlib.suppress(OSError):  # no flock on this filesystem: appends are still single writes
            fcntl.flock(fd, fcntl.LOCK_EX)


class _TornWrite(OSError):
    """A write that stopped short: what the failing ``os.write`` would have said."""


def _append_whole(fd: int, data: bytes, start: int) -> None:
    """Write ``data`` at the end of ``fd`` (``start``), whole; on failure take back what was written, and raise."""
    written = 0
    try:
        while written < len(data):
            count = os.write(fd, data[written:])
            if count == 0:  # pragma: no cover - a regular file answers short writes with an error next
                raise _TornWrite(errno.EIO, "the write stopped short")
            written += count
    except OSError:
        if written:  # the file keeps whole lines: a torn one would swallow the next record appended
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
        raise


class JsonlSink:
    """Appends one JSON line per record to ``path``.

    Appends hold an exclusive ``flock`` on the file, so that lines from concurrent processes
    never interleave, and are written whole or not at all: a write that stops short (a full
    disk) is taken back. A file that does not end with a newline (a writer killed mid-line, a
    hand edit) gets one before the record, so the record starts on a line of its own.

    A record that cannot be written is counted in :attr:`lost` and logged at WARNING, once per
    cause (a full disk warns once, not once per record); the tune is never failed for it.
    """

    lost: int
    """Records this sink could not write (a full disk, a permission, a file in the way)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        # Refused here, as the record setting refuses them: accepted, a directory (or a path that is no
        # path) would fail at every record, each failure only logged, the records lost.
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"JsonlSink takes the path of a JSONL file, got {type(path).__name__}")
        self.path = Path(path)
        try:
            is_dir = self.path.is_dir()
        except OSError:  # Python 3.11 raises EACCES for a path under a directory it cannot enter; emit says so
            is_dir = False
        if is_dir:
            raise ValueError(
                f"JsonlSink({str(path)!r}): that is a directory; name a JSONL file in it "
                f"(e.g. {str(self.path / 'records.jsonl')!r})"
            )
        blocking = file_in_the_way(self.path)
        if blocking is not None:
            raise ValueError(
                f"JsonlSink({str(path)!r}): it cannot be created, {str(blocking)!r} is a file, not a directory; "
                "name a JSONL file in a directory, or move that file aside"
            )
        self.lost = 0
        self._complaints = _Complaints()

    def emit(self, record: AutotuneRecord) -> None:
        """Append ``record`` as one line, whole, or count it lost and say why (once per cause)."""
        text, escaped = record_line(record)
        if escaped:
            _escaped_warning(f"JsonlSink({str(self.path)!r})", record, escaped, self._complaints)
        self.write_line(text)

    def write_line(self, text: str) -> None:
        """Append one line of JSON (a record, or a cache-hit summary), whole, with the guarantees of :meth:`emit`."""
        data = (text + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # 0666 less the umask (the kernel applies it), as open(path, "a") would create it. Opened for reading
            # too, to see how the file ends; a file this process may only write to is appended to blind.
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
                readable = True
            except PermissionError:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                readable = False
            try:
                _take_turns(fd)
                start = os.fstat(fd).st_size
                if readable and start and os.lseek(fd, start - 1, os.SEEK_SET) >= 0 and os.read(fd, 1) != b"\n":
                    data = b"\n" + data  # a torn line before this one: the record starts on a line of its own
                _append_whole(fd, data, start)
            finally:
                os.close(fd)  # and with it the lock
        except OSError as exc:
            self.lost += 1
            # A file made where a parent directory should be after the sink was set up: the
            # OSError names only "[Errno 17] File exists: '<that file>'".
            blocking = file_in_the_way(self.path)
            why = f"{blocking} is a file, not a directory; move it aside or name another path" if blocking else exc
            cause = f"in the way: {blocking}" if blocking else f"errno {exc.errno}" if exc.errno else type(exc).__name__
            if self._complaints.first(cause):
                _log.warning(
                    "cannot append a tuning record to %s: %s (not logged again for this cause; "
                    "the sink's .lost counts the records not kept)",
                    self.path,
                    why,
                )
            else:
                _log.debug("cannot append a tuning record to %s: %s", self.path, why)


class StreamSink:
    """Writes one JSON line per record to a text stream (stdout, stderr, ...)."""

    def __init__(self, stream: TextIO) -> None:
        if not (callable(getattr(stream, "write", None)) and callable(getattr(stream, "flush", None))):
            # accepted, StreamSink("stdout") would fail at every record, only logged
            raise TypeError(
                f"StreamSink takes a text stream with write() and flush() (sys.stdout, an open file), "
                f"got {type(stream).__name__}; for a file path use tk.JsonlSink(path)"
            )
        self.stream = stream
        self._lock = threading.Lock()
        self._complaints = _Complaints()

    def emit(self, record: AutotuneRecord) -> None:
        """Write ``record`` as one line and flush."""
        text, escaped = record_line(record)
        if escaped:
            _escaped_warning(f"StreamSink({getattr(self.stream, 'name', 'stream')})", record, escaped, self._complaints)
        self.write_line(text)

    def write_line(self, text: str) -> None:
        """Write one line of JSON (a record, or a cache-hit summary) and flush."""
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()


class LoggingSink:
    """Logs each record at INFO on ``tunekit.records`` (or the logger given)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or _log

    def emit(self, record: AutotuneRecord) -> None:
        """Log a one-line summary, with the record itself in ``extra['record']``."""
        self.logger.info(
            "%s on %s key=%s: winner %s (%s)",
            record.tuner,
            record.device_id,
            record.key,
            record.winner,
            record.decision,
            extra={"record": record},
        )


_global_lock = threading.Lock()
_global_sinks: list[RecordSink] = []


def add_record_sink(sink: RecordSink | Callable[[AutotuneRecord], object]) -> RecordSink:
    """Send every future record of every tuner to ``sink`` (a sink or a plain callable)."""
    resolved = as_sink(sink, "add_record_sink()")
    with _global_lock:
        _global_sinks.append(resolved)
    return resolved


def remove_record_sink(sink: RecordSink | Callable[[AutotuneRecord], object]) -> None:
    """Stop sending records to ``sink``: what ``add_record_sink`` returned, or the callable given to it.

    Unknown sinks are ignored.
    """
    with _global_lock:
        # The callable itself is matched too: add_record_sink wrapped it, so removing by it found
        # nothing and the sink went on receiving every record, silently.
        for added in [s for s in _global_sinks if s == sink or (isinstance(s, CallbackSink) and s.fn == sink)][:1]:
            _global_sinks.remove(added)


def global_sinks() -> tuple[RecordSink, ...]:
    """The sinks added with :func:`add_record_sink`."""
    return tuple(_global_sinks)


def sink_from_setting(value: str | None) -> RecordSink | None:
    """The sink named by ``TUNEKIT_RECORD``: ``stdout``, ``stderr`` or a JSONL path.

    ``value`` as the settings hold it: a stream name there is already lower case (``STDOUT`` is read as ``stdout``).
    """
    if not value:
        return None
    if value == "stdout":
        return StreamSink(sys.stdout)
    if value == "stderr":
        return StreamSink(sys.stderr)
    # "~" expanded as for cache_dir: unexpanded (quoted, or from tunekit.toml), it would make a directory named "~".
    return JsonlSink(Path(value).expanduser())


_setting_sinks: dict[str, RecordSink | None] = {}


def emit_to_all(record: AutotuneRecord, sinks: Sequence[RecordSink] = ()) -> None:
    """Send ``record`` to ``sinks``, every global sink, and the sink ``TUNEKIT_RECORD`` names.

    The setting's sink is made once per value, so a stream sink keeps one lock for every writer.
    """
    setting = _settings.current().record
    targets = [*sinks, *global_sinks()]
    if setting is not None:
        if setting not in _setting_sinks:
            try:
                _setting_sinks[setting] = sink_from_setting(setting)
            except ValueError as exc:
                # A file put in the way after the settings were read: the sink refuses the path, and a
                # failing sink must not fail the tune (not cached, so moving the file aside recovers).
                _log.warning("TUNEKIT_RECORD: %s; this record is not kept", exc)
        configured = _setting_sinks.get(setting)
        if configured is not None:
            targets.append(configured)
    emit(record, _one_per_file(targets))


def _one_per_file(sinks: Sequence[RecordSink]) -> tuple[RecordSink, ...]:
    """``sinks`` less each JSONL sink whose file an earlier one writes: a record appended there once.

    ``TUNEKIT_RECORD=records.jsonl`` beside a tuner's own ``JsonlSink("records.jsonl")`` (both as the
    docs show) would otherwise append every record twice, each read back as its own tune.
    """
    files: set[str] = set()
    kept: list[RecordSink] = []
    for sink in sinks:
        if isinstance(sink, JsonlSink):
            where = os.path.realpath(sink.path)
            if where in files:
                continue
            files.add(where)
        kept.append(sink)
    return tuple(kept)


def emit(record: AutotuneRecord, sinks: tuple[RecordSink, ...]) -> None:
    """Send ``record`` to ``sinks``; a failing sink is logged, never raised into the caller."""
    handling = sys.exc_info()[1]  # a tuner emits from its own except blocks (a cache miss is a KeyError)
    for sink in sinks:
        try:
            sink.emit(record)
        except Exception as exc:
            detach_from(handling, exc)
            _log.exception("record sink %r failed", sink)
