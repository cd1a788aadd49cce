"""Replay a GPU's measured landscape: Kernel Tuner cache files as a device with a virtual clock.

A Kernel Tuner brute-force cache holds every configuration of a kernel's restricted space
with its repeated timings on one real GPU. :func:`load_kernel_tuner_cache` reads one
(``.json`` or ``.json.gz``) into a :class:`ReplayData` whose ``space`` is a ``tk.Space``;
:class:`ReplayClient` then answers each configuration with one of its recorded samples, so
a search runs against a real device's landscape in milliseconds.

The format has no ``schema_version``: it is validated field by field on load, and
anything else is refused with the file's name. Nothing loaded is executed.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
import os
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, ValidationError

import tunekit as tk

__all__ = [
    "FAILURE_MARKERS",
    "KernelTunerCacheFile",
    "NothingToReplay",
    "ReplayClient",
    "ReplayData",
    "ReplayFailure",
    "ReplaySpace",
    "load_kernel_tuner_cache",
    "read_cache_document",
]

T = TypeVar("T")

FAILURE_MARKERS = ("CompilationFailedConfig", "RuntimeFailedConfig", "InvalidConfig", "ErrorConfig")
"""Strings Kernel Tuner writes into ``time`` for a configuration that did not run."""

_OLD_FAILURE = 1e20  # caches before Kernel Tuner 0.4.4 marked failures with this number


class KernelTunerCacheFile(BaseModel):
    """The top level of a Kernel Tuner cache file (extra fields are kept, not required)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    device_name: str = ""
    kernel_name: str = ""
    tune_params_keys: list[str]
    # Any JSON value: Kernel Tuner keys a value by its text whatever its type (see _replay_domain).
    tune_params: dict[str, list[Any]]
    # A list when Kernel Tuner 1.x tuned several objectives at once (``objectives={...}``).
    objective: str | list[str] = "time"
    cache: dict[str, dict[str, Any]]


class NothingToReplay(ValueError):
    """A well-formed cache file in which no configuration ran: every one failed, or none was written yet."""


class ReplayFailure(RuntimeError):
    """A configuration that failed on the real GPU fails again here, with the recorded reason."""


class _KnownKeys:
    """The restriction of a replayed space: exactly the configurations the file holds."""

    def __init__(self, keys: frozenset[tuple[tk.ParamValue, ...]], fingerprint: str, source: str) -> None:
        self.keys = keys
        self.fingerprint = fingerprint  # the space's hash reads this alone: the keys, not where they were read
        self.source = source

    def __call__(self, config: tk.Config) -> bool:
        return config.values_tuple in self.keys


class ReplaySpace(tk.Space):
    """A space whose restriction admits exactly a file's keys, walked through those keys alone.

    A cache from a Kernel Tuner run that did not try everything (a genetic search, a budget)
    holds a few thousand configurations of a Cartesian product that can reach 10^12: counting,
    enumerating or sampling by walking the product would never end. The same configurations come
    out in the same (Cartesian) order; only the walk is shorter.
    """

    def __init__(self, known: _KnownKeys, params: Mapping[str, Sequence[tk.ParamValue]]) -> None:
        super().__init__(restrict=known, **params)
        at = [{v: i for i, v in enumerate(params[name])} for name in self.names]
        self._walk = sorted(known.keys, key=lambda values: tuple(at[k][v] for k, v in enumerate(values)))
        self._known = known

    def config(self, values: Mapping[str, Any] | None = None, /, **kw: Any) -> tk.Config:
        """As ``tk.Space.config``; a configuration the file has no entry for is refused naming the file."""
        try:
            return super().config(values, **kw)
        except ValueError:
            given = {n: v.item() if isinstance(v, np.generic) else v for n, v in dict(values or {}, **kw).items()}
            domains = self.domains
            if set(given) != set(domains) or not all(
                any(type(v) is type(given[n]) and v == given[n] for v in domains[n]) for n in domains
            ):
                raise
            # Every value in its domain, so the one restriction, the file's keys, refused it: the space's
            # error names it "restriction #1 of 1 ('fingerprint:replay-keys:516c...')", which tells nobody anything.
            raise ValueError(
                f"configuration {given!r} has no entry in {self._known.source}: Kernel Tuner's run never measured "
                "it (restricted out of the space it tuned, or not tried); pick a configuration the file holds "
                "(for config in data.space)"
            ) from None

    @property
    def walk_cost(self) -> int:
        """A walk visits the file's configurations alone."""
        return len(self._walk)

    def __iter__(self) -> Iterator[tk.Config]:
        """The file's configurations in Cartesian order."""
        names = self.names
        for values in self._walk:
            yield tk.Config(names, values)

    def _valid_indices(self) -> npt.NDArray[Any]:
        """The file's configurations' Cartesian indices, from its keys alone.

        Otherwise ``TunableSet.from_space`` would walk the whole product for them, testing each point
        against the file's keys: past 10^8 points, one product of a sparse cache, it would never end.
        """
        names = self.names
        points = [self.index(tk.Config(names, values)) for values in self._walk]
        return np.array(points, dtype=np.int64 if self.cartesian_size <= np.iinfo(np.int64).max else object)


