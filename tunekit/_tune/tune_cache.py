"""TuneCache: the one home of a tuner's state on one device, in memory and on disk.

In memory it keeps each key's ranking, the winner the hot path calls, the tunes in flight and
the plan orders taken while autotuning was off. It writes each tuned ranking through to the
persistent cache, and takes a stored row only once it has checked it against the running set
(checksum, then candidate names). The Tuner, ``LocalTuner.execute`` and ``Record.seed`` reach
this state through its methods, and ``LocalTuner.execute`` through ``hot`` alone.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from tunekit._base import settings as _settings
from tunekit._base.errors import TuneRecursionError
from tunekit._base.self_call import TuneId, runs_within, tuned_by_parent
from tunekit._base.settings_model import Settings
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import key_id, key_to_dict, key_to_json
from tunekit._observe.events import CacheLookup
from tunekit._observe.observers import notify
from tunekit._store.cache import PersistentCache
from tunekit._store.cache_dirs import existing_cache, persistent_cache
from tunekit._tune.stale import report_stale
from tunekit._tune.tune_job import TuneJob
from tunekit._values.cache_row import CacheValue, CandidateResult
from tunekit._values.cache_state import CacheState, Hit, Miss, Pending, Unchecked
from tunekit._values.decision import TuneDecision
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.records import CacheRecovered, RecordEvent, SharedTunerName
from tunekit._values.set_origin import SetOrigin

__all__ = ["Owned", "TuneCache"]

_log = logging.getLogger("tunekit.tuner")

Ranking = tuple[int, ...]
"""Indices into a tunable set's candidates, fastest first."""


@dataclass(frozen=True, slots=True)
class Owned:
    """This call tunes the key: ``TuneCache.settle`` or ``abandon`` ends it and answers the waiters on ``future``."""

    future: Future[Ranking]


_plan_order_lock = threading.Lock()
_plan_order_owners: weakref.WeakSet[TuneCache] = weakref.WeakSet()
"""Caches holding plan orders taken while autotuning was off, to drop once it is back on."""
_every_cache: weakref.WeakSet[TuneCache] = weakref.WeakSet()
"""Every TuneCache of this process: a forked child drops the tunes its parent's other threads were running."""


