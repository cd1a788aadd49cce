"""Cache hits you can count: opt-in (``count_hits``), summarised per interval, never a record per hit.

A hit writes no tune record (nothing was decided), so a warm run leaves the records file as it
was. With ``TUNEKIT_COUNT_HITS=1`` each tuner's in-memory winners are read through a counting
view (chosen when the tuner first runs on a device), and the counts are written as one
:class:`HitSummary` line per ``count_hits_interval_s`` that saw hits, and one at exit, to the
records target (``TUNEKIT_RECORD``); ``tk.instrument_opentelemetry`` exports them as the
``tunekit.cache.hits`` counter. With it off nothing here runs: the hit path reads the tuner's own
dicts, as it always does.
"""

from __future__ import annotations

import atexit
import dataclasses
import enum
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from tunekit._base import settings as _settings
from tunekit._base.persisted import STORED, Persisted
from tunekit._observe.events import CacheLookup, TuneEvent
from tunekit._observe.observers import add_observer, remove_observer
from tunekit._observe.reader import HIT_SUMMARY_PREFIX
from tunekit._observe.sinks import JsonlSink, StreamSink, sink_from_setting

__all__ = [
    "HitCount",
    "HitCounter",
    "HitSummary",
    "counting_hot",
    "current_counter",
    "flush_hit_counts",
    "hit_counter",
    "read_hit_summaries",
    "stop_hit_counter",
]

_log = logging.getLogger("tunekit.hits")

HitSource = Literal["memory", "persistent"]


class HitCount(Persisted):
    """The hits of one tuner, device and key bucket in one interval, by where the winner came from."""

    tuner: str
    device_id: str
    key: dict[str, Any]
    source: HitSource = Field(description="memory: the in-process winner; persistent: read from the cache file.")
    hits: int = Field(ge=1)


class HitSummary(Persisted):
    """One line of a records file: the cache hits of one process over one interval (not one record per hit)."""

    kind: Literal["hit_summary"] = "hit_summary"
    schema_version: Literal[1] = 1
    pid: int
    start: float = Field(description="Unix time the interval began (the counter's start, or the last summary).")
    end: float = Field(description="Unix time the summary was written.")
    counts: list[HitCount]

    @property
    def total(self) -> int:
        """Every hit of the interval."""
        return sum(c.hits for c in self.counts)


def _scalar(value: object) -> object:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, enum.Enum):
        return _scalar(value.value)
    return str(value)  # a dtype reads as its name: float32


def _key_dict(key_id: object) -> dict[str, Any]:
    """A key bucket as a dict from the hot path's identity ``(class, *compared fields)``."""
    if isinstance(key_id, tuple) and key_id and dataclasses.is_dataclass(key_id[0]):
        names = [f.name for f in dataclasses.fields(key_id[0]) if f.compare]
        if len(names) == len(key_id) - 1:
            return {name: _scalar(value) for name, value in zip(names, key_id[1:], strict=True)}
    return {"key": _scalar(key_id)}


_Bucket = tuple[str, str, str, HitSource]  # tuner, device, key JSON, source


