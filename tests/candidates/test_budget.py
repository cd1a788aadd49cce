"""tk.Budget: one checked value for a search's options, taken by tk.search, with_search and tune_objective."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kt_cache import write_cache

import tunekit as tk
from tunekit_backends.cpu import CpuClient
from tunekit_backends.replay import ReplayClient, ReplayData, load_kernel_tuner_cache


@tk.autotune_key
class OneKey:
    n: int


class Instant:
    """An objective measured at no cost, counting each measurement: a configuration's score is the sum of its values."""

    def __init__(self, space: tk.Space) -> None:
        self.space = space
        self.measured: list[tk.Config] = []

    def measure(self, config: tk.Config) -> tk.Outcome:
        self.measured.append(config)
        return tk.Measured(tk.BenchmarkDurations((sum(config.values_tuple) + 1,)))

    def remaining(self) -> int | None:
        return None


@pytest.fixture
def data(tmp_path: Path) -> ReplayData:
    return load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))


def test_a_budget_holds_its_options_checked_and_frozen(tmp_path: Path) -> None:
    budget = tk.Budget(max_evals=20, max_seconds=60, strategy="random", seed=3, require=[{"X": 4}], log="t.jsonl")
    assert (budget.max_evals, budget.max_seconds, budget.strategy, budget.seed) == (20, 60, "random", 3)
    assert budget.require == ({"X": 4},) and budget.log == "t.jsonl"
    assert (budget.batch, budget.finalists) == (None, None), "unset: each entry point's own default"
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.seed = 4  # type: ignore[misc]
    # A value: equal budgets are equal and hash alike, dict incumbents and all.
    assert budget == dataclasses.replace(budget) and hash(budget) == hash(dataclasses.replace(budget))
    assert budget != dataclasses.replace(budget, seed=4)
    assert tk.Budget() == tk.Budget(max_evals=None, strategy="auto", seed=0, require=[], log=None)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"seed": None}, TypeError, r"tk.Budget\(seed=...\) must be an int, got None; pass seed=0"),
        ({"seed": -1}, ValueError, r"tk.Budget\(seed=...\) must be an int >= 0, got -1"),
        ({"max_evals": 2.5}, ValueError, r"tk.Budget\(max_evals=...\) must be a positive int"),
        ({"max_evals": 0}, ValueError, r"tk.Budget\(max_evals=...\) must be a positive int"),
        ({"max_seconds": 0}, ValueError, r"tk.Budget\(max_seconds=...\) must be a positive number of seconds"),
        ({"batch": 0}, ValueError, r"tk.Budget\(batch=...\) must be a positive int"),
        ({"finalists": -1}, ValueError, r"tk.Budget\(finalists=...\) must be an int >= 0"),
        ({"require": {"X": 4}}, TypeError, r"tk.Budget\(require=...\) takes a list of configurations"),
        ({"require": [[4]]}, TypeError, r"tk.Budget\(require=...\): item 0 is the list \[4\], not a configuration"),
        ({"strategy": "bayes"}, ValueError, r"tk.Budget\(strategy=...\): unknown strategy 'bayes'; choose one of"),
        ({"strategy": 3}, TypeError, r"tk.Budget\(strategy=...\) takes a strategy name .* or a factory"),
        ({"strategy": lambda space: None}, TypeError, r"cannot be called as factory\(space, numpy Generator\)"),
        ({"log": 3}, TypeError, r"tk.Budget\(log=...\) takes a file path \(str or pathlib.Path\) or None"),
    ],
)
def test_a_wrong_option_is_refused_when_the_budget_is_made(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        tk.Budget(**options)


def test_the_keywords_build_the_budget_that_budget_equals(data: ReplayData) -> None:
    client = ReplayClient(data)
    spaced = tk.TunableSet.from_space(data.space, client.kernel, key=lambda: OneKey(n=1))
    by_keywords = spaced.with_search(strategy="random", max_evals=6, seed=2, require=[{"X": 4, "Y": 32, "Z": 1}])
    by_budget = spaced.with_search(
        budget=tk.Budget(strategy="random", max_evals=6, seed=2, require=[{"X": 4, "Y": 32, "Z": 1}])
    )
    assert by_keywords.search is not None and by_budget.search is not None
    assert by_keywords.search.budget == by_budget.search.budget
    # tk.search and tk.tune_objective search alike from either: same proposals, same winner.
    budget = tk.Budget(strategy="random", max_evals=6, seed=2, batch=3)
    alone = tk.search(data.space, client.kernel, ReplayClient(data, seed=1), (), tuner="t", budget=budget)
    keywords = tk.search(
        data.space,
        client.kernel,
        ReplayClient(data, seed=1),
        (),
        tuner="t",
        strategy="random",
        max_evals=6,
        seed=2,
        batch=3,
    )
    assert [t.config for t in alone.trials] == [t.config for t in keywords.trials]
    objective = tk.tune_objective(Instant(data.space), tuner="o", device_id="d", budget=tk.Budget(max_evals=5, seed=1))
    same = tk.tune_objective(Instant(data.space), tuner="o", device_id="d", max_evals=5, seed=1)
    assert objective.trials == same.trials and objective.best == same.best


def test_budget_with_a_keyword_is_refused_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    space = tk.Space(A=[1, 2, 3])
    budget = tk.Budget(max_evals=2)
    both = r"takes its search options in budget= or as keywords, not both; got budget= and seed=, log=: set them"
    with pytest.raises(TypeError, match=r"tk.search\(\) " + both):
        tk.search(space, lambda c: lambda: None, _cpu(), (), tuner="t", budget=budget, seed=1, log="x.jsonl")
    with pytest.raises(TypeError, match=r"tk.tune_objective\(\) " + both):
        tk.tune_objective(Instant(space), tuner="t", device_id="d", budget=budget, seed=1, log="x.jsonl")
    spaced = tk.TunableSet.from_space(space, lambda c: lambda: None, key=lambda: OneKey(n=1))
    with pytest.raises(TypeError, match=r"TunableSet.with_search\(\) takes .* got budget= and max_evals=: set it"):
        spaced.with_search(budget=budget, max_evals=3)
    with pytest.raises(TypeError, match=r"tk.search\(budget=...\) takes a tk.Budget, e.g. budget=tk.Budget\("):
        tk.search(space, lambda c: lambda: None, _cpu(), (), tuner="t", budget={"max_evals": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'max_eval'; its search options are"):
        spaced.with_search(max_eval=3)  # type: ignore[call-arg]
    assert not Path("x.jsonl").exists()


def test_each_entry_point_searches_within_the_budget(data: ReplayData, tmp_path: Path) -> None:
    client = ReplayClient(data, seed=3)
    budget = tk.Budget(strategy="random", max_evals=7, seed=5, batch=3, log=tmp_path / "trials.jsonl")

    result = tk.search(data.space, client.kernel, client, (), tuner="alone", budget=budget)
    assert (result.evaluations, result.stopped_by, result.strategy, result.seed) == (7, "max_evals", "random", 5)
    assert len(result.finalists) == 4, "tk.search re-measures 4 finalists when the budget leaves it unset"
    assert (tmp_path / "trials.jsonl").exists()

    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tunables = tk.TunableSet.from_space(data.space, client.kernel, key=lambda: OneKey(n=1))
        tk.LocalTuner[OneKey, Any]("searched").execute(
            client.device_id, client, tunables.with_search(budget=dataclasses.replace(budget, log=None)), ()
        )
    finally:
        tk.remove_record_sink(sink)
    (ended,) = [e for record in records for e in record.events if isinstance(e, tk.SearchEnded)]
    assert (ended.evaluations, ended.stopped_by, ended.strategy, ended.seed) == (7, "max_evals", "random", 5)

    objective = Instant(data.space)
    found = tk.tune_objective(
        objective, tuner="o", device_id="d", budget=dataclasses.replace(budget, batch=None, log=None)
    )
    assert (found.evaluations, found.stopped_by, found.finalists) == (7, "max_evals", ())
    assert len(objective.measured) == 7, "one measurement per configuration: no finalist is measured again"


def test_tune_objective_refuses_a_budget_that_batches_or_has_finalists() -> None:
    objective = Instant(tk.Space(A=[1, 2, 3]))
    for budget in (tk.Budget(batch=8), tk.Budget(finalists=4)):
        with pytest.raises(ValueError, match=r"tk.tune_objective\(budget=...\) measures one configuration at a time"):
            tk.tune_objective(objective, tuner="o", device_id="d", budget=budget)
    tk.tune_objective(objective, tuner="o", device_id="d", budget=tk.Budget(batch=1, finalists=0))
    assert objective.measured, "batch=1 and finalists=0 are what it does anyway"
    with pytest.raises(TypeError, match=r"tk.tune_objective\(\) got an unexpected keyword argument 'batch'"):
        tk.tune_objective(objective, tuner="o", device_id="d", batch=4)  # type: ignore[call-arg]


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_type_checker_refuses_a_wrong_budget(tmp_path: Path) -> None:
    source = tmp_path / "user_code.py"
    source.write_text(
        textwrap.dedent(
            """
            import tunekit as tk

            GOOD = tk.Budget(max_evals=100, max_seconds=60.0, strategy="model_ils", require=[{"B": 1}], log="t")
            NAMED = tk.Budget(strategy="bayes")
            COUNT = tk.Budget(max_evals="100")
            SET = tk.TunableSet.from_space(tk.Space(B=[1, 2]), lambda c: lambda: 1, key=lambda: 1)
            SEARCHED = SET.with_search(budget={"max_evals": 3})
            BOTH = SET.with_search(budget=GOOD, seed=1)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(source)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    # Giving budget= and a keyword together is refused at run time, not by the type checker (line 9).
    assert sorted({int(line.split(":")[1]) for line in errors}) == [5, 6, 8], result.stdout


def _cpu() -> tk.Client:
    return CpuClient()
