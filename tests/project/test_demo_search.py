"""The search part of ``make demo``: the first run searches and commits, the next is served by the verified record."""

from __future__ import annotations

import inspect
import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

import tunekit as tk

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import demo_search
from demo_console import demo_console
from pipeline_objective import SPACE

SMALL = {"signals": 4, "length": 2048, "max_evals": 6}
"""A request small enough for seconds, a budget well under the space (so ``auto`` cannot go exhaustive)."""


def run(directory: Path) -> tuple[demo_search.SearchDemo, str]:
    # Each run stands for a new process: nothing in memory but what the committed record seeds.
    demo_search.TUNER.clear()
    out = io.StringIO()
    return demo_search.run_search_demo(Console(file=out, width=200), directory, **SMALL), out.getvalue()


def test_the_first_run_searches_within_budget_and_the_second_is_served_by_the_verified_record(tmp_path: Path) -> None:
    first, shown = run(tmp_path)
    assert first.result is not None, "the first run must search"
    assert first.result.evaluations == SMALL["max_evals"] < SPACE.size
    assert first.result.strategy == "model_ils" and first.result.stopped_by == "max_evals"
    assert first.result.trials[0].config.to_dict() == demo_search.INCUMBENT
    assert first.production_tunes == 0
    assert first.entry.winner == first.result.best.config.name
    entries = first.log_path.read_text().splitlines()
    assert len(entries) == 1 + SMALL["max_evals"]  # the header, then one line per trial
    assert first.record_path.parent == tmp_path and first.log_path.parent == tmp_path
    assert f"{SPACE.size} configurations" in shown and "model_ils" in shown and "max_evals" in shown
    log, record = first.log_path.read_bytes(), first.record_path.read_bytes()

    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        second, shown = run(tmp_path)
    finally:
        tk.remove_record_sink(sink)
    assert second.result is None, "the second run searched again instead of using the record"
    assert second.production_tunes == 0 and records == []  # no search, no tune: nothing decided anew
    assert second.entry == first.entry
    assert first.log_path.read_bytes() == log and first.record_path.read_bytes() == record
    assert "record verified, no search" in shown and "served from the record, no tune" in shown
    cache = tk.persistent_cache()
    assert cache is None or [r for r in cache.rows(tuner=demo_search.TUNER.name)] == []  # execute never tuned


def test_a_record_of_another_device_is_refused_and_the_key_searched_again(tmp_path: Path) -> None:
    first, _ = run(tmp_path)
    data = json.loads(first.record_path.read_text())
    data["device_id"] = "another machine"
    data["device_model"] = "another machine's CPU"
    first.record_path.write_text(json.dumps(data))

    again, shown = run(tmp_path)
    assert again.refused is not None and "another machine" in again.refused
    assert again.result is not None and again.production_tunes == 0
    assert sum(t.resumed for t in again.result.trials) == SMALL["max_evals"]  # same device: its log still answers
    assert "searched again" in shown
    assert tk.Record.load(again.record_path).device_id != "another machine"


def test_a_record_of_this_cpu_under_another_numpy_is_used_with_a_warning_and_nothing_searched(tmp_path: Path) -> None:
    """Regression: a numpy or BLAS upgrade changed the device id, the committed record was refused, searched again."""
    first, _ = run(tmp_path)
    data = json.loads(first.record_path.read_text())
    model, _, stack = data["device_id"].partition(":numpy-")
    assert stack and data["device_model"] == model
    data["device_id"] = f"{model}:numpy-1.26.4:openblas-0.3.21"
    first.record_path.write_text(json.dumps(data))

    again, shown = run(tmp_path)
    assert again.refused is None and again.result is None and again.production_tunes == 0
    assert "record warning" in shown and "numpy-1.26.4" in shown
    assert tk.Record.load(again.record_path).device_id == data["device_id"], (
        "the record still says where it was measured"
    )


def test_the_demo_states_the_budget_it_ran_and_gives_the_finalists_time_apart(tmp_path: Path) -> None:
    """Regression: the demo printed max_seconds=10, then 19.4 s with the finalists in it, as if the budget ran over."""
    demo_search.TUNER.clear()
    out = io.StringIO()
    demo = demo_search.run_search_demo(
        Console(file=out, width=400), tmp_path, signals=4, length=2048, max_evals=5, max_seconds=600.0
    )
    shown, result = out.getvalue(), demo.result
    assert result is not None
    # What the table says the budget is, is what the search was given and kept.
    assert "max_evals=5: at most 5 configurations measured" in shown
    assert "max_seconds=600: no configuration starts after 600 s" in shown
    assert result.stopped_by == "max_evals" and result.evaluations == 5
    # The search phase (what max_seconds bounds) and the finalists' batch after it are shown apart.
    assert result.finalists, "5 evaluations leave finalists to re-measure"
    assert result.search_seconds + result.finalists_seconds == result.wall_seconds
    assert 0 < result.finalists_seconds < result.wall_seconds
    assert f"in {result.search_seconds:.1f} s; {len(result.finalists)} finalists re-measured in " in shown
    assert f"{result.finalists_seconds:.1f} s ({result.wall_seconds:.1f} s in all)" in shown


def test_the_readme_says_what_the_demo_searches() -> None:
    """The README's count is the demo's own budget, and the demo's budget is a count (kept whatever the load)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    defaults = inspect.signature(demo_search.run_search_demo).parameters
    assert defaults["max_seconds"].default is None
    assert f"{defaults['max_evals'].default} of the {SPACE.size} configurations" in readme
    assert f"`max_evals={defaults['max_evals'].default}`" in readme


def test_the_budget_text_says_what_each_limit_ends() -> None:
    both = demo_search.budget_text(tk.Budget(max_evals=3, max_seconds=2.5, require=[demo_search.INCUMBENT]))
    assert both == (
        "max_evals=3: at most 3 configurations measured, or max_seconds=2.5: no configuration starts after 2.5 s "
        "(those started finish their rounds and runoff); then the 4 fastest and the incumbent re-measured side by "
        "side, outside the budget"
    )
    assert demo_search.budget_text(tk.Budget(finalists=0)) == "none: the whole space"


def test_a_piped_demo_prints_each_table_row_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich assumes 80 columns off a terminal: a piped demo cut a trial log's path in two inside its cell."""
    path = "/tmp/tunekit-demo/" + "a3e03d23" * 12 + ".jsonl"
    monkeypatch.delenv("COLUMNS", raising=False)
    table = Table("what", "where")
    table.add_row("trial log", path)
    console = demo_console()
    with console.capture() as piped:  # pytest's stdout is no terminal
        console.print(table)
    assert path in piped.get()
    monkeypatch.setenv("COLUMNS", "80")  # a width asked for is kept
    assert demo_console().width == 80
