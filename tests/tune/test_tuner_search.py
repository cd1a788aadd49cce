"""Tuning a key by searching the set's space (TunableSet.with_search) inside execute: budget, record, cache."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kt_cache import write_cache

import tunekit as tk
from tunekit._values.records import CheckResult
from tunekit.backend import DevicePeaks
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.replay import ReplayClient, load_kernel_tuner_cache
from tunekit_backends.simulated import SimulatedClient


@tk.autotune_key
class OneKey:
    n: int


def _records() -> tuple[list[tk.AutotuneRecord], tk.RecordSink]:
    records: list[tk.AutotuneRecord] = []
    return records, tk.add_record_sink(records.append)


def test_execute_searches_within_the_budget_and_caches_the_winner(tmp_path: Path) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data, seed=3)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=lambda: OneKey(n=1)).with_search(
        strategy="random", max_evals=10, seed=7, batch=4
    )
    records, sink = _records()
    try:
        tuner: tk.LocalTuner[OneKey, Any] = tk.LocalTuner("searched")
        tuner.execute(client.device_id, client, tunables, ())
        tuner.execute(client.device_id, client, tunables, ())  # the winner is reused: no second search
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    (ended,) = [e for e in record.events if isinstance(e, tk.SearchEnded)]
    assert (ended.stopped_by, ended.evaluations, ended.strategy, ended.seed) == ("max_evals", 10, "random", 7)
    evaluated = {c.name for c in record.candidates}
    assert len(evaluated) == 10 < data.space.size  # only what the search proposed was measured
    measured = {c.name: c.stats.median_ns for c in record.candidates if c.stats is not None}
    assert record.winner in measured and record.stored
    # The same seed proposes the same configurations as tk.search does on its own.
    alone = tk.search(
        data.space, client.kernel, client, (), tuner="alone", strategy="random", max_evals=10, seed=7, batch=4
    )
    assert {t.config.name for t in alone.trials} == evaluated


def test_with_search_is_refused_early_where_it_cannot_work() -> None:
    plain = tk.TunableSet(key=lambda: OneKey(n=1)).with_tunable(tk.Tunable("a", lambda: 1))
    with pytest.raises(ValueError, match="needs a set made from a tk.Space"):
        plain.with_search(max_evals=5)
    spaced = tk.TunableSet.from_space(tk.Space(A=[1, 2, 3]), lambda c: lambda: c.A, key=lambda: OneKey(n=1))
    with pytest.raises(ValueError, match="unknown strategy 'anneal'"):
        spaced.with_search(strategy="anneal")
    with pytest.raises(ValueError, match="max_evals"):
        spaced.with_search(max_evals=0)
    with pytest.raises(TypeError, match=r"TunableSet.with_search\(seed=...\) must be an int"):
        spaced.with_search(max_evals=2, seed=None)  # type: ignore[arg-type]  # was refused only after the search ran
    assert spaced.with_search(max_evals=2).checksum() == spaced.checksum()  # the budget does not re-tune
    assert spaced.with_search(require=[{"A": 2}], log="t.jsonl").checksum() == spaced.checksum()  # nor these


SOURCE = """
__kernel void fill(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (float)(BLOCK * UNROLL);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
def test_an_opencl_template_compiles_only_the_variants_the_search_measures(isolated_settings: Path) -> None:
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(
        SOURCE,
        "fill",
        {"BLOCK": [8, 16, 32, 64], "UNROLL": [1, 2, 3, 4, 5, 6]},
        geometry=lambda config, key: ((64,), (int(config.BLOCK),)),
    )
    tunables = template.tunable_set(
        client,
        key=lambda y, n: OneKey(n=int(n)),
        inputs=lambda key, y, n: (cla.zeros(client.queue, 64, np.float32), n),
    ).with_search(max_evals=5, seed=2, batch=5)
    y = cla.zeros(client.queue, 64, np.float32)
    records, sink = _records()
    try:
        tk.LocalTuner[OneKey, Any]("opencl-searched").execute(client.device_id, client, tunables, (y, np.int32(64)))
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    assert len(record.candidates) == 5 and record.winner is not None
    assert set(template.compiled()) == {c.name for c in record.candidates}  # 5 of 24 variants compiled
    assert len(set(y.get().tolist())) == 1


@pytest.mark.slow
@pytest.mark.opencl
def test_variants_a_search_evaluates_that_do_not_apply_to_the_key_are_in_its_record_and_error(
    isolated_settings: Path,
) -> None:
    """Regression: they were left out of both, and the error said "(no candidate was planned)" after evaluating them."""
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(
        SOURCE,
        "fill",
        {"BLOCK": [8, 16, 32, 64], "UNROLL": [1, 2]},
        geometry=lambda config, key: ((64,), (int(config.BLOCK),)),
        applies=lambda config, key: key.n >= config.BLOCK * config.UNROLL,
    )
    says = "does not apply to this key (the KernelTemplate's applies= returned False for this variant)"
    y = cla.zeros(client.queue, 64, np.float32)
    records, sink = _records()
    try:
        for n in (64, 4):
            tunables = template.tunable_set(
                client,
                key=lambda y, n: OneKey(n=int(n)),
                inputs=lambda key, y, n: (cla.zeros(client.queue, 64, np.float32), n),
            ).with_search(max_evals=2, require=[{"BLOCK": 64, "UNROLL": 2}, {"BLOCK": 32, "UNROLL": 1}])
            tuner = tk.LocalTuner[OneKey, Any]("opencl-applies")
            if n == 64:  # 64 * 2 does not apply; 32 * 1 does
                tuner.execute(client.device_id, client, tunables, (y, np.int32(n)))
                continue
            # No variant applies to n=4: those skipped use no budget, so the search tries all 8.
            with pytest.raises(tk.NoValidKernelFound) as caught:
                tuner.execute(client.device_id, client, tunables, (y, np.int32(n)))
    finally:
        tk.remove_record_sink(sink)
    failures = list(caught.value.failures)
    assert failures[:2] == [("fill[BLOCK=64,UNROLL=2]", says), ("fill[BLOCK=32,UNROLL=1]", says)]
    assert len(failures) == 8 and {why for _, why in failures} == {says}
    assert "no candidate was planned" not in str(caught.value)
    applies, none_applies = records
    assert [(c.name, c.status, c.error) for c in applies.candidates][:2] == [
        ("fill[BLOCK=64,UNROLL=2]", "skipped", says),
        ("fill[BLOCK=32,UNROLL=1]", "measured", None),
    ]
    # The skipped incumbent used no budget: a second configuration was searched for, and measured.
    measured = [c.name for c in applies.candidates if c.status == "measured"]
    assert len(measured) == 2 and applies.winner in measured
    assert [(c.name, c.status) for c in none_applies.candidates][:2] == [
        ("fill[BLOCK=64,UNROLL=2]", "skipped"),
        ("fill[BLOCK=32,UNROLL=1]", "skipped"),
    ]
    assert len(none_applies.candidates) == 8 and {c.status for c in none_applies.candidates} == {"skipped"}


@pytest.mark.slow
@pytest.mark.opencl
def test_variants_that_do_not_apply_to_the_key_do_not_use_the_search_budget(isolated_settings: Path) -> None:
    """Regression: max_evals counted them, so a budget of 2 spent on two such variants measured nothing."""
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(
        SOURCE,
        "fill",
        {"BLOCK": [64, 32, 16, 8], "UNROLL": [2, 1]},  # exhaustive order: 64x2, 64x1, 32x2 do not apply to n=32
        geometry=lambda config, key: ((64,), (int(config.BLOCK),)),
        applies=lambda config, key: key.n >= config.BLOCK * config.UNROLL,
    )
    tunables = template.tunable_set(
        client,
        key=lambda y, n: OneKey(n=int(n)),
        inputs=lambda key, y, n: (cla.zeros(client.queue, 64, np.float32), n),
    ).with_search(strategy="exhaustive", max_evals=2, batch=2)
    records, sink = _records()
    try:
        tk.LocalTuner[OneKey, Any]("opencl-budget").execute(
            client.device_id, client, tunables, (cla.zeros(client.queue, 64, np.float32), np.int32(32))
        )
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    assert [(c.name, c.status) for c in record.candidates] == [
        ("fill[BLOCK=64,UNROLL=2]", "skipped"),
        ("fill[BLOCK=64,UNROLL=1]", "skipped"),
        ("fill[BLOCK=32,UNROLL=2]", "skipped"),
        ("fill[BLOCK=32,UNROLL=1]", "measured"),
        ("fill[BLOCK=16,UNROLL=2]", "measured"),
    ]
    (ended,) = [e for e in record.events if isinstance(e, tk.SearchEnded)]
    assert (ended.stopped_by, ended.evaluations) == ("max_evals", 5)


def test_a_search_ends_at_the_batch_where_a_candidate_meets_the_roofline() -> None:
    """With bounds, a search inside execute short-circuits like a tune, and stops searching there."""
    tk.configure(autotune_level="balanced", warmup_ms=1.0)
    client = SimulatedClient(
        peaks=DevicePeaks(ops_per_s=1e12, bytes_per_s=1e11, launch_overhead_ns=5_000.0), device_id="search-roof"
    )
    # 1e8 bytes at 1e11 B/s: 1 ms at peak; at 0.8 the limit is 1.25 ms + 5 us. Only T=13 meets it.
    space = tk.Space(T=range(40))
    kernels = {t: client.kernel((1.1 if t == 13 else 3.0) * 1e6) for t in space.domains["T"]}
    tunables = (
        tk.TunableSet.from_space(space, lambda c: kernels[c.T], key=lambda: OneKey(n=1))
        .with_bounds(lambda key, inputs: tk.Bounds(tk.Work(compute_ops=1e9, bytes=1e8)))
        .with_search(strategy="random", max_evals=40, seed=0, batch=4)
    )
    records, sink = _records()
    try:
        tk.LocalTuner[OneKey, Any]("searched-roofline").execute(client.device_id, client, tunables, ())
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    (ended,) = [e for e in record.events if isinstance(e, tk.SearchEnded)]
    assert ended.stopped_by == "roofline"
    assert record.winner == "T=13"
    assert any(isinstance(e, tk.ShortCircuit) and e.name == "T=13" for e in record.events)
    # Batches of 4 up to the one holding T=13, nothing after it: fewer than the budget of 40.
    assert ended.evaluations < 40 and ended.evaluations % 4 == 0


def _searched(tmp_path: Path, **search: Any) -> tuple[ReplayClient, tk.TunableSet[OneKey, None]]:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data, seed=3)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=lambda n: OneKey(n=n)).with_search(**search)
    return client, tunables


