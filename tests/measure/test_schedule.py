"""The adaptive interleaved schedule: does it pick the truly fastest, and does the record say how?

Statistical claims run on the simulated device over many seeds (instant and deterministic);
one test runs the same schedule on the host CPU.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit._measure.runner import InProcessRunner
from tunekit._measure.runoff import MIN_PAIRS, runoff
from tunekit._measure.schedule import BatchResult, measure_batch
from tunekit.backend import CandidateFailed
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import KernelTemplate, OpenCLClient, _client as opencl_client
from tunekit_backends.simulated import NoiseModel, SimulatedClient

MS = 1_000_000
TYPICAL = NoiseModel(noise=0.05, drift=0.03, ramp=0.2, outlier_rate=0.01, cold_factor=3.0)
# A realistic spread: one near-tie within 1%, then gaps of 3% and more.
RATIOS = (1.0, 1.004, 1.03, 1.05, 1.1, 1.2, 1.4, 1.7, 2.0, 2.5, 3.0, 4.0)


@tk.autotune_key
class SizeKey:
    n: Annotated[int, tk.Anchor()]


def _settings(**overrides: Any) -> tk.Settings:
    # Explicit values, so the figures below test the documented defaults whatever the env says.
    return tk.Settings(**{"warmup_ms": 300.0, "warmup": 1, "samples": 10, "adaptive": True, **overrides})


def _batch(
    client: SimulatedClient, fns: list[Callable[..., Any]], settings: tk.Settings, limit_ns: float | None = None
) -> BatchResult:
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", fn) for i, fn in enumerate(fns)]
    )
    runner = InProcessRunner(client, tunables, ())
    return measure_batch(runner, range(len(fns)), settings, client=client, limit_ns=limit_ns, names=tunables.names)


def test_default_schedule_picks_within_1pct_of_true_best_in_99pct_of_200_noisy_tunes() -> None:
    settings = _settings()
    hits = 0
    for seed in range(200):
        client = SimulatedClient(TYPICAL, seed=seed)
        ratios = list(RATIOS)
        random.Random(seed).shuffle(ratios)
        result = _batch(client, [client.kernel(r * MS) for r in ratios], settings)
        hits += ratios[result.ranking[0]] <= 1.01
    assert hits >= 198, f"within 1% of the true best in only {hits}/200 tunes"


def test_elimination_never_removes_the_true_best_without_noise() -> None:
    settings = _settings()
    for seed in range(200):
        rng = random.Random(seed)
        times = [rng.uniform(0.1, 5.0) * MS for _ in range(rng.randint(2, 16))]
        client = SimulatedClient(NoiseModel(cold_factor=3.0), seed=seed)
        result = _batch(client, [client.kernel(t) for t in times], settings)
        best = f"c{times.index(min(times))}"
        eliminated = [e.name for e in result.events if isinstance(e, tk.Eliminated)]
        assert best not in eliminated, f"seed {seed}: the true best was eliminated"
        assert result.ranking[0] == times.index(min(times)), f"seed {seed}"


def test_runoff_decides_a_2pct_gap_under_5pct_noise_in_95pct_of_200_seeds() -> None:
    settings = _settings()
    correct = 0
    for seed in range(200):
        client = SimulatedClient(TYPICAL, seed=seed)
        client.warm_up(300 * MS)
        fast, slow = client.kernel(1.0 * MS), client.kernel(1.02 * MS)
        fns = [slow, fast] if seed % 2 else [fast, slow]
        tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
            [tk.Tunable(f"c{i}", fn) for i, fn in enumerate(fns)]
        )
        result = runoff(InProcessRunner(client, tunables, ()), [0, 1], settings.runoff_pairs)
        correct += fns[result.winner] is fast
    assert correct >= 190, f"the 2% faster finalist won only {correct}/200 runoffs"


def test_close_finalists_go_to_a_runoff_recorded_with_both_pairs_and_margin() -> None:
    client = SimulatedClient(TYPICAL, seed=3)
    result = _batch(client, [client.kernel(1.0 * MS), client.kernel(1.01 * MS), client.kernel(3 * MS)], _settings())
    kinds = [e.kind for e in result.events]
    assert kinds[0] == "warmup"
    assert "round" in kinds and "eliminated" in kinds and kinds[-2:] == ["runoff", "verdict"]
    runoff_event = result.events[-2]
    assert isinstance(runoff_event, tk.Runoff)
    assert sorted(runoff_event.finalists) == ["c0", "c1"]
    assert runoff_event.pairs_ns and all(a > 0 and b > 0 for a, b in runoff_event.pairs_ns)
    assert runoff_event.pairs_ns == [
        (r[runoff_event.finalists[0]], r[runoff_event.finalists[1]]) for r in runoff_event.rounds_ns
    ]
    assert runoff_event.ratio is not None
    assert runoff_event.margin == pytest.approx(abs(1 - runoff_event.ratio))
    assert result.ranking[0] == int(runoff_event.winner[1:])
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.stage == "runoff" and verdict.winner == runoff_event.winner
    assert verdict.runner_up == runoff_event.runner_up and verdict.runner_up in runoff_event.finalists
    assert verdict.margin is not None and verdict.margin_se is not None and verdict.margin_se > 0
    assert verdict.runner_up_ns == pytest.approx(verdict.winner_ns * (1 + verdict.margin))
    # The rounds' pairs count in the runoff's comparison.
    assert verdict.pairs > len(runoff_event.rounds_ns)
    slow = next(e for e in result.events if isinstance(e, tk.Eliminated))
    assert slow.name == "c2" and slow.reason == "slower"


def test_a_finalist_that_raises_in_the_runoff_forfeits() -> None:
    client = SimulatedClient(NoiseModel(noise=0.05), seed=1)
    # Admission (2 runs) and two more rounds (2 runs) pass; it raises in the runoff's second pair.
    flaky = client.kernel(1.0 * MS, fail_after=6)
    result = _batch(client, [flaky, client.kernel(1.0 * MS)], _settings())
    runoff_event = next(e for e in result.events if isinstance(e, tk.Runoff))
    assert runoff_event.forfeit == "c0" and runoff_event.winner == "c1"
    assert isinstance(result[0], tk.Failed) and "forfeited the runoff" in result[0].reason
    assert result.ranking == (1,)


def _scripted(client: SimulatedClient, durations_ns: list[float]) -> Callable[..., None]:
    """A candidate whose successive runs take the given true times (the last one repeats)."""
    kernels = [client.kernel(d) for d in durations_ns]
    calls = iter(range(10**6))

    def run(*_: Any) -> None:
        kernels[min(next(calls), len(kernels) - 1)]()

    return run


def test_short_circuit_needs_the_limit_met_again_after_other_candidates_runs() -> None:
    settings = _settings(warmup=1)
    client = SimulatedClient(seed=0)
    # First (dropped) sample, a kept sample under the limit, a confirming one under it, then one above it.
    misses = _scripted(client, [0.9 * MS, 0.9 * MS, 0.95 * MS, 1.5 * MS])
    result = _batch(client, [misses, *(client.kernel(t * MS) for t in (2, 3, 4, 5))], settings, limit_ns=1.0 * MS)
    assert not any(isinstance(e, tk.ShortCircuit) for e in result.events)
    assert all(isinstance(o, tk.Measured) for o in result.values())

    client = SimulatedClient(seed=0)
    meets = _scripted(client, [0.9 * MS, 0.9 * MS, 0.95 * MS, 0.97 * MS, 0.98 * MS])
    first = client.kernel(2 * MS)
    rest = [client.kernel(0.5 * MS), client.kernel(3 * MS)]
    result = _batch(client, [first, meets, *rest], settings, limit_ns=1.0 * MS)
    short = next(e for e in result.events if isinstance(e, tk.ShortCircuit))
    assert short.name == "c1" and short.samples_ns == [900_000, 950_000, 970_000, 980_000]
    assert short.skipped == ["c2", "c3"]
    # Between one sample of c1 and the next ran 2, then 4, then 6 samples of c0 (kept: no run wasted).
    assert first.calls == 2 + 2 + 4 + 6
    assert isinstance(result[2], tk.Skipped) and isinstance(result[3], tk.Skipped)
    assert rest[0].calls == 0, "a skipped candidate must never run"
    assert result.ranking[0] == 1
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.stage == "short_circuit" and verdict.winner == "c1"
    assert verdict.runner_up is None and verdict.margin is None


def test_a_first_candidate_meeting_the_limit_is_confirmed_after_the_next_ones_admission() -> None:
    client = SimulatedClient(seed=0)
    kernels = [client.kernel(t * MS) for t in (0.9, 2, 3, 4)]
    fns: list[Callable[..., Any]] = list(kernels)
    result = _batch(client, fns, _settings(warmup=1), limit_ns=1.0 * MS)
    short = next(e for e in result.events if isinstance(e, tk.ShortCircuit))
    # Nothing ran before c0: c1's admission spaced its first confirmation, c1's samples the others.
    assert short.name == "c0" and short.skipped == ["c2", "c3"]
    assert [k.calls for k in kernels] == [5, 2 + 4 + 6, 0, 0]


# Correlated noise: bursts of a boost clock 6% faster than nominal, lasting a run or two (1.5 ms on
# average), between stretches at nominal speed (15 ms on average); the white noise is small beside them.
CORRELATED = NoiseModel(noise=0.003, clock_states=(0.94, 1.0), clock_dwell_ms=(1.5, 15.0))


@pytest.mark.parametrize("seed", range(300))
def test_the_short_circuit_never_stops_on_a_candidate_truly_above_the_limit_under_correlated_noise(seed: int) -> None:
    """Regression: the confirming sample was taken on the very next run, in the same fast clock state as
    the sample it confirmed, so a candidate 3% above the limit met it twice and ended the batch."""
    client = SimulatedClient(CORRELATED, seed=seed)
    # 3% above the limit: it meets it only in the fast state, and a truly fast candidate comes later.
    above = client.kernel(1.03 * MS)
    others = [client.kernel(t * MS) for t in (1.6, 1.5, 1.4, 0.95, 2.0)]
    result = _batch(client, [above, *others], _settings(warmup=1), limit_ns=1.0 * MS)
    short = [e for e in result.events if isinstance(e, tk.ShortCircuit)]
    assert not short or short[0].name == "c4", f"seed {seed}: stopped on {short[0].name}, 3% above the limit"


def test_first_sample_is_recorded_but_left_out_of_the_statistics() -> None:
    client = SimulatedClient(NoiseModel(cold_factor=10.0), seed=0)
    result = _batch(client, [client.kernel(1 * MS), client.kernel(1.2 * MS)], _settings(warmup=1))
    outcome = result[0]
    assert isinstance(outcome, tk.Measured)
    assert outcome.discarded_ns == (10 * MS,)
    assert set(outcome.durations.samples_ns) == {1 * MS}


def test_fixed_mode_is_sequential_fixed_samples() -> None:
    client = SimulatedClient(seed=0)
    kernels = [client.kernel(2 * MS), client.kernel(1 * MS)]
    result = _batch(client, list(kernels), _settings(adaptive=False, samples=4, warmup=2))
    assert result.events == () and result.ranking == (1, 0)
    assert [k.calls for k in kernels] == [6, 6]
    assert client.warmup_ns == 0


def test_warmup_runs_on_the_device_clock_not_the_wall_clock() -> None:
    client = SimulatedClient(seed=0)
    _batch(client, [client.kernel(1 * MS)], _settings(warmup_ms=300.0))
    assert client.warmup_ns == 300 * MS


def test_the_same_schedule_runs_on_the_cpu_client() -> None:
    tk.configure(warmup_ms=20.0)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    data = list(range(20_000))
    array = np.arange(20_000)
    tuner: tk.LocalTuner[SizeKey, int] = tk.LocalTuner("schedule-cpu")
    tunables = (
        tk.TunableSet(key=lambda xs, arr: SizeKey(n=len(xs)))
        .with_tunable(tk.Tunable("python_loop", lambda xs, arr: sum(x * x for x in xs)))
        .with_tunable(tk.Tunable("numpy", lambda xs, arr: int(np.dot(arr, arr))))
    )
    client = CpuClient()
    try:
        assert tuner.execute(client.device_id, client, tunables, (data, array)) == sum(x * x for x in data)
    finally:
        tk.remove_record_sink(sink)
    record = records[0]
    assert record.winner == "numpy"
    kinds = [e.kind for e in record.events]
    assert kinds[0] == "warmup" and kinds.count("round") >= 1 and "sampling_stopped" in kinds
    warmup = record.events[0]
    # The client's own warm-up ran (its stop rule, steady or the deadline, is tested in test_steady.py),
    # for at least the third of the 20 ms it always spends; how far past the deadline it ran is load, not
    # a property of the code, so no upper bound here.
    assert isinstance(warmup, tk.Warmup) and warmup.method == "device" and warmup.duration_ms >= 20 / 3
    loop = next(c for c in record.candidates if c.name == "python_loop")
    assert len(loop.discarded_ns) == 1 and loop.stats is not None and loop.stats.count >= 1
    # The record (every sample, the rounds) survives a JSON round trip.
    assert tk.AutotuneRecord.model_validate_json(record.model_dump_json()) == record


WORK = """
__kernel void work(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float acc = x[i];
    for (int r = 0; r < REPEAT; r++) acc = acc * 0.999f + 0.001f;
    /* acc stays in [0, 1]: the branch never adds, but the compiler must keep the loop. */
    y[i] = a * x[i] + (acc > 1e30f ? 1.0f : 0.0f);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_the_same_schedule_runs_on_the_opencl_client_and_the_record_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
    # Cold for this process whatever ran before in it: a device that timed work under a second ago skips
    # its warm-up (0 ms), so on a shared test worker the warm-up shown depended on the test before.
    monkeypatch.setattr(opencl_client, "_WARMTH", opencl_client._Warmth())

    tk.configure(warmup_ms=20.0)
    client = OpenCLClient(flush_cache=False)
    # PAD changes nothing: the two REPEAT=4 variants are a true tie, REPEAT=64 is far slower.
    template = KernelTemplate(
        WORK, "work", {"REPEAT": [4, 64], "PAD": [0, 1]}, geometry=lambda config, key: ((key.n,), None)
    )
    n = 1 << 15

    def inputs(key: SizeKey, *args: object) -> tuple[object, ...]:
        x = np.random.default_rng(0).random(key.n, dtype=np.float32)
        return (
            cla.to_device(client.queue, x),
            cla.empty(client.queue, key.n, np.float32),
            np.float32(2),
            np.int32(key.n),
        )

    tunables = template.tunable_set(
        client, key=lambda x, y, a, n: SizeKey(n=int(n)), inputs=inputs, reference=lambda x, y, a, n: a * x, outputs=[1]
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    x = cla.to_device(client.queue, np.linspace(0, 1, n, dtype=np.float32))
    y = cla.zeros(client.queue, n, np.float32)
    try:
        tuner: tk.LocalTuner[SizeKey, Any] = tk.LocalTuner("schedule-opencl")
        tuner.execute(client.device_id, client, tunables, (x, y, np.float32(2), np.int32(n))).wait()
    finally:
        tk.remove_record_sink(sink)
    np.testing.assert_array_equal(y.get(), np.float32(2) * x.get())
    (record,) = records
    fast = {"work[REPEAT=4,PAD=0]", "work[REPEAT=4,PAD=1]"}
    assert record.winner in fast
    events = record.events
    warmup = next(e for e in events if isinstance(e, tk.Warmup))
    # Multiply-add kernels on the device. A CPU device has no minimum (it stops once steady), and an overrun
    # of the 20 ms is load, so only that it ran; the stop rule is tested in test_steady.py.
    assert warmup.duration_ms > 0 and warmup.method == "device"
    rounds = [e for e in events if isinstance(e, tk.Round)]
    assert rounds[0].number == 1 and len(rounds[0].samples_ns) == 4
    eliminated = {e.name for e in events if isinstance(e, tk.Eliminated)}
    assert eliminated >= {"work[REPEAT=64,PAD=0]", "work[REPEAT=64,PAD=1]"}
    stopped = next(e for e in events if isinstance(e, tk.SamplingStopped))
    runoffs = [e for e in events if isinstance(e, tk.Runoff)]
    if len(stopped.survivors) >= 2:  # the tie was not separated by the rounds: the runoff decided it
        (runoff_event,) = runoffs
        assert set(runoff_event.finalists) == fast and runoff_event.winner == record.winner
        # The runoff pairs its own rounds with the finalists' earlier ones (runoff(earlier=...)): at least
        # MIN_PAIRS in all before it may stop, so a quick separation can take fewer than 10 of its own.
        earlier = sum(set(runoff_event.finalists) <= set(r.samples_ns) for r in rounds)
        assert len(runoff_event.pairs_ns) + earlier >= MIN_PAIRS
    else:
        assert not runoffs and stopped.survivors == [record.winner]
    for candidate in record.candidates:
        assert candidate.status == "measured" and len(candidate.discarded_ns) == 1


def test_max_samples_below_min_samples_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"max_samples \(2\) must be at least min_samples \(4\)"):
        tk.Settings(min_samples=4, max_samples=2)


def test_a_single_candidate_is_measured_without_rounds_or_runoff() -> None:
    client = SimulatedClient(NoiseModel(noise=0.05), seed=0)
    kernel = client.kernel(1 * MS)
    result = _batch(client, [kernel], _settings())
    stopped = [e for e in result.events if isinstance(e, tk.SamplingStopped)]
    assert result.ranking == (0,) and stopped[0].reason == "one_left"
    assert kernel.calls == 2  # the timed warm-up run and one kept sample: nothing to compare it with


def test_a_runner_verdict_keeps_its_stage_and_the_rest_still_run() -> None:
    client = SimulatedClient(seed=0)

    def hangs(*_: Any) -> None:
        raise CandidateFailed("timeout after 1 s", "timeout")

    fast = client.kernel(1 * MS)
    result = _batch(client, [hangs, fast, client.kernel(5 * MS)], _settings())
    assert result[0] == tk.Failed("timeout after 1 s", "timeout")
    assert result.ranking == (1, 2) and dict(result) == result.outcomes  # a Mapping of outcomes


class _ClosingClient(CpuClient):
    """A CPU client whose resources go away after a few runs, as when another thread closes it mid-tune."""

    def __init__(self, runs: int) -> None:
        self.left = runs

    def profile(self, run: Callable[[], Any]) -> tuple[Any, int]:
        self.left -= 1
        if self.left < 0:
            raise tk.ClientClosed("the test's CPU client was closed")
        return super().profile(run)


def test_a_client_closed_while_candidates_run_stops_the_tune_and_stores_nothing(isolated_settings: Any) -> None:
    """Regression: the candidates run once the client went away failed with the client's error as their own, and
    the tune was stored as failed (or won by the others)."""
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable("a", lambda n: n), tk.Tunable("b", lambda n: n + 0)]
    )
    client = _ClosingClient(runs=4)
    with pytest.raises(tk.ClientClosed, match="the test's CPU client was closed"):
        tk.LocalTuner[SizeKey, int]("closing").execute(client.device_id, client, tunables, (8,))
    cache = tk.PersistentCache(isolated_settings)
    assert list(cache.rows()) == []
    assert cache.get_failure(client.device_id, "closing", key_to_json(SizeKey(n=8))) is None


