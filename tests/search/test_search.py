"""The search driver: budgets, incumbents, strategy checks, and the record it emits."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from kt_cache import BEST, write_cache

import tunekit as tk
from tunekit._observe.event_text import describe_events
from tunekit._observe.sinks import CallbackSink
from tunekit._search import choose as _search
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.replay import ReplayClient, ReplayData, load_kernel_tuner_cache
from tunekit_backends.simulated import NoiseModel, SimulatedClient


@pytest.fixture
def replay(tmp_path: Path) -> tuple[ReplayData, ReplayClient]:
    data = load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))
    return data, ReplayClient(data)


def test_max_evals_is_honoured_and_named(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    for strategy in ("random", "model_ils", "genetic", "ils"):
        result = tk.search(data.space, client.kernel, client, (), tuner="t", strategy=strategy, max_evals=9, batch=4)
        assert result.evaluations == 9
        assert result.stopped_by == "max_evals"
        assert len({t.config for t in result.trials}) == 9


def test_max_seconds_ends_the_search_and_is_named() -> None:
    space = tk.Space(A=range(1000))

    def build(c: tk.Config) -> object:
        return lambda: time.sleep(0.002)

    result = tk.search(space, build, tk_cpu(), (), tuner="slow", strategy="random", max_seconds=0.2)
    assert result.stopped_by == "max_seconds"
    assert 0 < result.evaluations < 1000


def test_a_time_budget_spent_before_the_first_batch_still_measures_one() -> None:
    """max_seconds=1e-9 ended the search before any batch: no winner, "(no candidate was planned)"."""
    space = tk.Space(A=range(100))
    result = tk.search(space, lambda c: lambda: None, tk_cpu(), (), tuner="t", strategy="random", max_seconds=1e-9)
    assert result.stopped_by == "max_seconds"
    assert result.evaluations == 1, "the first configuration of the first batch, no more"


@pytest.mark.slow
def test_max_seconds_stops_inside_a_batch_at_the_first_trial_that_finds_the_time_spent(tmp_path: Path) -> None:
    """Regression: max_seconds was checked only between batches, so a batch of 40 ran whole past a 0.3 s budget."""
    space = tk.Space(A=range(40))

    def build(c: tk.Config) -> object:
        return lambda: time.sleep(0.02)

    log = tmp_path / "trials.jsonl"
    result = tk.search(space, build, tk_cpu(), (), tuner="t", strategy="random", batch=40, max_seconds=0.3, log=log)
    assert result.stopped_by == "max_seconds"
    # Admitting a candidate runs it at least twice (a warm-up and a kept sample): >= 0.04 s of sleep, so at
    # most 0.3 / 0.04 + 1 of them start before the deadline, however slow the machine; the old driver ran 40.
    assert 1 <= result.evaluations <= 9, result.evaluations
    entries = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    assert len(entries) == result.evaluations, "the configurations the deadline kept from starting are no trials"
    assert {e["status"] for e in entries} == {"measured"} and {e["batch_size"] for e in entries} == {len(entries)}


def test_a_build_that_cannot_take_the_configuration_is_refused_at_the_call() -> None:
    """build=lambda: kernel failed every candidate alike ("takes 0 positional arguments") after the whole search."""
    space = tk.Space(A=[1, 2, 3])
    pattern = r"tk.search\(build=...\): .*<lambda> cannot be called as build\(config\) \(.*\); it takes the config"
    with pytest.raises(TypeError, match=pattern):
        tk.search(space, lambda: lambda: 1, tk_cpu(), (), tuner="t")  # type: ignore[arg-type,misc]
    with pytest.raises(TypeError, match=r"TunableSet.from_space\(build=...\): .* cannot be called as build\(config\)"):
        tk.TunableSet.from_space(space, lambda c, x: x, key=lambda: None)  # type: ignore[arg-type]
    tk.TunableSet.from_space(space, lambda *args, **kw: args[0], key=lambda: None)  # any signature taking one


def test_the_best_trial_equals_its_trial_and_has_a_float_score(replay: tuple[ReplayData, ReplayClient]) -> None:
    """best is a tk.BestTrial (score typed float) that still compares equal to the trial it is."""
    data, client = replay
    result = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=5, finalists=0)
    assert isinstance(result.best, tk.BestTrial) and result.best in result.trials
    assert result.best == result.ranking[0] and hash(result.best) == hash(result.ranking[0])
    assert result.best.score == result.ranking[0].score


def tk_cpu() -> tk.Client:
    return CpuClient()


def test_auto_is_exhaustive_when_the_budget_covers_the_space(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    result = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=1000)
    assert result.strategy == "exhaustive"
    assert result.stopped_by == "exhausted"
    assert result.evaluations == data.space.size
    small = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=10)
    assert small.strategy == "model_ils"


def test_incumbents_are_measured_even_with_a_budget_of_one(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    required = [{"X": 1, "Y": 16, "Z": 0}, {"X": 16, "Y": 64, "Z": 2}, {"X": 4, "Y": 32, "Z": 1}]
    result = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=1, require=required)
    assert [t.config.to_dict() for t in result.trials] == required
    assert result.stopped_by == "max_evals"
    assert result.best is not None and result.best.config.values_tuple == BEST
    plain = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=5, require=required[:2], seed=3)
    assert plain.best is not None and plain.best.score is not None
    assert all(plain.best.score <= t.score for t in plain.trials[:2] if t.score is not None)


def test_a_required_configuration_outside_the_space_is_an_error(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    with pytest.raises(ValueError, match="not in the space"):
        tk.search(data.space, client.kernel, client, (), tuner="t", require=[{"X": 16, "Y": 128, "Z": 0}])
    with pytest.raises(ValueError, match="is not one of"):
        tk.search(data.space, client.kernel, client, (), tuner="t", require=[{"X": 3, "Y": 16, "Z": 0}])


def test_the_search_emits_a_record_saying_how_it_ended(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    records: list[tk.AutotuneRecord] = []
    tk.search(
        data.space, client.kernel, client, (), tuner="t", max_evals=6, sinks=[CallbackSink(records.append)], seed=1
    )
    (record,) = records
    event, *final = record.events  # then how the finalists' batch decided
    assert isinstance(event, tk.SearchEnded) and any(isinstance(e, tk.Round) for e in final)
    assert event.stopped_by == "max_evals" and event.evaluations == 6 and event.space_hash == data.space.hash
    assert len(record.candidates) == 6
    assert tk.AutotuneRecord.model_validate_json(record.model_dump_json()) == record


def test_the_search_record_of_a_resumed_search_keeps_the_time_earlier_runs_spent(
    replay: tuple[ReplayData, ReplayClient], tmp_path: Path
) -> None:
    """Regression: SearchEnded lacked result.earlier_seconds, so a record of a resumed search hid the time before it."""
    data, client = replay
    log = tmp_path / "trials.jsonl"
    first: list[tk.AutotuneRecord] = []
    tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=3, log=log, sinks=[first.append], seed=1)
    fresh = first[0].events[0]
    assert isinstance(fresh, tk.SearchEnded) and fresh.earlier_seconds == 0.0
    assert "earlier runs" not in " ".join(describe_events(first[0].events))
    records: list[tk.AutotuneRecord] = []
    result = tk.search(
        data.space, client.kernel, client, (), tuner="t", max_evals=5, log=log, sinks=[records.append], seed=1
    )
    event = records[0].events[0]
    assert isinstance(event, tk.SearchEnded) and event.resumed == 3
    assert event.earlier_seconds == result.earlier_seconds and result.earlier_seconds > 0
    read_back = tk.AutotuneRecord.model_validate_json(records[0].model_dump_json())
    assert read_back == records[0]
    text = next(line for line in describe_events(read_back.events) if line.startswith("search"))
    assert f"(3 resumed from the trial log; earlier runs spent {result.earlier_seconds:.3g} s of its time)" in text
    # A record written before the field was kept still reads, and says nothing of it.
    older = records[0].model_dump(mode="json")
    del older["events"][0]["earlier_seconds"]
    old_event = tk.AutotuneRecord.model_validate(older).events[0]
    assert isinstance(old_event, tk.SearchEnded) and old_event.earlier_seconds is None
    assert "earlier runs" not in " ".join(describe_events([old_event]))


class Repeating:
    """A broken strategy: proposes the same configuration forever."""

    def __init__(self, space: tk.Space, rng: np.random.Generator) -> None:
        self.first = next(iter(space))

    def propose(self, n: int) -> list[tk.Config]:
        return [self.first]

    def observe(self, config: tk.Config, score: float | None) -> None:
        pass


def test_a_strategy_that_repeats_itself_is_stopped_with_its_name(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    with pytest.raises(tk.TunekitError, match="Repeating.*twice"):
        tk.search(data.space, client.kernel, client, (), tuner="t", strategy=Repeating, max_evals=5)


def test_the_same_seed_gives_the_same_search(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, _ = replay

    def run(seed: int) -> list[tk.Config]:
        client = ReplayClient(data)
        result = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=15, seed=seed)
        return [t.config for t in result.trials]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_finalists_are_remeasured_together_and_decide_the_winner(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    result = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=20, finalists=3, seed=2)
    leaders = sorted((t for t in result.trials if t.score is not None), key=lambda t: t.score or 0)[:3]
    assert {t.config for t in result.finalists} == {t.config for t in leaders}
    assert all(t.score is not None for t in result.finalists)
    assert result.best in result.finalists
    assert result.evaluations == 20, "finalists do not count against the budget"
    none = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=20, finalists=0, seed=2)
    assert none.finalists == ()


def test_the_record_shows_the_finalists_remeasurement_that_decided_the_winner(
    replay: tuple[ReplayData, ReplayClient],
) -> None:
    """The record kept the search-phase medians: `records summary` could show the winner slower than its runner-up."""
    data, client = replay
    records: list[tk.AutotuneRecord] = []
    result = tk.search(
        data.space, client.kernel, client, (), tuner="t", max_evals=20, finalists=3, seed=2, sinks=[records.append]
    )
    (record,) = records
    medians = {c.name: c.stats.median_ns for c in record.candidates if c.stats is not None}
    assert result.best is not None and record.winner == result.best.config.name
    for finalist in result.finalists:
        assert medians[finalist.config.name] == finalist.score
    assert len(record.candidates) == 20


def test_a_factory_that_builds_no_strategy_is_refused(replay: tuple[ReplayData, ReplayClient]) -> None:
    data, client = replay
    with pytest.raises(TypeError, match="lacks propose"):
        tk.search(data.space, client.kernel, client, (), tuner="t", strategy=lambda s, r: object(), max_evals=3)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ({"seed": None}, r"tk.search\(seed=...\) must be an int, got None"),
        ({"seed": 1.5}, r"seed=...\) must be an int"),
        # A negative seed failed inside the strategy as numpy's "expected non-negative integer".
        ({"seed": -1}, r"tk.search\(seed=...\) must be an int >= 0, got -1"),
        ({"max_evals": 2.5}, r"tk.search\(max_evals=...\) must be a positive int .* got 2.5"),
        ({"max_evals": 0}, r"max_evals=...\) must be a positive int"),
        ({"max_evals": True}, r"max_evals=...\) must be a positive int"),
        ({"max_seconds": 0}, r"tk.search\(max_seconds=...\) must be a positive number"),
        ({"max_seconds": "10"}, r"max_seconds=...\) must be a positive number"),
        ({"batch": 0}, r"tk.search\(batch=...\) must be a positive int"),
        ({"finalists": -1}, r"tk.search\(finalists=...\) must be an int >= 0"),
        (
            {"require": {"block_size_x": 16}},
            r"tk.search\(require=...\) takes a list of configurations.*require=\[config\]",
        ),
        # It said to put the configuration in a list, which it was: the item is what is wrong.
        (
            {"require": ["block_size_x=16"]},
            r"tk.search\(require=...\): item 0 is the str 'block_size_x=16', not a configuration; give a tk.Config",
        ),
        ({"require": [{"block_size_x": 16}, ("block_size_x", 16)]}, r"item 1 is the tuple \('block_size_x', 16\)"),
        ({"strategy": 5}, r"tk.search\(strategy=...\) takes a strategy name .* got 5"),
        ({"strategy": "anneal"}, r"tk.search\(strategy=...\): unknown strategy 'anneal'; choose one of"),
        ({"log": 5}, r"tk.search\(log=...\) takes a file path .* got 5"),
        (
            {"strategy": tk.Space},
            r"tk.search\(strategy=...\): Space cannot be called as factory\(space, numpy Generator\) .*too many",
        ),
        ({"strategy": lambda space: None}, r"<lambda> cannot be called as factory\(space, numpy Generator\)"),
    ],
)
def test_bad_search_arguments_are_refused_before_anything_is_measured(
    replay: tuple[ReplayData, ReplayClient], argument: dict[str, object], message: str
) -> None:
    """seed=None failed after the whole search ran; max_evals=2.5 blamed the strategy; a require dict was unpacked;
    strategy=5 failed inside the driver as "'int' object is not callable"; log=5 failed naming no argument; a class that
    is no factory failed as "Space.__init__() takes 1 positional argument but 3 were given"."""
    data, client = replay
    built: list[tk.Config] = []

    def build(config: tk.Config) -> object:
        built.append(config)
        return client.kernel(config)

    with pytest.raises((TypeError, ValueError), match=message):
        tk.search(data.space, build, client, (), tuner="t", **{"max_evals": 5, **argument})  # type: ignore[arg-type]
    assert built == []


def test_a_search_with_no_limit_over_a_space_too_big_to_walk_is_refused_before_anything_is_built() -> None:
    """tk.search(big, ...) with max_evals forgotten measured configuration after configuration, silently, for days."""
    big = tk.Space(A=range(1000), B=range(1000), C=range(100))
    built: list[tk.Config] = []

    def build(config: tk.Config) -> Any:
        built.append(config)
        return lambda: None

    for options in ({}, {"strategy": "random"}, {"budget": tk.Budget(seed=3)}):
        with pytest.raises(ValueError) as raised:
            tk.search(big, build, CpuClient(), (), tuner="big", **options)  # type: ignore[arg-type]
        assert str(raised.value) == (
            "tk.search() without max_evals or max_seconds measures every configuration of the space, up to "
            "100,000,000 of them here (over 10,000,000: days at a millisecond each); give it a budget, "
            "e.g. max_evals=200 or max_seconds=600"
        )
    assert built == []
    bounded = tk.search(big, build, CpuClient(), (), tuner="big", strategy="random", max_evals=2, finalists=0)
    assert bounded.evaluations == 2 and len(built) == 2


def test_a_bad_space_build_inputs_or_tuner_is_refused_before_anything_is_built(
    replay: tuple[ReplayData, ReplayClient],
) -> None:
    """A bare array as inputs was split into one argument per element and failed every candidate; a list as the
    space blamed the strategy; a non-callable build failed every candidate; an empty tuner was recorded; a str as the
    client failed as "'str' object has no attribute 'device_id'"."""
    data, client = replay
    built: list[tk.Config] = []

    def build(config: tk.Config) -> object:
        built.append(config)
        return client.kernel(config)

    with pytest.raises(TypeError, match=r"tk.search\(\) takes the inputs as a tuple, e.g. \(x,\).*got ndarray"):
        tk.search(data.space, build, client, np.ones(3), tuner="t", max_evals=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tk.search\(\) takes a tk.Space first, got list"):
        tk.search([1, 2], build, client, (), tuner="t", max_evals=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tk.search\(build=...\) takes a callable config -> runnable, got int"):
        tk.search(data.space, 5, client, (), tuner="t", max_evals=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"tk.search\(tuner=...\) must be a non-empty str, got ''"):
        tk.search(data.space, build, client, (), tuner="", max_evals=2)
    with pytest.raises(TypeError, match=r"tk.search\(client=...\): the client must be a tk.Client.* got str 'cpu'"):
        tk.search(data.space, build, "cpu", (), tuner="t", max_evals=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tk.search\(client=...\): the client is the class ReplayClient"):
        tk.search(data.space, build, ReplayClient, (), tuner="t", max_evals=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tk.search\(tuner=...\) must be a non-empty str, got 5"):
        tk.search(data.space, build, client, (), tuner=5, max_evals=2)  # type: ignore[arg-type]
    assert built == []
    assert tk.search(data.space, build, client, [], tuner="t", max_evals=2).evaluations == 2  # a list is fine


def test_numpy_numbers_are_accepted_as_seed_and_limits(replay: tuple[ReplayData, ReplayClient]) -> None:
    """The up-front checks refused seed=np.int64(0), which the search itself had always taken."""
    data, client = replay
    plain = tk.search(data.space, client.kernel, client, (), tuner="t", seed=3, max_evals=6)
    numpy_args = tk.search(
        data.space,
        client.kernel,
        client,
        (),
        tuner="t",
        seed=np.int64(3),
        max_evals=np.int64(6),
        max_seconds=np.float32(60),
    )
    assert [t.config for t in numpy_args.trials] == [t.config for t in plain.trials]


class ProposesDicts:
    def __init__(self, space: tk.Space, rng: np.random.Generator) -> None:
        self.first = next(iter(space))

    def propose(self, n: int) -> list[tk.Config]:
        return [self.first.to_dict()]  # type: ignore[list-item]

    def observe(self, config: tk.Config, score: float | None) -> None:
        pass


def test_a_strategy_that_proposes_dicts_is_told_to_propose_configs(replay: tuple[ReplayData, ReplayClient]) -> None:
    """A strategy proposing dicts failed with "unhashable type: 'dict'"."""
    data, client = replay
    with pytest.raises(tk.TunekitError, match=r"ProposesDicts.*a dict, not a tk.Config"):
        tk.search(data.space, client.kernel, client, (), tuner="t", strategy=ProposesDicts, max_evals=3)


class ProposesCartesianPoints:
    """Proposes space.at(i) for i = 0, 1, ...: what the advice for a strategy proposing dicts said to do."""

    def __init__(self, space: tk.Space, rng: np.random.Generator) -> None:
        self.space, self.next = space, 0

    def propose(self, n: int) -> list[tk.Config]:
        indices = range(self.next, min(self.next + n, self.space.cartesian_size))
        self.next += n
        return [self.space.at(i) for i in indices]

    def observe(self, config: tk.Config, score: float | None) -> None:
        pass


def test_the_advice_to_a_strategy_gives_configurations_the_restrictions_allow() -> None:
    """Regression: told to propose space.at(i), a strategy proposed restricted-out points, refused with no reason."""
    space = tk.Space(A=[1, 2, 3], B=[1, 2, 3], restrict=lambda c: c.A <= c.B)

    def build(config: tk.Config) -> Any:
        return lambda: None

    with pytest.raises(tk.TunekitError) as refused:
        tk.search(space, build, CpuClient(), (), tuner="t", strategy=ProposesCartesianPoints, max_evals=9)
    said = str(refused.value)
    assert "proposed Config(A=2, B=1), which is not in the space" in said
    assert "excluded by the space's restriction #1" in said and "c.A <= c.B" in said
    assert "space.at(i) and space.from_positions(...) give any Cartesian point" in said
    assert "space.sample(n, rng)" in said
    with pytest.raises(tk.TunekitError, match=r"ProposesDicts.*a dict, not a tk.Config") as dicts:
        tk.search(space, build, CpuClient(), (), tuner="t", strategy=ProposesDicts, max_evals=3)
    assert "space.allows(config)" in str(dicts.value), "the advice keeps at(i) only with its check"


def test_a_small_budget_starts_climbing_after_a_quarter_of_it(replay: tuple[ReplayData, ReplayClient]) -> None:
    """auto spent its first 20 evaluations on random points, so a budget of 12 was random search."""
    data, _ = replay
    for seed in range(3):
        client = ReplayClient(data, seed=seed)
        result = tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=12, seed=seed)
        assert result.strategy == "model_ils"
        first = [t for t in result.trials[:4] if t.score is not None]
        start = min(first, key=lambda t: t.score or 0.0).config
        changed = [n for n in data.space.names if result.trials[4].config[n] != start[n]]
        assert len(changed) == 1, (seed, start, result.trials[4].config)


def test_a_space_whose_restrictions_reject_everything_is_an_error_not_an_empty_result(tmp_path: Path) -> None:
    """A restriction rejecting every point returned a result with no trials and best=None, saying nothing."""
    space = tk.Space(BLOCK=[64, 128], restrict=lambda c: c.BLOCK > 1024)
    with pytest.raises(ValueError, match=r"no valid configuration: its restrictions reject all 2 points.*restrict="):
        tk.search(space, lambda c: lambda: None, tk_cpu(), (), tuner="t", max_evals=5, log=tmp_path / "t.jsonl")
    # the log is released: a corrected search may use it at once
    fixed = tk.Space(BLOCK=[64, 128])
    assert tk.search(fixed, lambda c: lambda: None, tk_cpu(), (), tuner="t2", log=tmp_path / "u.jsonl").evaluations == 2


@pytest.mark.parametrize("strategy", ["auto", "random"])
def test_a_space_too_big_to_walk_whose_restrictions_reject_everything_is_an_error(
    strategy: tk.StrategyName, few_hopeless_draws: int
) -> None:
    """A restriction rejecting all 10^12 points (a typo) had every search drawing at random for weeks."""
    space = tk.Space(restrict=lambda c: c.A < 0, **{name: range(1000) for name in "ABCD"})
    with pytest.raises(
        ValueError, match=rf"no configuration passed the space's restrictions in {few_hopeless_draws:,} random draws"
    ):
        tk.search(space, lambda c: lambda: None, tk_cpu(), (), tuner="t", strategy=strategy, max_evals=5)


class ProposesAGenerator(ProposesDicts):
    def propose(self, n: int) -> list[tk.Config]:
        return (c for c in [self.first])  # type: ignore[return-value]


def test_a_strategy_that_proposes_a_generator_is_told_to_return_a_list(replay: tuple[ReplayData, ReplayClient]) -> None:
    """A strategy returning a generator failed as "object of type 'generator' has no len()"."""
    data, client = replay
    with pytest.raises(tk.TunekitError, match=r"ProposesAGenerator.*proposed a generator; propose\(n\) returns a list"):
        tk.search(data.space, client.kernel, client, (), tuner="t", strategy=ProposesAGenerator, max_evals=3)


class Instant:
    """An objective measured at no cost: a configuration's score is the sum of its values."""

    def __init__(self, space: tk.Space) -> None:
        self.space = space

    def measure(self, config: tk.Config) -> tk.Outcome:
        return tk.Measured(tk.BenchmarkDurations((sum(config.values_tuple) + 1,)))

    def remaining(self) -> int | None:
        return None