def _search_events(records: list[tk.AutotuneRecord]) -> list[tk.SearchEnded]:
    return [e for r in records for e in r.events if isinstance(e, tk.SearchEnded)]


def test_with_search_measures_the_required_configurations_first_for_every_key(tmp_path: Path) -> None:
    """with_search took no require=: a set's searches could not start from known-good configurations."""
    required = [{"X": 16, "Y": 64, "Z": 2}, tk.Config(("X", "Y", "Z"), (1, 16, 0))]
    client, tunables = _searched(tmp_path, strategy="random", max_evals=1, seed=5, require=required)
    records, sink = _records()
    try:
        tuner: tk.LocalTuner[OneKey, Any] = tk.LocalTuner("required")
        for n in (1, 2):
            tuner.execute(client.device_id, client, tunables, (n,))
    finally:
        tk.remove_record_sink(sink)
    assert [r.key for r in records] == [{"n": 1}, {"n": 2}]
    for record in records:
        assert sorted(c.name for c in record.candidates) == ["X=1,Y=16,Z=0", "X=16,Y=64,Z=2"]
    assert [(e.evaluations, e.stopped_by) for e in _search_events(records)] == [(2, "max_evals")] * 2


def test_with_search_refuses_bad_require_and_log_as_tk_search_does(tmp_path: Path) -> None:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data)
    spaced = tk.TunableSet.from_space(data.space, client.kernel, key=lambda n: OneKey(n=n))
    calls: list[tuple[str, Any]] = [("TunableSet.with_search", spaced.with_search)]
    calls.append(("tk.search", lambda **kw: tk.search(data.space, client.kernel, client, (), tuner="t", **kw)))
    for where, call in calls:
        with pytest.raises(ValueError, match=r"^required configuration is not in the space: .*has no entry in c\.json"):
            call(require=[{"X": 16, "Y": 128, "Z": 0}])
        with pytest.raises(ValueError, match=r"^required configuration is not in the space: .*X=3 is not one of"):
            call(require=[{"X": 3, "Y": 16, "Z": 0}])
        with pytest.raises(TypeError, match=rf"^{where}\(require=...\) takes a list of configurations"):
            call(require={"X": 1, "Y": 16, "Z": 0})
        with pytest.raises(TypeError, match=rf"^{where}\(log=...\) takes a file path"):
            call(log=5)
        with pytest.raises(tk.TrialLogError, match=r"is a directory; give a file path"):
            call(log=tmp_path)