def test_a_client_closed_during_the_runoff_stops_it_instead_of_crowning_the_other_finalist() -> None:
    """Regression: a finalist whose run raised ClientClosed forfeited the runoff, and the other one won."""
    client = _ClosingClient(runs=3)
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable("a", lambda: 1), tk.Tunable("b", lambda: 2)]
    )
    with pytest.raises(tk.ClientClosed, match="the test's CPU client was closed"):
        runoff(InProcessRunner(client, tunables, ()), [0, 1], 8)


def test_a_batch_with_nothing_left_to_measure_adds_no_sampling_stopped_event() -> None:
    """Regression: a batch whose candidates all raised recorded sampling_stopped(one_left, survivors=[])."""
    tk.configure(warmup_ms=1.0)
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[SizeKey, int] = tk.LocalTuner("nothing-left", sinks=[records.append])
    group = tk.TuneGroup("g", lambda key: 1)

    def broken(xs: list[int]) -> int:
        raise RuntimeError("no kernel for this device")

    tunables = (
        tk.TunableSet(key=lambda xs: SizeKey(n=len(xs)))
        .with_tunable(tk.Tunable("broken", broken).group(group, lambda key: 2))
        .with_tunable(tk.Tunable("fallback", sum).group(group, lambda key: 1))
    )
    client = CpuClient()
    assert tuner.execute(client.device_id, client, tunables, (list(range(100)),)) == sum(range(100))
    (record,) = records
    assert record.winner == "fallback"
    stopped = [e for e in record.events if isinstance(e, tk.SamplingStopped)]
    assert [(e.reason, e.survivors) for e in stopped] == [("one_left", ["fallback"])]