def test_auto_is_exhaustive_when_the_budget_covers_a_large_restricted_space() -> None:
    """Over 50,000 Cartesian points auto never counted, so a budget covering all 600 valid points ran model_ils."""
    space = tk.Space(A=range(300), B=range(200), restrict=lambda c: c.A % 100 == 0)
    covered = tk.tune_objective(Instant(space), tuner="t", device_id="d", max_evals=700)
    assert covered.strategy == "exhaustive" and covered.stopped_by == "exhausted" and covered.evaluations == 600
    short = tk.tune_objective(Instant(space), tuner="t", device_id="d", max_evals=40)
    assert short.strategy == "model_ils" and short.evaluations == 40


def test_auto_does_not_count_a_restricted_space_past_the_counting_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    def restrict(c: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool(c.A == 0)

    space = tk.Space(A=range(100), B=range(100), restrict=restrict)
    monkeypatch.setattr(_search, "AUTO_COUNT_LIMIT", 9_999)
    assert not _search.budget_covers(space, 100, None) and calls == 0
    monkeypatch.setattr(_search, "AUTO_COUNT_LIMIT", 10_000)
    assert _search.budget_covers(space, 100, None) and calls == 10_000


def _fails(config: tk.Config) -> object:
    raise RuntimeError(f"no kernel for BLOCK={config.BLOCK}")


def test_a_search_where_every_configuration_fails_raises_after_keeping_the_trials(tmp_path: Path) -> None:
    """tk.search returned best=None where execute raises NoValidKernelFound: result.best.config failed far away."""
    space = tk.Space(BLOCK=tk.pow2(1, 2**24))
    records: list[tk.AutotuneRecord] = []
    log = tmp_path / "t.jsonl"
    with pytest.raises(tk.NoValidKernelFound) as caught:
        tk.search(
            space, _fails, tk_cpu(), (), tuner="t", max_evals=24, strategy="random", log=log, sinks=[records.append]
        )
    error = caught.value
    assert len(error.failures) == 24 and all("no kernel for BLOCK=" in reason for _, reason in error.failures)
    text = str(error)
    # One reason, each configuration's own name in it: one line, the others named beside it.
    assert text.startswith("tuner 't': no valid candidate:\n  - BLOCK=")
    assert "\n    the same for 23 more: BLOCK=" in text
    assert "(random, seed 0) evaluated 24 configurations and stopped at max_evals; a larger max_evals" in text
    assert f"every trial is kept in {log}" in text
    (record,) = records
    assert record.winner is None and len(record.candidates) == 24
    assert len(log.read_text().splitlines()) == 1 + 24


@tk.autotune_key
class _Length:
    n: Annotated[int, tk.Anchor()]


_FILL = """
__kernel void fill(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (float)(BLOCK);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
def test_a_search_over_a_kernel_template_names_its_candidates_as_the_tuner_does() -> None:
    """Regression: tk.search's record named a KernelTemplate's candidates 'BLOCK=16', its tuner's 'fill[BLOCK=16]'."""
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(_FILL, "fill", {"BLOCK": [8, 16, 32]}, geometry=lambda c, k: ((k.n,), (int(c.BLOCK),)))
    tunables = template.tunable_set(client, key=lambda y, n: _Length(n=int(n)))
    y = cla.zeros(client.queue, 64, np.float32)

    def build(config: tk.Config) -> Any:
        index = tunables.index_of(template.name_of(config))
        assert index is not None
        return tunables.tunables[index].fn

    searched: list[tk.AutotuneRecord] = []
    inputs = (y, np.int32(64))
    tk.search(template.space, build, client, inputs, tuner="fill", name_of=template.name_of, sinks=[searched.append])
    tuned: list[tk.AutotuneRecord] = []
    tk.LocalTuner[_Length, Any]("fill", sinks=[tuned.append]).execute(client.device_id, client, tunables, inputs)
    (search_record,), (tune_record,) = searched, tuned
    names = sorted(c.name for c in tune_record.candidates)
    assert names == ["fill[BLOCK=16]", "fill[BLOCK=32]", "fill[BLOCK=8]"]
    assert sorted(c.name for c in search_record.candidates) == names
    assert search_record.winner in names
    with pytest.raises(TypeError, match=r"tk.search\(name_of=...\) takes a callable config -> candidate name"):
        tk.search(template.space, build, client, inputs, tuner="fill", name_of="fill")  # type: ignore[arg-type]


class Cheap:
    """A deterministic objective: a configuration costs its index."""

    def __init__(self, space: tk.Space) -> None:
        self.space = space

    def measure(self, config: tk.Config) -> tk.Outcome:
        return tk.Measured(tk.BenchmarkDurations((100 + self.space.index(config),)))

    def remaining(self) -> int | None:
        return None


@pytest.mark.parametrize("strategy", ["auto", "exhaustive", "random", "model_ils"])
def test_a_budget_that_runs_out_with_the_last_configuration_says_the_space_was_exhausted(strategy: str) -> None:
    """An 80-point space searched whole with max_evals=80 was recorded as stopped by max_evals, as if cut short."""
    whole = tk.tune_objective(
        Cheap(tk.Space(A=range(40), B=["x", "y"])), tuner="t", device_id="d", max_evals=80, strategy=strategy
    )
    assert (whole.evaluations, whole.stopped_by) == (80, "exhausted")
    cut = tk.tune_objective(
        Cheap(tk.Space(A=range(40), B=["x", "y"])), tuner="t", device_id="d", max_evals=79, strategy=strategy
    )
    assert (cut.evaluations, cut.stopped_by) == (79, "max_evals")


def test_a_counted_restricted_space_searched_whole_within_its_budget_says_exhausted() -> None:
    space = tk.Space(A=range(40), B=["x", "y"], restrict=lambda c: c.A % 2 == 0)
    result = tk.tune_objective(Cheap(space), tuner="t", device_id="d", max_evals=40, max_seconds=3600)
    assert (result.strategy, result.evaluations, result.stopped_by) == ("exhaustive", 40, "exhausted")


def test_a_finalist_that_fails_its_remeasurement_does_not_win() -> None:
    """Regression: it was ranked by its search-phase median and won, recorded as failed and cached all the same."""
    space = tk.Space(A=[0, 1, 2, 3])
    searched = threading.Event()  # set when the strategy has nothing left: from then on, the finals run

    def build(config: tk.Config) -> Any:
        def run(x: np.ndarray) -> np.ndarray:
            if config.A == 0:  # the fastest, until it breaks in the finals
                if searched.is_set():
                    raise RuntimeError("broke in the finals")
                return x
            return np.sort(x)

        return run

    class Once:
        def __init__(self, space: tk.Space, rng: np.random.Generator) -> None:
            self.left = list(space)[:3]  # then nothing: a space searched whole ends without asking

        def propose(self, n: int) -> list[tk.Config]:
            proposed, self.left = self.left[:n], self.left[n:]
            if not proposed:
                searched.set()
            return proposed

        def observe(self, config: tk.Config, score: float | None) -> None:
            pass

    records: list[tk.AutotuneRecord] = []
    x = np.random.default_rng(0).standard_normal(20_000)
    result = tk.search(space, build, CpuClient(), (x,), tuner="flaky", strategy=Once, sinks=[records.append])
    assert 0 in [t.config.A for t in result.trials if t.score is not None]  # it was measured in the search
    assert result.best.config.A != 0
    assert 0 not in [t.config.A for t in result.ranking]
    (record,) = records
    assert record.winner == result.best.config.name
    assert {c.name: c.status for c in record.candidates}["A=0"] == "failed"


def test_an_incumbent_measured_cold_is_re_measured_with_the_finalists() -> None:
    """A required configuration timed alone on a cold device (one sample) was left out of the finalists: the winner
    was slower than it, though the issue promises the winner always beats or equals every incumbent."""
    tk.configure(warmup_ms=0)
    client = SimulatedClient(NoiseModel(ramp=2.0, ramp_tau_ms=20.0), seed=0)
    true_ns = {x: 1_000_000 if x == 0 else 1_200_000 + 10_000 * x for x in range(40)}
    result = tk.search(
        tk.Space(X=range(40)),
        lambda c: client.kernel(true_ns[c.X]),
        client,
        (),
        tuner="cold",
        require=[{"X": 0}],
        max_evals=24,
        finalists=1,
        seed=0,
    )
    first = result.trials[0]
    assert first.config.X == 0 and first.score is not None and first.score > 1.3 * 1_200_000  # measured cold
    assert result.best is not None and result.best.config.X == 0


def test_a_configuration_measured_alone_gets_min_samples() -> None:
    """A batch of one (batch=1, an incumbent, the budget's last) was timed once, and that single sample was
    compared with other batches' medians; the tuner's own one-candidate batch still takes one."""
    client = SimulatedClient(NoiseModel(noise=0.05), seed=0)
    result = tk.search(
        tk.Space(X=range(10)), lambda c: client.kernel(1_000_000 + 50_000 * c.X), client, (), tuner="alone", batch=1
    )
    counts = {len(t.outcome.durations.samples_ns) for t in result.trials if isinstance(t.outcome, tk.Measured)}
    assert counts == {tk.settings().min_samples}, counts


def test_a_huge_space_whose_only_valid_point_is_an_incumbent_ends_exhausted_with_it(few_hopeless_draws: int) -> None:
    """The hopeless-draws error ignored a measured incumbent: the search raised "rejects everything" and lost it."""
    space = tk.Space(restrict=lambda c: c.values_tuple == (7, 0, 0, 0), **{name: range(100) for name in "ABCD"})
    client = SimulatedClient(seed=0)
    result = tk.search(
        space,
        lambda c: client.kernel(1_000_000),
        client,
        (),
        tuner="one",
        require=[{"A": 7, "B": 0, "C": 0, "D": 0}],
        strategy="random",
        max_evals=5,
    )
    assert result.stopped_by == "exhausted" and [t.config.values_tuple for t in result.trials] == [(7, 0, 0, 0)]


def test_search_gates_each_configuration_against_the_reference_before_timing_it(tmp_path: Path) -> None:
    """tk.search had no correctness gate: a wrong kernel (CHUNK 256 skips its last chunk) was timed and could win."""

    def build(config: tk.Config) -> Any:
        def axpy(x: np.ndarray, y: np.ndarray) -> None:
            stop = len(x) - config.CHUNK if config.CHUNK == 256 else len(x)  # the wrong one: fastest, skips work
            for start in range(0, stop, config.CHUNK):
                y[start : start + config.CHUNK] += 2 * x[start : start + config.CHUNK]

        return axpy

    space = tk.Space(CHUNK=[8, 16, 32, 64, 128, 256])
    client = CpuClient()
    log = tmp_path / "axpy.jsonl"
    result = tk.search(
        space,
        build,
        client,
        (np.arange(1024.0), np.ones(1024)),
        tuner="axpy",
        strategy="exhaustive",
        batch=2,
        log=log,
        reference=lambda x, y: 2 * x + y,
        outputs=[1],
    )
    by_chunk = {t.config.CHUNK: t.outcome for t in result.trials}
    wrong = by_chunk[256]
    assert isinstance(wrong, tk.Failed) and wrong.stage == "check", wrong
    # Every correct one passed, in every batch: their in-place writes did not spoil later checks.
    assert all(isinstance(by_chunk[c], tk.Measured) for c in (8, 16, 32, 64, 128)), by_chunk
    assert result.best is not None and result.best.config.CHUNK != 256
    assert '"stage":"check"' in log.read_text().replace(" ", "")


def test_search_refuses_a_reference_that_is_not_callable_before_measuring() -> None:
    with pytest.raises(TypeError, match=r"tk.search\(reference=...\) takes a callable"):
        tk.search(tk.Space(A=[1]), lambda c: lambda: 1, CpuClient(), (), tuner="t", reference=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"needs the expected outputs: pass reference=fn"):
        tk.search(tk.Space(A=[1]), lambda c: lambda: 1, CpuClient(), (), tuner="t", outputs=[0])
    with pytest.raises(TypeError, match=r"tk.search\(outputs=...\) takes a list"):
        tk.search(tk.Space(A=[1]), lambda c: lambda: 1, CpuClient(), (), tuner="t", reference=abs, outputs=1)  # type: ignore[arg-type]


def test_explicit_searches_refuse_to_measure_when_autotuning_is_off(tmp_path: Path) -> None:
    """Regression: tk.search and tk.tune_objective measured and wrote their logs under TUNEKIT_AUTOTUNE=0."""
    tk.configure(autotune=False)
    built: list[str] = []

    def build(config: tk.Config) -> Any:
        built.append(config.name)
        return lambda: None

    space = tk.Space(N=[1, 2, 4])
    with pytest.raises(tk.AutotuneDisabled, match=r"tk.search\(tuner='off'\).*autotuning is off.*TUNEKIT_AUTOTUNE=0"):
        tk.search(space, build, tk_cpu(), (), tuner="off", log=tmp_path / "s.jsonl")
    objective = Cheap(space)
    objective.measure = lambda config: pytest.fail(f"measured {config.name}")  # type: ignore[method-assign]
    with pytest.raises(tk.AutotuneDisabled, match=r"tk.tune_objective\(tuner='off'\).*TUNER.execute"):
        tk.tune_objective(objective, tuner="off", device_id="d", log=tmp_path / "o.jsonl")
    assert built == [] and list(tmp_path.iterdir()) == []
    # A searched set inside execute follows the setting like any set: the first configuration, unmeasured.
    tunables = tk.TunableSet.from_space(space, build, key=lambda: _Length(n=1)).with_search(
        max_evals=2, log=tmp_path / "w.jsonl"
    )
    records: list[tk.AutotuneRecord] = []
    client = tk_cpu()
    tk.LocalTuner[_Length, Any]("off", sinks=[records.append]).execute(client.device_id, client, tunables, ())
    assert built == ["N=1"] and list(tmp_path.iterdir()) == []
    assert [(r.decision, r.winner) for r in records] == [("disabled", "N=1")]


def test_a_build_that_raises_is_a_compile_failure_in_the_result_log_record_and_error(tmp_path: Path) -> None:
    """build(config) raising was a failure at stage 'run' in the trials, the log, the record and the error."""

    def build(config: tk.Config) -> Any:
        if config.B != 1:
            raise ValueError(f"B={config.B} does not build")
        return lambda x: x.sum()

    records: list[tk.AutotuneRecord] = []
    log = tmp_path / "lazy.jsonl"
    space = tk.Space(B=[1, 2, 3])
    result = tk.search(
        space, build, CpuClient(), (np.ones(8),), tuner="lazy", strategy="exhaustive", log=log, sinks=[records.append]
    )
    failed = [t.outcome for t in result.trials if t.config.B == 2]
    assert failed == [tk.Failed("ValueError: B=2 does not build", "compile")]
    assert {(c.name, c.stage) for c in records[-1].candidates if c.status == "failed"} == {
        ("B=2", "compile"),
        ("B=3", "compile"),
    }
    assert log.read_text().replace(" ", "").count('"stage":"compile"') == 2
    with pytest.raises(tk.NoValidKernelFound, match="B=2: compile: ValueError: B=2 does not build"):
        tk.search(tk.Space(B=[2]), build, CpuClient(), (np.ones(8),), tuner="none-build")


def test_a_restricted_space_searched_whole_within_max_evals_is_exhausted() -> None:
    """Regression: with a restriction no point fails, a budget equal to the space ended 'max_evals', not 'exhausted'."""
    space = tk.Space(A=[1, 2, 3, 4], B=[1, 2, 3], restrict=lambda c: c.A + c.B < 100)
    for strategy in ("auto", "exhaustive"):
        result = tk.search(
            space, lambda c: lambda x: x, CpuClient(), (1,), tuner="whole", max_evals=12, strategy=strategy
        )
        assert (result.evaluations, result.stopped_by) == (12, "exhausted"), strategy
