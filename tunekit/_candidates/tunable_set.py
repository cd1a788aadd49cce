"""TunableSet: the candidates of one operation, with the key and input generators."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, Unpack

from typing_extensions import TypeVar

from tunekit._base.code_identity import code_identity
from tunekit._base.errors import CandidateFailed, ClientClosed, describe_error
from tunekit._base.settings import IsolationMode
from tunekit._candidates.budget import SEARCH_KEYS, Budget, SearchOptions, budget_from
from tunekit._candidates.config import Config
from tunekit._candidates.isolation import (
    DeviceLocatorWorkerFactory,
    DeviceWorkerFactory,
    Isolation,
    LocatorWorkerFactory,
    WorkerFactory,
    factory_keywords,
    worker_reference,
)
from tunekit._candidates.reference import Compare, Reference, reference_of
from tunekit._candidates.roofline import Bounds
from tunekit._candidates.search_spec import (
    SearchSpec,
    check_build,
    check_enumerable,
    check_log_path,
    config_name,
    empty_space_error,
    incumbents_of,
)
from tunekit._candidates.space import Space
from tunekit._candidates.space_tunables import SpaceTunables
from tunekit._candidates.tunable import Tunable

__all__ = [
    "BoundsFn",
    "InputGenerator",
    "KeyGenerator",
    "LazyBuild",
    "TunableSet",
    "build_identity",
    "build_name",
    "declared_key_class",
    "tuned_function",
]

K = TypeVar("K", covariant=True)
Out = TypeVar("Out", covariant=True)
O2 = TypeVar("O2")
K2 = TypeVar("K2")
# The key an inputs generator takes; Any in a bare `InputGenerator` annotation.
KeyIn = TypeVar("KeyIn", contravariant=True, default=Any)


class LazyBuild(Generic[O2]):
    """A tunable function built from its configuration at first call, then reused."""

    __slots__ = ("_build", "_fn", "config")

    def __init__(self, build: Callable[[Config], Callable[..., O2]], config: Config) -> None:
        self._build = build
        self._fn: Callable[..., O2] | None = None
        self.config = config

    def __call__(self, *args: Any, **kwargs: Any) -> O2:
        return self.function()(*args, **kwargs)

    def function(self) -> Callable[..., O2]:
        """``build(config)``, called once; what it raises (or a result that is not callable) propagates."""
        fn = self._fn
        if fn is None:
            fn = self._build(self.config)
            if not callable(fn):
                raise TypeError(f"build({self.config!r}) returned {type(fn).__name__}, not a callable")
            self._fn = fn
        return fn


def tuned_function(fn: Callable[..., O2]) -> Callable[..., O2]:
    """What tuning runs for a candidate whose function is ``fn``: a ``LazyBuild`` is built first.

    A build that raises is the candidate's ``compile``-stage failure (``CandidateFailed``), as an
    OpenCL build error is: run inside the candidate's first call it would be reported as ``run``,
    and a user filtering failures on the compile stage would miss it. A cached winner launched outside
    a tune calls the ``LazyBuild`` itself, so its caller still gets the build's own exception.
    """
    if not isinstance(fn, LazyBuild):
        return fn
    try:
        return fn.function()
    except ClientClosed:  # no candidate's fault: the tune stops with it
        raise
    except Exception as exc:
        raise CandidateFailed(describe_error(exc), "compile") from exc


class KeyGenerator(Protocol[K]):
    """Builds the autotune key from the call's inputs; a plain function fits."""

    def __call__(self, *inputs: Any, **kwargs: Any) -> K: ...


class InputGenerator(Protocol[KeyIn]):
    """Builds benchmark inputs from the key and the caller's inputs; a plain function fits.

    It returns the tuple of arguments every candidate is called with while tuning, so that
    tuning never writes into the caller's buffers. Its first parameter is the set's key: a
    function taking another key class is a type error where the set is made.
    """

    # The inputs after the key are Any: a set does not know execute's argument types.
    def __call__(self, key: KeyIn, /, *inputs: Any, **kwargs: Any) -> tuple[Any, ...]: ...


_SEARCH = "search"
_ISOLATION = "tunekit:isolation"

BoundsFn = Callable[[Any, tuple[Any, ...]], Bounds]
"""(key, benchmark inputs) -> tk.Bounds; used by the roofline short circuit."""


def build_identity(build: Callable[..., object]) -> str:
    """A digest of ``build``'s code and of its module's functions it calls (not of the values it reads).

    An edited build measures other kernels than the cached winner's: without its digest in the
    checksum, it would re-use that winner, its trial logs and its records.
    """
    return hashlib.sha256(code_identity(build).encode()).hexdigest()[:32]


