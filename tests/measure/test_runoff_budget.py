"""The runoff's shared sample budget and its futility bound, on the simulated device (deterministic)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

import pytest

import tunekit as tk
from tunekit._measure.evidence import Gap
from tunekit._measure.runner import InProcessRunner
from tunekit._measure.runoff import BUDGET_FINALISTS, RunoffResult, runoff
from tunekit._measure.schedule import measure_batch
from tunekit_backends.simulated import NoiseModel, SimulatedClient

MS = 1_000_000


@tk.autotune_key
class SizeKey:
    n: Annotated[int, tk.Anchor()]


def _runoff(times: list[float], seed: int, noise: float = 0.02, **kwargs: Any) -> RunoffResult:
    client = SimulatedClient(NoiseModel(noise=noise), seed=seed)
    client.warm_up(300 * MS)
    fns: list[Callable[..., Any]] = [client.kernel(t * MS) for t in times]
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", fn) for i, fn in enumerate(fns)]
    )
    return runoff(InProcessRunner(client, tunables, ()), list(range(len(fns))), 100, **kwargs)


def test_sixteen_identical_finalists_share_the_budget_and_some_leave_undecidable() -> None:
    """Before the budget, sixteen finalists no round could separate ran 100 rounds each (~1,600 samples)."""
    endings = set()
    for seed in range(10):
        result = _runoff([1.0] * 16, seed)
        spent = sum(len(r) for r in result.rounds)
        assert spent <= BUDGET_FINALISTS * 100, f"seed {seed}: {spent} samples"
        assert result.tied, f"seed {seed}: no finalist left as undecidable in the budget"
        assert result.winner is not None and result.winner not in result.tied
        assert result.ended in ("tied", "max_rounds")
        endings.add(result.ended)
    assert endings == {"tied", "max_rounds"}


def test_the_budget_does_not_lose_a_finalist_3pct_faster_than_eleven_identical_ones() -> None:
    wins = sum(_runoff([1.03] * 11 + [1.0], seed).winner == 11 for seed in range(30))
    assert wins == 30, f"the 3% faster finalist won {wins}/30 runoffs"


def test_two_finalists_3pct_apart_are_still_separated() -> None:
    for seed in range(30):
        result = _runoff([1.0, 1.03], seed)
        assert (result.ended, result.winner, result.tied) == ("separated", 0, ()), f"seed {seed}"


def test_a_budget_smaller_than_a_round_still_runs_one_round() -> None:
    result = _runoff([1.0, 1.0, 1.0], 0, budget=1)
    assert len(result.rounds) == 1 and result.ended == "max_rounds" and result.winner is not None


def test_many_identical_candidates_end_with_a_tie_recorded_in_the_runoff_event() -> None:
    client = SimulatedClient(NoiseModel(noise=0.02, cold_factor=3.0), seed=2)
    times = [1.0] * 14 + [1.5, 2.0]
    fns = [client.kernel(t * MS) for t in times]
    tunables = tk.TunableSet(key=lambda n: SizeKey(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", fn) for i, fn in enumerate(fns)]
    )
    settings = tk.Settings(warmup_ms=300.0, warmup=1, adaptive=True)
    result = measure_batch(
        InProcessRunner(client, tunables, ()), range(len(fns)), settings, client=client, names=tunables.names
    )
    event = next(e for e in result.events if isinstance(e, tk.Runoff))
    assert len(event.finalists) >= 10
    assert sum(len(r) for r in event.rounds_ns) <= BUDGET_FINALISTS * settings.runoff_pairs
    assert event.tied and event.winner not in event.tied
    assert set(event.tied) | set(event.dropped) <= set(event.finalists)
    verdict = result.events[-1]
    assert isinstance(verdict, tk.Verdict) and verdict.decided_by == event.ended


def test_decidable_is_the_predictive_probability_of_a_decision() -> None:
    # Nothing left to sample: decided now or never.
    assert Gap(0.05, 0.01, 1000, 1000).decidable(2.5, 0) == 1.0
    assert Gap(0.001, 0.01, 1000, 1000).decidable(2.5, 0) == 0.0
    # A gap at zero, the pairs to come as many as those so far: the final estimate's deviation is
    # se / sqrt(2) and the final half-width t se / sqrt(2), so each side has Phi(-t).
    g = Gap(0.0, 0.01, 10_000, 10_000)
    assert g.decidable(2.5, 10_000) == pytest.approx(math.erfc(2.5 / math.sqrt(2)), rel=1e-3)
    # More pairs to come, or a larger gap, make a decision likelier.
    assert Gap(0.0, 0.01, 20, 20).decidable(2.5, 10) < Gap(0.0, 0.01, 20, 20).decidable(2.5, 100)
    assert Gap(0.005, 0.01, 20, 20).decidable(2.5, 50) < Gap(0.02, 0.01, 20, 20).decidable(2.5, 50)
    # Too few pairs to say: never futile.
    assert Gap(0.0, math.inf, 0, 1).decidable(2.5, 10) == 1.0
