"""Live progress of running tunes and searches on a terminal (rich), shown only for those that take a while.

A tune or search appears once it has run for ``progress_delay_s`` (a second by default), so the
common sub-second tune prints nothing. While shown, each is one line: its phase with that phase's
own count (``compile 3/15``, ``check 7/15``, ``first samples 9/15``, ``round 4 of <=10: 6 of 15
left``, ``runoff 40/100 pairs``), the current leader with its median, and for a search what it
has evaluated against its budget and its best so far. The bar stands for the whole tune, so it
is never full while rounds or the runoff still run. When it ends, the line is replaced by a
one-line summary that stays in the scrollback and ends with the winner's margin over the
runner-up, as the deciding stage measured them.

Nothing here runs on a cache hit: observers see tunes and searches only.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from tunekit._base.counted import counted, plural
from tunekit._base.units import format_duration_ns
from tunekit._observe.events import (
    BatchStarted,
    CandidateProgress,
    PhaseStarted,
    SearchAdvanced,
    SearchFinished,
    SearchStarted,
    TuneEvent,
    TuneFinished,
    TuneStarted,
)
from tunekit._values.decision import TuneDecision, decision_of
from tunekit._values.records import AutotuneRecord

__all__ = ["TerminalProgress", "terminal_progress"]

_STEPS = 1000
"""The bar's resolution: a tune's fraction done, in thousandths."""

# Where each phase of a batch starts and ends on the bar. The rounds and the runoff have room of
# their own, so the bar is not full while they run (counting timed candidates filled it at admission).
_SPANS = {
    "compile": (0.0, 0.2),
    "check": (0.2, 0.3),
    "warmup": (0.3, 0.35),
    "admission": (0.35, 0.5),
    "rounds": (0.5, 0.8),
    "runoff": (0.8, 0.98),
}


def _size_text(size: int, counted: bool) -> str:
    """A search's space size; a restricted space's Cartesian size, not counted, is only a bound on it."""
    return str(size) if counted else f"up to {size}"


def _describe_key(key: Mapping[str, object]) -> str:
    return " ".join(f"{name}={value}" for name, value in key.items())


@dataclass
class _Search:
    """What the display knows about a search (its own, or the one inside a tune)."""

    space_size: int | None
    max_evals: int | None
    max_seconds: float | None
    size_counted: bool = True
    evaluated: int = 0
    best: str | None = None
    best_ns: float | None = None
    finalists: int = 0

    def budget_fraction(self, elapsed: float, batch: float = 0.0) -> float:
        """How much of the budget is spent (``batch``: configurations of the running batch, in part measured):
        the larger of the count's share and the time's."""
        shares = [0.0]
        if self.max_evals:
            shares.append((self.evaluated + batch) / self.max_evals)
        elif self.space_size:
            shares.append((self.evaluated + batch) / self.space_size)
        if self.max_seconds:
            shares.append(elapsed / self.max_seconds)
        return min(max(shares), 1.0)

    def text(self, elapsed: float) -> str:
        if self.finalists:
            return f"[bold]finalists[/] ({self.finalists}, re-measured side by side) after {self.evaluated} evaluated"
        of = f"/{self.max_evals}" if self.max_evals is not None else ""
        size = f" of {_size_text(self.space_size, self.size_counted)}" if self.space_size is not None else ""
        text = f"evaluated {self.evaluated}{of}{size}"
        if self.max_seconds is not None:
            text += f", {elapsed:.0f}/{self.max_seconds:g} s"
        return text


@dataclass
class _Tune:
    """What the display knows about one running tune or search."""

    title: str
    verb: str
    started: float
    total: int = 0
    compiled: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)
    admitted: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    failed: int = 0
    samples: dict[str, list[float]] = field(default_factory=dict)
    medians: dict[str, float] = field(default_factory=dict)
    phase: str = "compile"
    phase_names: tuple[str, ...] = ()
    round: int = 0
    limit: int | None = None
    runoff_samples: int = 0
    search: _Search | None = None
    task: TaskID | None = None
    timer: threading.Timer | None = None

    def new_batch(self, candidates: tuple[str, ...]) -> None:
        if self.search is not None:  # each search batch is its own tune of a few configurations
            self.total = 0
            for known in (self.compiled, self.checked, self.admitted, self.done):
                known.clear()
            self.samples.clear()
            self.medians.clear()
        self.total += len(candidates)
        self.phase, self.phase_names, self.round, self.limit = "compile", (), 0, None

    def leader(self) -> tuple[str, float] | None:
        """The fastest candidate so far: final medians where known, else the median of its samples."""
        best = {name: statistics.median(values) for name, values in self.samples.items() if values}
        best.update(self.medians)
        if not best:
            return None
        name = min(best, key=best.__getitem__)
        return name, best[name]

    def phase_text(self) -> str:
        """The phase with its own count, so no two counts on the line can be read as one."""
        total = max(self.total, 1)
        match self.phase:
            case "compile" if not self.total:  # before the first batch is known
                return "[bold]compile[/]"
            case "compile":
                return f"[bold]compile[/] {len(self.compiled)}/{total}"
            case "check":
                return f"[bold]check[/] {len(self.checked)}/{total}"
            case "warmup":
                return f"[bold]warm-up[/] ({len(self.compiled)}/{total} compiled)"
            case "admission":
                return f"[bold]first samples[/] {len(self.admitted)}/{len(self.phase_names) or total}"
            case "rounds":
                limit = f" of <={self.limit}" if self.limit else ""
                return f"[bold]round {self.round}[/]{limit}: {len(self.phase_names)} of {total} left"
            case "runoff":
                pairs = self.runoff_samples // max(len(self.phase_names), 1)
                limit = f"/{self.limit}" if self.limit else ""
                noun = plural(self.limit or pairs, "pair")
                return f"[bold]runoff[/] of {len(self.phase_names)}: {pairs}{limit} {noun}"
            case _:
                return f"[bold]{self.phase}[/]"

    def fraction(self) -> float:
        """How far the tune (or the search) is, below 1 until it has ended."""
        start, end = _SPANS.get(self.phase, (0.0, 0.98))
        total = max(self.total, 1)
        match self.phase:
            case "compile":
                within = len(self.compiled) / total
            case "check":
                within = len(self.checked) / total
            case "admission":
                within = len(self.admitted) / max(len(self.phase_names) or total, 1)
            case "rounds":
                within = self.round / self.limit if self.limit else 0.5
            case "runoff":
                pairs = self.runoff_samples / max(len(self.phase_names), 1)
                within = pairs / self.limit if self.limit else 0.5
            case _:
                within = 0.0
        batch = start + (end - start) * min(within, 1.0)
        if self.search is None:
            return batch
        if self.search.finalists:
            return 0.9 + 0.09 * batch
        return 0.9 * self.search.budget_fraction(time.monotonic() - self.started, batch * self.total)

    def detail(self) -> str:
        parts = []
        if self.search is not None:
            parts.append(self.search.text(time.monotonic() - self.started))
            if self.total:
                parts.append(self.phase_text())
        else:
            parts.append(self.phase_text())
        if self.failed:
            parts.append(f"[red]failed {self.failed}[/]")
        search = self.search
        if search is not None and not search.finalists:  # a batch's leader is no news beside the search's best
            if search.best is not None and search.best_ns is not None:
                parts.append(f"best so far [bold]{escape(search.best)}[/] {format_duration_ns(search.best_ns)}")
        elif (leader := self.leader()) is not None:
            parts.append(f"leader [bold]{escape(leader[0])}[/] {format_duration_ns(leader[1])}")
        return " · ".join(parts)


def _decided(decided: TuneDecision) -> str:
    """The winner, the stage that decided, why where needed, and last the margin over the runner-up."""
    time = format_duration_ns(decided.winner_ns)
    text = f"winner [bold]{escape(decided.winner)}[/] {time} ({escape(decided.stage_text)})"
    if why := decided.why():
        text += f"; {escape(why)}"
    if decided.runner_up is None:
        return text + "; no runner-up, so no margin"
    runner_up = f"{escape(decided.runner_up)} {format_duration_ns(decided.runner_up_ns or 0.0)}"
    doubt = "" if decided.trusted else "[yellow](not trusted: the spread is wider)[/] "
    return f"{text}; margin {doubt}{escape(decided.margin_text)} over {runner_up}"


class TerminalProgress:
    """A :class:`~tunekit.TuneObserver` drawing running tunes and searches on a rich console (stderr by default)."""

    def __init__(self, *, console: Console | None = None, delay_s: float = 1.0) -> None:
        self.console = console or Console(stderr=True)
        self.delay_s = delay_s
        self._lock = threading.Lock()
        self._tunes: dict[int, _Tune] = {}
        self._progress: Progress | None = None

    def observe(self, event: TuneEvent) -> None:
        """Update the display with one event."""
        with self._lock:
            match event:
                case TuneStarted(tune_id, tuner, _, key, _):
                    self._start(tune_id, _Tune(title=f"{tuner} {_describe_key(key)}", verb="tuned", started=0.0))
                case SearchStarted(search_id, tuner, _, key, size, max_evals, max_seconds, counted):
                    search = _Search(size, max_evals, max_seconds, counted)
                    if search_id in self._tunes:  # a search inside a tune: the tune's line shows it
                        self._tunes[search_id].search = search
                    else:
                        title = f"{tuner} {_describe_key(key)}".strip()
                        self._start(search_id, _Tune(title=title, verb="searched", started=0.0, search=search))
                case BatchStarted(tune_id, _, candidates) if tune_id in self._tunes:
                    self._tunes[tune_id].new_batch(candidates)
                case CandidateProgress(tune_id, name, stage, duration_ns, _) if tune_id in self._tunes:
                    self._advance(self._tunes[tune_id], name, stage, duration_ns)
                case PhaseStarted(tune_id, phase, candidates, number, limit) if tune_id in self._tunes:
                    tune = self._tunes[tune_id]
                    tune.phase, tune.phase_names, tune.round, tune.limit = phase, candidates, number, limit
                    tune.runoff_samples = 0
                case SearchAdvanced(search_id, evaluated, best, best_ns, _, finalists) if search_id in self._tunes:
                    tune = self._tunes[search_id]
                    if tune.search is not None:
                        tune.search.evaluated, tune.search.best, tune.search.best_ns = evaluated, best, best_ns
                        tune.search.finalists = finalists
                        tune.new_batch(())  # the batch is done: its phase is no longer news
                case SearchFinished() if event.search_id in self._tunes:
                    if self._tunes[event.search_id].verb == "searched":
                        self._finish(self._tunes.pop(event.search_id), event.record, event.error, event)
                case TuneFinished(tune_id, record, error) if tune_id is not None and tune_id in self._tunes:
                    self._finish(self._tunes.pop(tune_id), record, error, None)
                case _:
                    return
            self._redraw()

    def describe(self, tune_id: int) -> tuple[str, float] | None:
        """What the line of a running tune or search says and how full its bar is (None once it has ended)."""
        with self._lock:
            tune = self._tunes.get(tune_id)
            return None if tune is None else (Text.from_markup(tune.detail()).plain, tune.fraction())

    def _start(self, tune_id: int, tune: _Tune) -> None:
        tune.started = time.monotonic()
        self._tunes[tune_id] = tune
        if self.delay_s <= 0:  # at once, not from a timer's thread: a tune faster than it starts would show nothing
            self._show_locked(tune_id)
            return
        tune.timer = threading.Timer(self.delay_s, self._show, args=(tune_id,))
        tune.timer.daemon = True
        tune.timer.start()

    def _advance(self, tune: _Tune, name: str, stage: str, duration_ns: float | None) -> None:
        match stage:
            case "compiled":
                tune.compiled.add(name)
            case "checked":
                tune.checked.add(name)
                if tune.phase == "compile":
                    tune.phase = "check"
            case "sample" if duration_ns is not None:
                tune.samples.setdefault(name, []).append(duration_ns)
                if tune.phase == "admission":
                    tune.admitted.add(name)
                elif tune.phase == "runoff":
                    tune.runoff_samples += 1
            case "measured" if duration_ns is not None:
                tune.medians[name] = duration_ns
                tune.done.add(name)
            case "failed":
                tune.failed += 1
                tune.done.add(name)
                tune.samples.pop(name, None)
            case _:
                tune.done.add(name)

    def _show(self, tune_id: int) -> None:
        """The tune has run past the delay: give it a line (starting the live display if needed)."""
        with self._lock:
            self._show_locked(tune_id)

    def _show_locked(self, tune_id: int) -> None:
        tune = self._tunes.get(tune_id)
        if tune is None:
            return
        if self._progress is None:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=24),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
        tune.task = self._progress.add_task(
            escape(tune.title), total=_STEPS, completed=int(tune.fraction() * _STEPS), detail=tune.detail()
        )

    def _redraw(self) -> None:
        if self._progress is None:
            return
        for tune in self._tunes.values():
            if tune.task is not None:
                self._progress.update(tune.task, completed=int(tune.fraction() * _STEPS), detail=tune.detail())

    def _finish(
        self, tune: _Tune, record: AutotuneRecord | None, error: str | None, search: SearchFinished | None
    ) -> None:
        if tune.timer is not None:
            tune.timer.cancel()
        if tune.task is None or self._progress is None:
            return
        self._progress.remove_task(tune.task)
        elapsed = time.monotonic() - tune.started
        if error is not None:
            outcome = f"[red]failed[/]: {escape(error)}"
        elif record is None or record.winner is None:
            outcome = "[red]no valid candidate[/]"
        elif (decided := decision_of(record)) is not None:
            # The figures that decided, so the line agrees with `records summary` and the cache.
            outcome = _decided(decided)
        else:
            median = tune.medians.get(record.winner)
            timed = f" {format_duration_ns(median)}" if median is not None else ""
            outcome = f"winner [bold]{escape(record.winner)}[/]{timed}; no runner-up, so no margin"
        size = tune.search.space_size if tune.search is not None else None
        of = f" of {_size_text(size, tune.search.size_counted)}" if tune.search is not None and size is not None else ""
        if error is not None:
            cost = f"after {elapsed:.1f} s"
        elif search is not None:
            finalists = (
                f", then {counted(search.finalists, 'finalist')} in {search.finalists_seconds:.1f} s"
                if search.finalists
                else ""
            )
            cost = (
                f"{search.evaluated}{of} {plural(size or search.evaluated, 'configuration')} "
                f"in {search.search_seconds:.1f} s "
                f"(stopped by {search.stopped_by}){finalists}"
            )
        elif tune.search is not None:  # a search inside a tune
            configurations = plural(size or tune.search.evaluated, "configuration")
            cost = f"{tune.search.evaluated}{of} {configurations} searched in {elapsed:.1f} s"
        else:
            cost = f"{counted(len(tune.done), 'candidate')} in {elapsed:.1f} s"
        self._progress.console.print(
            f"[green]✓[/] {tune.verb} {escape(tune.title)}: {cost}; {outcome}",
            highlight=False,
        )
        if not any(t.task is not None for t in self._tunes.values()):
            self._progress.stop()
            self._progress = None


_terminal_lock = threading.Lock()
_terminal: TerminalProgress | None = None


def terminal_progress(delay_s: float) -> TerminalProgress:
    """The process's one stderr display, shared by concurrent tunes so their lines stack, not fight."""
    global _terminal
    with _terminal_lock:
        if _terminal is None:
            _terminal = TerminalProgress(delay_s=delay_s)
        _terminal.delay_s = delay_s
        return _terminal
