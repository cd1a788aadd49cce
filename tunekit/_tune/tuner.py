"""The device-scoped Tuner: each key's ranking (from memory, from disk, or tuned now); recovery from a failed winner."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from tunekit._base import settings as _settings
from tunekit._base.errors import (
    ClientClosed,
    InputTypeError,
    NoValidKernelFound,
    TuneRecursionError,
    describe_error,
)
from tunekit._base.persisted import STORED
from tunekit._base.self_call import runs_within, tuning
from tunekit._base.settings_model import Settings
from tunekit._candidates.arguments import unbindable
from tunekit._candidates.plan import plan_order, skip_reason
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import is_autotune_key, key_to_dict, key_to_json
from tunekit._measure.client import Client, require_client
from tunekit._observe.doubt import warn_if_untrusted
from tunekit._observe.observers import TuneObservation, decision, observe_tune
from tunekit._observe.sinks import RecordSink, emit_to_all
from tunekit._store.cache import PersistentCache
from tunekit._store.cache_dirs import cache_dir, persistent_cache
from tunekit._store.fleet import fleet_store
from tunekit._store.tune_failure import forget_failure, record_failure, repeat_failure
from tunekit._store.tune_lock import drop_stale_lock, free_lock, tune_lock
from tunekit._tune.key_churn import KeyChurn
from tunekit._tune.measure_job import measure
from tunekit._tune.names import claim_name
from tunekit._tune.overlap import measuring
from tunekit._tune.search_tune import search_note
from tunekit._tune.tune_cache import TuneCache
from tunekit._tune.tune_job import TuneJob
from tunekit._values.cache_state import CacheState, Hit, Pending
from tunekit._values.decision import decision_of
from tunekit._values.outcome import Failed, Outcome, outcome_reason
from tunekit._values.records import AutotuneRecord, CandidateRecord, Decision, Demoted, PhaseTimes, RecordEvent

__all__ = ["Tuner"]

_log = logging.getLogger("tunekit.tuner")


class Tuner:
    """Tunes and remembers winners for one tuner name on one device.

    Concurrent calls with the same new key tune it once: the first caller tunes, the others
    wait on its future. No lock is held while a candidate runs. A candidate that executes its
    own operation for the key being tuned raises ``TuneRecursionError`` and fails.
    """

    def __init__(self, name: str, device_id: str, *, sinks: Sequence[RecordSink] = ()) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Tuner needs a non-empty str name, got {name!r}")
        # Checked here, at the first execute on a device: an int would fail only deep in the tune lock,
        # and an empty str would be stored as a cache row that `tunekit cache verify` and `export` refuse.
        if not isinstance(device_id, str) or not device_id:
            error = TypeError if not isinstance(device_id, str) else ValueError
            raise error(
                f"tuner {name!r}: the device id must be a non-empty str, got {device_id!r}; "
                "pass client.device_id, e.g. TUNER.execute(client.device_id, client, tunables, inputs)"
            )
        if not _encodable(device_id):
            raise ValueError(
                f"tuner {name!r}: the device id {device_id!r} holds a lone surrogate, which cannot be stored in the "
                "cache or a lock file name (UTF-8): a device id decoded from bytes with errors='surrogateescape' "
                "must be decoded with errors='replace' (or taken from client.device_id)"
            )
        self.name = name
        self.device_id = device_id
        self.tune_cache = TuneCache(name, device_id)
        """Every winner this tuner knows, in memory and written through to the persistent cache."""
        self._sinks = tuple(sinks)
        self._recovered = False
        self._churn = KeyChurn(name)

    # -- what is known ---------------------------------------------------------------

    def state(self, tunables: TunableSet[Any, Any], key: object) -> CacheState:
        """Where ``key`` stands: in memory, being tuned, stored on disk unchecked, or missing.

        In memory also when an equal set (same checksum) has it: ``resolve`` takes it from there.
        """
        return self.tune_cache.state(tunables, key)

    @property
    def winners(self) -> Mapping[TunableSet[Any, Any], dict[object, Callable[..., Any]]]:
        """The in-memory winner of each key, by tunable set (``tuner.winners[tunables][key]``)."""
        return self.tune_cache.winners()

    def winners_names(self) -> list[str]:
        """Names of the in-memory winners, over every set and key (for tools and benches)."""
        return self.tune_cache.winner_names()

    def seed(self, tunables: TunableSet[Any, Any], key: object, ranking_names: Sequence[str]) -> None:
        """Install a known ranking (from a committed record) so ``key`` is never tuned here."""
        self._claim(tunables, key_to_json(key), _settings.current())
        self.tune_cache.seed(tunables, key, ranking_names)

    def clear(self) -> None:
        """Forget every in-memory winner (the persistent cache is untouched)."""
        self.tune_cache.clear()

    def _claim(self, tunables: TunableSet[Any, Any], key_json: str, settings: Settings) -> None:
        """Refuse a second, different set for this name and key, whose row would overwrite the first's.

        Checked whether or not the cache is enabled, so that a program does not start failing
        when its cache is switched on.
        """
        claim_name(cache_dir(settings), self.device_id, self.name, key_json, tunables)

    # -- the slow path ---------------------------------------------------------------

    def resolve(
        self, client: Client, tunables: TunableSet[Any, Any], key: object, inputs: tuple[Any, ...]
    ) -> tuple[int, ...]:
        """The ranking for ``key``: from memory, from disk, from another thread's tune, or tuned now.

        Raises TypeError before anything else when ``client`` is not a ``tk.Client``, and
        ValueError when it is another device's than this tuner's.
        """
        require_client(client, f"tuner {self.name!r}: resolve()")
        if not isinstance(tunables, TunableSet):  # a list of tunables would fail deep inside, as an AttributeError
            raise TypeError(
                f"tuner {self.name!r}: resolve() takes a tk.TunableSet, got {type(tunables).__name__}; "
                "build one with tk.TunableSet(key=...).with_tunables([...])"
            )
        if client.device_id != self.device_id:
            raise ValueError(
                f"tuner {self.name!r}: execute() was given the device id {self.device_id!r}, but the client's is "
                f"{client.device_id!r}; winners measured on this client would be cached and recorded as that other "
                "device's. Pass client.device_id, e.g. TUNER.execute(client.device_id, client, tunables, inputs)"
            )
        settings = _settings.current()
        if not is_autotune_key(key):
            raise TypeError(
                f"tuner {self.name!r}: the key generator {tunables.describe_key_fn()} returned "
                f"{type(key).__name__}, not an @tk.autotune_key instance"
            )
        try:  # refuse here, before any tuning, a key that can be neither looked up nor stored
            hash(key)
            key_json = key_to_json(key)
        except TypeError as exc:
            exc.add_note(f"tunekit: tuner {self.name!r} {tunables!r}: the key comes from {tunables.describe_key_fn()}")
            raise
        self._claim(tunables, key_json, settings)
        tune_id = (self.device_id, self.name, key_json, tunables.checksum())
        begun = self.tune_cache.begin(tunables, key, tune_id)
        if isinstance(begun, Hit):
            return begun.ranking
        if isinstance(begun, Pending):
            if runs_within(begun.future):  # a candidate or prepare hook of this very tune
                raise TuneRecursionError(self.name, key)
            return begun.future.result()
        try:
            with tuning(begun.future, tune_id):
                # Opened only when autotuning is on: autotuning off writes nothing, and opening creates the file.
                cache = persistent_cache(settings) if settings.autotune else None
                fleet = fleet_store(settings) if settings.autotune else None
                job = TuneJob(
                    self.name, self.device_id, client, tunables, key, key_json, inputs, settings, cache, fleet
                )
                ranking = self._decide(job)
        except BaseException as exc:
            self.tune_cache.abandon(tunables, key, exc)
            raise
        self.tune_cache.settle(tunables, key, ranking, tuned=settings.autotune)  # _decide measured nothing when off
        return ranking

    def _decide(self, job: TuneJob) -> tuple[int, ...]:
        """The ranking of a key missing from memory: the plan order, a stored row, or a tune."""
        if not job.settings.autotune:
            return self._untuned(job.tunables, job.key)
        if job.fleet is not None:
            return self._decide_in_fleet(job)
        return self._decide_here(job)

    def _decide_in_fleet(self, job: TuneJob) -> tuple[int, ...]:
        """The fleet's winner of the key, or this host's (stored or tuned now) offered to the fleet under its lock.

        The fleet's lock is taken before this host's, in every process: two processes never hold
        one each while waiting for the other's.
        """
        assert job.fleet is not None
        ranking = self.tune_cache.fleet_ranking(job)
        if ranking is not None:
            return ranking
        with job.fleet.lock(self.device_id, self.name, job.key_json, job.settings.tune_lock_timeout_s) as held:
            if held:  # another process may have tuned this key while this one waited for the lock
                ranking = self.tune_cache.fleet_ranking(job, after_wait=True)
                if ranking is not None:
                    return ranking
            ranking = self._decide_here(job)
            shared = self.tune_cache.publish(job, ranking)
            if shared is None and job.cache is not None:  # the fleet forgot the key since this host's copy
                self.tune_cache.forget_copy(job)
                ranking = self._decide_here(job)
                shared = self.tune_cache.publish(job, ranking)
            return ranking if shared is None else shared

    def _decide_here(self, job: TuneJob) -> tuple[int, ...]:
        """The ranking of a key from this host's cache, or tuned now under this host's tune lock."""
        if job.cache is None:
            return self._tune_and_store(job)
        if not self._recovered:
            self._recovered = True
            self.recover_records(job.cache)
        ranking = self.tune_cache.stored_ranking(job)
        if ranking is not None:
            # A winner whose process was killed before it sent the record, read by a process that had already
            # looked for unsent records (a campaign's surviving worker, retrying the killed one's job): sent here.
            if job.cache.pending_records(self.device_id, self.name, job.key_json):
                self._send_unsent(job.cache, job.key_json)
            drop_stale_lock(job.cache, self.device_id, self.name, job.key_json)
            return ranking
        with tune_lock(job.cache, self.device_id, self.name, job.key_json, job.settings.tune_lock_timeout_s) as held:
            if held:  # another process may have tuned this key while this one waited for the lock
                ranking = self.tune_cache.stored_ranking(job, after_wait=True)
                if ranking is not None:
                    return ranking
                # ... or found that it cannot be tuned: that tune would only be repeated here.
                failed = repeat_failure(
                    job.cache, self.device_id, self.name, job.key, job.key_json, job.tunables, job.settings
                )
                if failed is not None:
                    raise failed
            return self._tune_and_store(job)

    def _tune_and_store(self, job: TuneJob) -> tuple[int, ...]:
        """Measure the key, store and record the winner; NoValidKernelFound when there is none."""
        started = time.perf_counter()
        tunables = job.tunables
        observation = observe_tune(self.name, self.device_id, key_to_dict(job.key), tunables.names, job.settings)
        try:
            with measuring(self.device_id) as span:
                outcomes, batch_of, ranking = measure(job, observation)
        except BaseException as exc:
            observation.failed(exc)
            raise
        winner = tunables.tunables[ranking[0]].name if ranking else None
        wall_time_s = time.perf_counter() - started
        record = self._record(
            tunables,
            job.key,
            "tuned",
            winner,
            stored=bool(ranking) and job.cache is not None,
            wall_time_s=wall_time_s,
            phases=_phases(job.phase_s, wall_time_s),
            candidates=[
                CandidateRecord.of(tunables.tunables[i].name, batch_of.get(i, 0), o) for i, o in outcomes.items()
            ],
            events=job.events,
        )
        decided = decision_of(record)
        # The record goes into the winner's transaction: a kill before the sinks have it leaves it
        # there for the next process of this tuner to send (recover_records).
        stored = bool(ranking) and self.tune_cache.store(
            job, ranking, outcomes, decided, record=record.model_dump_json()
        )
        if stored != record.stored:
            record = record.model_copy(update={"stored": stored})
        if stored and job.cache is not None:
            forget_failure(job.cache, self.device_id, self.name, job.key_json)
        warn_if_untrusted(self.name, job.key, decided, overlapped=span.others, stored=stored)
        self._churn.tuned(job.key)
        _warn_uncallable(self.name, tunables, outcomes, len(job.inputs))
        self._emit(record, observation)
        if stored and job.cache is not None:
            job.cache.record_sent(self.device_id, self.name, job.key_json)
        if not ranking:
            failures = [(tunables.tunables[i].name, outcome_reason(o)) for i, o in outcomes.items()]
            if job.cache is not None and not _callers_input_refused(tunables, outcomes):
                # still under the tune lock: a waiter reads it before it could tune
                record_failure(job.cache, self.device_id, self.name, job.key_json, tunables, failures, job.settings)
            note = search_note(
                tuner=self.name, device_id=self.device_id, tunables=tunables, key=job.key, events=job.events
            )
            error = NoValidKernelFound(self.name, job.key, failures, recorded=note)
            if hint := _reference_note(tunables, outcomes):  # a note: `recorded` says what the store knows
                error.add_note(f"tunekit: {hint}")
            raise error
        return ranking

    def recover_records(self, cache: PersistentCache) -> int:
        """Send the records of this tuner's winners whose process was killed before sending them; how many.

        A record is kept in the winner's transaction and removed once sent. One still there while
        its key's tune lock is free belongs to a process killed in between: its record is sent here,
        as that process would have sent it. Once per tuner and process, at its first look into the
        cache; a record whose key is being tuned now is left to its tune.
        """
        return sum(
            self._send_unsent(cache, key_json) for key_json, _ in cache.pending_records(self.device_id, self.name)
        )

    def _send_unsent(self, cache: PersistentCache, key_json: str) -> bool:
        """Send the record kept with the key's winner, unless its tune holds the lock now; whether one was sent."""
        with free_lock(cache, self.device_id, self.name, key_json) as free:
            found = cache.pending_records(self.device_id, self.name, key_json) if free else []
            if not found:
                return False  # being tuned or stored now, or sent meanwhile
            sent = False
            try:
                record = AutotuneRecord.model_validate_json(found[0][1], context=STORED)
            except ValidationError as exc:
                _log.warning("%s: an unsent record of key %s is unreadable, dropped: %s", self.name, key_json, exc)
            else:
                _log.info("%s: sending the record of key %s, left unsent by a killed process", self.name, key_json)
                self._emit(record)
                sent = True
            cache.record_sent(self.device_id, self.name, key_json)
            return sent

    def _untuned(self, tunables: TunableSet[Any, Any], key: object) -> tuple[int, ...]:
        """Autotuning disabled: plan order, nothing measured, nothing written."""
        order = tuple(plan_order(key, tunables.tunables))
        if not order:
            raise NoValidKernelFound(self.name, key, [(t.name, skip_reason(key, t)) for t in tunables.tunables])
        self._emit(self._record(tunables, key, "disabled", tunables.tunables[order[0]].name))
        return order

    # -- a cached winner that fails at launch -------------------------------------------

    def recover(self, tunables: TunableSet[Any, Any], key: object, inputs: tuple[Any, ...], error: Exception) -> Any:
        """Run the next-ranked candidates after the winner raised on real inputs.

        The failures are demoted only when a later candidate succeeds: when every candidate
        fails, the inputs are at fault, the ranking is kept and the first error is raised. An
        ``InputTypeError`` says so at once: it is raised as it is, no other candidate is run.
        """
        if isinstance(error, ClientClosed | InputTypeError):  # no candidate is at fault: nothing to demote
            raise error
        ranking = self.tune_cache.ranking(tunables, key)
        failures: list[tuple[int, Exception]] = [(ranking[0], error)] if ranking else []
        for index in ranking[1:]:
            try:
                output = tunables.tunables[index].fn(*inputs)
            except ClientClosed:
                raise
            except Exception as exc:
                failures.append((index, exc))
                continue
            self._demote(tunables, key, ranking, failures, index)
            return output
        raise error

    def _demote(
        self,
        tunables: TunableSet[Any, Any],
        key: object,
        ranking: tuple[int, ...],
        failures: list[tuple[int, Exception]],
        replacement: int,
    ) -> None:
        failed = {index for index, _ in failures}
        stored = self.tune_cache.demote(tunables, key, tuple(i for i in ranking if i not in failed))
        for index, exc in failures:
            _log.warning(
                "%s: cached winner %s failed on real inputs (%s); demoted in favour of %s",
                self.name,
                tunables.tunables[index].name,
                describe_error(exc),
                tunables.tunables[replacement].name,
            )
        self._emit(
            self._record(
                tunables,
                key,
                "demoted",
                tunables.tunables[replacement].name,
                stored=stored,
                events=[
                    Demoted(
                        name=tunables.tunables[index].name,
                        error=describe_error(exc),
                        replacement=tunables.tunables[replacement].name,
                    )
                    for index, exc in failures
                ],
            )
        )

    def _record(
        self,
        tunables: TunableSet[Any, Any],
        key: object,
        kind: Decision,
        winner: str | None,
        *,
        stored: bool = False,
        wall_time_s: float = 0.0,
        candidates: Sequence[CandidateRecord] = (),
        events: Sequence[RecordEvent] = (),
        phases: PhaseTimes | None = None,
    ) -> AutotuneRecord:
        """The record of one decision of this tuner about ``key``."""
        return AutotuneRecord(
            tuner=self.name,
            device_id=self.device_id,
            key=key_to_dict(key),
            checksum=tunables.checksum(),
            decision=kind,
            candidates=list(candidates),
            winner=winner,
            stored=stored,
            wall_time_s=wall_time_s,
            events=list(events),
            phases=phases,
        )

    def _emit(self, record: AutotuneRecord, observation: TuneObservation | None = None) -> None:
        if observation is None:
            decision(record)
        else:
            observation.finished(record)
        emit_to_all(record, self._sinks)


