"""The device-scoped Tuner: in-memory winners, the persistent cache, and the tuning itself."""

from __future__ import annotations

import copy
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tunekit._base import settings as _settings
from tunekit._base.errors import (
    ClientClosed,
    InputTypeError,
    NoValidKernelFound,
    TunekitError,
    TuneRecursionError,
    describe_error,
)
from tunekit._base.self_call import runs_within, tuned_by_parent, tuning
from tunekit._base.settings import Settings
from tunekit._candidates.plan import plan_batches, plan_order, skip_reason
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import is_autotune_key, key_to_dict, key_to_json
from tunekit._measure.bounds import time_limit_ns
from tunekit._measure.check import Gate, ReferenceFailed
from tunekit._measure.client import Client, require_client
from tunekit._measure.isolation import check_each, open_runner, refuse_unforkable
from tunekit._measure.prepare import prepare_batch
from tunekit._measure.runner import CandidateRunner
from tunekit._measure.schedule import BatchResult, measure_batch
from tunekit._observe.events import CacheLookup
from tunekit._observe.observers import TuneObservation, decision, notify, observe_tune
from tunekit._observe.sinks import RecordSink, emit_to_all
from tunekit._store.cache import PersistentCache, default_cache_dir
from tunekit._store.tune_failure import forget_failure, record_failure, repeat_failure
from tunekit._store.tune_lock import tune_lock
from tunekit._tune.names import claim_name
from tunekit._tune.search_tune import search_note, search_tune
from tunekit._tune.stale import report_stale
from tunekit._values.cache_row import CacheValue, CandidateResult
from tunekit._values.cache_state import CacheState, Hit, Miss, Pending, Unchecked
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped, outcome_reason
from tunekit._values.records import (
    AutotuneRecord,
    CacheRecovered,
    CandidateRecord,
    CheckResult,
    Demoted,
    FallbackBatch,
    Prepared,
    RecordEvent,
    SharedTunerName,
)
from tunekit._values.set_origin import SetOrigin

__all__ = ["Tuner", "persistent_cache"]

_log = logging.getLogger("tunekit.tuner")

_caches_lock = threading.Lock()
_caches: dict[Path, PersistentCache] = {}

_plan_order_lock = threading.Lock()
_plan_order_owners: weakref.WeakSet[Tuner] = weakref.WeakSet()
"""Tuners holding plan orders taken while autotuning was off, to drop once it is back on."""


def persistent_cache(settings: Settings | None = None) -> PersistentCache | None:
    """The persistent cache the settings point at (shared per directory), or None when disabled."""
    settings = settings or _settings.current()
    if not settings.cache:
        return None
    directory = _cache_dir(settings)
    with _caches_lock:
        cache = _caches.get(directory)
        if cache is None:
            cache = _caches[directory] = PersistentCache(directory)
    return cache


def _cache_dir(settings: Settings) -> Path:
    return (settings.cache_dir or default_cache_dir()).expanduser().resolve()


def _existing_cache(settings: Settings) -> PersistentCache | None:
    """The persistent cache when its file exists, else None: a look creates nothing.

    Opening the cache creates its file, so asking for a key's state (with autotune off, or
    before anything was tuned) left an empty cache where nothing was ever stored.
    """
    if not settings.cache:
        return None
    try:
        missing = not (_cache_dir(settings) / PersistentCache.FILENAME).exists()
    except OSError:  # a directory this process may not look into: opening the cache says why, once
        missing = False
    return None if missing else persistent_cache(settings)