def test_with_search_keeps_one_resumable_trial_log_per_key(tmp_path: Path) -> None:
    """with_search took no log=: a search inside execute that was killed started over from nothing."""
    tk.configure(cache=False)  # each tuner below tunes again, as a new process after a kill would
    log = tmp_path / "logs" / "fill.jsonl"
    client, short = _searched(tmp_path, strategy="random", max_evals=6, seed=2, batch=3, log=log)
    records, sink = _records()
    try:
        for n in (1, 2):
            tk.LocalTuner[OneKey, Any]("logged").execute(client.device_id, client, short, (n,))
        logs = sorted(log.parent.glob("*.jsonl"))
        _, longer = _searched(tmp_path, strategy="random", max_evals=10, seed=2, batch=3, log=log)
        tk.LocalTuner[OneKey, Any]("logged").execute(client.device_id, client, longer, (1,))
        # All from the log, nothing measured: the resumed trials must still rank (they were left out, and it raised).
        _, again = _searched(tmp_path, strategy="random", max_evals=6, seed=2, batch=3, log=log, finalists=0)
        tk.LocalTuner[OneKey, Any]("logged").execute(client.device_id, client, again, (2,))
    finally:
        tk.remove_record_sink(sink)
    assert [p.name.split(".")[:2] for p in logs] == [["fill", "n=1"], ["fill", "n=2"]]
    headers = [tk.TrialLogHeader.model_validate_json(p.read_text().splitlines()[0]) for p in logs]
    assert [(h.tuner, h.key, h.device_id) for h in headers] == [("logged", {"n": n}, client.device_id) for n in (1, 2)]
    first, _, resumed, replayed = _search_events(records)
    assert (first.evaluations, first.resumed) == (6, 0)
    assert (resumed.evaluations, resumed.resumed, resumed.stopped_by) == (10, 6, "max_evals")
    assert {c.name for c in records[0].candidates} < {c.name for c in records[2].candidates}
    assert (replayed.evaluations, replayed.resumed) == (6, 6)
    entries = [tk.TrialEntry.model_validate_json(line) for line in logs[1].read_text().splitlines()[1:]]
    logged = {tk.Config(tuple(e.config), tuple(e.config.values())).name: e.score_ns for e in entries}
    assert {c.name for c in records[3].candidates} == set(logged)
    assert records[3].winner == min((s, n) for n, s in logged.items() if s is not None)[1]