class TuneCache:
    """The winners of one tuner name on one device: in memory, in flight, and written through to disk.

    Sets are told apart by ``id()`` and held weakly: keyed by the set itself, every set built per
    call (instead of once, with ``LocalTuner.init``) would stay alive here. A collected set's
    entries are dropped before its id can be reused.
    """

    def __init__(self, name: str, device_id: str) -> None:
        self.name = name
        self.device_id = device_id
        self._lock = threading.Lock()
        self._fns: dict[int, dict[object, Callable[..., Any]]] = {}
        self.winner_fns: Mapping[int, Mapping[object, Callable[..., Any]]] = self._fns
        """The winner's function of each key, by ``id()`` of its set."""
        self._hot: dict[int, dict[object, Callable[..., Any]]] = {}
        self.hot: Mapping[int, Mapping[object, Callable[..., Any]]] = self._hot
        """``winner_fns`` by each key's ``key_id`` (a tuple hashed and compared in C, not by the key's own
        ``__hash__``/``__eq__``): what ``LocalTuner.execute`` looks up on a hit.

        Read without the lock: a dict read is atomic, and entries are only ever set or popped whole."""
        self._rankings: dict[int, dict[object, Ranking]] = {}
        self._sets: dict[int, weakref.ref[TunableSet[Any, Any]]] = {}
        # By (checksum, key), not by set: two equal sets built apart (one per thread, say) that both
        # miss a key tune it once, and the other waits, even with the persistent cache (whose tune
        # lock would serialise them) off.
        self._pending: dict[tuple[str, object], Future[Ranking]] = {}
        # Every tuned ranking by (checksum, key), as names: an equal set built elsewhere (one per
        # client of this device, one built per call, TUNER.init's beside a seeded one) finds it
        # without reading the persistent cache, or tuning again when the cache is off. Names, not
        # sets: it keeps no set alive.
        self._by_checksum: dict[tuple[str, object], tuple[str, ...]] = {}
        # The keys of each set (by id) whose ranking is a plan order taken while autotuning was
        # off. They are dropped when it is switched back on (settings.on_configure), not checked
        # at each call, which would slow the hot path.
        self._plan_orders: dict[int, set[object]] = {}
        _every_cache.add(self)

    def _forked(self) -> None:
        """In a forked child: forget the tunes in flight that no thread of the child runs.

        Their owners are threads of the parent, which fork() does not copy: a call waiting on one
        would wait for ever. The child tunes such a key itself, or, with the persistent cache,
        waits on the parent's tune lock and reads its winner. A tune the forking code works for
        (a forked isolation worker's) stays, so that its candidate executing its own key still
        fails at once rather than tuning again.
        """
        self._lock = threading.Lock()  # held by another thread at fork, it would stay held here
        self._pending = {tune: future for tune, future in self._pending.items() if runs_within(future)}

    # -- in memory -------------------------------------------------------------------------------

    def state(self, tunables: TunableSet[Any, Any], key: object) -> CacheState:
        """Where ``key`` stands: in memory (this set's or an equal set's), being tuned, stored unchecked, or missing."""
        with self._lock:
            hit = self._hit_locked(tunables, key, adopt=False)
            if hit is not None:
                return hit
            future = self._pending.get((tunables.checksum(), key))
            if future is not None:
                return Pending(future)
        cache = existing_cache(_settings.current())
        return Miss() if cache is None else self._row(cache, key_to_json(key))

    def begin(self, tunables: TunableSet[Any, Any], key: object, tune_id: TuneId) -> Hit | Pending | Owned:
        """The ranking in memory, the tune in flight to wait on, or the tune this call now owns.

        Raises ``TuneRecursionError`` when this process is a spawned worker of that very tune: a
        candidate that executes its own key would start the tune it is part of.
        """
        with self._lock:
            hit = self._hit_locked(tunables, key, adopt=True)
            if hit is not None:
                return hit
            future = self._pending.get((tunables.checksum(), key))
            if future is not None:
                return Pending(future)
            if tuned_by_parent(tune_id):
                raise TuneRecursionError(self.name, key, where="by the process that started this worker")
            future = self._pending[(tunables.checksum(), key)] = Future()
            return Owned(future)

    def settle(self, tunables: TunableSet[Any, Any], key: object, ranking: Ranking, *, tuned: bool) -> None:
        """End an owned tune with its ranking: remembered, and handed to the calls waiting on it.

        ``tuned=False`` (autotuning off: a plan order, nothing measured) is kept to this set, and
        only until autotuning is back on (see ``_remember_locked``).
        """
        with self._lock:
            self._remember_locked(tunables, key, ranking, tuned=tuned)
            future = self._pending.pop((tunables.checksum(), key))
        future.set_result(ranking)

    def abandon(self, tunables: TunableSet[Any, Any], key: object, error: BaseException) -> None:
        """End an owned tune that raised: the calls waiting on it raise ``error`` too, and the next call tunes."""
        with self._lock:
            future = self._pending.pop((tunables.checksum(), key))
        future.set_exception(error)

    def ranking(self, tunables: TunableSet[Any, Any], key: object) -> Ranking:
        """The ranking in memory for ``key`` with ``tunables``; empty when there is none."""
        with self._lock:
            return self._rankings.get(id(tunables), {}).get(key, ())

    def seed(self, tunables: TunableSet[Any, Any], key: object, ranking_names: Sequence[str]) -> None:
        """Remember a known ranking, by candidate names (a committed record's), as if ``key`` were tuned."""
        ranking = _indices(tunables, ranking_names)
        if not ranking:
            raise ValueError(f"tuner {self.name!r}: none of {list(ranking_names)} is a member of {tunables!r}")
        with self._lock:
            self._remember_locked(tunables, key, ranking, tuned=True)

    def winners(self) -> Mapping[TunableSet[Any, Any], dict[object, Callable[..., Any]]]:
        """The in-memory winner of each key, by tunable set."""
        return _WinnersBySet(self._fns, self._sets)

    def winner_names(self) -> list[str]:
        """Names of the in-memory winners, over every set and key."""
        with self._lock:
            return [
                tunables.tunables[ranking[0]].name
                for ident, by_key in self._rankings.copy().items()  # a collected set may drop out meanwhile
                if (tunables := self._sets.get(ident, _dead)()) is not None
                for ranking in by_key.values()
            ]

    def clear(self) -> None:
        """Forget every in-memory winner (the persistent cache is untouched); tunes in flight go on."""
        with self._lock:
            self._fns.clear()
            self._hot.clear()
            self._rankings.clear()
            self._sets.clear()
            self._by_checksum.clear()
            self._plan_orders.clear()

    def forget_plan_orders(self) -> None:
        """Autotuning is back on: drop the plan orders taken while it was off, so their keys are tuned."""
        with self._lock:
            # Detached first: a set collected meanwhile pops its entry from the table (_forget_collected,
            # without the lock, maybe on this very thread), which would break a loop over it.
            plan_orders, self._plan_orders = self._plan_orders, {}
            for ident, keys in plan_orders.items():
                for key in keys:
                    # A pop, not a new dict: atomic for the lock-free readers on the hot path.
                    self._hot.get(ident, {}).pop(key_id(key), None)
                    self._fns.get(ident, {}).pop(key, None)
                    self._rankings.get(ident, {}).pop(key, None)

    def _hit_locked(self, tunables: TunableSet[Any, Any], key: object, *, adopt: bool) -> Hit | None:
        """This set's ranking, or an equal set's (``adopt``: remembered for this set too); under the lock."""
        ranking = self._rankings.get(id(tunables), {}).get(key)
        if ranking is not None:
            return Hit(ranking)
        known = self._by_checksum.get((tunables.checksum(), key))
        if known is None:
            return None
        ranking = _indices(tunables, known)  # an equal set: the same names in the same order, so the same indices
        if adopt:
            self._remember_locked(tunables, key, ranking, tuned=True)
        return Hit(ranking)

    def _remember_locked(self, tunables: TunableSet[Any, Any], key: object, ranking: Ranking, *, tuned: bool) -> None:
        """Make ``ranking`` the answer for ``key`` with ``tunables``; under the lock.

        ``tuned=False`` (the plan order used while autotuning is off) keeps the ranking to this
        set, and only until autotuning is back on: offered to an equal set, or kept for this one,
        it would answer the key from then on, and the key would never be tuned. When autotuning
        is already back on, it is not kept at all.
        """
        ident = id(tunables)
        if not tuned:
            # Read under the lock _autotune_back_on takes: either it sees this cache, or this sees autotuning on.
            with _plan_order_lock:
                if _settings.current().autotune:  # switched back on during this resolve
                    return
                _plan_order_owners.add(self)
            self._plan_orders.setdefault(ident, set()).add(key)
        elif key in self._plan_orders.get(ident, ()):
            self._plan_orders[ident].discard(key)
        self._track(tunables)
        self._rankings.setdefault(ident, {})[key] = ranking
        if tuned:
            self._by_checksum[(tunables.checksum(), key)] = tuple(tunables.tunables[i].name for i in ranking)
        # One item assignment: atomic for the lock-free readers on the hot path, and O(1)
        # however many keys a set has.
        fn = tunables.tunables[ranking[0]].fn
        self._fns.setdefault(ident, {})[key] = fn
        self._hot.setdefault(ident, {})[key_id(key)] = fn

    def _track(self, tunables: TunableSet[Any, Any]) -> None:
        """Forget ``tunables``' winners when it is collected (before its id can be reused); under the lock."""
        ident = id(tunables)
        if ident not in self._sets:
            forget = functools.partial(TuneCache._forget_collected, weakref.ref(self), ident)
            self._sets[ident] = weakref.ref(tunables, forget)

    @staticmethod
    def _forget_collected(cache: weakref.ref[TuneCache], ident: int, _: object) -> None:
        """A set was collected: drop its entries. Without the lock, as single atomic pops: the
        collection may run on a thread that holds it."""
        owner = cache()
        if owner is not None:
            owner._hot.pop(ident, None)
            owner._fns.pop(ident, None)
            owner._rankings.pop(ident, None)
            owner._sets.pop(ident, None)
            owner._plan_orders.pop(ident, None)

    # -- on disk ---------------------------------------------------------------------------------

    def stored_ranking(self, job: TuneJob, *, after_wait: bool = False) -> Ranking | None:
        """The usable stored ranking of the job's key, or None (a miss, a stale or an unreadable row).

        The second look, after waiting for another process's tune, tells observers nothing more:
        they saw this resolve's lookup the first time.
        """
        assert job.cache is not None
        match self._row(job.cache, job.key_json):
            case Unchecked(checksum, value):
                found: list[RecordEvent] = []
                ranking = self._check(job.tunables, job.key, checksum, value, found)
                # After the wait, another process's set may have written the row it re-tunes over.
                job.events.extend(e for e in found if e not in job.events)
                if after_wait:
                    if ranking is not None:
                        _log.info(
                            "%s: another process tuned %s while this one waited; using its winner", self.name, job.key
                        )
                    return ranking
                notify(CacheLookup(self.name, self.device_id, key_to_dict(job.key), "hit" if ranking else "stale"))
                return ranking
            case Miss(reason):
                if not after_wait:
                    if reason is not None:
                        job.events.append(CacheRecovered(detail=reason))
                    notify(CacheLookup(self.name, self.device_id, key_to_dict(job.key), "miss"))
                return None

    def store(
        self,
        job: TuneJob,
        ranking: Ranking,
        outcomes: Mapping[int, Outcome],
        decision: TuneDecision | None = None,
        *,
        record: str | None = None,
    ) -> bool:
        """Write a tuned ranking, its outcomes, the figures that decided it and (until sent) its record.

        Whether it was stored.
        """
        if job.cache is None:
            return False
        value = _cache_value(job.tunables, ranking, outcomes, decision)
        return job.cache.put(self.device_id, self.name, job.key_json, job.tunables.checksum(), value, record=record)

    def demote(self, tunables: TunableSet[Any, Any], key: object, ranking: Ranking) -> bool:
        """Make ``ranking`` (the old one less the candidates that failed) the answer, in memory and on disk.

        The row is rewritten only when it is this set's (same checksum); whether it was.
        """
        with self._lock:  # a plan order demoted while autotuning is off is still no tuned ranking
            self._remember_locked(tunables, key, ranking, tuned=key not in self._plan_orders.get(id(tunables), ()))
        settings = _settings.current()
        # Not even opened when autotune is off, which writes nothing: opening it creates the file.
        cache = persistent_cache(settings) if settings.autotune else None
        if cache is None:
            return False
        key_json = key_to_json(key)
        got = cache.get(self.device_id, self.name, key_json)
        if not (isinstance(got, tuple) and got[0] == tunables.checksum()):
            return False
        names = [tunables.tunables[i].name for i in ranking]
        value = got[1].model_copy(update={"winner": names[0], "ranking": names})
        return cache.put(self.device_id, self.name, key_json, tunables.checksum(), value)

    # -- in the fleet's store ----------------------------------------------------------------------

    def fleet_ranking(self, job: TuneJob, *, after_wait: bool = False) -> Ranking | None:
        """The usable ranking the fleet's store has for the job's key (then kept in this host's cache too), or None.

        A miss tells observers nothing: the look into this host's cache that follows does.
        """
        assert job.fleet is not None
        got = job.fleet.get(self.device_id, self.name, job.key_json)
        if not isinstance(got, tuple):
            return None
        ranking = self._adopt(job, *got)
        if ranking is None:
            return None
        if after_wait:
            _log.info("%s: another process tuned %s while this one waited; using its winner", self.name, job.key)
        else:
            notify(CacheLookup(self.name, self.device_id, key_to_dict(job.key), "hit"))
        return ranking

    def publish(self, job: TuneJob, ranking: Ranking) -> Ranking | None:
        """Offer this host's winner of the job's key to the fleet's store; the ranking every process uses.

        That is this one, unless another process stored a winner of the same set first (its tune
        lock timed out, or the database was away meanwhile): then that one, here too. None when the
        store refused it: the fleet was cleared of the key after this host's copy was tuned.
        """
        assert job.fleet is not None
        tunables = job.tunables
        names = [tunables.tunables[i].name for i in ranking]
        value = self._local_value(job, names)
        got = job.fleet.put_if_absent(self.device_id, self.name, job.key_json, tunables.checksum(), value)
        if got is None:
            return None
        if not isinstance(got, tuple) or got[1].ranking == names:
            return ranking
        adopted = self._adopt(job, *got)
        if adopted is None:
            return ranking
        _log.info(
            "%s: another process stored %s as the winner of %s first; using it", self.name, got[1].winner, job.key
        )
        return adopted

    def forget_copy(self, job: TuneJob) -> None:
        """Remove this host's copy of the job's key, which the fleet was cleared of after it was tuned."""
        if job.cache is not None:
            _log.info(
                "%s: the fleet's store was cleared of %s after this host's winner was tuned; tuning it again",
                self.name,
                job.key,
            )
            job.cache.delete(self.device_id, self.name, job.key_json)

    def _adopt(self, job: TuneJob, checksum: str, value: CacheValue) -> Ranking | None:
        """A fleet row's ranking when usable with the job's set, written to this host's cache too."""
        found: list[RecordEvent] = []
        ranking = self._check(job.tunables, job.key, checksum, value, found)
        job.events.extend(e for e in found if e not in job.events)
        if ranking is not None and job.cache is not None:
            # This host's copy: what it serves while the fleet's database is away.
            job.cache.put(self.device_id, self.name, job.key_json, checksum, value)
        return ranking

    def _local_value(self, job: TuneJob, names: list[str]) -> CacheValue:
        """The row this host's cache has for the ranking (with its measurements), or one made of the names alone."""
        got = None if job.cache is None else job.cache.get(self.device_id, self.name, job.key_json)
        if isinstance(got, tuple) and got[0] == job.tunables.checksum() and got[1].ranking == names:
            return got[1]
        return CacheValue(winner=names[0], ranking=names, origin=SetOrigin.of(job.tunables))

    def _row(self, cache: PersistentCache, key_json: str) -> Unchecked | Miss:
        """The persistent row of ``key_json``: unchecked, or a miss saying why a row was unreadable."""
        got = cache.get(self.device_id, self.name, key_json)
        return Unchecked(*got) if isinstance(got, tuple) else Miss(got)

    def check_row(self, tunables: TunableSet[Any, Any], key: object, row: Unchecked) -> Ranking | None:
        """The ranking a stored row gives ``tunables``, or None when it is stale; read only, nothing adopted.

        For a question about the winner (``LocalTuner.winner``): a stale row is not logged or reported
        here, as the tune that replaces it is.
        """
        if row.checksum != tunables.checksum():
            return None
        winner = tunables.index_of(row.value.winner)
        if winner is None:
            return None
        return (winner, *(i for i in _indices(tunables, row.value.ranking) if i != winner))

    def _check(
        self, tunables: TunableSet[Any, Any], key: object, checksum: str, value: CacheValue, events: list[RecordEvent]
    ) -> Ranking | None:
        """A stored ranking usable with ``tunables``, or None when it must be re-tuned."""
        if checksum != tunables.checksum():
            here = report_stale(self.name, self.device_id, key, value.origin, tunables)
            if here is not None and value.origin is not None:
                events.append(SharedTunerName(stored=value.origin, current=here))
            return None
        winner = tunables.index_of(value.winner)
        if winner is None:
            _log.info("%s: stored winner %r is no longer a candidate; re-tuning", self.name, value.winner)
            return None
        return (winner, *(i for i in _indices(tunables, value.ranking) if i != winner))


