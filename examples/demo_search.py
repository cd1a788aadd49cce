"""The search part of ``make demo``: search a space too big to measure whole, commit the winner, serve it.

Offline, ``tk.search`` measures a budget's worth of the configurations of the numpy pipeline of
``pipeline_objective.py`` on the CPU, one trial log line per configuration, and the winner goes
into a committed record (``tk.Record``). Production loads that record verified and seeds its
tuner with it, so it never tunes: the next run finds the record verified and searches nothing,
and a run with autotuning off is served by it too (``serve_committed_record``). Run it alone::

    python examples/demo_search.py DIRECTORY    # the trial log and the record go into DIRECTORY
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

import tunekit as tk
from tunekit_backends.cpu import CpuClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_console import demo_console
from pipeline_objective import SPACE, PipelineKey, build, pipeline, pipeline_key

TUNER: tk.LocalTuner[PipelineKey, np.ndarray] = tk.LocalTuner("pipeline")
INCUMBENT = {"METHOD": "direct", "BLOCK": 1024, "DTYPE": "float64", "BATCH": 1}
"""The configuration a hand-tuned pipeline would ship: the search must beat or equal it."""


def tunable_set() -> tk.TunableSet[PipelineKey, np.ndarray]:
    """One candidate per configuration of the pipeline's space (built only if run)."""
    return tk.TunableSet.from_space(SPACE, build, key=pipeline_key)