def _close_set(client: SimulatedClient, seed: int, ratios: tuple[float, ...], noisy: int, noise: float) -> list[Any]:
    """Candidates at ``ratios`` of 1 ms, shuffled by ``seed``; the one at rank ``noisy`` has its own white noise."""
    order = list(range(len(ratios)))
    random.Random(seed).shuffle(order)
    return [client.kernel(ratios[i] * MS, noise=noise if i == noisy else None) for i in order]


def test_a_candidate_much_noisier_than_the_rest_is_kept_until_its_own_samples_say_it_is_slower() -> None:
    """Regression: elimination pooled one noise level over every candidate, so a true best much noisier
    than the rest (10% against 1.5%) was judged by the others' quiet and dropped after a few unlucky samples."""
    ratios = (1.0, 1.02, 1.05, 1.08, 1.12, 1.2, 1.3, 1.5, 1.8, 2.2, 2.8, 3.5)
    dropped = 0
    for seed in range(150):
        client = SimulatedClient(NoiseModel(noise=0.015, cold_factor=3.0), seed=seed)
        kernels = _close_set(client, seed, ratios, noisy=0, noise=0.1)
        result = _batch(client, list(kernels), _settings())
        best = f"c{[k.true_ns for k in kernels].index(MS)}"
        dropped += any(isinstance(e, tk.Eliminated) and e.name == best for e in result.events)
    assert dropped == 0, f"the noisy true best was eliminated in {dropped}/150 tunes"


