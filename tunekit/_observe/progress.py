"""Live progress of running tunes on a terminal (rich), shown only for tunes that take a while.

A tune appears once it has run for ``progress_delay_s`` (a second by default), so the
common sub-second tune prints nothing. While shown, each running tune is one line:
candidates compiled, checked and timed, and the current leader with its median. When it
ends, the line is replaced by a one-line summary that stays in the scrollback: the winner,
the runner-up and the margin as the deciding stage measured them, and that stage.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from tunekit._base.units import format_duration_ns
from tunekit._observe.events import BatchStarted, CandidateProgress, TuneEvent, TuneFinished, TuneStarted
from tunekit._values.decision import decision_of
from tunekit._values.records import AutotuneRecord

__all__ = ["TerminalProgress", "terminal_progress"]


def _describe_key(key: Mapping[str, object]) -> str:
    return " ".join(f"{name}={value}" for name, value in key.items())


@dataclass
class _Tune:
    """What the display knows about one running tune."""

    title: str
    started: float
    total: int = 0
    compiled: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    failed: int = 0
    samples: dict[str, list[float]] = field(default_factory=dict)
    medians: dict[str, float] = field(default_factory=dict)
    task: TaskID | None = None
    timer: threading.Timer | None = None

    def leader(self) -> tuple[str, float] | None:
        """The fastest candidate so far: final medians where known, else the median of its samples."""
        best = {name: statistics.median(values) for name, values in self.samples.items() if values}
        best.update(self.medians)
        if not best:
            return None
        name = min(best, key=best.__getitem__)
        return name, best[name]

    def timed(self) -> int:
        """Candidates timed at least once, or settled without timing (failed, skipped)."""
        return len(self.done | self.samples.keys())

    def detail(self) -> str:
        parts = [f"compiled {len(self.compiled)}/{self.total}"]
        if self.checked:
            parts.append(f"checked {len(self.checked)}/{self.total}")
        parts.append(f"timed {self.timed()}/{self.total}")
        if self.failed:
            parts.append(f"[red]failed {self.failed}[/]")
        leader = self.leader()
        if leader is not None:
            parts.append(f"leader [bold]{leader[0]}[/] {format_duration_ns(leader[1])}")
        return " · ".join(parts)


class TerminalProgress:
    """A :class:`~tunekit.TuneObserver` drawing running tunes on a rich console (stderr by default)."""

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
                    tune = _Tune(title=f"{tuner} {_describe_key(key)}", started=time.monotonic())
                    self._tunes[tune_id] = tune
                    tune.timer = threading.Timer(self.delay_s, self._show, args=(tune_id,))
                    tune.timer.daemon = True
                    tune.timer.start()
                case BatchStarted(tune_id, _, candidates) if tune_id in self._tunes:
                    self._tunes[tune_id].total += len(candidates)
                case CandidateProgress(tune_id, name, stage, duration_ns, _) if tune_id in self._tunes:
                    self._advance(self._tunes[tune_id], name, stage, duration_ns)
                case TuneFinished(tune_id, record, error) if tune_id is not None and tune_id in self._tunes:
                    self._finish(self._tunes.pop(tune_id), record, error)
                case _:
                    return
            self._redraw()

    def _advance(self, tune: _Tune, name: str, stage: str, duration_ns: float | None) -> None:
        match stage:
            case "compiled":
                tune.compiled.add(name)
            case "checked":
                tune.checked.add(name)
            case "sample" if duration_ns is not None:
                tune.samples.setdefault(name, []).append(duration_ns)
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
            tune = self._tunes.get(tune_id)
            if tune is None:
                return
            if self._progress is None:
                self._progress = Progress(
                    SpinnerColumn(),
                    TextColumn("[bold]{task.description}"),
                    BarColumn(bar_width=24),
                    MofNCompleteColumn(),
                    TextColumn("{task.fields[detail]}"),
                    TimeElapsedColumn(),
                    console=self.console,
                    transient=True,
                )
                self._progress.start()
            tune.task = self._progress.add_task(
                tune.title, total=max(tune.total, 1), completed=tune.timed(), detail=tune.detail()
            )

    def _redraw(self) -> None:
        if self._progress is None:
            return
        for tune in self._tunes.values():
            if tune.task is not None:
                self._progress.update(tune.task, total=max(tune.total, 1), completed=tune.timed(), detail=tune.detail())

    def _finish(self, tune: _Tune, record: AutotuneRecord | None, error: str | None) -> None:
        if tune.timer is not None:
            tune.timer.cancel()
        if tune.task is None or self._progress is None:
            return
        self._progress.remove_task(tune.task)
        elapsed = time.monotonic() - tune.started
        if error is not None:
            outcome = f"[red]failed[/]: {error}"
        elif record is None or record.winner is None:
            outcome = "[red]no valid candidate[/]"
        elif (decided := decision_of(record)) is not None:
            # The figures that decided, so the line agrees with `records summary` and the cache.
            outcome = f"winner {escape(decided.text())}"
            if not decided.trusted:
                outcome += " [yellow](not trusted: spread wider than the margin)[/]"
        else:
            median = tune.medians.get(record.winner)
            timed = f" {format_duration_ns(median)}" if median is not None else ""
            outcome = f"winner [bold]{escape(record.winner)}[/]{timed}"
        self._progress.console.print(
            f"[green]✓[/] tuned {tune.title}: {len(tune.done)} candidates in {elapsed:.1f} s, {outcome}",
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
