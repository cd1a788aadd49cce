"""tunekit: measure each candidate on the real device, keep the winner, reuse it everywhere.

The whole flow::

    from typing import Annotated
    import numpy as np
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class SumKey:
        n: Annotated[int, tk.Anchor()]       # 1000 -> 1024: nearby sizes share a winner
        dtype: str

    TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("row_sum")

    def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
        tunables = TUNER.init(lambda: tk.TunableSet(
                key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
            .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
            .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x))))
        return TUNER.execute(client.device_id, client, tunables, (x,))

    row_sum(CpuClient(), np.ones((64, 1000), np.float32))  # tunes once, then dispatches

Winners persist in a SQLite cache (``TUNEKIT_CACHE_DIR``), every decision can stream
to JSONL (``TUNEKIT_RECORD``), and ``TUNEKIT_AUTOTUNE=0`` turns measuring off.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tunekit._base.version import __version__

if TYPE_CHECKING:
    from tunekit._base.errors import (
        AutotuneDisabled,
        CandidateFailed,
        ClientClosed,
        InputTypeError,
        NoValidKernelFound,
        RecordMismatch,
        SettingsError,
        TrialLogError,
        TunekitError,
        TuneRecursionError,
    )
    from tunekit._base.settings import Settings, configure
    from tunekit._base.settings import current as settings
    from tunekit._candidates.budget import Budget
    from tunekit._candidates.isolation import Isolation
    from tunekit._candidates.plan import plan_batches
    from tunekit._candidates.space import Config, ParamValue, ParamValues, Space, SpaceModel, pow2
    from tunekit._candidates.strategy import STRATEGIES, StrategyName
    from tunekit._candidates.tunable import Tunable, TuneGroup
    from tunekit._candidates.tunable_set import InputGenerator, KeyGenerator, TunableSet
    from tunekit._keys.anchor import Anchor, anchor
    from tunekit._keys.key import autotune_key, is_autotune_key, key_to_json
    from tunekit._measure.benchmark import tune_benchmark
    from tunekit._measure.bounds import AutotuneBound, Bounds, Thresholds, Work, calculate_bounds
    from tunekit._measure.check import SupportsCheckBuffers
    from tunekit._measure.client import (
        Client,
        DevicePeaks,
        SupportsCacheFlush,
        SupportsDeviceModel,
        SupportsForkCheck,
        SupportsLocator,
        SupportsPeaks,
        SupportsWarmup,
    )
    from tunekit._measure.isolation import RunPolicy, current_run_policy
    from tunekit._measure.prepare import PreparesTogether
    from tunekit._observe.events import (
        BatchStarted,
        CacheLookup,
        CandidateProgress,
        TuneEvent,
        TuneFinished,
        TuneObserver,
        TuneStarted,
    )
    from tunekit._observe.observers import add_observer, remove_observer
    from tunekit._observe.otel import instrument_opentelemetry
    from tunekit._observe.reader import BadLine, RecordLine, read_records
    from tunekit._observe.report import write_report
    from tunekit._observe.sinks import (
        CallbackSink,
        JsonlSink,
        LoggingSink,
        RecordSink,
        StreamSink,
        add_record_sink,
        remove_record_sink,
    )
    from tunekit._search.objective import Objective, tune_objective
    from tunekit._search.result import BestTrial, SearchResult, Trial
    from tunekit._search.search import search
    from tunekit._search.strategies import Strategy, StrategyFactory
    from tunekit._store.cache import PersistentCache, default_cache_dir
    from tunekit._tune.local import LocalTuner
    from tunekit._tune.record import Record
    from tunekit._tune.tuner import Tuner, persistent_cache
    from tunekit._values.cache_row import CacheRow, CacheValue
    from tunekit._values.cache_state import CacheState, Hit, Miss, Pending, Unchecked
    from tunekit._values.durations import BenchmarkDurations
    from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
    from tunekit._values.record_file import RecordEntry, RecordFile
    from tunekit._values.records import (
        AutotuneRecord,
        CandidateRecord,
        Eliminated,
        Round,
        Runoff,
        SampleStats,
        SamplingStopped,
        SearchEnded,
        ShortCircuit,
        Warmup,
    )
    from tunekit._values.trial_log import TrialEntry, TrialLogHeader

# Public name -> (private module, name there). Nothing below is imported with the package:
# `tunekit --help` and `import tunekit` stay fast, and a name loads its module (numpy,
# pydantic, ...) on first use. Type checkers read the imports above instead.
_EXPORTS: dict[str, tuple[str, str]] = {
    "Anchor": ("tunekit._keys.anchor", "Anchor"),
    "AutotuneBound": ("tunekit._measure.bounds", "AutotuneBound"),
    "AutotuneDisabled": ("tunekit._base.errors", "AutotuneDisabled"),
    "AutotuneRecord": ("tunekit._values.records", "AutotuneRecord"),
    "BadLine": ("tunekit._observe.reader", "BadLine"),
    "BatchStarted": ("tunekit._observe.events", "BatchStarted"),
    "BenchmarkDurations": ("tunekit._values.durations", "BenchmarkDurations"),
    "Bounds": ("tunekit._measure.bounds", "Bounds"),
    "Budget": ("tunekit._candidates.budget", "Budget"),
    "CacheLookup": ("tunekit._observe.events", "CacheLookup"),
    "CacheRow": ("tunekit._values.cache_row", "CacheRow"),
    "CacheState": ("tunekit._values.cache_state", "CacheState"),
    "CacheValue": ("tunekit._values.cache_row", "CacheValue"),
    "CallbackSink": ("tunekit._observe.sinks", "CallbackSink"),
    "CandidateFailed": ("tunekit._base.errors", "CandidateFailed"),
    "ClientClosed": ("tunekit._base.errors", "ClientClosed"),
    "InputTypeError": ("tunekit._base.errors", "InputTypeError"),
    "CandidateProgress": ("tunekit._observe.events", "CandidateProgress"),
    "CandidateRecord": ("tunekit._values.records", "CandidateRecord"),
    "Client": ("tunekit._measure.client", "Client"),
    "Config": ("tunekit._candidates.space", "Config"),
    "DevicePeaks": ("tunekit._measure.client", "DevicePeaks"),
    "Eliminated": ("tunekit._values.records", "Eliminated"),
    "Failed": ("tunekit._values.outcome", "Failed"),
    "Hit": ("tunekit._values.cache_state", "Hit"),
    "InputGenerator": ("tunekit._candidates.tunable_set", "InputGenerator"),
    "Isolation": ("tunekit._candidates.isolation", "Isolation"),
    "RunPolicy": ("tunekit._measure.isolation", "RunPolicy"),
    "current_run_policy": ("tunekit._measure.isolation", "current_run_policy"),
    "JsonlSink": ("tunekit._observe.sinks", "JsonlSink"),
    "KeyGenerator": ("tunekit._candidates.tunable_set", "KeyGenerator"),
    "LocalTuner": ("tunekit._tune.local", "LocalTuner"),
    "LoggingSink": ("tunekit._observe.sinks", "LoggingSink"),
    "Measured": ("tunekit._values.outcome", "Measured"),
    "Miss": ("tunekit._values.cache_state", "Miss"),
    "NoValidKernelFound": ("tunekit._base.errors", "NoValidKernelFound"),
    "Objective": ("tunekit._search.objective", "Objective"),
    "Outcome": ("tunekit._values.outcome", "Outcome"),
    "ParamValue": ("tunekit._candidates.space", "ParamValue"),
    "ParamValues": ("tunekit._candidates.space", "ParamValues"),
    "Pending": ("tunekit._values.cache_state", "Pending"),
    "PersistentCache": ("tunekit._store.cache", "PersistentCache"),
    "Record": ("tunekit._tune.record", "Record"),
    "RecordEntry": ("tunekit._values.record_file", "RecordEntry"),
    "RecordFile": ("tunekit._values.record_file", "RecordFile"),
    "RecordLine": ("tunekit._observe.reader", "RecordLine"),
    "RecordMismatch": ("tunekit._base.errors", "RecordMismatch"),
    "RecordSink": ("tunekit._observe.sinks", "RecordSink"),
    "Round": ("tunekit._values.records", "Round"),
    "Runoff": ("tunekit._values.records", "Runoff"),
    "STRATEGIES": ("tunekit._candidates.strategy", "STRATEGIES"),
    "SampleStats": ("tunekit._values.records", "SampleStats"),
    "SamplingStopped": ("tunekit._values.records", "SamplingStopped"),
    "SearchEnded": ("tunekit._values.records", "SearchEnded"),
    "SearchResult": ("tunekit._search.result", "SearchResult"),
    "Settings": ("tunekit._base.settings", "Settings"),
    "SettingsError": ("tunekit._base.errors", "SettingsError"),
    "ShortCircuit": ("tunekit._values.records", "ShortCircuit"),
    "Skipped": ("tunekit._values.outcome", "Skipped"),
    "Space": ("tunekit._candidates.space", "Space"),
    "SpaceModel": ("tunekit._candidates.space", "SpaceModel"),
    "Strategy": ("tunekit._search.strategies", "Strategy"),
    "StrategyFactory": ("tunekit._search.strategies", "StrategyFactory"),
    "StrategyName": ("tunekit._candidates.strategy", "StrategyName"),
    "StreamSink": ("tunekit._observe.sinks", "StreamSink"),
    "SupportsCacheFlush": ("tunekit._measure.client", "SupportsCacheFlush"),
    "SupportsCheckBuffers": ("tunekit._measure.check", "SupportsCheckBuffers"),
    "SupportsDeviceModel": ("tunekit._measure.client", "SupportsDeviceModel"),
    "SupportsForkCheck": ("tunekit._measure.client", "SupportsForkCheck"),
    "SupportsLocator": ("tunekit._measure.client", "SupportsLocator"),
    "SupportsPeaks": ("tunekit._measure.client", "SupportsPeaks"),
    "SupportsWarmup": ("tunekit._measure.client", "SupportsWarmup"),
    "PreparesTogether": ("tunekit._measure.prepare", "PreparesTogether"),
    "Thresholds": ("tunekit._measure.bounds", "Thresholds"),
    "Trial": ("tunekit._search.result", "Trial"),
    "BestTrial": ("tunekit._search.result", "BestTrial"),
    "TrialEntry": ("tunekit._values.trial_log", "TrialEntry"),
    "TrialLogError": ("tunekit._base.errors", "TrialLogError"),
    "TrialLogHeader": ("tunekit._values.trial_log", "TrialLogHeader"),
    "Tunable": ("tunekit._candidates.tunable", "Tunable"),
    "TunableSet": ("tunekit._candidates.tunable_set", "TunableSet"),
    "TuneEvent": ("tunekit._observe.events", "TuneEvent"),
    "TuneFinished": ("tunekit._observe.events", "TuneFinished"),
    "TuneGroup": ("tunekit._candidates.tunable", "TuneGroup"),
    "TuneObserver": ("tunekit._observe.events", "TuneObserver"),
    "TuneRecursionError": ("tunekit._base.errors", "TuneRecursionError"),
    "TuneStarted": ("tunekit._observe.events", "TuneStarted"),
    "TunekitError": ("tunekit._base.errors", "TunekitError"),
    "Tuner": ("tunekit._tune.tuner", "Tuner"),
    "Unchecked": ("tunekit._values.cache_state", "Unchecked"),
    "Warmup": ("tunekit._values.records", "Warmup"),
    "Work": ("tunekit._measure.bounds", "Work"),
    "add_observer": ("tunekit._observe.observers", "add_observer"),
    "add_record_sink": ("tunekit._observe.sinks", "add_record_sink"),
    "anchor": ("tunekit._keys.anchor", "anchor"),
    "autotune_key": ("tunekit._keys.key", "autotune_key"),
    "calculate_bounds": ("tunekit._measure.bounds", "calculate_bounds"),
    "configure": ("tunekit._base.settings", "configure"),
    "default_cache_dir": ("tunekit._store.cache", "default_cache_dir"),
    "instrument_opentelemetry": ("tunekit._observe.otel", "instrument_opentelemetry"),
    "is_autotune_key": ("tunekit._keys.key", "is_autotune_key"),
    "key_to_json": ("tunekit._keys.key", "key_to_json"),
    "persistent_cache": ("tunekit._tune.tuner", "persistent_cache"),
    "plan_batches": ("tunekit._candidates.plan", "plan_batches"),
    "pow2": ("tunekit._candidates.space", "pow2"),
    "read_records": ("tunekit._observe.reader", "read_records"),
    "remove_observer": ("tunekit._observe.observers", "remove_observer"),
    "remove_record_sink": ("tunekit._observe.sinks", "remove_record_sink"),
    "search": ("tunekit._search.search", "search"),
    "settings": ("tunekit._base.settings", "current"),
    "tune_benchmark": ("tunekit._measure.benchmark", "tune_benchmark"),
    "tune_objective": ("tunekit._search.objective", "tune_objective"),
    "write_report": ("tunekit._observe.report", "write_report"),
}

__all__ = [
    "Anchor",
    "AutotuneBound",
    "AutotuneDisabled",
    "AutotuneRecord",
    "BadLine",
    "BatchStarted",
    "BenchmarkDurations",
    "BestTrial",
    "Bounds",
    "Budget",
    "CacheLookup",
    "CacheRow",
    "CacheState",
    "CacheValue",
    "CallbackSink",
    "CandidateFailed",
    "CandidateProgress",
    "CandidateRecord",
    "Client",
    "ClientClosed",
    "Config",
    "DevicePeaks",
    "Eliminated",
    "Failed",
    "Hit",
    "InputGenerator",
    "InputTypeError",
    "Isolation",
    "JsonlSink",
    "KeyGenerator",
    "LocalTuner",
    "LoggingSink",
    "Measured",
    "Miss",
    "NoValidKernelFound",
    "Objective",
    "Outcome",
    "ParamValue",
    "ParamValues",
    "Pending",
    "PersistentCache",
    "PreparesTogether",
    "Record",
    "RecordEntry",
    "RecordFile",
    "RecordLine",
    "RecordMismatch",
    "RecordSink",
    "Round",
    "RunPolicy",
    "Runoff",
    "STRATEGIES",
    "SampleStats",
    "SamplingStopped",
    "SearchEnded",
    "SearchResult",
    "Settings",
    "SettingsError",
    "ShortCircuit",
    "Skipped",
    "Space",
    "SpaceModel",
    "Strategy",
    "StrategyFactory",
    "StrategyName",
    "StreamSink",
    "SupportsCacheFlush",
    "SupportsCheckBuffers",
    "SupportsDeviceModel",
    "SupportsForkCheck",
    "SupportsLocator",
    "SupportsPeaks",
    "SupportsWarmup",
    "Thresholds",
    "Trial",
    "TrialEntry",
    "TrialLogError",
    "TrialLogHeader",
    "Tunable",
    "TunableSet",
    "TuneEvent",
    "TuneFinished",
    "TuneGroup",
    "TuneObserver",
    "TuneRecursionError",
    "TuneStarted",
    "TunekitError",
    "Tuner",
    "Unchecked",
    "Warmup",
    "Work",
    "__version__",
    "add_observer",
    "add_record_sink",
    "anchor",
    "autotune_key",
    "calculate_bounds",
    "configure",
    "current_run_policy",
    "default_cache_dir",
    "instrument_opentelemetry",
    "is_autotune_key",
    "key_to_json",
    "persistent_cache",
    "plan_batches",
    "pow2",
    "read_records",
    "remove_observer",
    "remove_record_sink",
    "search",
    "settings",
    "tune_benchmark",
    "tune_objective",
    "write_report",
]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'tunekit' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("_")})