@dataclass(frozen=True)
class ReplayData:
    """A loaded cache file: the space, each valid configuration's samples (ms), and failures."""

    path: Path
    gpu: str
    device_name: str
    kernel_name: str
    objective: str
    """What the file was tuned for (``time`` if unsaid; comma-joined when several); the replay is of ``time``."""
    space: tk.Space
    samples_ms: Mapping[tk.Config, tuple[float, ...]]
    failures: Mapping[tk.Config, str]
    relabelled: Mapping[str, Mapping[tk.ParamValue, Any]]
    """Parameters whose values ``tk.Space`` refuses as the file lists them (``[1, True]``: equal in
    Python, two values to Kernel Tuner), replayed as strings: each replayed value -> the file's."""

    def file_value(self, name: str, value: tk.ParamValue) -> Any:
        """The value as the file lists it of a replayed ``value`` of parameter ``name``."""
        return self.relabelled.get(name, {}).get(value, value)

    def key_text(self, config: tk.Config) -> str:
        """The cache key Kernel Tuner gives ``config`` (``str()`` of each value, comma-joined)."""
        return ",".join(str(self.file_value(n, v)) for n, v in config.items())

    @property
    def best_ms(self) -> float:
        """The fastest mean time of any valid configuration."""
        return min(self.mean_ms(c) for c in self.samples_ms)

    def mean_ms(self, config: tk.Config) -> float:
        """Mean of the recorded samples (Kernel Tuner's ``time``)."""
        samples = self.samples_ms[config]
        return math.fsum(samples) / len(samples)