def build_name(build: Callable[..., object]) -> str:
    """Where ``build`` is defined, ``module.qualname``, to name it in an error beside its digest."""
    fn = getattr(build, "__func__", build)  # a bound method: its function's names
    qualname = getattr(fn, "__qualname__", None) or type(build).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}.{qualname}" if module else qualname


def _declared_return(key: Callable[..., object]) -> object:
    """The return type ``key`` declares (the class itself for ``key=Key``), or None when it declares none."""
    if isinstance(key, type):  # the key class itself (key=Key): it is what the generator returns
        return key
    try:
        hints = typing.get_type_hints(key, localns=dict(inspect.getclosurevars(key).nonlocals))
    except Exception:
        return None
    return hints.get("return")


def declared_key_class(key: Callable[..., object]) -> type | None:
    """The ``@tk.autotune_key`` class a key generator declares it returns; None for a lambda or an unannotated one."""
    declared = _declared_return(key)
    return declared if isinstance(declared, type) and getattr(declared, "__tunekit_key__", False) else None


def _check_key_annotation(key: Callable[..., object]) -> None:
    """Refuse, at definition time, a key generator whose declared return type is no autotune key."""
    if isinstance(key, type):
        if not getattr(key, "__tunekit_key__", False):
            raise TypeError(
                f"TunableSet(key={key.__name__}): {key.__name__} is not an @tk.autotune_key class; "
                "decorate it with @tk.autotune_key (not @dataclass)"
            )
        return
    declared = _declared_return(key)
    if isinstance(declared, type) and not getattr(declared, "__tunekit_key__", False):
        raise TypeError(
            f"the key generator {getattr(key, '__qualname__', key)!r} returns {declared.__name__}, "
            "which is not an @tk.autotune_key class; decorate the key class with @tk.autotune_key"
        )


_WorkerFactory = (
    WorkerFactory["TunableSet[Any, Any]"]
    | DeviceWorkerFactory["TunableSet[Any, Any]"]
    | LocatorWorkerFactory["TunableSet[Any, Any]"]
    | DeviceLocatorWorkerFactory["TunableSet[Any, Any]"]
)
"""What ``with_isolation(worker=)`` takes: a factory building (client, set, inputs), told the device id or locator."""


