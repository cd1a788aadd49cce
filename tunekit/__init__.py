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

from tunekit._version import __version__

if TYPE_CHECKING:
    from tunekit._anchor import Anchor, anchor
    from tunekit._benchmark import BenchmarkDurations, tune_benchmark
    from tunekit._bounds import AutotuneBound, Bounds, Thresholds, Work, calculate_bounds
    from tunekit._cache import CacheRow, CacheValue, PersistentCache, default_cache_dir
    from tunekit._cache_state import CacheState, Hit, Miss, Pending, Unchecked
    from tunekit._check import SupportsCheckBuffers
    from tunekit._client import (
        Client,
        DevicePeaks,
        SupportsCacheFlush,
        SupportsDeviceModel,
        SupportsForkCheck,
        SupportsLocator,
        SupportsPeaks,
        SupportsWarmup,
    )
    from tunekit._errors import (
        AutotuneDisabled,
        CandidateFailed,
        ClientClosed,
        InputTypeError,
        NoValidKernelFound,
        SettingsError,
        TunekitError,
        TuneRecursionError,
    )
    from tunekit._isolation import Isolation, RunPolicy, current_run_policy
    from tunekit._key import autotune_key, is_autotune_key, key_to_json
    from tunekit._local import LocalTuner
    from tunekit._objective import Objective, tune_objective
    from tunekit._observe import (
        BatchStarted,
        CacheLookup,
        CandidateProgress,
        TuneEvent,
        TuneFinished,
        TuneObserver,
        TuneStarted,
        add_observer,
        remove_observer,
    )
    from tunekit._otel import instrument_opentelemetry
    from tunekit._outcome import Failed, Measured, Outcome, Skipped
    from tunekit._plan import plan_batches
    from tunekit._prepare import PreparesTogether
    from tunekit._record_file import Record, RecordEntry, RecordFile, RecordMismatch
    from tunekit._record_reader import BadLine, RecordLine, read_records
    from tunekit._records import (
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
    from tunekit._report import write_report
    from tunekit._search import BestTrial, SearchResult, Trial, search
    from tunekit._settings import Settings, configure
    from tunekit._settings import current as settings
    from tunekit._sinks import (
        CallbackSink,
        JsonlSink,
        LoggingSink,
        RecordSink,
        StreamSink,
        add_record_sink,
        remove_record_sink,
    )
    from tunekit._space import Config, ParamValue, ParamValues, Space, SpaceModel, pow2
    from tunekit._strategies import STRATEGIES, Strategy, StrategyFactory, StrategyName
    from tunekit._trials import TrialEntry, TrialLogError, TrialLogHeader
    from tunekit._tunable import Tunable, TuneGroup
    from tunekit._tunable_set import InputGenerator, KeyGenerator, TunableSet
    from tunekit._tuner import Tuner, persistent_cache

# Public name -> (private module, name there). Nothing below is imported with the package:
# `tunekit --help` and `import tunekit` stay fast, and a name loads its module (numpy,
# pydantic, ...) on first use. Type checkers read the imports above instead.
_EXPORTS: dict[str, tuple[str, str]] = {
    "Anchor": ("tunekit._anchor", "Anchor"),
    "AutotuneBound": ("tunekit._bounds", "AutotuneBound"),
    "AutotuneDisabled": ("tunekit._errors", "AutotuneDisabled"),
    "AutotuneRecord": ("tunekit._records", "AutotuneRecord"),
    "BadLine": ("tunekit._record_reader", "BadLine"),
    "BatchStarted": ("tunekit._observe", "BatchStarted"),
    "BenchmarkDurations": ("tunekit._benchmark", "BenchmarkDurations"),
    "Bounds": ("tunekit._bounds", "Bounds"),
    "CacheLookup": ("tunekit._observe", "CacheLookup"),
    "CacheRow": ("tunekit._cache", "CacheRow"),
    "CacheState": ("tunekit._cache_state", "CacheState"),
    "CacheValue": ("tunekit._cache", "CacheValue"),
    "CallbackSink": ("tunekit._sinks", "CallbackSink"),
    "CandidateFailed": ("tunekit._errors", "CandidateFailed"),
    "ClientClosed": ("tunekit._errors", "ClientClosed"),
    "InputTypeError": ("tunekit._errors", "InputTypeError"),
    "CandidateProgress": ("tunekit._observe", "CandidateProgress"),
    "CandidateRecord": ("tunekit._records", "CandidateRecord"),
    "Client": ("tunekit._client", "Client"),
    "Config": ("tunekit._space", "Config"),
    "DevicePeaks": ("tunekit._client", "DevicePeaks"),
    "Eliminated": ("tunekit._records", "Eliminated"),
    "Failed": ("tunekit._outcome", "Failed"),
    "Hit": ("tunekit._cache_state", "Hit"),
    "InputGenerator": ("tunekit._tunable_set", "InputGenerator"),
    "Isolation": ("tunekit._isolation", "Isolation"),
    "RunPolicy": ("tunekit._isolation", "RunPolicy"),
    "current_run_policy": ("tunekit._isolation", "current_run_policy"),
    "JsonlSink": ("tunekit._sinks", "JsonlSink"),
    "KeyGenerator": ("tunekit._tunable_set", "KeyGenerator"),
    "LocalTuner": ("tunekit._local", "LocalTuner"),
    "LoggingSink": ("tunekit._sinks", "LoggingSink"),
    "Measured": ("tunekit._outcome", "Measured"),
    "Miss": ("tunekit._cache_state", "Miss"),
    "NoValidKernelFound": ("tunekit._errors", "NoValidKernelFound"),
    "Objective": ("tunekit._objective", "Objective"),
    "Outcome": ("tunekit._outcome", "Outcome"),
    "ParamValue": ("tunekit._space", "ParamValue"),
    "ParamValues": ("tunekit._space", "ParamValues"),
    "Pending": ("tunekit._cache_state", "Pending"),
    "PersistentCache": ("tunekit._cache", "PersistentCache"),
    "Record": ("tunekit._record_file", "Record"),
    "RecordEntry": ("tunekit._record_file", "RecordEntry"),
    "RecordFile": ("tunekit._record_file", "RecordFile"),
    "RecordLine": ("tunekit._record_reader", "RecordLine"),
    "RecordMismatch": ("tunekit._record_file", "RecordMismatch"),
    "RecordSink": ("tunekit._sinks", "RecordSink"),
    "Round": ("tunekit._records", "Round"),
    "Runoff": ("tunekit._records", "Runoff"),
    "STRATEGIES": ("tunekit._strategies", "STRATEGIES"),
    "SampleStats": ("tunekit._records", "SampleStats"),
    "SamplingStopped": ("tunekit._records", "SamplingStopped"),
    "SearchEnded": ("tunekit._records", "SearchEnded"),
    "SearchResult": ("tunekit._search", "SearchResult"),
    "Settings": ("tunekit._settings", "Settings"),
    "SettingsError": ("tunekit._errors", "SettingsError"),
    "ShortCircuit": ("tunekit._records", "ShortCircuit"),
    "Skipped": ("tunekit._outcome", "Skipped"),
    "Space": ("tunekit._space", "Space"),
    "SpaceModel": ("tunekit._space", "SpaceModel"),
    "Strategy": ("tunekit._strategies", "Strategy"),
    "StrategyFactory": ("tunekit._strategies", "StrategyFactory"),
    "StrategyName": ("tunekit._strategies", "StrategyName"),
    "StreamSink": ("tunekit._sinks", "StreamSink"),
    "SupportsCacheFlush": ("tunekit._client", "SupportsCacheFlush"),
    "SupportsCheckBuffers": ("tunekit._check", "SupportsCheckBuffers"),
    "SupportsDeviceModel": ("tunekit._client", "SupportsDeviceModel"),
    "SupportsForkCheck": ("tunekit._client", "SupportsForkCheck"),
    "SupportsLocator": ("tunekit._client", "SupportsLocator"),
    "SupportsPeaks": ("tunekit._client", "SupportsPeaks"),
    "SupportsWarmup": ("tunekit._client", "SupportsWarmup"),
    "PreparesTogether": ("tunekit._prepare", "PreparesTogether"),
    "Thresholds": ("tunekit._bounds", "Thresholds"),
    "Trial": ("tunekit._search", "Trial"),
    "BestTrial": ("tunekit._search", "BestTrial"),
    "TrialEntry": ("tunekit._trials", "TrialEntry"),
    "TrialLogError": ("tunekit._trials", "TrialLogError"),
    "TrialLogHeader": ("tunekit._trials", "TrialLogHeader"),
    "Tunable": ("tunekit._tunable", "Tunable"),
    "TunableSet": ("tunekit._tunable_set", "TunableSet"),
    "TuneEvent": ("tunekit._observe", "TuneEvent"),
    "TuneFinished": ("tunekit._observe", "TuneFinished"),
    "TuneGroup": ("tunekit._tunable", "TuneGroup"),
    "TuneObserver": ("tunekit._observe", "TuneObserver"),
    "TuneRecursionError": ("tunekit._errors", "TuneRecursionError"),
    "TuneStarted": ("tunekit._observe", "TuneStarted"),
    "TunekitError": ("tunekit._errors", "TunekitError"),
    "Tuner": ("tunekit._tuner", "Tuner"),
    "Unchecked": ("tunekit._cache_state", "Unchecked"),
    "Warmup": ("tunekit._records", "Warmup"),
    "Work": ("tunekit._bounds", "Work"),
    "add_observer": ("tunekit._observe", "add_observer"),
    "add_record_sink": ("tunekit._sinks", "add_record_sink"),
    "anchor": ("tunekit._anchor", "anchor"),
    "autotune_key": ("tunekit._key", "autotune_key"),
    "calculate_bounds": ("tunekit._bounds", "calculate_bounds"),
    "configure": ("tunekit._settings", "configure"),
    "default_cache_dir": ("tunekit._cache", "default_cache_dir"),
    "instrument_opentelemetry": ("tunekit._otel", "instrument_opentelemetry"),
    "is_autotune_key": ("tunekit._key", "is_autotune_key"),
    "key_to_json": ("tunekit._key", "key_to_json"),
    "persistent_cache": ("tunekit._tuner", "persistent_cache"),
    "plan_batches": ("tunekit._plan", "plan_batches"),
    "pow2": ("tunekit._space", "pow2"),
    "read_records": ("tunekit._record_reader", "read_records"),
    "remove_observer": ("tunekit._observe", "remove_observer"),
    "remove_record_sink": ("tunekit._sinks", "remove_record_sink"),
    "search": ("tunekit._search", "search"),
    "settings": ("tunekit._settings", "current"),
    "tune_benchmark": ("tunekit._benchmark", "tune_benchmark"),
    "tune_objective": ("tunekit._objective", "tune_objective"),
    "write_report": ("tunekit._report", "write_report"),
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