def test_every_finalist_the_rounds_leave_takes_part_in_the_runoff_and_the_verdict_names_its_stage() -> None:
    client = SimulatedClient(NoiseModel(noise=0.05, cold_factor=3.0), seed=5)
    kernels = [client.kernel(t * MS) for t in (1.0, 1.005, 1.01, 1.015, 3.0)]
    result = _batch(client, list(kernels), _settings())
    stopped = next(e for e in result.events if isinstance(e, tk.SamplingStopped))
    runoff_event = next(e for e in result.events if isinstance(e, tk.Runoff))
    assert stopped.reason == "max_samples" and len(stopped.survivors) >= 3
    assert sorted(runoff_event.finalists) == sorted(stopped.survivors)
    assert runoff_event.pairs_ns == []  # more than two finalists: their samples are in rounds_ns
    assert all(set(r) <= set(runoff_event.finalists) for r in runoff_event.rounds_ns)
    out = set(runoff_event.dropped) | set(runoff_event.tied)
    # The last round times every finalist still in (those that left in it included), the winner among them.
    last = set(runoff_event.rounds_ns[-1])
    assert set(runoff_event.finalists) - out <= last and runoff_event.winner in last
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.stage == "runoff" and verdict.winner == runoff_event.winner
    measured = [o for o in result.values() if isinstance(o, tk.Measured)]
    kept = sum(len(o.durations.samples_ns) for o in measured)  # the discarded warm-up samples are no samples
    assert verdict.samples == kept + sum(len(r) for r in runoff_event.rounds_ns)