def _encodable(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate): what the cache, records and lock files store."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _phases(phase_s: dict[str, float], wall_time_s: float) -> PhaseTimes:
    """The record's phases from a tune's seconds per phase; what they leave of ``wall_time_s`` is ``other_s``."""
    named = {f"{phase}_s": max(seconds, 0.0) for phase, seconds in phase_s.items()}
    return PhaseTimes(**named, other_s=max(wall_time_s - sum(named.values()), 0.0))


_warned_uncallable: set[tuple[str, str]] = set()
"""(tuner, candidate) already warned about by _warn_uncallable: once per process, not once per key."""


def _warn_uncallable(tuner: str, tunables: TunableSet[Any, Any], outcomes: dict[int, Outcome], arity: int) -> None:
    """Warn about each candidate that failed because its parameters cannot take the call's inputs.

    Failures are values, and a candidate that fails for some keys is a design (a kernel for small
    sizes only); one whose signature cannot take the inputs at all is a typo that would otherwise
    leave it out of every tune without a word.
    """
    for index, outcome in outcomes.items():
        if not (isinstance(outcome, Failed) and outcome.reason.startswith("TypeError:")):
            continue
        tunable = tunables.tunables[index]
        if (tuner, tunable.name) in _warned_uncallable:
            continue
        refused = unbindable(tunable.fn, arity)
        if refused is None:  # it can take them, or has no signature to tell: nothing to say
            continue
        _warned_uncallable.add((tuner, tunable.name))
        _log.warning(
            "%s: candidate %r takes %s, which cannot be called with the %d input(s) execute() passes (%s); "
            "it fails in every tune: give it the operation's parameters, or remove it",
            tuner,
            tunable.name,
            inspect.signature(tunable.fn),
            arity,
            refused[1],
        )