def test_a_changed_set_starts_a_new_per_key_trial_log(tmp_path: Path) -> None:
    """The per-key log was named without the set's checksum: after version= changed, the old code's timings answered."""

    client = CpuClient()
    ran: list[tuple[str, int]] = []

    def build(version: str) -> Any:
        def candidate(config: tk.Config) -> Any:
            def fn(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
                ran.append((version, config.B))
                return x + 0

            return fn

        return candidate

    log = tmp_path / "t.jsonl"
    for version in ("v1", "v2"):
        tunables = tk.TunableSet.from_space(
            tk.Space(B=[1, 2, 3, 4]), build(version), key=lambda x: OneKey(n=x.size), version=version
        ).with_search(max_evals=4, finalists=1, log=log)
        tk.LocalTuner[OneKey, Any]("stale").execute(client.device_id, client, tunables, (np.ones(8),))
    assert {b for v, b in ran if v == "v2"} == {1, 2, 3, 4}  # every configuration of the new code ran
    assert len(list(tmp_path.glob("t.n=8.*.jsonl"))) == 2


def _sleeping_config(config: tk.Config) -> Any:
    def run() -> int:
        time.sleep(0.01 * config.A)  # long enough for the two searches to overlap
        return int(config.A)

    return run


@pytest.mark.parametrize("cache", [True, False])
def test_two_equal_sets_searched_at_once_share_one_search_and_its_trial_log(tmp_path: Path, cache: bool) -> None:
    """Regression: two equal sets built apart, searching one key from two threads, both opened the key's trial log."""
    tk.configure(cache=cache)
    log = tmp_path / "trials.jsonl"
    space = tk.Space(A=[1, 2, 3, 4])

    def build() -> tk.TunableSet[OneKey, int]:  # separately built, equal: same space, same candidates
        return tk.TunableSet.from_space(space, _sleeping_config, key=lambda: OneKey(n=1)).with_search(
            strategy="random", max_evals=4, seed=1, batch=2, log=log
        )

    sets = [build(), build()]
    assert sets[0] is not sets[1] and sets[0].checksum() == sets[1].checksum()
    tuner: tk.LocalTuner[OneKey, int] = tk.LocalTuner("two-equal-searches")
    client = CpuClient()
    start = threading.Barrier(2)
    results: dict[int, object] = {}

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = tuner.execute(client.device_id, client, sets[i], ())
        except Exception as exc:
            results[i] = exc

    records, sink = _records()
    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        tk.remove_record_sink(sink)
    assert not any(isinstance(r, Exception) for r in results.values()), results
    assert results[0] == results[1]
    assert [r.decision for r in records] == ["tuned"]  # one search, whose winner the other thread took
    (trial_log,) = tmp_path.glob("trials.*.jsonl")
    configs = [line for line in trial_log.read_text().splitlines() if '"config"' in line]
    assert len(configs) == 4  # each configuration measured once, by the one search


def test_a_time_budget_too_small_for_one_batch_still_tunes_the_key() -> None:
    """with_search(max_seconds=1e-9) failed the key with "(no candidate was planned)", a failed tune kept 60 s."""
    tunables = tk.TunableSet.from_space(tk.Space(A=range(50)), lambda c: lambda: c.A, key=lambda: OneKey(n=1))
    tuner: tk.LocalTuner[OneKey, int] = tk.LocalTuner("tiny_time")
    client = CpuClient()
    assert tuner.execute(client.device_id, client, tunables.with_search(max_seconds=1e-9), ()) in range(50)


@pytest.mark.slow
def test_a_searched_set_stops_inside_a_batch_at_the_first_trial_that_finds_its_time_spent() -> None:
    """Regression: with_search(max_seconds=0.3, batch=40) ran its one batch of 40 candidates whole."""

    def build(c: tk.Config) -> Any:
        def run() -> int:
            time.sleep(0.02)
            return int(c.A)

        return run

    space = tk.Space(A=range(40))
    tunables = tk.TunableSet.from_space(space, build, key=lambda: OneKey(n=1))
    records, sink = _records()
    try:
        tuner: tk.LocalTuner[OneKey, int] = tk.LocalTuner("timed")
        client = CpuClient()
        searched = tunables.with_search(strategy="random", batch=40, max_seconds=0.3)
        assert tuner.execute(client.device_id, client, searched, ()) in range(40)
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    (ended,) = [e for e in record.events if isinstance(e, tk.SearchEnded)]
    # A started candidate runs at least twice before the next starts (>= 0.04 s of sleep): at most 9 start by 0.3 s.
    assert ended.stopped_by == "max_seconds" and 1 <= ended.evaluations <= 9, ended
    assert len(record.candidates) == ended.evaluations, "the candidates the deadline kept from starting are no trials"


@tk.autotune_key
class AxpyKey:
    n: int


def test_a_search_checks_in_place_candidates_against_the_inputs_as_they_were_before_any_timing() -> None:
    """Regression: later batches copied inputs the earlier batches' timed runs had written to, and failed every one."""

    def build(config: tk.Config) -> Any:
        def axpy(x: np.ndarray, y: np.ndarray) -> None:
            for start in range(0, len(x), config.CHUNK):
                y[start : start + config.CHUNK] += 2 * x[start : start + config.CHUNK]

        return axpy

    space = tk.Space(CHUNK=[64, 128, 256, 512, 1024, 2048])
    tunables = (
        tk.TunableSet.from_space(space, build, key=lambda x, y: AxpyKey(n=len(x)))
        .with_reference(lambda x, y: 2 * x + y, outputs=[1])
        .with_search(strategy="exhaustive", max_evals=6, batch=2)
    )
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[AxpyKey, None] = tk.LocalTuner("axpy", sinks=[records.append])
    client = CpuClient()
    tuner.execute(client.device_id, client, tunables, (np.arange(4096.0), np.ones(4096)))
    (record,) = records
    checks = [e for e in record.events if isinstance(e, CheckResult)]
    assert len(checks) >= 6 and all(check.passed for check in checks), [c.detail for c in checks if not c.passed]
    assert {c.status for c in record.candidates} == {"measured"}


AXPY = """
__kernel void axpy(__global const float* x, __global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] += 2.0f * x[i] * (BLOCK > 0);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
def test_an_opencl_search_checks_each_batch_on_the_device_inputs_as_they_were_first(isolated_settings: Path) -> None:
    """Regression: a search's later batches were checked on device inputs the earlier batches' timing had written."""
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(
        AXPY, "axpy", tk.Space(BLOCK=[8, 16, 32, 64]), geometry=lambda config, key: ((256,), (int(config.BLOCK),))
    )
    tunables = template.tunable_set(
        client, key=lambda x, y, n: AxpyKey(n=int(n)), reference=lambda x, y, n: 2 * x + y, outputs=[1]
    ).with_search(strategy="exhaustive", max_evals=4, batch=2)
    x = cla.to_device(client.queue, np.arange(256, dtype=np.float32))
    y = cla.to_device(client.queue, np.ones(256, dtype=np.float32))
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[AxpyKey, Any] = tk.LocalTuner("cl-axpy", sinks=[records.append])
    tuner.execute(client.device_id, client, tunables, (x, y, np.int32(256)))
    (record,) = records
    checks = [e for e in record.events if isinstance(e, CheckResult)]
    assert len(checks) >= 4 and all(check.passed for check in checks), [c.detail for c in checks if not c.passed]
    assert {c.status for c in record.candidates} == {"measured"}


def test_a_set_searched_one_configuration_at_a_time_gives_each_min_samples(tmp_path: Path) -> None:
    """with_search(batch=1) timed each configuration once: a tune's lone candidate needs no more; a search's does."""
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    client = ReplayClient(data, seed=3)
    tunables = tk.TunableSet.from_space(data.space, client.kernel, key=lambda: OneKey(n=1)).with_search(
        strategy="random", max_evals=5, seed=7, batch=1, finalists=0
    )
    records, sink = _records()
    try:
        tk.LocalTuner[OneKey, Any]("one-by-one").execute(client.device_id, client, tunables, ())
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    kept = {len(c.samples_ns) for c in record.candidates if c.status == "measured"}
    assert kept == {tk.settings().min_samples}, kept


def test_a_search_inside_execute_that_measures_nothing_says_how_it_ended(tmp_path: Path) -> None:
    """Regression: the error listed the 3 configurations a budget of 3 evaluated as if they were the whole set."""

    def build(config: tk.Config) -> Any:
        def run() -> None:
            raise RuntimeError(f"A={config.A} is broken")

        return run

    tunables = tk.TunableSet.from_space(tk.Space(A=list(range(10))), build, key=lambda: OneKey(n=1)).with_search(
        max_evals=3, log=tmp_path / "broken.jsonl"
    )
    client = CpuClient()
    with pytest.raises(tk.NoValidKernelFound) as caught:
        tk.LocalTuner[OneKey, None]("broken").execute(client.device_id, client, tunables, ())
    (log,) = tmp_path.glob("broken.*.jsonl")
    assert len(caught.value.failures) == 3
    assert caught.value.recorded.startswith("the search (model_ils, seed 0) evaluated 3 configurations")
    assert "stopped at max_evals; a larger max_evals or max_seconds evaluates more of the space" in str(caught.value)
    assert f"every trial is kept in {log}" in str(caught.value)
    plain = tk.TunableSet(key=lambda: OneKey(n=1)).with_tunable(tk.Tunable("a", build(tk.Space(A=[0]).config(A=0))))
    with pytest.raises(tk.NoValidKernelFound) as unsearched:
        tk.LocalTuner[OneKey, None]("plain").execute(client.device_id, client, plain, ())
    assert unsearched.value.recorded == ""