def test_a_batch_decided_by_the_rounds_has_a_verdict_naming_the_closest_other() -> None:
    client = SimulatedClient(NoiseModel(noise=0.01, cold_factor=3.0), seed=0)
    result = _batch(client, [client.kernel(t * MS) for t in (1.0, 1.3, 1.31, 3.0)], _settings())
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.stage == "rounds" and verdict.winner == "c0"
    assert verdict.runner_up in ("c1", "c2") and verdict.margin == pytest.approx(0.3, abs=0.03)
    assert verdict.margin_se is not None and 0 < verdict.margin_se < 0.02
    measured = [o for o in result.values() if isinstance(o, tk.Measured)]
    assert verdict.samples == sum(len(o.durations.samples_ns) for o in measured)

    client = SimulatedClient(seed=0)
    (verdict,) = [e for e in _batch(client, [client.kernel(MS)], _settings()).events if isinstance(e, tk.Verdict)]
    assert verdict.stage == "single" and verdict.runner_up is None and verdict.margin is None


def test_a_runoff_among_three_drops_the_separated_and_crowns_the_fastest() -> None:
    client = SimulatedClient(NoiseModel(noise=0.02), seed=1)
    client.warm_up(300 * MS)
    fns: list[Callable[..., Any]] = [client.kernel(t * MS) for t in (1.06, 1.0, 1.03)]
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", fn) for i, fn in enumerate(fns)]
    )
    result = runoff(InProcessRunner(client, tunables, ()), [0, 1, 2], 100)
    assert result.winner == 1 and result.dropped and result.dropped[0] == 0
    assert result.stopped_early and len(result.rounds) < 100
    # Back to back, in an order that alternates: every finalist runs first, last and in between.
    firsts = {next(iter(r)) for r in result.rounds if len(r) == 3}
    assert firsts == {0, 1, 2}


