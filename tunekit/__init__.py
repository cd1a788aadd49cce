"""tunekit: measure each candidate on the real device, keep the winner, reuse it everywhere.

The whole flow::

    from typing import Annotated
    import numpy as np
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class SumKey:
        n: Annotated[int, tk.Anchor()]       # 1000 -> 1024: nearby sizes share a winner
        dtype: np.dtype  # takes x.dtype; stored by name

    TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("row_sum")

    def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
        tunables = TUNER.init(lambda: tk.TunableSet(
                key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
            .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x))))
        return TUNER.execute(client.device_id, client, tunables, (x,))

    row_sum(CpuClient(), np.ones((64, 1000), np.float32))  # tunes once, then dispatches

Winners persist in a SQLite cache (``TUNEKIT_CACHE_DIR``), every decision can stream
to JSONL (``TUNEKIT_RECORD``), and ``TUNEKIT_AUTOTUNE=0`` turns measuring off.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from tunekit._base.version import __version__ as __version__

# The public surface, declared once: public name -> (private module, name there). Nothing is
# imported with the package, so `import tunekit` and `tunekit --help` stay fast; a name loads its
# module on first use. __all__ and the lazy loader come from this table; type checkers read the
# imports under TYPE_CHECKING below, which tests/project/test_public_api.py holds equal to it.
_EXPORTS: dict[str, tuple[str, str]] = {
    "Anchor": ("tunekit._keys.anchor", "Anchor"),
    "AutotuneBound": ("tunekit._candidates.roofline", "AutotuneBound"),
    "AutotuneDisabled": ("tunekit._base.errors", "AutotuneDisabled"),
    "AutotuneRecord": ("tunekit._values.records", "AutotuneRecord"),
    "BadLine": ("tunekit._observe.reader", "BadLine"),
    "BatchStarted": ("tunekit._observe.events", "BatchStarted"),
    "BenchResult": ("tunekit._measure.bench_result", "BenchResult"),
    "BenchmarkDurations": ("tunekit._values.durations", "BenchmarkDurations"),
    "BestTrial": ("tunekit._search.result", "BestTrial"),
    "Bounds": ("tunekit._candidates.roofline", "Bounds"),
    "Budget": ("tunekit._candidates.budget", "Budget"),
    "CacheLookup": ("tunekit._observe.events", "CacheLookup"),
    "CacheRow": ("tunekit._values.cache_row", "CacheRow"),
    "CacheState": ("tunekit._values.cache_state", "CacheState"),
    "CacheValue": ("tunekit._values.cache_row", "CacheValue"),
    "Campaign": ("tunekit._campaign.campaign", "Campaign"),
    "CampaignError": ("tunekit._campaign.spec", "CampaignError"),
    "CampaignJob": ("tunekit._campaign.job", "CampaignJob"),
    "CampaignResult": ("tunekit._campaign.campaign", "CampaignResult"),
    "CampaignTarget": ("tunekit._campaign.target", "CampaignTarget"),
    "CandidateProgress": ("tunekit._observe.events", "CandidateProgress"),
    "CandidateRecord": ("tunekit._values.records", "CandidateRecord"),
    "Client": ("tunekit._measure.client", "Client"),
    "ClientClosed": ("tunekit._base.errors", "ClientClosed"),
    "Config": ("tunekit._candidates.config", "Config"),
    "Eliminated": ("tunekit._values.records", "Eliminated"),
    "Failed": ("tunekit._values.outcome", "Failed"),
    "Hit": ("tunekit._values.cache_state", "Hit"),
    "HitSummary": ("tunekit._observe.hit_count", "HitSummary"),
    "InputTypeError": ("tunekit._base.errors", "InputTypeError"),
    "JsonlSink": ("tunekit._observe.sinks", "JsonlSink"),
    "LocalTuner": ("tunekit._tune.local", "LocalTuner"),
    "LoggingSink": ("tunekit._observe.sinks", "LoggingSink"),
    "Measured": ("tunekit._values.outcome", "Measured"),
    "Miss": ("tunekit._values.cache_state", "Miss"),
    "NoValidKernelFound": ("tunekit._base.errors", "NoValidKernelFound"),
    "Objective": ("tunekit._search.objective", "Objective"),
    "Outcome": ("tunekit._values.outcome", "Outcome"),
    "ParamValue": ("tunekit._candidates.config", "ParamValue"),
    "ParamValues": ("tunekit._candidates.space", "ParamValues"),
    "Pending": ("tunekit._values.cache_state", "Pending"),
    "PersistentCache": ("tunekit._store.cache", "PersistentCache"),
    "PhaseStarted": ("tunekit._observe.events", "PhaseStarted"),
    "Record": ("tunekit._tune.record", "Record"),
    "RecordEntry": ("tunekit._values.record_file", "RecordEntry"),
    "RecordFile": ("tunekit._values.record_file", "RecordFile"),
    "RecordLine": ("tunekit._observe.reader", "RecordLine"),
    "RecordMismatch": ("tunekit._base.errors", "RecordMismatch"),
    "RecordSink": ("tunekit._observe.record_sink", "RecordSink"),
    "Round": ("tunekit._values.records", "Round"),
    "Runoff": ("tunekit._values.records", "Runoff"),
    "STRATEGIES": ("tunekit._candidates.strategy", "STRATEGIES"),
    "SampleStats": ("tunekit._values.records", "SampleStats"),
    "SamplingStopped": ("tunekit._values.records", "SamplingStopped"),
    "SearchAdvanced": ("tunekit._observe.events", "SearchAdvanced"),
    "SearchEnded": ("tunekit._values.records", "SearchEnded"),
    "SearchFinished": ("tunekit._observe.events", "SearchFinished"),
    "SearchResult": ("tunekit._search.result", "SearchResult"),
    "SearchStarted": ("tunekit._observe.events", "SearchStarted"),
    "Settings": ("tunekit._base.settings_model", "Settings"),
    "SettingsError": ("tunekit._base.errors", "SettingsError"),
    "ShortCircuit": ("tunekit._values.records", "ShortCircuit"),
    "Skipped": ("tunekit._values.outcome", "Skipped"),
    "Space": ("tunekit._candidates.space", "Space"),
    "SpaceModel": ("tunekit._candidates.space_model", "SpaceModel"),
    "Strategy": ("tunekit._search.strategies", "Strategy"),
    "StrategyFactory": ("tunekit._search.strategies", "StrategyFactory"),
    "StrategyName": ("tunekit._candidates.strategy", "StrategyName"),
    "StreamSink": ("tunekit._observe.sinks", "StreamSink"),
    "Thresholds": ("tunekit._candidates.roofline", "Thresholds"),
    "Trial": ("tunekit._search.result", "Trial"),
    "TrialEntry": ("tunekit._values.trial_log", "TrialEntry"),
    "TrialLogError": ("tunekit._base.errors", "TrialLogError"),
    "TrialLogHeader": ("tunekit._values.trial_log", "TrialLogHeader"),
    "Tunable": ("tunekit._candidates.tunable", "Tunable"),
    "TunableSet": ("tunekit._candidates.tunable_set", "TunableSet"),
    "TuneDecision": ("tunekit._values.decision", "TuneDecision"),
    "TuneEvent": ("tunekit._observe.events", "TuneEvent"),
    "TuneFinished": ("tunekit._observe.events", "TuneFinished"),
    "TuneGroup": ("tunekit._candidates.tunable", "TuneGroup"),
    "TuneObserver": ("tunekit._observe.events", "TuneObserver"),
    "TuneRecursionError": ("tunekit._base.errors", "TuneRecursionError"),
    "TuneStarted": ("tunekit._observe.events", "TuneStarted"),
    "TunekitError": ("tunekit._base.errors", "TunekitError"),
    "Tuner": ("tunekit._tune.tuner", "Tuner"),
    "Unchecked": ("tunekit._values.cache_state", "Unchecked"),
    "Verdict": ("tunekit._values.records", "Verdict"),
    "Warmup": ("tunekit._values.records", "Warmup"),
    "Winner": ("tunekit._tune.winner", "Winner"),
    "Work": ("tunekit._candidates.roofline", "Work"),
    "WorkerStartFailed": ("tunekit._base.errors", "WorkerStartFailed"),
    "__version__": ("tunekit._base.version", "__version__"),
    "add_observer": ("tunekit._observe.observers", "add_observer"),
    "add_record_sink": ("tunekit._observe.sinks", "add_record_sink"),
    "anchor": ("tunekit._keys.anchor", "anchor"),
    "autotune_key": ("tunekit._keys.key", "autotune_key"),
    "bench": ("tunekit._measure.bench", "bench"),
    "calculate_bounds": ("tunekit._candidates.roofline", "calculate_bounds"),
    "configure": ("tunekit._base.settings", "configure"),
    "decision_of": ("tunekit._values.decision", "decision_of"),
    "default_cache_dir": ("tunekit._store.cache", "default_cache_dir"),
    "flush_hit_counts": ("tunekit._observe.hit_count", "flush_hit_counts"),
    "format_duration_ns": ("tunekit._base.units", "format_duration_ns"),
    "instrument_opentelemetry": ("tunekit._observe.otel", "instrument_opentelemetry"),
    "persistent_cache": ("tunekit._store.cache_dirs", "persistent_cache"),
    "plan_batches": ("tunekit._candidates.plan", "plan_batches"),
    "pow2": ("tunekit._candidates.space", "pow2"),
    "read_hit_summaries": ("tunekit._observe.hit_count", "read_hit_summaries"),
    "read_records": ("tunekit._observe.reader", "read_records"),
    "remove_observer": ("tunekit._observe.observers", "remove_observer"),
    "remove_record_sink": ("tunekit._observe.sinks", "remove_record_sink"),
    "search": ("tunekit._search.search", "search"),
    "settings": ("tunekit._base.settings", "current"),
    "tune_benchmark": ("tunekit._measure.benchmark", "tune_benchmark"),
    "tune_objective": ("tunekit._search.objective", "tune_objective"),
    "write_report": ("tunekit._observe.report", "write_report"),
}

# Names that were public here once: (private module, name there, where to import it from now;
# "" when it is no longer public). They still work, with a DeprecationWarning.
_MOVED: dict[str, tuple[str, str, str]] = {
    "CallbackSink": ("tunekit._observe.sinks", "CallbackSink", ""),
    "CandidateFailed": ("tunekit._base.errors", "CandidateFailed", "tunekit.backend"),
    "DevicePeaks": ("tunekit._measure.client", "DevicePeaks", "tunekit.backend"),
    "InputGenerator": ("tunekit._candidates.tunable_set", "InputGenerator", "tunekit.backend"),
    "Isolation": ("tunekit._candidates.isolation", "Isolation", ""),
    "KeyGenerator": ("tunekit._candidates.tunable_set", "KeyGenerator", "tunekit.backend"),
    "PreparesTogether": ("tunekit._measure.prepare", "PreparesTogether", "tunekit.backend"),
    "RunPolicy": ("tunekit._measure.run_policy", "RunPolicy", "tunekit.backend"),
    "SupportsCacheFlush": ("tunekit._measure.client", "SupportsCacheFlush", "tunekit.backend"),
    "SupportsCheckBuffers": ("tunekit._measure.check", "SupportsCheckBuffers", "tunekit.backend"),
    "SupportsDeviceModel": ("tunekit._measure.client", "SupportsDeviceModel", "tunekit.backend"),
    "SupportsForkCheck": ("tunekit._measure.client", "SupportsForkCheck", "tunekit.backend"),
    "SupportsLocator": ("tunekit._measure.client", "SupportsLocator", "tunekit.backend"),
    "SupportsPeaks": ("tunekit._measure.client", "SupportsPeaks", "tunekit.backend"),
    "SupportsWarmup": ("tunekit._measure.client", "SupportsWarmup", "tunekit.backend"),
    "current_run_policy": ("tunekit._measure.run_policy", "current_run_policy", "tunekit.backend"),
    "is_autotune_key": ("tunekit._keys.key", "is_autotune_key", ""),
    "key_to_json": ("tunekit._keys.key", "key_to_json", ""),
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from tunekit._base.errors import (
        AutotuneDisabled as AutotuneDisabled,
        ClientClosed as ClientClosed,
        InputTypeError as InputTypeError,
        NoValidKernelFound as NoValidKernelFound,
        RecordMismatch as RecordMismatch,
        SettingsError as SettingsError,
        TrialLogError as TrialLogError,
        TunekitError as TunekitError,
        TuneRecursionError as TuneRecursionError,
        WorkerStartFailed as WorkerStartFailed,
    )
    from tunekit._base.settings import (
        configure as configure,
        current,
    )
    from tunekit._base.settings_model import Settings as Settings

    settings = current  # tk.settings(): the settings in force
    from tunekit._base.units import format_duration_ns as format_duration_ns
    from tunekit._campaign.campaign import Campaign as Campaign, CampaignResult as CampaignResult
    from tunekit._campaign.job import CampaignJob as CampaignJob
    from tunekit._campaign.spec import CampaignError as CampaignError
    from tunekit._campaign.target import CampaignTarget as CampaignTarget
    from tunekit._candidates.budget import Budget as Budget
    from tunekit._candidates.config import Config as Config, ParamValue as ParamValue
    from tunekit._candidates.plan import (
        plan_batches as plan_batches,
    )
    from tunekit._candidates.roofline import (
        AutotuneBound as AutotuneBound,
        Bounds as Bounds,
        Thresholds as Thresholds,
        Work as Work,
        calculate_bounds as calculate_bounds,
    )
    from tunekit._candidates.space import ParamValues as ParamValues, Space as Space, pow2 as pow2
    from tunekit._candidates.space_model import SpaceModel as SpaceModel
    from tunekit._candidates.strategy import (
        STRATEGIES as STRATEGIES,
        StrategyName as StrategyName,
    )
    from tunekit._candidates.tunable import (
        Tunable as Tunable,
        TuneGroup as TuneGroup,
    )
    from tunekit._candidates.tunable_set import (
        TunableSet as TunableSet,
    )
    from tunekit._keys.anchor import (
        Anchor as Anchor,
        anchor as anchor,
    )
    from tunekit._keys.key import (
        autotune_key as autotune_key,
    )
    from tunekit._measure.bench import bench as bench
    from tunekit._measure.bench_result import BenchResult as BenchResult
    from tunekit._measure.benchmark import (
        tune_benchmark as tune_benchmark,
    )
    from tunekit._measure.client import (
        Client as Client,
    )
    from tunekit._observe.events import (
        BatchStarted as BatchStarted,
        CacheLookup as CacheLookup,
        CandidateProgress as CandidateProgress,
        PhaseStarted as PhaseStarted,
        SearchAdvanced as SearchAdvanced,
        SearchFinished as SearchFinished,
        SearchStarted as SearchStarted,
        TuneEvent as TuneEvent,
        TuneFinished as TuneFinished,
        TuneObserver as TuneObserver,
        TuneStarted as TuneStarted,
    )
    from tunekit._observe.hit_count import (
        HitSummary as HitSummary,
        flush_hit_counts as flush_hit_counts,
        read_hit_summaries as read_hit_summaries,
    )
    from tunekit._observe.observers import (
        add_observer as add_observer,
        remove_observer as remove_observer,
    )
    from tunekit._observe.otel import (
        instrument_opentelemetry as instrument_opentelemetry,
    )
    from tunekit._observe.reader import (
        BadLine as BadLine,
        RecordLine as RecordLine,
        read_records as read_records,
    )
    from tunekit._observe.record_sink import RecordSink as RecordSink
    from tunekit._observe.report import (
        write_report as write_report,
    )
    from tunekit._observe.sinks import (
        JsonlSink as JsonlSink,
        LoggingSink as LoggingSink,
        StreamSink as StreamSink,
        add_record_sink as add_record_sink,
        remove_record_sink as remove_record_sink,
    )
    from tunekit._search.objective import (
        Objective as Objective,
        tune_objective as tune_objective,
    )
    from tunekit._search.result import BestTrial as BestTrial, SearchResult as SearchResult, Trial as Trial
    from tunekit._search.search import search as search
    from tunekit._search.strategies import (
        Strategy as Strategy,
        StrategyFactory as StrategyFactory,
    )
    from tunekit._store.cache import (
        PersistentCache as PersistentCache,
        default_cache_dir as default_cache_dir,
    )
    from tunekit._store.cache_dirs import persistent_cache as persistent_cache
    from tunekit._tune.local import (
        LocalTuner as LocalTuner,
    )
    from tunekit._tune.record import (
        Record as Record,
    )
    from tunekit._tune.tuner import Tuner as Tuner
    from tunekit._tune.winner import Winner as Winner
    from tunekit._values.cache_row import (
        CacheRow as CacheRow,
        CacheValue as CacheValue,
    )
    from tunekit._values.cache_state import (
        CacheState as CacheState,
        Hit as Hit,
        Miss as Miss,
        Pending as Pending,
        Unchecked as Unchecked,
    )
    from tunekit._values.decision import (
        TuneDecision as TuneDecision,
        decision_of as decision_of,
    )
    from tunekit._values.durations import (
        BenchmarkDurations as BenchmarkDurations,
    )
    from tunekit._values.outcome import (
        Failed as Failed,
        Measured as Measured,
        Outcome as Outcome,
        Skipped as Skipped,
    )
    from tunekit._values.record_file import (
        RecordEntry as RecordEntry,
        RecordFile as RecordFile,
    )
    from tunekit._values.records import (
        AutotuneRecord as AutotuneRecord,
        CandidateRecord as CandidateRecord,
        Eliminated as Eliminated,
        Round as Round,
        Runoff as Runoff,
        SampleStats as SampleStats,
        SamplingStopped as SamplingStopped,
        SearchEnded as SearchEnded,
        ShortCircuit as ShortCircuit,
        Verdict as Verdict,
        Warmup as Warmup,
    )
    from tunekit._values.trial_log import (
        TrialEntry as TrialEntry,
        TrialLogHeader as TrialLogHeader,
    )


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
    elif name in _MOVED:
        module, attribute, home = _MOVED[name]
        where = f"import it from {home}" if home else "it is not part of tunekit's public API and will be removed"
        warnings.warn(f"tunekit.{name} moved: {where}", DeprecationWarning, stacklevel=2)
    else:
        raise AttributeError(f"module 'tunekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), attribute)
    if name in _EXPORTS:  # cached, so the next access is a plain attribute; a moved name warns at every use
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("_")})
