"""The public surface is exactly what __all__ names: nothing leaks by accident."""

from __future__ import annotations

import tunekit as tk

EXPECTED = {
    "Anchor",
    "AutotuneRecord",
    "BadLine",
    "BatchStarted",
    "BenchmarkDurations",
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
    "STRATEGIES",
    "SampleStats",
    "SearchEnded",
    "SearchResult",
    "Settings",
    "Skipped",
    "Space",
    "SpaceModel",
    "Strategy",
    "StrategyFactory",
    "StreamSink",
    "SupportsCacheFlush",
    "SupportsCheckBuffers",
    "SupportsPeaks",
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
    "__version__",
    "add_observer",
    "add_record_sink",
    "anchor",
    "autotune_key",
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
}


def test_all_is_exactly_the_public_names() -> None:
    assert set(tk.__all__) == EXPECTED
    assert list(tk.__all__) == sorted(tk.__all__), "keep __all__ sorted (plain sorted())"
    for name in tk.__all__:
        assert hasattr(tk, name), name


def test_no_private_module_leaks_a_public_name() -> None:
    public = {name for name in dir(tk) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(tk, name)).__name__ == "module"}
    assert public - modules == EXPECTED - {"__version__"}
