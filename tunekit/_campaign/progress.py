"""What a campaign shows as it runs: a line per finished job on stderr, and a bar on a terminal."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from tunekit._base.units import format_duration_ns
from tunekit._campaign.job import CampaignJob
from tunekit._campaign.result import JobResult

__all__ = ["CampaignProgress"]


class CampaignProgress:
    """Counts and shows finished, stored and failed jobs; silent when ``shown`` is False."""

    def __init__(self, total: int, *, shown: bool) -> None:
        self.console = Console(stderr=True, quiet=not shown, soft_wrap=True)
        self._bar = Progress(
            TextColumn("campaign"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tuned]} tuned, {task.fields[stored]} stored, {task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not (shown and self.console.is_terminal),  # elsewhere the lines alone say it
            transient=True,
        )
        self._task = self._bar.add_task("jobs", total=total, tuned=0, stored=0, failed=0)
        self._counts = {"tuned": 0, "stored": 0, "failed": 0}

    def __enter__(self) -> CampaignProgress:
        self._bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._bar.stop()

    def finished(self, job: CampaignJob, result: JobResult) -> None:
        """A job's winner is in its record."""
        entry = result.record.entries[0]
        # Text, not markup: a candidate named `gelu[vec=8,block=512]` would lose its configuration as a style tag.
        self.console.print(
            Text(
                f"{result.decision:>6} {job.describe()} -> {entry.winner} "
                f"({format_duration_ns(entry.median_ns)}, on {result.host}, {result.seconds:.2f} s)"
            ),
            highlight=False,
        )
        self._advance(result.decision)

    def failed(self, job: CampaignJob, why: str) -> None:
        """A job raised, or its worker died more often than it was retried."""
        # An error naming `[/x]` raised MarkupError here, and ended the campaign's loop.
        self.console.print(Text.assemble(("failed", "red"), f" {job.describe()}: {why}"), highlight=False)
        self._advance("failed")

    def _advance(self, what: str) -> None:
        self._counts[what] += 1
        counts = self._counts
        self._bar.update(self._task, advance=1, tuned=counts["tuned"], stored=counts["stored"], failed=counts["failed"])