def read_cache_document(path: str | Path) -> Any:
    """The JSON document of a Kernel Tuner cache file (``.json`` or ``.json.gz``), closed if left open.

    Kernel Tuner appends each result to the file while it tunes and closes the JSON only when
    the run ends, so a stopped run leaves an open file (and a kill mid-write, a half-written
    last entry). Such a file is read as Kernel Tuner reads it: closed after its last whole entry.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
        # Told apart by content, not by name: a renamed or re-compressed file reads the same.
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8-sig")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            body = text.rstrip()
            last_line_dropped = body[: body.rfind("\n")].rstrip()
            # Open after a whole entry; killed between the cache's closing brace and the document's
            # (Kernel Tuner 1.x rewrites both after each entry); killed in the middle of an entry.
            for whole in (body.removesuffix(",") + "}\n}", body + "}", last_line_dropped.removesuffix(",") + "}\n}"):
                try:
                    return json.loads(whole)
                except json.JSONDecodeError:
                    continue
            raise exc from None
    except (OSError, EOFError, zlib.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        # zlib.error: a corrupt gzip body (the bench catches ValueError to go on with the other files).
        raise ValueError(f"{path}: not a readable Kernel Tuner cache file ({type(exc).__name__}: {exc})") from exc


def _gpu_name(path: Path) -> str:
    """The GPU id from the file path (some files leave ``device_name`` empty)."""
    # The folder as the absolute path names it: "A100.json.gz" given from inside its folder has no
    # parent name ("replay:/A100"), so the same file would get another device id (and its trial logs
    # and records would be refused) depending on the directory the search was started from.
    path = Path(os.path.abspath(path))
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    return f"{path.parent.name}/{stem}"


def _entry_value(path: Path, key: str, entry: Mapping[str, Any], names: Sequence[str]) -> tuple[float, ...] | str:
    """The samples of a valid entry (ms), or the failure marker of a failed one.

    Where the marker sits changed across Kernel Tuner versions: 1.5 writes it to ``__error__``
    and leaves ``time`` out; earlier versions write it to the objective's field (``time``, or
    ``GFLOP/s`` in a file tuned for it, again without ``time``). Kernel Tuner's own reader takes
    a marker in any field as the failure, and so does this one.
    """
    error = entry.get("__error__")
    if error is not None and error not in FAILURE_MARKERS:
        raise ValueError(f"{path}: entry {key!r} has __error__={error!r}, expected one of {FAILURE_MARKERS}")
    markers = [v for k, v in entry.items() if k not in names and isinstance(v, str) and v in FAILURE_MARKERS]
    if error is not None or markers:
        return str(error if error is not None else markers[0])
    time = entry.get("time")
    if isinstance(time, str):
        raise ValueError(f"{path}: entry {key!r} has time={time!r}, expected a number or one of {FAILURE_MARKERS}")
    if time is None:
        raise ValueError(
            f"{path}: entry {key!r} has no 'time' and no failure marker ({', '.join(FAILURE_MARKERS)}) in any "
            "field: nothing says how fast it ran or why it did not"
        )
    if not isinstance(time, int | float) or isinstance(time, bool) or not math.isfinite(time) or time < 0:
        raise ValueError(f"{path}: entry {key!r} has time={time!r}, expected a finite non-negative number")
    if time >= _OLD_FAILURE:
        return "RuntimeFailedConfig"
    times = entry.get("times")
    if times is None:
        return (float(time),)
    if (
        not isinstance(times, list)
        or not times
        or not all(isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) for t in times)
    ):
        raise ValueError(f"{path}: entry {key!r} has a malformed 'times' list")
    return tuple(float(t) for t in times)


@dataclass(frozen=True)
class _Domain:
    """One parameter's values as the file lists them (``listed``) and as the replay names them (``values``)."""

    listed: tuple[Any, ...]
    values: tuple[tk.ParamValue, ...]

    @property
    def relabelled(self) -> bool:
        return self.values != self.listed

    @functools.cached_property
    def by_text(self) -> Mapping[str, tuple[int, ...]]:
        """Positions of the values Kernel Tuner keys by each text (several where texts collide: ``1`` and ``"1"``)."""
        at: dict[str, tuple[int, ...]] = {}
        for i, value in enumerate(self.listed):
            at[str(value)] = (*at.get(str(value), ()), i)
        return at


def _replay_domain(path: Path, name: str, listed: Sequence[Any]) -> _Domain:
    """A parameter's values for the replay: as listed where ``tk.Space`` takes them, else named by their text.

    Kernel Tuner keys a configuration by ``str()`` of its values, so to it ``1``, ``True`` and
    ``1.0`` are three values (its own strategies test file lists ``["test", 1, True, 2.45]``),
    while ``tk.Space`` refuses them as one value (they compare equal in Python) and refuses
    ``None``, lists and strings holding ``,`` or ``=`` (configuration names would be ambiguous).
    Such a parameter, and only such a one, is replayed with a string per value: its key text,
    else ``repr()`` where two texts collide (``1`` and ``"1"``), with ``%``, ``,`` and ``=``
    percent-escaped where a text holds ``,`` or ``=``. Distinct values keep distinct names, and
    ``ReplayData.file_value`` maps a name back. A value listed twice is one key, so one value.
    """
    unique = tuple({(type(v), repr(v)): v for v in listed}.values())
    try:
        tk.Space(restrict=None, **{name: unique})
        return _Domain(unique, unique)
    except (TypeError, ValueError) as exc:
        refused = exc
    texts = [str(v) for v in unique]
    if len(set(texts)) < len(texts):
        texts = [repr(v) for v in unique]
    if any("," in t or "=" in t for t in texts):
        texts = [t.replace("%", "%25").replace(",", "%2C").replace("=", "%3D") for t in texts]
    try:
        tk.Space(restrict=None, **{name: texts})
    except (TypeError, ValueError):
        # Not the values: the name itself (a keyword, a Config attribute), which no text fixes.
        raise ValueError(f"{path}: its tune_params do not make a search space: {refused}") from refused
    return _Domain(unique, tuple(texts))