class TunableSet(Generic[K, Out]):
    """The candidates of one operation: immutable; ``with_*`` methods return a new set.

    Without ``inputs=``, benchmark inputs are deep copies of the caller's inputs.
    """

    __slots__ = (
        "__weakref__",  # a tuner name's claim holds its set weakly (tunekit/_tune/names.py)
        "_bounds",
        "_checksum",
        "_names",
        "_reference",
        "_short_circuit",
        "extras",
        "inputs",
        "key",
        "tunables",
    )

    key: KeyGenerator[K]
    inputs: InputGenerator[Any] | None
    tunables: Sequence[Tunable[Any, Any]]
    """The candidates in order: a tuple, or for a :meth:`from_space` set a sequence making each when asked for."""

    def __init__(self, key: Callable[..., K], inputs: InputGenerator[K] | None = None) -> None:
        if not callable(key):
            raise TypeError(f"TunableSet(key=...) needs a callable that builds the key, got {type(key).__name__}")
        if inputs is not None and not callable(inputs):
            raise TypeError(
                f"TunableSet(inputs=...) needs a callable (key, *inputs) -> tuple, got {type(inputs).__name__}"
            )
        _check_key_annotation(key)
        self.key = key
        self.inputs = inputs
        self.tunables = ()
        self.extras: dict[str, Any] = {}
        self._names: dict[str, int] = {}
        self._bounds: BoundsFn | None = None
        self._short_circuit = True
        self._reference: Reference | None = None
        self._checksum: str | None = None

    def _copy(self) -> TunableSet[Any, Any]:
        new: TunableSet[Any, Any] = TunableSet.__new__(TunableSet)
        new.key = self.key
        new.inputs = self.inputs
        new.tunables = self.tunables
        new.extras = dict(self.extras)
        new._names = dict(self._names)
        new._bounds = self._bounds
        new._short_circuit = self._short_circuit
        new._reference = self._reference
        new._checksum = None
        return new

    @staticmethod
    def from_space(
        space: Space,
        build: Callable[[Config], Callable[..., O2]],
        *,
        key: Callable[..., K2],
        inputs: InputGenerator[K2] | None = None,
        version: str = "",
    ) -> TunableSet[K2, O2]:
        """One tunable per valid configuration of ``space``, named ``config.name``, made when asked for.

        ``build(config)`` is called lazily, at a candidate's first run, so a space of
        compiled kernels compiles only what is measured and a build error is that
        candidate's failure, at stage ``compile``. The space's hash and ``build``'s code
        enter the checksum, so editing either re-tunes, starts new trial logs and refuses
        records made before.
        The space is walked here, once, for the configurations its restrictions allow (a space
        without restrictions is not walked); the set keeps which they are, not a tunable each:
        ``tunables[i]``, a lookup by name or an iteration makes a candidate when it first reaches it.
        For spaces too big to walk, search them with ``tk.search``.
        """
        # key is a plain Callable, not KeyGenerator[K2]: mypy cannot infer a lambda's type against
        # a generic Protocol while it also solves O2 from build, so `key=lambda x: Key(...)` would fail.
        if not isinstance(space, Space):
            raise TypeError(f"TunableSet.from_space() takes a tk.Space, got {type(space).__name__}")
        check_build("TunableSet.from_space", build)
        if not isinstance(version, str):  # each Tunable refuses it when made; made lazily, it would fail far from here
            raise TypeError(
                f"TunableSet.from_space(version=...) must be a str, got {version!r}; pass version={str(version)!r}"
            )
        check_enumerable(
            "TunableSet.from_space()",
            space,
            "search a space this big with tk.search(space, build, client, ...) or tk.tune_objective(...), or narrow "
            "its domains",
        )
        new: TunableSet[K2, O2] = TunableSet(key, inputs)  # its key and inputs refused before the walk, not after

        def make(config: Config, name: str, version: str) -> Tunable[O2]:
            return Tunable(name, LazyBuild(build, config), version)

        tunables = SpaceTunables(space, version, make)
        if not tunables:  # an empty set would fail only at its first execute, saying to add tunables
            raise empty_space_error("TunableSet.from_space()", space)
        # Set here, not through with_tunables and three with_extra: each would copy the set, and
        # with_tunables would check again, one at a time, what the space guarantees (distinct names).
        new.tunables = tunables
        new.extras.update(
            {"checksum:space": space.hash, "checksum:build": build_identity(build), "build": build, "space": space}
        )
        return new

    def with_tunable(self, tunable: Tunable[O2, K]) -> TunableSet[K, Out | O2]:
        """A new set with ``tunable`` appended; a duplicate name is refused here."""
        return self.with_tunables([tunable])

    def with_tunables(self, tunables: Sequence[Tunable[O2, K]]) -> TunableSet[K, Out | O2]:
        """A new set with every tunable of ``tunables`` appended, in order; a duplicate name is refused here."""
        # One copy and one tuple for the whole batch: a set of 10^5 configurations is built
        # in linear time (appending one by one would copy the set per tunable).
        if isinstance(tunables, Tunable):  # tuple() of it would fail as "'Tunable' object is not iterable"
            raise TypeError("with_tunables() takes a list of tk.Tunable; for a single one use with_tunable(tunable)")
        new: TunableSet[K, Out | O2] = self._copy()
        added = tuple(tunables)
        names: dict[str, int] = {}
        for tunable in added:
            if not isinstance(tunable, Tunable):
                raise TypeError(f"with_tunable() takes a tk.Tunable, got {type(tunable).__name__}")
            if tunable.name in names or self.index_of(tunable.name) is not None:
                raise ValueError(
                    f"duplicate tunable name {tunable.name!r}: names identify winners in the cache, make each unique"
                )
            names[tunable.name] = len(self.tunables) + len(names)
        if isinstance(self.tunables, SpaceTunables):  # the space's stay unmade
            new.tunables = self.tunables.extended(added)
        else:
            new._names.update(names)
            new.tunables = (*self.tunables, *added)
        return new

    def with_bounds(self, bounds: Callable[[K, tuple[Any, ...]], Bounds]) -> TunableSet[K, Out]:
        """A new set whose roofline bounds come from ``bounds(key, inputs)``, a ``tk.Bounds`` for the set's key."""
        if not callable(bounds):
            raise TypeError("with_bounds() takes a callable (key, inputs) -> tk.Bounds")
        new = self._copy()
        new._bounds = bounds
        return new

    def with_short_circuit(self, enabled: bool) -> TunableSet[K, Out]:
        """A new set with the roofline short circuit switched on or off."""
        if not isinstance(enabled, bool):  # bool("false") is True: a string would switch it on
            raise TypeError(f"with_short_circuit() takes True or False, got {enabled!r}")
        new = self._copy()
        new._short_circuit = enabled
        return new

    def with_reference(
        self,
        reference: Callable[..., Any] | None = None,
        *,
        outputs: Sequence[int] | None = None,
        rtol: float = 0.0,
        atol: float = 0.0,
        compare: Compare | None = None,
    ) -> TunableSet[K, Out]:
        """A new set whose candidates must compute the right answer before they are timed.

        Each candidate runs once on fresh copies of the benchmark inputs and its outputs are
        compared with ``reference(*inputs)``, or, when ``reference`` is None, with the output
        of the first candidate that runs. ``outputs`` lists the argument positions a candidate
        writes in place (kernels); without it the return value is the output. Integers must
        match exactly, floats within a tolerance from the dtype's rounding that ``rtol`` and
        ``atol`` can widen. A float output coarser than both the expected value and the float
        inputs fails as losing precision, unless ``rtol`` or ``atol`` is given: it is then held
        to the finer dtype's rounding widened by them. A candidate that fails is recorded with
        the error figures and never timed. Without ``reference`` nothing tells which side of a
        disagreement is right: the first candidate stays the answer (it can win while wrong), and
        a warning on ``tunekit.tuner`` names it and the candidates that disagree with it.

        ``compare``, a function ``(expected, got) -> bool`` called once per output, replaces the
        elementwise comparison (Kernel Tuner's ``verify=``): True passes the output; False, or an
        exception whose message says why, fails the candidate with that reason. The expected value
        is then anything the function reads (a total, a sorted copy), not an array of the output's
        shape, and a candidate's output may have a shape of its own. Not with ``rtol``/``atol``:
        apply the tolerance inside it.
        """
        new = self._copy()
        new._reference = reference_of("with_reference", reference, outputs, rtol, atol, compare)
        return new

    @property
    def reference(self) -> Reference | None:
        """How candidates are checked before timing, or None when they are not."""
        return self._reference

    def with_extra(self, name: str, value: Any) -> TunableSet[K, Out]:
        """A new set carrying an extension's option (correctness reference, source hash, ...).

        A ``checksum:`` extra enters :meth:`checksum` as its text, so it must be a str, int,
        float or bool: another object's text (``<object at 0x7f...>``) changes every process,
        and each process would re-tune every key.
        """
        if name.startswith("checksum:") and not isinstance(value, str | int | float | bool):
            raise TypeError(
                f"with_extra({name!r}, ...): a checksum extra must be a str, int, float or bool (its text is hashed), "
                f"got {type(value).__name__}; pass a stable digest of it, e.g. hashlib.sha256(data).hexdigest()"
            )
        new = self._copy()
        new.extras[name] = value
        return new

    def with_isolation(
        self,
        mode: IsolationMode,
        *,
        timeout_s: float | None = None,
        worker: _WorkerFactory | None = None,
    ) -> TunableSet[K, Out]:
        """A new set tuned under its own isolation, whatever the global ``isolation`` setting says.

        ``mode="process"`` times candidates in a worker process so a crash or hang
        disqualifies only that candidate. ``timeout_s`` limits each run of a candidate
        (None: the ``candidate_timeout_s`` setting; ``math.inf``: no limit). ``worker``, a
        module-level function ``(key fields, *, device_id, locator) -> (client, tunable set, inputs)``,
        makes the worker a fresh interpreter that builds its own device state: needed for OpenCL
        or CUDA, whose state does not survive ``fork()``. ``device_id`` (the tune's) says which
        device model to build for, ``locator`` (the calling client's, see ``tunekit.backend.SupportsLocator``;
        None if it has none) which device of this machine; a factory without one of these
        parameters is called without it. It is checked here, not at tuning time.
        """
        if worker is None:
            return self.with_extra(_ISOLATION, Isolation(mode, timeout_s))
        reference = worker_reference(worker)
        keywords = factory_keywords(worker)
        isolation = Isolation(mode, timeout_s, reference, "device_id" in keywords, "locator" in keywords)
        return self.with_extra(_ISOLATION, isolation)

    def with_search(self, *, budget: Budget | None = None, **options: Unpack[SearchOptions]) -> TunableSet[K, Out]:
        """A new set whose keys are tuned by searching its space within a budget, not by measuring all of it.

        Only for a set made from a ``tk.Space`` (``TunableSet.from_space``, or an OpenCL
        ``KernelTemplate(...).tunable_set``). Each new key runs the same search as ``tk.search``
        (``budget=tk.Budget(...)``, or its fields as keywords: ``strategy``, ``seed``,
        ``max_evals``/``max_seconds``, ``batch``, ``finalists``, ``require``, ``log``), measuring
        candidates like any tune (prepare, correctness check, schedule); the winner is cached and
        recorded like any other, and the record carries a ``search`` event saying which limit ended
        it. ``require``: incumbents measured first for every key, checked against the space here.
        ``log``: one resumable trial log per key and device, beside this path with the key in its
        name (``gemm.jsonl`` -> ``gemm.m=4096,n=4096.1a2b3c4d.jsonl``).
        """
        space = self.extras.get("space")
        if not isinstance(space, Space):
            raise ValueError(
                "TunableSet.with_search(...) needs a set made from a tk.Space: build it with "
                "TunableSet.from_space(space, build, key=...) or KernelTemplate(...).tunable_set(...)"
            )
        budget = budget_from("TunableSet.with_search", budget, options, SEARCH_KEYS)
        # Checked here, as early as possible: tk.search checks them at its call, but a set's
        # searches run later, inside execute, one per key.
        incumbents = tuple(incumbents_of(space, budget.require))
        log = check_log_path(budget.log) if budget.log is not None else None
        name_of = self.extras.get("space_name_of", config_name)
        spec = SearchSpec(space, name_of, dataclasses.replace(budget, require=incumbents, log=log))
        return self.with_extra(_SEARCH, spec)

    @property
    def search(self) -> SearchSpec | None:
        """How keys of this set are searched (:meth:`with_search`), or None to measure every candidate."""
        spec: SearchSpec | None = self.extras.get(_SEARCH)
        return spec

    @property
    def isolation(self) -> Isolation | None:
        """The set's own isolation from :meth:`with_isolation`, or None to follow the settings."""
        policy: Isolation | None = self.extras.get(_ISOLATION)
        return policy

    @property
    def bounds(self) -> BoundsFn | None:
        """The roofline bounds function, if any."""
        return self._bounds

    @property
    def short_circuit(self) -> bool:
        """Whether a candidate within its roofline bound may end its batch early."""
        return self._short_circuit

    @property
    def names(self) -> Sequence[str]:
        """Tunable names in declaration order: a tuple, or for a :meth:`from_space` set a sequence equal to one."""
        if isinstance(self.tunables, SpaceTunables):  # named from the space, making no tunable
            return self.tunables.names
        return tuple(t.name for t in self.tunables)

    def index_of(self, name: str) -> int | None:
        """Position of the tunable called ``name``, or None when it is not a member."""
        if isinstance(self.tunables, SpaceTunables):
            return self.tunables.index_of(name)
        return self._names.get(name)

    def checksum(self) -> str:
        """Stable hash of the candidates: names in order, each version, and the ``checksum:`` extras.

        Those hold what else decides the candidates: a space's hash, ``from_space``'s build
        code, an OpenCL template's kernel source.

        A cached winner whose checksum differs was measured against other candidates
        and is re-tuned.
        """
        if self._checksum is None:
            digest = hashlib.sha256()
            if isinstance(self.tunables, SpaceTunables):  # the same bytes, without making a tunable each
                self.tunables.hash_into(digest)
            else:
                for tunable in self.tunables:
                    digest.update(f"{tunable.name}\x00{tunable.version}\x01".encode())
            for name in sorted(self.extras):
                if name.startswith("checksum:"):
                    digest.update(f"{name}={self.extras[name]}\x02".encode())
            self._checksum = digest.hexdigest()[:32]
        return self._checksum

    def validate(self, owner: str) -> None:
        """Refuse an empty set, naming ``owner`` (the tuner) in the error."""
        if not self.tunables:
            raise ValueError(f"tuner {owner!r}: the TunableSet has no tunables; add some with .with_tunable(...)")

    def describe_key_fn(self) -> str:
        """Where the key generator was defined, for error messages."""
        try:
            where = inspect.getsourcefile(self.key)
            line = getattr(getattr(self.key, "__code__", None), "co_firstlineno", None)
            return f"{self.key.__qualname__} ({where}{'' if line is None else f':{line}'})"  # type: ignore[attr-defined]
        except (TypeError, AttributeError):
            return repr(self.key)

    def __repr__(self) -> str:
        names = self.names
        shown = ", ".join(names[:8]) + (f", ... {len(names) - 8} more" if len(names) > 8 else "")
        return f"TunableSet({shown})"
