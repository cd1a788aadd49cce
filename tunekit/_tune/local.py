"""LocalTuner: what user code holds, one per tuned operation."""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tunekit._base.errors import SettingsError
from tunekit._candidates.tunable_set import TunableSet
from tunekit._measure.client import CHECKED_CLIENT_TYPES, Client, require_client
from tunekit._observe.record_sink import RecordSink, as_sinks
from tunekit._tune.built_sets import BuiltSets, captured_key
from tunekit._tune.record_device import UnverifiedSeeds

if TYPE_CHECKING:
    from tunekit._tune.tuner import Tuner
    from tunekit._tune.winner import Winner
    from tunekit._values.records import AutotuneRecord

__all__ = ["LocalTuner", "describe_inputs"]

K = TypeVar("K")
Out = TypeVar("Out")

_FunctionType = types.FunctionType


class LocalTuner(Generic[K, Out]):
    """Builds an operation's tunable set once and dispatches each call to the tuned winner.

    ``K`` is the key class and ``Out`` the output type every tunable must return, so a
    candidate returning the wrong type is a type error in the user's code. ``name`` names the
    operation in the cache, records and reports: on one device, a process refuses a second,
    different tunable set asking for a key that a live set already runs under the name (the two
    would overwrite each other's cached winner for it).
    """

    def __init__(self, name: str, *, sinks: Sequence[RecordSink | Callable[[AutotuneRecord], object]] = ()) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"LocalTuner needs a non-empty name, got {name!r}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            # It names cache rows, records and lock files, all UTF-8: refused here rather than at the first store.
            raise ValueError(f"LocalTuner name {name!r} holds a lone surrogate; use a name with a UTF-8 form") from None
        self.name = name
        self._sinks = as_sinks(sinks, f"LocalTuner {name!r}: sinks=")
        self._lock = threading.Lock()
        self._sets: BuiltSets[K, Out] = BuiltSets(name)
        self._plain_sets = self._sets.plain
        self._captured_sets = self._sets.captured
        self._tuners: dict[str, Tuner] = {}
        # Each device's winners by set id and key id (its tuner's TuneCache.hot): execute's hit is two dict reads.
        self._hot: dict[str, Mapping[int, Mapping[object, Callable[..., Any]]]] = {}
        self.seeded_unverified = UnverifiedSeeds(name)
        """The devices whose winners ``Record.seed`` installed from unverified records: a call on another one
        tunes, and says why once."""

    def init(self, factory: Callable[[], TunableSet[K, Out]]) -> TunableSet[K, Out]:
        """Build the tunable set on the first call; later calls return it without building it again.

        Sets are remembered by the factory's code together with the values it captured, so a
        fresh lambda written at the same place in the source finds the set built the first time,
        while one capturing another client (another device, another OpenCL context) or another
        dtype builds that client's own set. Captures are compared by value when they compare by
        value (an int, a str, a dtype), else by identity (a client, an array): a factory that
        captures the call's inputs builds a set at every call. A global the factory reads is no
        capture: bind a module-level loop variable as a default (``lambda client=client: ...``).
        """
        if type(factory) is _FunctionType:  # the hot path: a lambda capturing nothing, known by its code
            # Gets, not a try: a KeyError raised at every call would cost a capturing lambda ~100 ns.
            entry = self._plain_sets.get(id(factory.__code__))
            if entry is not None:
                return entry.tunables
            if self._captured_sets:  # a lambda capturing values (the client): by the ids of its code and captures
                try:
                    entry = self._captured_sets.get(captured_key(factory))
                except ValueError:  # a variable captured before it was assigned: the slow path says so
                    entry = None
                if entry is not None:
                    return entry.tunables
        if not callable(factory):  # the set itself, passed instead of a function that builds it
            raise TypeError(
                f"tuner {self.name!r}: init() takes a function that builds the set, e.g. "
                f"TUNER.init(lambda: tk.TunableSet(key=...).with_tunable(...)), got {type(factory).__name__}"
            )
        tunables = self._sets.get(factory)
        if tunables is not None:
            return tunables
        return self._sets.add(factory, lambda: self._build(factory))

    def _build(self, factory: Callable[[], TunableSet[K, Out]]) -> TunableSet[K, Out]:
        built = factory()
        if not isinstance(built, TunableSet):
            raise TypeError(f"tuner {self.name!r}: init() factory returned {type(built).__name__}, not a tk.TunableSet")
        built.validate(self.name)
        return built

    def tuner(self, device_id: str) -> Tuner:
        """The device-scoped tuner of ``device_id``, created on first use."""
        tuner = self._tuners.get(device_id)
        if tuner is None:
            # The miss path (measurement, the persistent store, records, observers, pydantic) loads at a
            # process's first miss, not with LocalTuner: importing tunekit, or a module that defines its
            # tuners at import, does not pay the ~300 ms it takes (benches/import_time.py). A hit reads
            # self._hot alone and never comes here.
            from tunekit._observe.hit_count import counting_hot  # noqa: PLC0415 - see above
            from tunekit._tune.tuner import Tuner  # noqa: PLC0415 - see above

            with self._lock:
                tuner = self._tuners.get(device_id)
                if tuner is None:
                    tuner = self._tuners[device_id] = Tuner(self.name, device_id, sinks=self._sinks)
                    # The winners themselves unless count_hits is on: then a view that counts each one read,
                    # so counting costs nothing on the hit path while it is off.
                    self._hot[device_id] = counting_hot(self.name, device_id, tuner.tune_cache.hot)
        return tuner

    def execute(self, device_id: str, client: Client, tunables: TunableSet[K, Out], inputs: tuple[Any, ...]) -> Out:
        """Run the winner for these inputs' key on the real inputs, tuning first on a miss.

        Raises TypeError at once, before any tuning or cache access, when ``client`` is not a
        ``tk.Client`` (it names the members it lacks), and ValueError before a key's first tune
        when ``device_id`` is not ``client.device_id``.
        """
        if type(client) not in CHECKED_CLIENT_TYPES:  # a set lookup on the hot path; the full check once per class
            require_client(client, f"tuner {self.name!r}: execute()")
        if type(inputs) is not tuple:
            raise TypeError(
                f"tuner {self.name!r}: execute() takes the inputs as a tuple, e.g. (x,) or (a, b); "
                f"got {type(inputs).__name__}"
            )
        try:
            key = tunables.key(*inputs)
        except SettingsError:  # settings are first read by an anchored key: not the key generator's fault
            raise
        except Exception as exc:  # the user's own exception, with where it came from
            self._require_set(tunables)
            exc.add_note(
                f"tunekit: raised by the key generator {tunables.describe_key_fn()} of tuner {self.name!r} "
                f"{tunables!r} on inputs ({describe_inputs(inputs)})"
            )
            raise
        try:  # a hit: the winner by device, set and key_id (a tuple hashed and compared in C)
            fn = self._hot[device_id][id(tunables)][key._tk_id]  # type: ignore[attr-defined]
        except (KeyError, AttributeError, TypeError):  # no winner in memory, no autotune key, no hashable device id
            return self._miss(device_id, client, tunables, key, inputs)
        try:
            return fn(*inputs)  # type: ignore[no-any-return]
        except Exception as exc:
            return self.tuner(device_id).recover(tunables, key, inputs, exc)  # type: ignore[no-any-return]

    def _miss(
        self, device_id: str, client: Client, tunables: TunableSet[K, Out], key: K, inputs: tuple[Any, ...]
    ) -> Out:
        """No winner in memory for ``key``: its ranking from disk, from another thread's tune or tuned now, run."""
        tuner = self.tuner(device_id)
        self._require_set(tunables)
        self.seeded_unverified.warn_unserved(device_id, client)
        if not tunables.tunables:
            tunables.validate(self.name)
        ranking = tuner.resolve(client, tunables, key, inputs)
        try:
            return tunables.tunables[ranking[0]].fn(*inputs)  # type: ignore[no-any-return]
        except Exception as exc:
            return tuner.recover(tunables, key, inputs, exc)  # type: ignore[no-any-return]

    def winner(
        self,
        device_id: str,
        tunables: TunableSet[K, Out],
        key: K | None = None,
        *,
        inputs: tuple[Any, ...] | None = None,
    ) -> Winner | None:
        """Which candidate won ``key`` (or the key of ``inputs``) on ``device_id``; None when none has yet.

        Nothing runs and nothing is tuned: the winner is this process's (tuned, or seeded from a
        record), else the persistent cache's row when it holds one for this very set (same
        checksum, a candidate the set still has). A key being tuned meanwhile has none yet.
        ``winner.config`` is the configuration, for a set made from a space or a template.
        """
        from tunekit._tune.winner import winner_at  # noqa: PLC0415 - the miss path's modules, as tuner() says
        from tunekit._values.cache_state import Hit, Unchecked  # noqa: PLC0415 - as above

        self._require_set(tunables, "winner(device_id, TUNER.init(build), key)")
        if (key is None) == (inputs is None):
            raise TypeError(
                f"tuner {self.name!r}: winner() takes a key or inputs=(...), one of the two, e.g. "
                f"TUNER.winner(client.device_id, tunables, inputs=(x, y)); got "
                f"{'neither' if key is None else 'both'}"
            )
        if inputs is not None:
            if type(inputs) is not tuple:
                raise TypeError(f"tuner {self.name!r}: winner(inputs=...) takes a tuple, got {type(inputs).__name__}")
            key = tunables.key(*inputs)
        tuner = self.tuner(device_id)
        state = tuner.state(tunables, key)
        if isinstance(state, Hit):
            return winner_at(tunables, state.ranking[0], stored=False)
        if isinstance(state, Unchecked):
            ranking = tuner.tune_cache.check_row(tunables, key, state)
            return None if ranking is None else winner_at(tunables, ranking[0], stored=True)
        return None

    def _require_set(
        self, tunables: object, example: str = "execute(client.device_id, client, TUNER.init(build), inputs)"
    ) -> None:
        """Refuse what is no TunableSet (a list of tunables, say): it would fail deep inside, with an AttributeError."""
        if not isinstance(tunables, TunableSet):
            call = example.split("(", 1)[0]
            raise TypeError(
                f"tuner {self.name!r}: {call}() takes the tk.TunableSet that init() returned, got "
                f"{type(tunables).__name__}; e.g. TUNER.{example}"
            ) from None  # called while handling the AttributeError it met: that one says nothing to the caller

    def clear(self, *, stored: bool = False) -> None:
        """Forget the built sets and every in-memory winner; with ``stored=True``, the stored winners too.

        Once the old sets are gone, a different set may run under this tuner's name (a set
        redefined in a running process, e.g. a notebook cell run again).

        ``stored=True`` also removes this tuner's winners, every key on every device, from the
        persistent cache the process uses (its recorded failed tunes go with them), as
        ``tunekit cache clear --tuner NAME --yes`` does: from this host's cache, and from the
        fleet's store when ``TUNEKIT_CACHE_URL`` names one, where the clear is recorded so that
        no host offers its old copy back. Each key is then tuned again at its next call, in this
        process or any other. With the cache off (``TUNEKIT_CACHE=0``) it clears memory only.
        Returns None; raises OSError, naming the store and why, when a store it would be served
        from could not be cleared (a cache this user may only read, a fleet database that does
        not answer): memory is cleared all the same.
        """
        try:
            if stored:
                # Before memory: a call in another thread meanwhile then finds no old winner on disk to read back.
                from tunekit._base import settings as _settings  # noqa: PLC0415 - the store modules load at first use
                from tunekit._store.forget import forget_winners  # noqa: PLC0415 - as tuner() says

                forget_winners(_settings.current(), self.name)
        finally:
            with self._lock:
                self._sets.clear()
                for tuner in self._tuners.values():
                    tuner.clear()
                self._tuners.clear()
                self._hot.clear()
                self.seeded_unverified.clear()


def describe_inputs(inputs: tuple[Any, ...]) -> str:
    """The inputs' types, with shape and dtype where they have them, for error messages."""
    parts = []
    for value in inputs:
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        detail = ", ".join(f"{n}={v}" for n, v in (("shape", shape), ("dtype", dtype)) if v is not None)
        parts.append(f"{type(value).__name__}({detail})" if detail else type(value).__name__)
    return ", ".join(parts)