def _key_values(
    path: Path, key: str, entry: Mapping[str, Any], domains: Mapping[str, _Domain]
) -> tuple[tk.ParamValue, ...]:
    """The configuration a cache key names, as replay values.

    Kernel Tuner keys an entry by ``str()`` of each value as it tuned, but writes ``tune_params``
    and the entry's own fields through JSON: a ``np.float32(0.1)`` is keyed ``0.1`` and written
    ``0.10000000149011612``. A key part that matches no value's text, or several, is read from
    the entry's own field, as is the whole key where a value's text holds ``,``.
    """
    parts: list[str | None] = list(key.split(","))
    if len(parts) != len(domains):
        if not all(name in entry for name in domains):
            raise ValueError(
                f"{path}: cache key {key!r} has {len(parts)} values for {len(domains)} parameters, and its entry "
                "does not name each parameter's value (a tune_params string holding ',' splits its key)"
            )
        parts = [None] * len(domains)
    values = []
    for (name, domain), part in zip(domains.items(), parts, strict=True):
        at = domain.by_text.get(part, ()) if part is not None else ()
        if len(at) != 1 and name in entry:
            own = entry[name]
            at = tuple(i for i, v in enumerate(domain.listed) if type(v) is type(own) and v == own)
        if len(at) != 1:
            raise ValueError(f"{path}: cache key {key!r} holds a value outside tune_params ({name}={part!r})")
        values.append(domain.values[at[0]])
    return tuple(values)


_CACHE_HINT = "the replay reads the cache file a tuning run writes with kernel_tuner.tune_kernel(..., cache=PATH)"


def _other_kernel_tuner_file(doc: Any) -> str | None:
    """Kernel Tuner's other JSON files, named: unnamed, each would be refused as dozens of pydantic field errors."""
    if not isinstance(doc, dict) or "cache" in doc:
        return None
    if isinstance(doc.get("results"), list):
        return "a T4 results file (kernel_tuner.store_output_file, autotuning_methodology)"
    if "ConfigurationSpace" in doc or "KernelSpecification" in doc:
        return "a T1 input file (the description of a tuning problem: no measurements)"
    return None


def load_kernel_tuner_cache(path: str | Path) -> ReplayData:
    """Load a Kernel Tuner cache file (``.json`` or ``.json.gz``) for replay.

    Configurations absent from the file are the restricted-out ones: the space's
    restriction admits exactly the file's keys. The replay is of ``time`` (what tunekit
    measures), whatever objective the file was tuned for.
    """
    path = Path(path)
    doc = read_cache_document(path)
    other = _other_kernel_tuner_file(doc)
    if other is not None:
        raise ValueError(f"{path}: {other}, not a Kernel Tuner cache file; {_CACHE_HINT}")
    try:
        data = KernelTunerCacheFile.model_validate(doc)
    except ValidationError as exc:
        raise ValueError(f"{path}: not a Kernel Tuner cache file: {exc}") from exc
    names = data.tune_params_keys
    if sorted(names) != sorted(data.tune_params):
        raise ValueError(f"{path}: tune_params_keys {names} do not match tune_params {sorted(data.tune_params)}")
    # Checked before the keys are parsed: a name the space refuses is the file's error, not a key's.
    domains = {n: _replay_domain(path, n, data.tune_params[n]) for n in names}
    params = {n: d.values for n, d in domains.items()}
    samples: dict[tuple[tk.ParamValue, ...], tuple[float, ...]] = {}
    failures: dict[tuple[tk.ParamValue, ...], str] = {}
    for key, entry in data.cache.items():
        values = _key_values(path, key, entry, domains)
        value = _entry_value(path, key, entry, names)
        if isinstance(value, str):
            failures[values] = value
        else:
            samples[values] = value
    if not samples:
        if not failures:
            raise NothingToReplay(
                f"{path}: its cache holds no configuration (a Kernel Tuner run stopped before its first result?); "
                "nothing to replay"
            )
        counts = Counter(failures.values())
        raise NothingToReplay(
            f"{path}: every one of its {len(failures)} configurations failed on the GPU "
            f"({', '.join(f'{n} {marker}' for marker, n in counts.most_common())}); nothing to replay"
        )
    keys = frozenset(samples) | frozenset(failures)
    digest = hashlib.sha256("\n".join(sorted(",".join(map(str, k)) for k in keys)).encode()).hexdigest()[:32]
    space = ReplaySpace(_KnownKeys(keys, f"replay-keys:{digest}", path.name), params)
    objective = data.objective if isinstance(data.objective, str) else ",".join(data.objective)
    return ReplayData(
        path=path,
        gpu=_gpu_name(path),
        device_name=data.device_name,
        kernel_name=data.kernel_name,
        objective=objective,
        space=space,
        samples_ms={tk.Config(names, k): v for k, v in samples.items()},
        failures={tk.Config(names, k): v for k, v in failures.items()},
        relabelled={n: dict(zip(d.values, d.listed, strict=True)) for n, d in domains.items() if d.relabelled},
    )


