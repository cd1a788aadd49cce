"""RecordSink, the protocol of where records go, and the check that turns what a user passes into sinks.

Apart from the sinks themselves (:mod:`tunekit._observe.sinks`), which serialise records with
pydantic: ``tk.LocalTuner(name, sinks=...)`` checks its sinks when it is created, and importing it
loads neither pydantic nor the record models (see benches/import_time.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tunekit._values.records import AutotuneRecord

__all__ = ["CallbackSink", "RecordSink", "as_sink", "as_sinks"]


@runtime_checkable
class RecordSink(Protocol):
    """Receives every tuning decision."""

    def emit(self, record: AutotuneRecord) -> None:
        """Take one record; must not raise for an ordinary I/O hiccup."""
        ...


class CallbackSink:
    """Calls ``fn(record)`` for each record."""

    def __init__(self, fn: Callable[[AutotuneRecord], object]) -> None:
        if not callable(fn):
            raise TypeError(f"CallbackSink takes a callable record -> None, got {type(fn).__name__}")
        self.fn = fn

    def emit(self, record: AutotuneRecord) -> None:
        """Pass ``record`` on."""
        self.fn(record)

    def __repr__(self) -> str:  # a failing sink is logged by its repr: name the caller's function
        return f"CallbackSink({getattr(self.fn, '__qualname__', None) or self.fn!r})"


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