def test_finalists_that_all_raise_in_the_runoff_all_forfeit_and_the_tune_goes_on() -> None:
    """Regression: when every finalist left raised in the same runoff round, the runoff looked for a
    leader among none and the tune died with ValueError("min() arg is an empty sequence")."""
    client = SimulatedClient(NoiseModel(noise=0.05), seed=1)
    flaky = [client.kernel(1.0 * MS, fail_after=6), client.kernel(1.0 * MS, fail_after=6)]
    result = _batch(client, flaky, _settings())
    assert not any(isinstance(e, tk.Runoff) for e in result.events)
    assert all(isinstance(result[i], tk.Failed) and "forfeited the runoff" in result[i].reason for i in range(2))
    assert result.ranking == ()
    assert not any(isinstance(e, tk.Verdict) for e in result.events)

    # A candidate the rounds eliminated is still measured: it wins once the finalists are out.
    client = SimulatedClient(NoiseModel(noise=0.05), seed=1)
    flaky = [client.kernel(1.0 * MS, fail_after=6), client.kernel(1.0 * MS, fail_after=6)]
    result = _batch(client, [*flaky, client.kernel(3.0 * MS)], _settings())
    assert any(isinstance(e, tk.Eliminated) and e.name == "c2" for e in result.events)
    assert result.ranking == (2,)
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.winner == "c2"