class _WinnersBySet(Mapping[TunableSet[Any, Any], dict[object, Callable[..., Any]]]):
    """A cache's in-memory winners seen by set, over its id-keyed tables."""

    def __init__(
        self,
        fns: dict[int, dict[object, Callable[..., Any]]],
        sets: dict[int, weakref.ref[TunableSet[Any, Any]]],
    ) -> None:
        self._fns = fns
        self._sets = sets

    def __getitem__(self, tunables: TunableSet[Any, Any]) -> dict[object, Callable[..., Any]]:
        return self._fns[id(tunables)]

    def __iter__(self) -> Iterator[TunableSet[Any, Any]]:
        for ident in self._fns.copy():  # a collected set may drop out meanwhile
            tunables = self._sets.get(ident, _dead)()
            if tunables is not None:
                yield tunables

    def __len__(self) -> int:
        return len(self._fns)


def _dead() -> None:
    """Stands for the weak reference of a set already forgotten."""
    return None


def _autotune_back_on(settings: Settings) -> None:
    """After ``configure``: when autotuning is on, every key answered by a plan order is tuned at its next call."""
    if settings.autotune:
        with _plan_order_lock:
            owners = list(_plan_order_owners)
            _plan_order_owners.clear()
        for owner in owners:
            owner.forget_plan_orders()


