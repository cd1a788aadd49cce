"""Tune observers: live notifications while a tune runs (progress displays, tracing, metrics).

Records say what was decided, once it is decided; observers also see a tune while it
runs (each compiled candidate, each timed sample), and the cache lookups that precede it.
Notifying is free when nobody observes: :func:`observe_tune` then hands back a no-op.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
from collections.abc import Mapping, Sequence

from tunekit._base.errors import describe_error
from tunekit._base.settings_model import Settings
from tunekit._measure.runner import CandidateRunner
from tunekit._observe.callback_error import detach_from
from tunekit._observe.events import (
    BatchStarted,
    CandidateProgress,
    PhaseStarted,
    SearchAdvanced,
    SearchFinished,
    SearchStarted,
    TuneEvent,
    TuneFinished,
    TuneObserver,
    TuneStarted,
)
from tunekit._observe.progress import terminal_progress
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.records import AutotuneRecord

__all__ = ["TuneObservation", "add_observer", "notify", "observe_search", "observe_tune", "remove_observer"]

_log = logging.getLogger("tunekit.observe")


_lock = threading.Lock()
_observers: tuple[TuneObserver, ...] = ()
_failed_observers: set[int] = set()
"""ids of observers that have raised: a broken one raises on every event (every sample), so only its first
failure is logged at ERROR, the rest at DEBUG."""
_tune_ids = itertools.count(1)


def add_observer(observer: TuneObserver) -> TuneObserver:
    """Send every future tune event of every tuner to ``observer``; returns it, for :func:`remove_observer`."""
    global _observers
    if not isinstance(observer, TuneObserver):
        raise TypeError(f"{observer!r} has no observe(event) method, so it cannot observe tunes")
    with _lock:
        _observers = (*_observers, observer)
        _failed_observers.discard(id(observer))  # a new object may reuse a removed one's id
    return observer


def remove_observer(observer: TuneObserver) -> None:
    """Stop notifying ``observer``; unknown observers are ignored."""
    global _observers
    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)
        _failed_observers.discard(id(observer))


def _active(settings: Settings) -> tuple[TuneObserver, ...]:
    observers = _observers
    if settings.progress and _stderr_is_terminal():
        observers = (*observers, terminal_progress(settings.progress_delay_s))
    return observers


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def notify(event: TuneEvent, observers: Sequence[TuneObserver] | None = None) -> None:
    """Deliver ``event``; an observer that raises is logged and never breaks the tune."""
    handling = sys.exc_info()[1]  # a tuner notifies from its own except blocks (a cache miss is a KeyError)
    for observer in _observers if observers is None else observers:
        try:
            observer.observe(event)
        except Exception as exc:
            detach_from(handling, exc)
            if id(observer) in _failed_observers:
                _log.debug("tune observer %r failed again on %s", observer, type(event).__name__, exc_info=True)
                continue
            _failed_observers.add(id(observer))
            _log.exception(
                "tune observer %r failed on %s (its later failures are logged at DEBUG)", observer, type(event).__name__
            )


class TuneObservation:
    """The observers of one tune, fixed when it starts, so the events of a tune go to the same places."""

    def __init__(self, observers: tuple[TuneObserver, ...], tune_id: int) -> None:
        self.observers = observers
        self.tune_id = tune_id
        self._compiled: set[int] = set()

    def compiled(self, index: int, name: str) -> None:
        """Candidate ``index`` compiled (by its prepare hook, or at its first launch); reported once."""
        if self.observers and index not in self._compiled:
            self._compiled.add(index)
            notify(CandidateProgress(self.tune_id, name, "compiled"), self.observers)

    def checked(self, name: str) -> None:
        """Candidate ``name`` passed the correctness gate."""
        if self.observers:
            notify(CandidateProgress(self.tune_id, name, "checked"), self.observers)

    def runner(self, inner: CandidateRunner, names: Sequence[str]) -> CandidateRunner:
        """``inner``, reporting each first launch and each timed sample."""
        return _ObservedRunner(inner, self, tuple(names)) if self.observers else inner

    def batch(self, number: int, names: Sequence[str]) -> None:
        """Batch ``number`` of the plan is about to run."""
        if self.observers:
            notify(BatchStarted(self.tune_id, number, tuple(names)), self.observers)

    def outcomes(self, results: Mapping[int, Outcome], names: Sequence[str]) -> None:
        """Report the final outcome of each candidate of a measured batch."""
        for index, outcome in results.items() if self.observers else ():
            match outcome:
                case Measured(durations):
                    event = CandidateProgress(self.tune_id, names[index], "measured", durations.median_ns)
                case Failed(reason, _):
                    event = CandidateProgress(self.tune_id, names[index], "failed", detail=reason)
                case Skipped(reason):
                    event = CandidateProgress(self.tune_id, names[index], "skipped", detail=reason)
            notify(event, self.observers)

    def search_started(
        self,
        tuner: str,
        device_id: str,
        key: Mapping[str, object],
        *,
        space_size: int | None,
        max_evals: int | None,
        max_seconds: float | None,
        size_counted: bool = True,
    ) -> None:
        """A search began, under this observation's id (a tune's, for a search inside a tune)."""
        if self.observers:
            event = SearchStarted(self.tune_id, tuner, device_id, key, space_size, max_evals, max_seconds, size_counted)
            notify(event, self.observers)

    def search_advanced(self, event: SearchAdvanced) -> None:
        """The search measured a batch, or turned to its finalists."""
        if self.observers:
            notify(event, self.observers)

    def search_finished(self, event: SearchFinished) -> None:
        """The search ended (with its record, for a search of its own)."""
        if self.observers:
            notify(event, self.observers)

    def failed(self, exc: BaseException) -> None:
        """The tune raised before a decision was made."""
        if self.observers:
            notify(TuneFinished(self.tune_id, None, describe_error(exc)), self.observers)

    def finished(self, record: AutotuneRecord) -> None:
        """The decision of this tune."""
        if self.observers:
            notify(TuneFinished(self.tune_id, record), self.observers)


def observe_tune(
    tuner: str, device_id: str, key: Mapping[str, object], candidates: Sequence[str], settings: Settings
) -> TuneObservation:
    """Announce a tune to the observers in force (the terminal's progress display among them)."""
    observers = _active(settings)
    observation = TuneObservation(observers, next(_tune_ids))
    if observers:
        notify(TuneStarted(observation.tune_id, tuner, device_id, key, tuple(candidates)), observers)
    return observation


def observe_search(settings: Settings) -> TuneObservation:
    """The observers in force for a search of its own (``tk.search``, ``tk.tune_objective``), under a new id.

    The search announces itself (``search_started``) once its budget and space are known.
    """
    return TuneObservation(_active(settings), next(_tune_ids))


def decision(record: AutotuneRecord) -> None:
    """Report a decision that measured nothing (autotuning disabled, a demotion)."""
    if _observers:
        notify(TuneFinished(None, record))


class _ObservedRunner:
    """Forwards to a runner and reports progress; timing happens inside ``inner``, so it is unaffected."""

    def __init__(self, inner: CandidateRunner, observation: TuneObservation, names: tuple[str, ...]) -> None:
        self._inner = inner
        self._observation = observation
        self._names = names

    def warmup(self, index: int) -> None:
        self._inner.warmup(index)
        self._observation.compiled(index, self._names[index])

    def phase(self, name: str, indices: Sequence[int], *, number: int = 0, limit: int | None = None) -> None:
        names = tuple(self._names[i] for i in indices)
        event = PhaseStarted(self._observation.tune_id, name, names, number=number, limit=limit)
        notify(event, self._observation.observers)

    def sample(self, index: int, *, flush: bool = True) -> int:
        duration_ns = self._inner.sample(index, flush=flush)
        self._observation.compiled(index, self._names[index])
        notify(
            CandidateProgress(self._observation.tune_id, self._names[index], "sample", float(duration_ns)),
            self._observation.observers,
        )
        return duration_ns
