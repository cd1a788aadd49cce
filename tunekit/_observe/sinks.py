"""Where records go: a JSONL file, a stream, Python logging, or any callable."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable

from tunekit._base import settings as _settings
from tunekit._base.paths import file_in_the_way
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
    "remove_record_sink",
    "sink_from_setting",
]

_log = logging.getLogger("tunekit.records")


@runtime_checkable
class RecordSink(Protocol):
    """Receives every tuning decision."""

    def emit(self, record: AutotuneRecord) -> None:
        """Take one record; must not raise for an ordinary I/O hiccup."""
        ...


class JsonlSink:
    """Appends one JSON line per record to ``path``.

    Each line is written with a single ``write`` on an ``O_APPEND`` descriptor, so lines
    from concurrent processes interleave whole, never torn.
    """

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

    def emit(self, record: AutotuneRecord) -> None:
        """Append ``record`` as one line."""
        line = (record.model_dump_json() + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # 0666 less the umask (the kernel applies it), as open(path, "a") would create it.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            # A file made where a parent directory should be after the sink was set up: the
            # OSError names only "[Errno 17] File exists: '<that file>'".
            blocking = file_in_the_way(self.path)
            why = f"{blocking} is a file, not a directory; move it aside or name another path" if blocking else exc
            _log.warning("cannot append a tuning record to %s: %s", self.path, why)


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

    def emit(self, record: AutotuneRecord) -> None:
        """Write ``record`` as one line and flush."""
        with self._lock:
            self.stream.write(record.model_dump_json() + "\n")
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


class CallbackSink:
    """Calls ``fn(record)`` for each record."""

    def __init__(self, fn: Callable[[AutotuneRecord], object]) -> None:
        if not callable(fn):
            raise TypeError(f"CallbackSink takes a callable record -> None, got {type(fn).__name__}")
        self.fn = fn

    def emit(self, record: AutotuneRecord) -> None:
        """Pass ``record`` on."""
        self.fn(record)


_global_lock = threading.Lock()
_global_sinks: list[RecordSink] = []


def as_sink(sink: RecordSink | Callable[[AutotuneRecord], object], where: str) -> RecordSink:
    """``sink`` itself, or a plain callable wrapped as one; anything else is refused, naming ``where``.

    Refused here because an accepted non-sink would fail at every record, each failure only
    logged, so the records it was meant to keep would be lost.
    """
    if isinstance(sink, RecordSink):
        return sink
    if not callable(sink):
        raise TypeError(
            f"{where} takes a record sink (an object with emit(record), e.g. tk.JsonlSink(path)) "
            f"or a callable record -> None, got {type(sink).__name__}"
        )
    return CallbackSink(sink)


def as_sinks(sinks: Sequence[RecordSink | Callable[[AutotuneRecord], object]], where: str) -> tuple[RecordSink, ...]:
    """Each of ``sinks`` through :func:`as_sink`; a single sink, not in a list, is refused naming ``where``.

    Otherwise ``tk.search(sinks=tk.JsonlSink(path))`` would fail as "'JsonlSink' object is not
    iterable", and a path string would be walked character by character.
    """
    if not isinstance(sinks, list | tuple):
        raise TypeError(
            f"{where} takes a list of sinks, got {type(sinks).__name__}; a single one goes in a list: sinks=[sink]"
        )
    return tuple(as_sink(sink, where) for sink in sinks)


def add_record_sink(sink: RecordSink | Callable[[AutotuneRecord], object]) -> RecordSink:
    """Send every future record of every tuner to ``sink`` (a sink or a plain callable)."""
    resolved = as_sink(sink, "add_record_sink()")
    with _global_lock:
        _global_sinks.append(resolved)
    return resolved


def remove_record_sink(sink: RecordSink) -> None:
    """Stop sending records to ``sink``; unknown sinks are ignored."""
    with _global_lock:
        if sink in _global_sinks:
            _global_sinks.remove(sink)


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
    emit(record, tuple(targets))


def emit(record: AutotuneRecord, sinks: tuple[RecordSink, ...]) -> None:
    """Send ``record`` to ``sinks``; a failing sink is logged, never raised into the caller."""
    for sink in sinks:
        try:
            sink.emit(record)
        except Exception:
            _log.exception("record sink %r failed", sink)
