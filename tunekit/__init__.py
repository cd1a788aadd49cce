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

from tunekit._anchor import Anchor, anchor
from tunekit._benchmark import BenchmarkDurations, tune_benchmark
from tunekit._bounds import AutotuneBound, Bounds, Thresholds, Work, calculate_bounds
from tunekit._cache import CacheRow, CacheValue, PersistentCache, default_cache_dir
from tunekit._cache_state import CacheState, Hit, Miss, Pending, Unchecked
from tunekit._check import SupportsCheckBuffers
from tunekit._client import Client, DevicePeaks, SupportsCacheFlush, SupportsPeaks, SupportsWarmup
from tunekit._errors import CandidateFailed, NoValidKernelFound, TunekitError
from tunekit._isolation import Isolation
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
from tunekit._search import SearchResult, Trial, search
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
from tunekit._space import Config, ParamValue, Space, SpaceModel, pow2
from tunekit._strategies import STRATEGIES, Strategy, StrategyFactory
from tunekit._trials import TrialEntry, TrialLogError, TrialLogHeader
from tunekit._tunable import Tunable, TuneGroup
from tunekit._tunable_set import InputGenerator, KeyGenerator, TunableSet
from tunekit._tuner import Tuner, persistent_cache
from tunekit._version import __version__

__all__ = [
    "Anchor",
    "AutotuneBound",
    "AutotuneRecord",
    "BadLine",
    "BatchStarted",
    "BenchmarkDurations",
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
    "Config",
    "DevicePeaks",
    "Eliminated",
    "Failed",
    "Hit",
    "InputGenerator",
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
    "Pending",
    "PersistentCache",
    "Record",
    "RecordEntry",
    "RecordFile",
    "RecordLine",
    "RecordMismatch",
    "RecordSink",
    "Round",
    "Runoff",
    "STRATEGIES",
    "SampleStats",
    "SamplingStopped",
    "SearchEnded",
    "SearchResult",
    "Settings",
    "ShortCircuit",
    "Skipped",
    "Space",
    "SpaceModel",
    "Strategy",
    "StrategyFactory",
    "StreamSink",
    "SupportsCacheFlush",
    "SupportsCheckBuffers",
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
