"""What a search returns: its trials, its winner, what it cost and which limit ended it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._values.outcome import Failed, Measured, Outcome
from tunekit._values.records import RecordEvent

__all__ = ["BestTrial", "SearchResult", "StopReason", "Trial", "score_of"]

# The key class a search was for: Any when it was given none, so a bare `tk.SearchResult` annotation reads as before.
Key = TypeVar("Key", covariant=True, default=Any)

StopReason = Literal["max_evals", "max_seconds", "exhausted", "objective_budget", "roofline"]


@dataclass(frozen=True, slots=True, eq=False)
class Trial:
    """One evaluated configuration; ``resumed`` when its outcome came from the trial log."""

    config: Config
    outcome: Outcome
    resumed: bool = False

    @property
    def score(self) -> float | None:
        """Median ns when measured, else None."""
        return self.outcome.durations.score if isinstance(self.outcome, Measured) else None

    # By value across the subclass: ``result.best in result.finalists`` holds for the same trial.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trial):
            return NotImplemented
        return (self.config, self.outcome, self.resumed) == (other.config, other.outcome, other.resumed)

    def __hash__(self) -> int:
        return hash((self.config, self.outcome, self.resumed))


@dataclass(frozen=True, slots=True, eq=False)
class BestTrial(Trial):
    """The winner of a search: a measured trial, so its ``score`` is a float, never None.

    Typed apart from ``Trial`` so that ``result.best.score / 1e6`` passes ``mypy --strict``
    without a None check (the winner is measured by definition).
    """

    @property
    def score(self) -> float:
        """Median ns of the winner's measurement."""
        if not isinstance(self.outcome, Measured):
            raise AssertionError("a search's best trial is a measured one")
        return self.outcome.durations.score


def score_of(trial: Trial) -> float:
    """A trial's score for sorting: unmeasured trials last."""
    return trial.score if trial.score is not None else math.inf


@dataclass(frozen=True, slots=True)
class SearchResult(Generic[Key]):
    """What a search found, what it cost, and why it stopped.

    Typed by the key it was for (``tk.search(..., key=SumKey(...))`` returns ``SearchResult[SumKey]``),
    so that adding it to a record of another key class is a type error.
    """

    tuner: str
    device_id: str
    space: Space
    strategy: str
    seed: int
    trials: tuple[Trial, ...]
    stopped_by: StopReason
    strategy_seconds: float
    wall_seconds: float

    finalists_seconds: float = 0.0
    """Seconds of ``wall_seconds`` that the finalists' side-by-side re-measurement took (0 without one).

    It runs once the budget has ended the search, and is outside it: ``wall_seconds`` less this
    is the time ``max_seconds`` bounds (its overrun is the rounds and runoff of the batch that was
    running when the time ran out, as no configuration starts after it).
    """
    finalists: tuple[Trial, ...] = ()
    final_events: tuple[RecordEvent, ...] = ()
    """What the schedule did in the finalists' batch (rounds, a runoff): the comparison that chose the winner."""
    key: Key | None = None
    """The key bucket the search was for (``key=``), None when it was given none."""
    build_id: str | None = None
    """A digest of the code of ``tk.search``'s ``build`` (``build_name`` names it); None for ``tk.tune_objective``.

    ``Record.add`` compares it with the record's set's build: a search with another build measured
    other kernels under the same configuration names.
    """
    build_name: str | None = None
    """Where ``build`` is defined (``module.qualname``); None for ``tk.tune_objective``."""
    earlier_seconds: float = 0.0
    """Seconds earlier runs of this search spent, as its trial log holds them; ``max_seconds`` counts them.

    ``wall_seconds`` is this call's alone, from its trial log's opening (a wait for another search
    holding the log is that search's time): a resumed search can stop at ``max_seconds`` after a
    fraction of a second, its time spent before it was killed.
    """

    @property
    def search_seconds(self) -> float:
        """Seconds this call spent searching, before the finalists' re-measurement: what ``max_seconds`` bounds."""
        return self.wall_seconds - self.finalists_seconds

    @property
    def ranking(self) -> tuple[Trial, ...]:
        """Measured configurations, fastest first: the finalists as their final batch decided, then the rest."""
        final = [t for t in self.finalists if t.score is not None]
        # A finalist that failed its re-measurement (its check, a crash, a timeout) is out: its
        # search-phase median would let it win with a failed outcome in the record and the cache.
        decided = {t.config for t in self.finalists if t.score is not None or isinstance(t.outcome, Failed)}
        rest = sorted((t for t in self.trials if t.score is not None and t.config not in decided), key=score_of)
        return (*final, *rest)

    @property
    def best(self) -> BestTrial:
        """The fastest measured configuration (by the finalists' measurement when there was one).

        Never ``None``: ``tk.search`` and ``tk.tune_objective`` raise ``tk.NoValidKernelFound``
        rather than return a result that measured nothing, so callers need no None check.
        """
        ranking = self.ranking
        if not ranking:
            raise ValueError(f"the search for tuner {self.tuner!r} measured no configuration, so it has no best")
        first = ranking[0]
        return BestTrial(first.config, first.outcome, first.resumed)

    @property
    def evaluations(self) -> int:
        """Distinct configurations evaluated (resumed ones included)."""
        return len(self.trials)