class Tuner:
    """Tunes and remembers winners for one tuner name on one device.

    Concurrent calls with the same new key tune it once: the first caller tunes, the others
    wait on its future. No lock is held while a candidate runs. A candidate that executes its
    own operation for the key being tuned raises ``TuneRecursionError`` and fails.
    """

    def __init__(self, name: str, device_id: str, *, sinks: Sequence[RecordSink] = ()) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Tuner needs a non-empty str name, got {name!r}")
        # Checked here, at the first execute on a device, because a device id that is not a
        # non-empty str used to fail only deep in the tune lock (an int) or be stored as a
        # cache row that `tunekit cache verify` and `export` then refused (an empty str).
        if not isinstance(device_id, str) or not device_id:
            error = TypeError if not isinstance(device_id, str) else ValueError
            raise error(
                f"tuner {name!r}: the device id must be a non-empty str, got {device_id!r}; "
                "pass client.device_id, e.g. TUNER.execute(client.device_id, client, tunables, inputs)"
            )
        self.name = name
        self.device_id = device_id
        self._sinks = tuple(sinks)
        self._lock = threading.Lock()
        # Read without the lock on the hot path: dict reads are atomic and entries are
        # only ever replaced whole. Keyed by id() of a live set, and dropped when the set is
        # collected: keyed by the set itself they kept every set alive, so a program building
        # its set per call (instead of once, with LocalTuner.init) grew by a set per call.
        self.by_id: dict[int, dict[object, Callable[..., Any]]] = {}
        self._rankings: dict[int, dict[object, tuple[int, ...]]] = {}
        self._sets: dict[int, weakref.ref[TunableSet[Any, Any]]] = {}
        # By (checksum, key), not by set: two equal sets built apart (one per thread, say) that
        # both miss a key tune it once, and the other waits. By set they tuned it at once, two
        # searches clashing on the key's trial log when the persistent cache (whose tune lock
        # serialised them) was off.
        self._pending: dict[tuple[str, object], Future[tuple[int, ...]]] = {}
        # Every ranking known here by (checksum, key), as names: an equal set built elsewhere (one
        # per client of this device, one built per call, TUNER.init's beside a seeded one) finds it
        # without reading the persistent cache, or tuning again when the cache is off. Names, not
        # sets: it keeps no set alive.
        self._by_checksum: dict[tuple[str, object], tuple[str, ...]] = {}
        # The keys of each set (by id) whose ranking is a plan order taken while autotuning was
        # off. They are dropped when it is switched back on (settings.on_configure), not checked
        # at each call: the hot path answered from them, and the key was never tuned.
        self._plan_orders: dict[int, set[object]] = {}

    # -- cache state -----------------------------------------------------------------

    def state(self, tunables: TunableSet[Any, Any], key: object) -> CacheState:
        """Where ``key`` stands: in memory, being tuned, stored on disk unchecked, or missing.

        In memory also when an equal set (same checksum) has it: ``resolve`` takes it from there.
        """
        with self._lock:
            ranking = self._rankings.get(id(tunables), {}).get(key)
            if ranking is not None:
                return Hit(ranking)
            known = self._by_checksum.get((tunables.checksum(), key))
            if known is not None:
                return Hit(_indices(tunables, known))
            future = self._pending.get((tunables.checksum(), key))
            if future is not None:
                return Pending(future)
        cache = _existing_cache(_settings.current())
        return Miss() if cache is None else self._stored(cache, key_to_json(key))

    def _stored(self, cache: PersistentCache, key_json: str) -> Unchecked | Miss:
        """The persistent row of ``key_json``: unchecked, or a miss saying why a row was unreadable."""
        got = cache.get(self.device_id, self.name, key_json)
        return Unchecked(*got) if isinstance(got, tuple) else Miss(got)

    @property
    def winners(self) -> Mapping[TunableSet[Any, Any], dict[object, Callable[..., Any]]]:
        """The in-memory winner of each key, by tunable set (``tuner.winners[tunables][key]``)."""
        return _WinnersBySet(self)

    def _remember(
        self, tunables: TunableSet[Any, Any], key: object, ranking: tuple[int, ...], *, tuned: bool = True
    ) -> None:
        with self._lock:
            self._remember_locked(tunables, key, ranking, tuned=tuned)

    def _remember_locked(
        self, tunables: TunableSet[Any, Any], key: object, ranking: tuple[int, ...], *, tuned: bool = True
    ) -> None:
        """``_remember``, with the lock already held.

        ``tuned=False`` (the plan order used while autotuning is off) keeps the ranking to this
        set, and only until autotuning is back on: offered to an equal set, or kept for this one,
        it would answer the key from then on, and the key would never be tuned. When autotuning
        is already back on, it is not kept at all.
        """
        ident = id(tunables)
        if not tuned:
            # Read under the lock _autotune_back_on takes: either it sees this tuner, or this sees autotuning on.
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
        self.by_id.setdefault(ident, {})[key] = tunables.tunables[ranking[0]].fn

    def _forget_plan_orders(self) -> None:
        """Autotuning is back on: drop the plan orders taken while it was off, so their keys are tuned."""
        with self._lock:
            # Detached first: a set collected meanwhile pops its entry from the table (_forget_set,
            # without the lock, maybe on this very thread), which would break a loop over it.
            plan_orders, self._plan_orders = self._plan_orders, {}
            for ident, keys in plan_orders.items():
                for key in keys:
                    # A pop, not a new dict: atomic for the lock-free readers on the hot path.
                    self.by_id.get(ident, {}).pop(key, None)
                    self._rankings.get(ident, {}).pop(key, None)

    def _track(self, tunables: TunableSet[Any, Any]) -> None:
        """Forget ``tunables``' winners when it is collected (before its id can be reused); under the lock."""
        ident = id(tunables)
        if ident not in self._sets:
            self._sets[ident] = weakref.ref(tunables, functools.partial(_forget_set, weakref.ref(self), ident))

    def seed(self, tunables: TunableSet[Any, Any], key: object, ranking_names: Sequence[str]) -> None:
        """Install a known ranking (from a committed record) so ``key`` is never tuned here."""
        self._claim(tunables, key_to_json(key), _settings.current())
        ranking = _indices(tunables, ranking_names)
        if not ranking:
            raise ValueError(f"tuner {self.name!r}: none of {list(ranking_names)} is a member of {tunables!r}")
        self._remember(tunables, key, ranking)

    def winners_names(self) -> list[str]:
        """Names of the in-memory winners, over every set and key (for tools and benches)."""
        with self._lock:
            return [
                tunables.tunables[ranking[0]].name
                for ident, by_key in self._rankings.copy().items()  # a collected set may drop out meanwhile
                if (tunables := self._sets.get(ident, _dead)()) is not None
                for ranking in by_key.values()
            ]

    def clear(self) -> None:
        """Forget every in-memory winner (the persistent cache is untouched)."""
        with self._lock:
            self.by_id.clear()
            self._rankings.clear()
            self._sets.clear()
            self._by_checksum.clear()
            self._plan_orders.clear()

    def _claim(self, tunables: TunableSet[Any, Any], key_json: str, settings: Settings) -> None:
        """Refuse a second, different set for this name and key, whose row would overwrite the first's.

        Checked whether or not the cache is enabled, so that a program does not start failing
        when its cache is switched on.
        """
        claim_name(_cache_dir(settings), self.device_id, self.name, key_json, tunables)

    # -- the slow path ---------------------------------------------------------------

    def resolve(
        self, client: Client, tunables: TunableSet[Any, Any], key: object, inputs: tuple[Any, ...]
    ) -> tuple[int, ...]:
        """The ranking for ``key``: from memory, from disk, from another thread's tune, or tuned now.

        Raises TypeError before anything else when ``client`` is not a ``tk.Client``, and
        ValueError when it is another device's than this tuner's.
        """
        require_client(client, f"tuner {self.name!r}: resolve()")
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
        checksum = tunables.checksum()
        tune_id = (self.device_id, self.name, key_json, checksum)
        with self._lock:
            ranking = self._rankings.get(id(tunables), {}).get(key)
            if ranking is not None:
                return ranking
            known = self._by_checksum.get((checksum, key))
            if known is not None:  # an equal set's ranking: same names in the same order, so the same indices
                ranking = _indices(tunables, known)
                self._remember_locked(tunables, key, ranking)
                return ranking
            future = self._pending.get((checksum, key))
            owner = future is None
            if future is None:
                if tuned_by_parent(tune_id):  # a candidate run by a spawned worker of this very tune
                    raise TuneRecursionError(self.name, key, where="by the process that started this worker")
                future = self._pending[(checksum, key)] = Future()
        if not owner:
            if runs_within(future):  # a candidate or prepare hook of this very tune
                raise TuneRecursionError(self.name, key)
            return future.result()
        try:
            with tuning(future, tune_id):
                ranking = self._decide(client, tunables, key, inputs, settings)
        except BaseException as exc:
            with self._lock:
                del self._pending[(checksum, key)]
            future.set_exception(exc)
            raise
        self._remember(tunables, key, ranking, tuned=settings.autotune)  # _decide measured nothing when off
        with self._lock:
            del self._pending[(checksum, key)]
        future.set_result(ranking)
        return ranking

    def _decide(
        self, client: Client, tunables: TunableSet[Any, Any], key: object, inputs: tuple[Any, ...], settings: Settings
    ) -> tuple[int, ...]:
        events: list[RecordEvent] = []
        if not settings.autotune:
            return self._untuned(tunables, key)
        cache = persistent_cache(settings)
        key_json = key_to_json(key)
        if cache is None:
            return self._tune_and_store(client, tunables, key, key_json, inputs, settings, events, None)
        ranking = self._cached(cache, tunables, key, key_json, events)
        if ranking is not None:
            return ranking
        with tune_lock(cache, self.device_id, self.name, key_json, settings.tune_lock_timeout_s) as held:
            if held:  # another process may have tuned this key while this one waited for the lock
                ranking = self._cached(cache, tunables, key, key_json, events, after_wait=True)
                if ranking is not None:
                    return ranking
                # ... or found that it cannot be tuned: that tune would only be repeated here.
                failed = repeat_failure(cache, self.device_id, self.name, key, key_json, tunables, settings)
                if failed is not None:
                    raise failed
            return self._tune_and_store(client, tunables, key, key_json, inputs, settings, events, cache)

    def _cached(
        self,
        cache: PersistentCache,
        tunables: TunableSet[Any, Any],
        key: object,
        key_json: str,
        events: list[RecordEvent],
        *,
        after_wait: bool = False,
    ) -> tuple[int, ...] | None:
        """The usable stored ranking of ``key``, or None (a miss, a stale or an unreadable row).

        The second look, after waiting for another process's tune, tells observers nothing more:
        they saw this resolve's lookup the first time.
        """
        match self._stored(cache, key_json):
            case Unchecked(checksum, value):
                found: list[RecordEvent] = []
                ranking = self._check(tunables, key, checksum, value, found)
                # After the wait, another process's set may have written the row it re-tunes over.
                events.extend(e for e in found if e not in events)
                if after_wait:
                    if ranking is not None:
                        _log.info(
                            "%s: another process tuned %s while this one waited; using its winner", self.name, key
                        )
                    return ranking
                notify(CacheLookup(self.name, self.device_id, key_to_dict(key), "hit" if ranking else "stale"))
                return ranking
            case Miss(reason):
                if not after_wait:
                    if reason is not None:
                        events.append(CacheRecovered(detail=reason))
                    notify(CacheLookup(self.name, self.device_id, key_to_dict(key), "miss"))
                return None

    def _tune_and_store(
        self,
        client: Client,
        tunables: TunableSet[Any, Any],
        key: object,
        key_json: str,
        inputs: tuple[Any, ...],
        settings: Settings,
        events: list[RecordEvent],
        cache: PersistentCache | None,
    ) -> tuple[int, ...]:
        started = time.perf_counter()
        observation = observe_tune(self.name, self.device_id, key_to_dict(key), tunables.names, settings)
        try:
            outcomes, batch_of, ranking = self._tune(client, tunables, key, inputs, settings, events, observation)
        except BaseException as exc:
            observation.failed(exc)
            raise
        winner = tunables.tunables[ranking[0]].name if ranking else None
        stored = False
        if winner is not None and cache is not None:
            stored = cache.put(
                self.device_id, self.name, key_json, tunables.checksum(), _cache_value(tunables, ranking, outcomes)
            )
            if stored:
                forget_failure(cache, self.device_id, self.name, key_json)
        self._emit(
            AutotuneRecord(
                tuner=self.name,
                device_id=self.device_id,
                key=key_to_dict(key),
                checksum=tunables.checksum(),
                decision="tuned",
                candidates=[
                    CandidateRecord.of(tunables.tunables[i].name, batch_of.get(i, 0), o) for i, o in outcomes.items()
                ],
                winner=winner,
                stored=stored,
                wall_time_s=time.perf_counter() - started,
                events=events,
            ),
            observation,
        )
        if not ranking:
            failures = [(tunables.tunables[i].name, outcome_reason(o)) for i, o in outcomes.items()]
            if cache is not None and not _callers_input_refused(tunables, outcomes):
                # still under the tune lock: a waiter reads it before it could tune
                record_failure(cache, self.device_id, self.name, key_json, tunables, failures, settings)
            note = search_note(tuner=self.name, device_id=self.device_id, tunables=tunables, key=key, events=events)
            raise NoValidKernelFound(self.name, key, failures, recorded=note)
        return ranking

    def _check(
        self, tunables: TunableSet[Any, Any], key: object, checksum: str, value: CacheValue, events: list[RecordEvent]
    ) -> tuple[int, ...] | None:
        """A stored ranking usable with ``tunables``, or None when it must be re-tuned."""
        if checksum != tunables.checksum():
            here = report_stale(self.name, self.device_id, key, value.origin, tunables)
            if here is not None and value.origin is not None:
                events.append(SharedTunerName(stored=value.origin, current=here))
            return None
        if tunables.index_of(value.winner) is None:
            _log.info("%s: stored winner %r is no longer a candidate; re-tuning", self.name, value.winner)
            return None
        ranking = _indices(tunables, value.ranking)
        winner = tunables.index_of(value.winner)
        assert winner is not None
        return (winner, *(i for i in ranking if i != winner))

    def _untuned(self, tunables: TunableSet[Any, Any], key: object) -> tuple[int, ...]:
        """Autotuning disabled: plan order, nothing measured, nothing written."""
        order = tuple(plan_order(key, tunables.tunables))
        if not order:
            raise NoValidKernelFound(self.name, key, [(t.name, skip_reason(key, t)) for t in tunables.tunables])
        self._emit(
            AutotuneRecord(
                tuner=self.name,
                device_id=self.device_id,
                key=key_to_dict(key),
                checksum=tunables.checksum(),
                decision="disabled",
                winner=tunables.tunables[order[0]].name,
                stored=False,
                wall_time_s=0.0,
            )
        )
        return order

    def _tune(
        self,
        client: Client,
        tunables: TunableSet[Any, Any],
        key: object,
        inputs: tuple[Any, ...],
        settings: Settings,
        events: list[RecordEvent],
        observation: TuneObservation,
    ) -> tuple[dict[int, Outcome], dict[int, int], tuple[int, ...]]:
        """Measure the plan's batches until one yields a measured candidate; the outcomes and ranking."""
        where = f"tuner {self.name!r}"
        refuse_unforkable(client, tunables.isolation, settings, where=where)  # before inputs, peaks or compiles
        bench_inputs = self._benchmark_inputs(tunables, key, inputs)
        gate = Gate(client, bench_inputs, tunables.reference) if tunables.reference is not None else None
        batches = plan_batches(key, tunables.tunables)
        limit_ns = None
        if tunables.short_circuit:
            limit_ns = time_limit_ns(
                tunables.bounds, key, bench_inputs, client, settings.short_circuit_threshold, self.name
            )
        outcomes: dict[int, Outcome] = {}
        batch_of: dict[int, int] = {}
        ranking: tuple[int, ...] = ()
        # Batches hold an index at most once: when they hold as many as the set, every index is planned, and a range
        # says so without a set of them all (270 MiB at a searched space set's first execute of 5*10^6).
        count = len(tunables.tunables)
        planned: Container[int] = range(count)
        if sum(map(len, batches)) < count:
            planned = {i for batch in batches for i in batch}
            for index in range(count):
                if index not in planned:
                    outcomes[index] = Skipped(skip_reason(key, tunables.tunables[index]))
        # Compiling and checking run in this process, before the runner times anything.
        with open_runner(client, tunables, bench_inputs, settings, key=key, where=where, gate=gate) as opened:
            runner = observation.runner(opened, tunables.names)

            def run_batch(
                batch: list[int], number: int, deadline: float | None = None
            ) -> tuple[dict[int, Outcome], BatchResult]:
                """Compile, check and time one batch; every outcome, and the schedule's result."""
                results: dict[int, Outcome] = dict(
                    self._prepare_and_check(
                        tunables, batch, number, bench_inputs, gate, settings, events, opened, observation
                    )
                )
                measured = measure_batch(
                    runner,
                    [i for i in batch if i not in results],
                    settings,
                    client=client,
                    limit_ns=limit_ns,
                    names=tunables.names,
                    lone_samples=settings.min_samples if tunables.search is not None else 1,
                    deadline=deadline,
                )
                results.update(measured)
                events.extend(measured.events)
                observation.outcomes(results, tunables.names)
                return results, measured

            if tunables.search is not None:
                return search_tune(
                    tuner=self.name,
                    device_id=self.device_id,
                    tunables=tunables,
                    key=key,
                    spec=tunables.search,
                    planned=planned,
                    run_batch=run_batch,
                    events=events,
                )
            for number, batch in enumerate(batches):
                if number > 0:
                    events.append(FallbackBatch(batch=number))
                observation.batch(number, [tunables.tunables[i].name for i in batch])
                results, measured = run_batch(batch, number)
                ranking = measured.ranking
                for index in batch:
                    batch_of[index] = number
                    outcomes[index] = results.get(index, Skipped("not measured"))
                if ranking:
                    break
        return outcomes, batch_of, ranking

    def _prepare_and_check(
        self,
        tunables: TunableSet[Any, Any],
        batch: list[int],
        number: int,
        inputs: tuple[Any, ...],
        gate: Gate | None,
        settings: Settings,
        events: list[RecordEvent],
        runner: CandidateRunner,
        observation: TuneObservation,
    ) -> dict[int, Failed]:
        """Compile every candidate of the batch (concurrently), then check each once where the runner runs it."""
        phase = prepare_batch(tunables, batch, inputs, settings.compile_workers, on_compiled=observation.compiled)
        failures = phase.failures
        if phase.hooks:
            events.append(
                Prepared(
                    batch=number,
                    candidates=phase.hooks,
                    failed=len(failures),
                    workers=phase.threads,
                    wall_time_s=phase.wall_time_s,
                    compiled_in_process=phase.slower_path,
                )
            )
        if gate is None:
            return failures
        try:
            # Each check's event is kept as its check ends: a reference that fails later stops the tune with them.
            for index, check in check_each(runner, gate, [i for i in batch if i not in failures], tunables):
                if isinstance(check, Failed):
                    failures[index] = check
                    continue
                name = tunables.tunables[index].name
                events.append(
                    CheckResult(
                        name=name,
                        passed=check.passed,
                        against=gate.against,
                        detail=check.detail,
                        max_abs_error=check.max_abs_error,
                        max_rel_error=check.max_rel_error,
                    )
                )
                if not check.passed:
                    failures[index] = Failed(check.detail, "check")
                else:
                    observation.checked(name)
        except ReferenceFailed as exc:
            raise ReferenceFailed(f"tuner {self.name!r}: {exc}") from exc.__cause__
        return failures

    def _benchmark_inputs(
        self, tunables: TunableSet[Any, Any], key: object, inputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        """Inputs candidates are timed on: generated, or deep copies of the caller's."""
        generator = tunables.inputs
        if generator is None:
            try:
                return copy.deepcopy(inputs)
            except Exception as exc:
                raise TunekitError(
                    f"tuner {self.name!r}: cannot deep-copy the inputs for benchmarking ({describe_error(exc)}); "
                    "give the TunableSet an inputs= generator"
                ) from exc
        try:
            generated = generator(key, *inputs)
        except ClientClosed:  # allocating on a closed client is not the generator's mistake
            raise
        except Exception as exc:
            raise TunekitError(
                f"tuner {self.name!r}: the input generator raised {describe_error(exc)} ({tunables!r})"
            ) from exc
        if not isinstance(generated, tuple):
            raise TunekitError(
                f"tuner {self.name!r}: the input generator returned {type(generated).__name__}; "
                "it must return a tuple of the arguments every candidate is called with"
            )
        return generated

    # -- a cached winner that fails at launch -------------------------------------------

    def recover(self, tunables: TunableSet[Any, Any], key: object, inputs: tuple[Any, ...], error: Exception) -> Any:
        """Run the next-ranked candidates after the winner raised on real inputs.

        The failures are demoted only when a later candidate succeeds: when every candidate
        fails, the inputs are at fault, the ranking is kept and the first error is raised. An
        ``InputTypeError`` says so at once: it is raised as it is, no other candidate is run.
        """
        if isinstance(error, ClientClosed | InputTypeError):  # no candidate is at fault: nothing to demote
            raise error
        with self._lock:
            ranking = self._rankings.get(id(tunables), {}).get(key, ())
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
        new_ranking = tuple(i for i in ranking if i not in failed)
        with self._lock:  # a plan order demoted while autotuning is off is still no tuned ranking
            self._remember_locked(tunables, key, new_ranking, tuned=key not in self._plan_orders.get(id(tunables), ()))
        settings = _settings.current()
        # Not even opened when autotune is off, which writes nothing: opening it creates the file.
        cache = persistent_cache(settings) if settings.autotune else None
        stored = False
        if cache is not None:
            got = cache.get(self.device_id, self.name, key_to_json(key))
            if isinstance(got, tuple) and got[0] == tunables.checksum():
                _, value = got
                names = [tunables.tunables[i].name for i in new_ranking]
                stored = cache.put(
                    self.device_id,
                    self.name,
                    key_to_json(key),
                    tunables.checksum(),
                    value.model_copy(update={"winner": names[0], "ranking": names}),
                )
        for index, exc in failures:
            _log.warning(
                "%s: cached winner %s failed on real inputs (%s); demoted in favour of %s",
                self.name,
                tunables.tunables[index].name,
                describe_error(exc),
                tunables.tunables[replacement].name,
            )
        self._emit(
            AutotuneRecord(
                tuner=self.name,
                device_id=self.device_id,
                key=key_to_dict(key),
                checksum=tunables.checksum(),
                decision="demoted",
                winner=tunables.tunables[replacement].name,
                stored=stored,
                wall_time_s=0.0,
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

    def _emit(self, record: AutotuneRecord, observation: TuneObservation | None = None) -> None:
        if observation is None:
            decision(record)
        else:
            observation.finished(record)
        emit_to_all(record, self._sinks)


class _WinnersBySet(Mapping[TunableSet[Any, Any], dict[object, Callable[..., Any]]]):
    """A tuner's in-memory winners seen by set, over its id-keyed table."""

    def __init__(self, tuner: Tuner) -> None:
        self._tuner = tuner

    def __getitem__(self, tunables: TunableSet[Any, Any]) -> dict[object, Callable[..., Any]]:
        return self._tuner.by_id[id(tunables)]

    def __iter__(self) -> Iterator[TunableSet[Any, Any]]:
        for ident in self._tuner.by_id.copy():  # a collected set may drop out meanwhile
            tunables = self._tuner._sets.get(ident, _dead)()
            if tunables is not None:
                yield tunables

    def __len__(self) -> int:
        return len(self._tuner.by_id)


def _dead() -> None:
    """Stands for the weak reference of a set already forgotten."""
    return None


def _forget_set(tuner: weakref.ref[Tuner], ident: int, _: object) -> None:
    """A set was collected: drop its winners. Without the lock, as single atomic pops: the
    collection may run on a thread that holds it."""
    owner = tuner()
    if owner is not None:
        owner.by_id.pop(ident, None)
        owner._rankings.pop(ident, None)
        owner._sets.pop(ident, None)
        owner._plan_orders.pop(ident, None)


def _autotune_back_on(settings: Settings) -> None:
    """After ``configure``: when autotuning is on, every key answered by a plan order is tuned at its next call."""
    if settings.autotune:
        with _plan_order_lock:
            owners = list(_plan_order_owners)
            _plan_order_owners.clear()
        for owner in owners:
            owner._forget_plan_orders()


_settings.on_configure(_autotune_back_on)


def _cache_value(tunables: TunableSet[Any, Any], ranking: tuple[int, ...], outcomes: dict[int, Outcome]) -> CacheValue:
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
    return CacheValue(winner=names[0], ranking=names, results=results, origin=SetOrigin.of(tunables))


def _indices(tunables: TunableSet[Any, Any], names: Iterable[str]) -> tuple[int, ...]:
    """The indices in ``tunables`` of the named candidates, in order; names it lacks are left out."""
    return tuple(i for i in map(tunables.index_of, names) if i is not None)


def _callers_input_refused(tunables: TunableSet[Any, Any], outcomes: dict[int, Outcome]) -> bool:
    """Whether every failure was a tk.InputTypeError on the caller's own inputs (a set without ``inputs=``).

    Such a failure says nothing of the key: remembered, it would answer another process's correct call
    with this call's wrong dtype for ``failed_tune_retry_s``.
    """
    failed = [o for o in outcomes.values() if isinstance(o, Failed)]
    prefix = f"{InputTypeError.__name__}:"
    return tunables.inputs is None and bool(failed) and all(o.reason.startswith(prefix) for o in failed)
