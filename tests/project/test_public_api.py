"""The public surface is exactly what __all__ names: nothing leaks by accident."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import tunekit as tk
from tunekit import backend

EXPECTED = {
    "Anchor",
    "AutotuneBound",
    "AutotuneDisabled",
    "AutotuneRecord",
    "BadLine",
    "BatchStarted",
    "BenchResult",
    "BenchmarkDurations",
    "BestTrial",
    "Bounds",
    "Budget",
    "CacheLookup",
    "CacheRow",
    "CacheState",
    "CacheValue",
    "Campaign",
    "CampaignError",
    "CampaignJob",
    "CampaignResult",
    "CampaignTarget",
    "CandidateProgress",
    "CandidateRecord",
    "Client",
    "ClientClosed",
    "Config",
    "Eliminated",
    "Failed",
    "Hit",
    "HitSummary",
    "InputTypeError",
    "JsonlSink",
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
    "PhaseStarted",
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
    "SearchAdvanced",
    "SearchEnded",
    "SearchFinished",
    "SearchResult",
    "SearchStarted",
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
    "Thresholds",
    "Trial",
    "TrialEntry",
    "TrialLogError",
    "TrialLogHeader",
    "Tunable",
    "TunableSet",
    "TuneDecision",
    "TuneEvent",
    "TuneFinished",
    "TuneGroup",
    "TuneObserver",
    "TuneRecursionError",
    "TuneStarted",
    "TunekitError",
    "Tuner",
    "Unchecked",
    "Verdict",
    "Warmup",
    "Work",
    "Winner",
    "WorkerStartFailed",
    "__version__",
    "add_observer",
    "add_record_sink",
    "anchor",
    "autotune_key",
    "bench",
    "calculate_bounds",
    "configure",
    "decision_of",
    "default_cache_dir",
    "flush_hit_counts",
    "format_duration_ns",
    "instrument_opentelemetry",
    "persistent_cache",
    "plan_batches",
    "pow2",
    "read_hit_summaries",
    "read_records",
    "remove_observer",
    "remove_record_sink",
    "search",
    "settings",
    "tune_benchmark",
    "tune_objective",
    "write_report",
}


MOVED_TO_BACKEND = {
    "CandidateFailed",
    "DevicePeaks",
    "InputGenerator",
    "KeyGenerator",
    "PreparesTogether",
    "RunPolicy",
    "SupportsCacheFlush",
    "SupportsCheckBuffers",
    "SupportsDeviceModel",
    "SupportsForkCheck",
    "SupportsLocator",
    "SupportsPeaks",
    "SupportsWarmup",
    "current_run_policy",
}
"""Top-level names a client author needs, now in tunekit.backend; tk keeps them as deprecated aliases."""

NO_LONGER_PUBLIC = {"CallbackSink", "Isolation", "is_autotune_key", "key_to_json"}

BACKEND = {
    "CANARY_BYTES",
    "CANARY_VALUE",
    "CandidateFailed",
    "CheckBuffers",
    "Client",
    "ClientClosed",
    "DevicePeaks",
    "HostCheckBuffers",
    "InputGenerator",
    "KeyGenerator",
    "PreparesTogether",
    "ReferenceFailed",
    "Restriction",
    "RunPolicy",
    "SupportsCacheFlush",
    "SupportsCheckBuffers",
    "SupportsColdInputs",
    "SupportsDeviceModel",
    "SupportsForkCheck",
    "SupportsLocator",
    "SupportsPeaks",
    "SupportsWarmup",
    "check_enumerable",
    "current_run_policy",
    "describe_error",
    "empty_space_error",
    "unbindable",
    "function_identity",
    "warm_until_steady",
}


def test_all_is_exactly_the_public_names() -> None:
    assert set(tk.__all__) == EXPECTED
    assert list(tk.__all__) == sorted(tk.__all__), "keep the _EXPORTS table sorted (plain sorted())"
    for name in tk.__all__:
        assert hasattr(tk, name), name


def test_no_private_module_leaks_a_public_name() -> None:
    public = {name for name in dir(tk) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(tk, name)).__name__ == "module"}
    assert public - modules == EXPECTED - {"__version__"}


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """What type checkers read: public name -> (module, name there), from __init__.py's TYPE_CHECKING block."""
    tree = ast.parse(Path(tk.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    found: dict[str, tuple[str, str]] = {}
    imported: dict[str, tuple[str, str]] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.asname == alias.name:  # `import X as X`: the explicit re-export mypy --strict honours
                    found[alias.name] = (str(node.module), alias.name)
                else:
                    imported[alias.asname or alias.name] = (str(node.module), alias.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):  # `settings = current`
            (target,) = node.targets
            assert isinstance(target, ast.Name)
            found[target.id] = imported[node.value.id]
    return found


def test_type_checkers_see_exactly_the_table() -> None:
    """The TYPE_CHECKING imports name every public name at the module the lazy loader takes it from, and no other."""
    table = {name: where for name, where in tk._EXPORTS.items() if name != "__version__"}
    assert _type_checking_imports() == table


def test_each_public_name_loads_from_its_private_module() -> None:
    for name, (module, attribute) in tk._EXPORTS.items():
        assert getattr(tk, name) is getattr(importlib.import_module(module), attribute), name


def test_backend_is_exactly_what_a_client_author_needs() -> None:
    assert set(backend.__all__) == BACKEND
    for name in backend.__all__:
        assert hasattr(backend, name), name


@pytest.mark.parametrize("name", sorted(MOVED_TO_BACKEND))
def test_a_name_moved_to_the_backend_still_works_with_a_warning_naming_its_new_home(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"tunekit.{name} moved: import it from tunekit.backend"):
        value = getattr(tk, name)
    assert value is getattr(backend, name)
    assert name not in tk.__all__ and name not in dir(tk)


@pytest.mark.parametrize("name", sorted(NO_LONGER_PUBLIC))
def test_a_name_no_longer_public_still_works_with_a_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match="is not part of tunekit's public API"):
        getattr(tk, name)
    assert name not in tk.__all__


def test_every_moved_name_is_listed_as_moved() -> None:
    assert set(tk._MOVED) == MOVED_TO_BACKEND | NO_LONGER_PUBLIC
    assert not set(tk._MOVED) & set(tk._EXPORTS)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'tunekit' has no attribute 'Tunner'"):
        tk.Tunner  # noqa: B018