def filter_rms(client: CpuClient, x: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """Production's call: the pipeline by the winner for this request's key."""
    tunables = TUNER.init(tunable_set)
    return TUNER.execute(client.device_id, client, tunables, (x, taps))


@dataclass(frozen=True)
class SearchDemo:
    """What one run did: searched now (``result``) or found the record verified (``result`` None)."""

    key: PipelineKey
    result: tk.SearchResult | None
    entry: tk.RecordEntry
    log_path: Path
    record_path: Path
    production_tunes: int
    """Tunes the production call ran after seeding the record: 0, or the record did not serve it."""
    refused: str | None = None
    """Why a record already there was not used (tk.RecordMismatch), so the key was searched again."""
    decision: tk.TuneDecision | None = None
    """How the finalists' side-by-side re-measurement chose the winner (searched now); None: served from the record."""


@dataclass(frozen=True)
class _Request:
    """The demo's request, its set, and where its trial log and record go in ``directory``."""

    client: CpuClient
    x: np.ndarray
    taps: np.ndarray
    key: PipelineKey
    tunables: tk.TunableSet[PipelineKey, np.ndarray]
    record_path: Path
    log_path: Path


def _request(directory: Path, signals: int, length: int) -> _Request:
    client = CpuClient()
    rng = np.random.default_rng(0)
    x, taps = rng.standard_normal((signals, length)), rng.standard_normal(63)
    key = pipeline_key(x, taps)
    tunables = TUNER.init(tunable_set)
    # A log answers for one set on one device: a changed space or another machine starts a new
    # log instead of being refused by the old one (as TunableSet.with_search names its logs).
    digest = hashlib.sha256(f"{client.device_id}\n{tunables.checksum()}".encode()).hexdigest()[:8]
    log_path = directory / f"pipeline-trials.signals={key.signals},length={key.length}.{digest}.jsonl"
    return _Request(client, x, taps, key, tunables, directory / "pipeline-record.json", log_path)


def run_search_demo(
    console: Console,
    directory: Path,
    *,
    signals: int = 16,
    length: int = 16384,
    max_evals: int | None = 20,
    max_seconds: float | None = None,
) -> SearchDemo:
    """Search the pipeline's space for one request shape unless a verified record has it, then serve it.

    The budget is a count by default, so every run keeps it whatever the machine's load: 20 of
    the 84 configurations. ``max_seconds`` adds a time limit, which ends the search phase only
    (see :func:`budget_text`).
    """
    budget = tk.Budget(
        max_evals=max_evals, max_seconds=max_seconds, strategy="auto", seed=0, require=[INCUMBENT], log=None
    )
    request = _request(directory, signals, length)
    client, key, tunables, record_path = request.client, request.key, request.tunables, request.record_path
    record: tk.Record | None = None
    refused = None
    if record_path.exists():
        try:
            # Given the client, a record of this CPU under another numpy or BLAS is used, with a warning.
            record = tk.Record.load_verified(record_path, tunables, client, tuner=TUNER)
        except (tk.RecordMismatch, OSError) as exc:  # refused, corrupt or unreadable: searched again
            refused = str(exc)
    result = None
    searched: list[tk.AutotuneRecord] = []
    if record is None or key not in record:
        sink = tk.add_record_sink(searched.append)
        try:
            result = tk.search(
                SPACE,
                build,
                client,
                (request.x, request.taps),
                tuner=TUNER.name,
                key=key,
                # The budget the table states is the one run: one object, printed from what was passed.
                budget=dataclasses.replace(budget, log=request.log_path),
            )
        finally:
            tk.remove_record_sink(sink)
        if record is None or record.device_id != client.device_id:
            # A record measured under another numpy takes no winner measured under this one: it is started afresh.
            record = tk.Record.for_tunables(TUNER.name, client, tunables)
        record.add(key, result)
        record.save(record_path)
        # Production's side: it trusts nothing it has not verified, the file just written included.
        record = tk.Record.load_verified(record_path, tunables, client, tuner=TUNER)
    demo = _serve(console, request, record, result, refused)
    if searched:
        demo = dataclasses.replace(demo, decision=tk.decision_of(searched[-1]))
    print_search_demo(console, demo, budget=budget_text(budget))
    return demo


def budget_text(budget: tk.Budget) -> str:
    """The budget as the search enforces it: what each limit ends, and what comes after it, outside it."""
    limits = []
    if budget.max_evals is not None:
        limits.append(f"max_evals={budget.max_evals}: at most {budget.max_evals} configurations measured")
    if budget.max_seconds is not None:
        limits.append(
            f"max_seconds={budget.max_seconds:g}: no configuration starts after {budget.max_seconds:g} s "
            "(those started finish their rounds and runoff)"
        )
    stated = ", or ".join(limits) if limits else "none: the whole space"
    finalists = 4 if budget.finalists is None else budget.finalists
    if finalists:
        incumbent = " and the incumbent" if budget.require else ""
        stated += f"; then the {finalists} fastest{incumbent} re-measured side by side, outside the budget"
    return stated


def serve_committed_record(
    console: Console, directory: Path, *, signals: int = 16, length: int = 16384
) -> SearchDemo | str:
    """With autotuning off: serve the request from the record a run committed in ``directory``, searching nothing.

    Returns what was served, or why nothing can be (no record, or one that does not serve
    this request here), for the caller to say.
    """
    request = _request(directory, signals, length)
    if not request.record_path.exists():
        return f"no record committed at {request.record_path}, which a run with autotuning on commits"
    try:
        record = tk.Record.load_verified(request.record_path, request.tunables, request.client, tuner=TUNER)
    except (tk.RecordMismatch, OSError) as exc:
        return f"the record at {request.record_path} does not serve this run: {exc}"
    if request.key not in record:
        return f"the record at {request.record_path} has no winner for {request.key}"
    demo = _serve(console, request, record, None, None)
    print_search_demo(console, demo, budget=None)  # the record does not keep the search's budget
    return demo


def _serve(
    console: Console, request: _Request, record: tk.Record, result: tk.SearchResult | None, refused: str | None
) -> SearchDemo:
    """Production's side: seed the verified record into the tuner and run the request through it."""
    for warning in record.warnings:
        console.print(Text.assemble(("record warning:", "yellow"), f" {warning}"))
    record.seed(TUNER, request.tunables, PipelineKey)

    tunes: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(tunes.append)
    try:
        out = filter_rms(request.client, request.x, request.taps)
    finally:
        tk.remove_record_sink(sink)
    # Every configuration computes the same RMS (BLOCK only reorders the sum, float32 rounds).
    np.testing.assert_allclose(out, pipeline(request.x, request.taps, SPACE.config(**INCUMBENT)), rtol=1e-3)
    entry = record.get(request.key)
    assert entry is not None, "the record was just verified with this key's entry"
    return SearchDemo(request.key, result, entry, request.log_path, request.record_path, len(tunes), refused)


def print_search_demo(console: Console, demo: SearchDemo, *, budget: str | None) -> None:
    """One two-column table: the space, the budget, what the search did (or the record says), where it went."""
    entry, result = demo.entry, demo.result
    table = Table(title="Search a space too big to measure whole (examples/pipeline_objective.py)", show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("key", f"signals={demo.key.signals} length={demo.key.length}")
    table.add_row("space", f"{SPACE.size} configurations ({SPACE.cartesian_size} before restrictions)")
    if budget is not None:
        table.add_row("budget", budget)
    table.add_row("strategy", f"auto -> {entry.strategy}")
    if result is not None:
        resumed = sum(t.resumed for t in result.trials)
        evaluated = f"{result.evaluations}, the incumbent first ({resumed} from the trial log)"
        evaluated += f", in {result.search_seconds:.1f} s"
        if result.finalists:
            evaluated += (
                f"; {len(result.finalists)} finalists re-measured in {result.finalists_seconds:.1f} s "
                f"({result.wall_seconds:.1f} s in all)"
            )
    else:
        evaluated = f"{entry.evaluations} (by the search that made the record)"
    table.add_row("evaluated", evaluated)
    table.add_row("stopped by", entry.stopped_by)
    table.add_row("winner", entry.winner)
    # The finalists' side-by-side measurement: the one that decided the winner.
    decision = demo.decision
    if decision is not None:  # as the stage that decided measured it, beside the runner-up's below
        table.add_row("time", f"{decision.winner_ns / 1e6:.2f} ms ({decision.stage_text})")
    else:
        table.add_row("median", f"{entry.median_ns / 1e6:.2f} ms over {entry.samples} samples")
    if decision is not None and decision.runner_up is not None:
        table.add_row("runner-up", f"{decision.runner_up} {(decision.runner_up_ns or 0.0) / 1e6:.2f} ms")
        # Among the finalists, timed side by side, the winner is the faster by the stage that decided, so the
        # margin is not negative; a search-phase median below the winner's is explained on the "why" row.
        table.add_row(
            "margin",
            f"{decision.margin_text}: the runner-up's time over the winner's, less one (its 95% interval in "
            f"brackets), by the stage that decided: {decision.stage_text}",
        )
        if why := decision.why():
            table.add_row("why", why)
    elif result is None:
        table.add_row("decided", "by the search that made the record (its finalists re-measured side by side)")
    table.add_row("trial log", str(demo.log_path))
    table.add_row("record", str(demo.record_path))
    how = "searched now, record committed and verified" if result is not None else "record verified, no search"
    if demo.production_tunes == 0:
        table.add_row("served", f"{how}; production call served from the record, no tune")
    else:
        table.add_row(
            "served",
            Text.assemble(
                f"{how}; ", (f"production call tuned ({demo.production_tunes}): the record did not serve it", "red")
            ),
        )
    if demo.refused:
        console.print(Text.assemble(("record not used, searched again:", "yellow"), f" {demo.refused}"))
    console.print(table)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} DIRECTORY")
    run_search_demo(demo_console(), Path(sys.argv[1]))