def _reference_note(tunables: TunableSet[Any, Any], outcomes: dict[int, Outcome]) -> str:
    """What to look at when every candidate failed its check against a reference function; '' otherwise.

    Each failure names its own error figures, so a list of them reads as "every candidate is wrong",
    when the one thing they disagree with, and the likelier to be wrong, is the reference.
    """
    reference = tunables.reference
    if reference is None or reference.fn is None or not outcomes:
        return ""
    if not all(isinstance(o, Failed) and o.stage == "check" for o in outcomes.values()):
        return ""
    every = "the only candidate" if len(outcomes) == 1 else f"all {len(outcomes)} candidates"
    return (
        f"{every} failed the correctness check against the reference function "
        f"{getattr(reference.fn, '__qualname__', repr(reference.fn))}: where the candidates agree with each other, "
        + (
            "check the reference (its dtype, its output, with_reference(outputs=...)), or widen rtol/atol"
            if reference.compare is None
            else "check the reference and the compare= function (each failure gives its verdict)"
        )
    )


def _callers_input_refused(tunables: TunableSet[Any, Any], outcomes: dict[int, Outcome]) -> bool:
    """Whether every failure was a tk.InputTypeError on the caller's own inputs.

    The candidates ran on the caller's arguments when the set has no ``inputs=``, or when its generator
    only copies them (``copies_callers_arguments = True``, as an OpenCL template's default device copies
    say). Such a failure says nothing of the key: remembered, it would answer another process's correct
    call with this call's wrong dtype for ``failed_tune_retry_s``.
    """
    failed = [o for o in outcomes.values() if isinstance(o, Failed)]
    prefix = f"{InputTypeError.__name__}:"
    callers = tunables.inputs is None or getattr(tunables.inputs, "copies_callers_arguments", False) is True
    return callers and bool(failed) and all(o.reason.startswith(prefix) for o in failed)