class ReplayClient:
    """A ``tk.Client`` whose device is a recorded landscape, timed on a virtual clock.

    ``kernel(config)`` is the configuration's "compiled kernel": calling it advances the
    clock by one recorded sample of that configuration, drawn with a generator seeded by
    ``(seed, configuration, how many times it ran)``, so a replay is reproducible whatever
    order configurations run in. Recorded failures raise :class:`ReplayFailure`.
    """

    def __init__(self, data: ReplayData, *, seed: int = 0) -> None:
        # A path given here would fail only later, as "'str' object has no attribute 'gpu'".
        if not isinstance(data, ReplayData):
            raise TypeError(
                f"ReplayClient() takes the ReplayData that load_kernel_tuner_cache(path) returns, got "
                f"{type(data).__name__}; e.g. ReplayClient(load_kernel_tuner_cache(path), seed=0)"
            )
        if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
            raise TypeError(f"ReplayClient(seed=...) must be an int, got {seed!r}")
        # numpy takes no negative seed: -1 would fail every candidate's run as "expected non-negative integer".
        if seed < 0:
            raise ValueError(f"ReplayClient(seed=...) must be an int >= 0, got {seed}")
        self.data = data
        self.seed = int(seed)
        self._clock_ns = 0
        self._runs: dict[tk.Config, int] = {}
        self._lock = threading.Lock()

    @property
    def device_id(self) -> str:
        """``replay:<kernel folder>/<file stem>``: the GPU as named by the file's path."""
        return f"replay:{self.data.gpu}"

    @property
    def clock_ns(self) -> int:
        """Virtual time spent running kernels so far."""
        return self._clock_ns

    def profile(self, run: Callable[[], T]) -> tuple[T, int]:
        """Run ``run`` and return the virtual time its kernels took."""
        start = self._clock_ns
        out = run()
        return out, self._clock_ns - start

    def sync(self) -> None:
        """Nothing is ever in flight on a virtual device."""

    def warm_up(self, duration_ns: int) -> None:
        """Advance the virtual clock (``tunekit.backend.SupportsWarmup``): no wall time, and no kernel runs.

        Without it the schedule would warm up by running candidates for wall time, which
        advances their sample counters by a machine-dependent amount and breaks replay.
        """
        with self._lock:
            self._clock_ns += duration_ns

    def kernel(self, config: tk.Config) -> Callable[..., None]:
        """The runnable for ``config``; building one for a compile failure raises here."""
        failure = self.data.failures.get(config)
        # Kernel Tuner decides InvalidConfig (too many threads for the device) before compiling.
        if failure in ("CompilationFailedConfig", "InvalidConfig"):
            raise ReplayFailure(f"{config.name}: {failure} (recorded on {self.data.gpu})")
        if config not in self.data.samples_ms and config not in self.data.failures:
            raise ValueError(f"{config.name} is not in {self.data.path.name}: it is restricted out of the space")

        def run(*_: Any) -> None:
            self.run(config)

        return run

    def run(self, config: tk.Config) -> None:
        """Run ``config`` once: advance the clock by a recorded sample, or raise its recorded failure."""
        failure = self.data.failures.get(config)
        if failure is not None:
            raise ReplayFailure(f"{config.name}: {failure} (recorded on {self.data.gpu})")
        samples = self.data.samples_ms.get(config)
        if samples is None:
            raise ValueError(f"{config.name} is not in {self.data.path.name}: it is restricted out of the space")
        with self._lock:
            nth = self._runs.get(config, 0)
            self._runs[config] = nth + 1
            rng = np.random.default_rng([self.seed, self.data.space.index(config), nth])
            self._clock_ns += round(samples[int(rng.integers(len(samples)))] * 1e6)