_settings.on_configure(_autotune_back_on)


def _cache_value(
    tunables: TunableSet[Any, Any], ranking: Ranking, outcomes: Mapping[int, Outcome], decision: TuneDecision | None
) -> CacheValue:
    """The row of a tuned ranking: winner and ranking by name, every candidate's outcome, where the set was
    defined, and the figures that decided it."""
    results = []
    for index, outcome in outcomes.items():
        name = tunables.tunables[index].name
        match outcome:
            case Measured(durations):
                results.append(
                    CandidateResult(
                        name=name, status="measured", median_ns=durations.median_ns, samples=len(durations.samples_ns)
                    )
                )
            case Failed(reason, _):
                results.append(CandidateResult(name=name, status="failed", error=reason[:10_000]))
            case Skipped(reason):
                results.append(CandidateResult(name=name, status="skipped", error=reason[:10_000]))
    names = [tunables.tunables[i].name for i in ranking]
    return CacheValue(winner=names[0], ranking=names, results=results, origin=SetOrigin.of(tunables), decision=decision)


def _indices(tunables: TunableSet[Any, Any], names: Iterable[str]) -> Ranking:
    """The indices in ``tunables`` of the named candidates, in order; names it lacks are left out."""
    return tuple(i for i in map(tunables.index_of, names) if i is not None)


def _forked() -> None:
    global _plan_order_lock  # held by another thread at fork, it would stay held in the child
    _plan_order_lock = threading.Lock()
    for cache in list(_every_cache):
        cache._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
