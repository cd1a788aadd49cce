"""Which tunes the running code works for, so a candidate that executes its own key fails at once.

A candidate (or a prepare hook) that executes its operation for the key being tuned would wait
for the very tune that is running it. The tune's future is kept in a context variable while it
runs: the tuning thread sees it, so do the prepare hooks it runs on a thread pool (each hook
runs in a copy of its context) and a worker forked from it. A spawned worker, a fresh
interpreter, is sent the ``(device id, tuner name, key JSON, set checksum)`` of every tune it
works for instead, and refuses to run those tunes itself. A tune of the same key by a set with
other candidates (another checksum) is no self-call: it goes on at once, as it would in the
parent's process, without waiting on the parent's tune lock (see :func:`locked_by_parent`).
Other threads asking for a key being tuned rightly wait for the tune.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["TuneId", "inherit", "locked_by_parent", "runs_within", "tunes_to_pass_on", "tuned_by_parent", "tuning"]

TuneId = tuple[str, str, str, str]
"""(device id, tuner name, key JSON, tunable set checksum): a tune as another process can name it.

The checksum tells the tune's own set (rebuilt by a spawned worker's factory) from another set
that only shares the tuner name."""

_futures: ContextVar[frozenset[object]] = ContextVar("tunekit_tune_futures", default=frozenset())
_ids: ContextVar[frozenset[TuneId]] = ContextVar("tunekit_tune_ids", default=frozenset())
_from_parent: frozenset[TuneId] = frozenset()
"""The tunes of the process that spawned this one as their worker (empty elsewhere)."""


@contextmanager
def tuning(future: object, tune_id: TuneId) -> Iterator[None]:
    """Mark the code run in this context (and contexts copied from it) as working for this tune."""
    futures = _futures.set(_futures.get() | {future})
    ids = _ids.set(_ids.get() | {tune_id})
    try:
        yield
    finally:
        _ids.reset(ids)
        _futures.reset(futures)


def runs_within(future: object) -> bool:
    """Whether the calling code works for the tune behind ``future`` (waiting on it would wait forever)."""
    return future in _futures.get()


def tuned_by_parent(tune_id: TuneId) -> bool:
    """Whether this process is a spawned worker of the tune ``tune_id``."""
    return tune_id in _from_parent


def locked_by_parent(device_id: str, tuner: str, key_json: str) -> bool:
    """Whether this process's parent holds the tune lock of (device, tuner, key): this process works for that tune.

    A tune nested in it (another set, same tuner and key) goes on at once, as it would in the
    parent: waiting for the lock would wait for the tune that is waiting for this process.
    """
    return any(tune_id[:3] == (device_id, tuner, key_json) for tune_id in _from_parent)


def tunes_to_pass_on() -> list[list[str]]:
    """The tunes a worker spawned from here works for, as JSON: this context's and this process's parent's."""
    return [list(tune_id) for tune_id in sorted(_ids.get() | _from_parent)]


def inherit(tune_ids: Iterable[Sequence[str]]) -> None:
    """In a spawned worker: the tunes its parent sent (from :func:`tunes_to_pass_on`)."""
    global _from_parent  # set once, at a spawned worker's start, before any tune
    _from_parent = frozenset((str(d), str(t), str(k), str(c)) for d, t, k, c in tune_ids)