class HitCounter:
    """The process's hit counts: added to on each counted hit, summarised on :meth:`flush`."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.lock = threading.Lock()
        """Held for each count: one lock for every tally, so a summary reads them all at one moment."""
        self._memory: dict[tuple[str, str], dict[object, int]] = {}  # (tuner, device) -> key id -> hits
        self._persistent: dict[_Bucket, int] = {}
        self._summarising = threading.Lock()
        self._written: dict[_Bucket, int] = {}
        self._since = time.time()
        self._keys: dict[object, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tally(self, tuner: str, device_id: str) -> dict[object, int]:
        """The hits by key id of one tuner on one device, for its counting view to add to under :attr:`lock`."""
        with self.lock:
            return self._memory.setdefault((tuner, device_id), {})

    def hit(self, tuner: str, device_id: str, key_id: object) -> None:
        """One call served by an in-memory winner."""
        tally = self.tally(tuner, device_id)
        with self.lock:
            tally[key_id] = tally.get(key_id, 0) + 1

    def observe(self, event: TuneEvent) -> None:
        """Count a winner read from the persistent cache (a process's first call of a tuned key)."""
        if isinstance(event, CacheLookup) and event.result == "hit":
            key = json.dumps({k: _scalar(v) for k, v in event.key.items()}, sort_keys=True, separators=(",", ":"))
            bucket: _Bucket = (event.tuner, event.device_id, key, "persistent")
            with self.lock:
                self._persistent[bucket] = self._persistent.get(bucket, 0) + 1

    def _key_json(self, key_id: object) -> str:
        key = self._keys.get(key_id)
        if key is None:
            key = self._keys[key_id] = json.dumps(_key_dict(key_id), sort_keys=True, separators=(",", ":"))
        return key

    def totals(self) -> dict[_Bucket, int]:
        """Every hit since the counter started, by bucket (what a cumulative metric reports)."""
        with self.lock:
            memory = [(where, dict(tally)) for where, tally in self._memory.items()]
            totals = dict(self._persistent)
        for (tuner, device), tally in memory:
            for key_id, hits in tally.items():
                bucket: _Bucket = (tuner, device, self._key_json(key_id), "memory")
                totals[bucket] = totals.get(bucket, 0) + hits
        return totals

    def summary(self) -> HitSummary | None:
        """The hits since the last summary, or None when there were none; the next one starts from here."""
        with self._summarising:  # the interval's thread and a flush at exit or by hand: each hit in one summary
            totals = self.totals()
            fresh = {b: n - self._written.get(b, 0) for b, n in totals.items() if n > self._written.get(b, 0)}
            start, self._since = self._since, time.time()
            self._written = totals
        if not fresh:
            return None
        counts = [
            HitCount(tuner=tuner, device_id=device, key=json.loads(key), source=source, hits=n)
            for (tuner, device, key, source), n in sorted(fresh.items())
        ]
        return HitSummary(pid=os.getpid(), start=start, end=self._since, counts=counts)

    def flush(self) -> HitSummary | None:
        """Write the hits since the last summary as one line to the records target; the summary written, if any."""
        summary = self.summary()
        if summary is not None:
            _write(summary.model_dump_json())
        return summary

    def start(self) -> None:
        """Summarise every ``interval_s`` on a daemon thread, and once more at exit."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="tunekit-hit-counter", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the thread and write the last summary."""
        self._stop.set()
        self.flush()

    def forked(self) -> None:
        """In a forked child: count this process's hits alone, on its own thread, and write them as it exits.

        The parent's hits so far are the parent's to write. A multiprocessing worker leaves by
        ``os._exit``, past ``atexit``, after running multiprocessing's own finalizers: one is added.
        (A pool left by ``terminate()``, as ``with Pool(...)`` does, kills its workers: their hits are lost.)
        """
        self.lock, self._summarising = threading.Lock(), threading.Lock()  # held by another thread at fork: held here
        self._written, self._since = self.totals(), time.time()
        self._stop, self._thread = threading.Event(), None
        self._thread = threading.Thread(target=self._run, name="tunekit-hit-counter", daemon=True)
        self._thread.start()
        workers = sys.modules.get("multiprocessing.util")
        if workers is not None:  # a worker clears the finalizers it inherited, then runs these callbacks
            workers.register_after_fork(self, _close_as_the_worker_exits)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.flush()
            except Exception:  # the counter must never take the process down
                _log.exception("cannot write the cache-hit summary")


def _write(line: str) -> None:
    """One summary line to the file or stream ``TUNEKIT_RECORD`` names; logged at INFO without one."""
    target = _settings.current().record
    sink = None
    if target:
        try:
            sink = sink_from_setting(target)
        except ValueError as exc:
            _log.warning("TUNEKIT_RECORD: %s; this hit summary is not kept", exc)
    if isinstance(sink, JsonlSink | StreamSink):
        sink.write_line(line)
    else:
        _log.info("cache hits: %s", line)


def _close_as_the_worker_exits(counter: HitCounter) -> None:
    sys.modules["multiprocessing.util"].Finalize(None, counter.close, exitpriority=0)


_counter_lock = threading.Lock()
_counter: HitCounter | None = None


def _forked() -> None:
    global _counter_lock  # held by another thread at fork, it would stay held in the child
    _counter_lock = threading.Lock()
    if _counter is not None:
        _counter.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def hit_counter() -> HitCounter | None:
    """The process's counter when ``count_hits`` is on (made and started at the first ask), else None."""
    global _counter
    settings = _settings.current()
    if not settings.count_hits:
        return None
    with _counter_lock:
        if _counter is None:
            _counter = HitCounter(settings.count_hits_interval_s)
            add_observer(_counter)
            _counter.start()
        return _counter


def stop_hit_counter() -> HitSummary | None:
    """Stop the process's counter, writing its last summary (returned); the next ``hit_counter()`` starts anew.

    Tuners already running keep counting into the stopped counter until ``LocalTuner.clear()``.
    """
    global _counter
    with _counter_lock:
        counter, _counter = _counter, None
    if counter is None:
        return None
    remove_observer(counter)
    atexit.unregister(counter.close)
    counter._stop.set()
    return counter.flush()


def flush_hit_counts() -> HitSummary | None:
    """Write the cache hits counted since the last summary now, rather than at the next interval or at exit.

    Returns the summary written, or None when nothing was counted since (or ``count_hits`` is off).
    A short script, or a test, reads its own hits back this way.
    """
    counter = _counter
    return counter.flush() if counter is not None else None


def current_counter() -> HitCounter | None:
    """The counter if one was started, without starting one (for a metric's callback)."""
    return _counter


class _CountingWinners(Mapping[object, Callable[..., Any]]):
    """One set's winners by key id; each winner found is a hit, added to the tuner's tally."""

    __slots__ = ("_lock", "_tally", "winners")

    def __init__(
        self, winners: Mapping[object, Callable[..., Any]], tally: dict[object, int], lock: threading.Lock
    ) -> None:
        self.winners = winners
        self._tally = tally
        self._lock = lock

    def __getitem__(self, key_id: object) -> Callable[..., Any]:
        fn = self.winners[key_id]
        with self._lock:
            self._tally[key_id] = self._tally.get(key_id, 0) + 1
        return fn

    def __iter__(self) -> Iterator[object]:
        return iter(self.winners)

    def __len__(self) -> int:
        return len(self.winners)


class _CountingHot(Mapping[int, Mapping[object, Callable[..., Any]]]):
    """A tuner's in-memory winners by set id, each set's read through a :class:`_CountingWinners`."""

    __slots__ = ("_hot", "_lock", "_tally", "_views")

    def __init__(
        self, hot: Mapping[int, Mapping[object, Callable[..., Any]]], tally: dict[object, int], lock: threading.Lock
    ) -> None:
        self._hot = hot
        self._tally = tally
        self._lock = lock
        self._views: dict[int, _CountingWinners] = {}

    def __getitem__(self, set_id: int) -> Mapping[object, Callable[..., Any]]:
        winners = self._hot[set_id]
        view = self._views.get(set_id)
        # Made once per set, not per call; made again when the tuner replaces the set's dict (a clear).
        if view is None or view.winners is not winners:
            view = self._views[set_id] = _CountingWinners(winners, self._tally, self._lock)
        return view

    def __iter__(self) -> Iterator[int]:
        return iter(self._hot)

    def __len__(self) -> int:
        return len(self._hot)


def counting_hot(
    tuner: str, device_id: str, hot: Mapping[int, Mapping[object, Callable[..., Any]]]
) -> Mapping[int, Mapping[object, Callable[..., Any]]]:
    """``hot`` itself when counting is off, else a view of it that counts each winner read."""
    counter = hit_counter()
    if counter is None:
        return hot
    return _CountingHot(hot, counter.tally(tuner, device_id), counter.lock)


def read_hit_summaries(path: str | os.PathLike[str]) -> Iterator[HitSummary]:
    """The hit summaries of a records file, in order (its tune records are left to ``read_records``)."""
    with Path(path).open("rb") as file:
        for raw in file:
            if raw.startswith(HIT_SUMMARY_PREFIX):
                yield HitSummary.model_validate_json(raw, context=STORED)