def test_a_runoff_that_ends_tied_says_so_and_names_the_tied_finalists() -> None:
    """The record said only ``stopped_early``: a runoff ended by a tie and one ended by separating every
    finalist read alike. Now ``ended`` and ``tied`` say which."""
    for seed in range(3):
        client = SimulatedClient(NoiseModel(noise=0.002), seed=seed)
        client.warm_up(300 * MS)
        fns: list[Callable[..., Any]] = [client.kernel(t * MS) for t in (1.0, 1.0, 1.0)]
        tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
            [tk.Tunable(f"c{i}", fn) for i, fn in enumerate(fns)]
        )
        result = runoff(InProcessRunner(client, tunables, ()), [0, 1, 2], 100)
        assert result.ended == "tied" and result.stopped_early
        assert result.winner is not None and set(result.tied) | set(result.dropped) | {result.winner} == {0, 1, 2}
        assert result.winner not in result.tied and result.tied
    client = SimulatedClient(NoiseModel(noise=0.02), seed=1)
    client.warm_up(300 * MS)
    fns = [client.kernel(t * MS) for t in (1.0, 1.2)]
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", f) for i, f in enumerate(fns)]
    )
    separated = runoff(InProcessRunner(client, tunables, ()), [0, 1], 100)
    assert separated.ended == "separated" and separated.tied == () and separated.winner == 0


def test_the_verdict_says_what_decided_and_the_runoff_names_its_tied_finalists() -> None:
    client = SimulatedClient(NoiseModel(noise=0.002, cold_factor=3.0), seed=1)
    kernels = [client.kernel(t * MS) for t in (1.0, 1.0, 1.0, 2.0)]
    result = _batch(client, list(kernels), _settings())
    runoff_event = next(e for e in result.events if isinstance(e, tk.Runoff))
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.stage == "runoff"
    assert runoff_event.ended == verdict.decided_by == "tied" and runoff_event.tied
    assert verdict.winner not in runoff_event.tied

    client = SimulatedClient(NoiseModel(noise=0.01, cold_factor=3.0), seed=0)
    result = _batch(client, [client.kernel(t * MS) for t in (1.0, 1.3, 3.0)], _settings())
    assert result.events[-1].decided_by == "eliminations"  # type: ignore[union-attr]
    client = SimulatedClient(seed=0)
    (verdict,) = [e for e in _batch(client, [client.kernel(MS)], _settings()).events if isinstance(e, tk.Verdict)]
    assert verdict.decided_by == "single"
