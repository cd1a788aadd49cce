"""What tune observers are told: the events of a tune as it runs, and the observer protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from tunekit._values.records import AutotuneRecord

__all__ = [
    "BatchStarted",
    "PhaseStarted",
    "SearchAdvanced",
    "SearchFinished",
    "SearchStarted",
    "CacheLookup",
    "CandidateProgress",
    "LookupResult",
    "ProgressStage",
    "TuneEvent",
    "TuneFinished",
    "TuneObserver",
    "TuneStarted",
]

LookupResult = Literal["hit", "miss", "stale"]


ProgressStage = Literal["compiled", "checked", "sample", "measured", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """The persistent cache was asked for a key: ``hit``, ``miss``, or ``stale`` (stored but re-tuned).

    Only the slow path is reported: a call served by a winner already in memory costs a
    dictionary read and notifies nobody.
    """

    tuner: str
    device_id: str
    key: Mapping[str, object]
    result: LookupResult


@dataclass(frozen=True, slots=True)
class TuneStarted:
    """A tune began; ``tune_id`` ties the events of one tune together (tunes may run concurrently)."""

    tune_id: int
    tuner: str
    device_id: str
    key: Mapping[str, object]
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BatchStarted:
    """A plan batch is about to be measured (batch 0 first; later ones are fallbacks)."""

    tune_id: int
    batch: int
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CandidateProgress:
    """One step of one candidate.

    ``compiled``: its first launch succeeded (a launch includes compiling). ``checked``: its
    output passed the correctness gate. ``sample``: one timed run of ``duration_ns``.
    ``measured``, ``failed``, ``skipped``: its final outcome, with ``median_ns`` or ``detail``.
    """

    tune_id: int
    name: str
    stage: ProgressStage
    duration_ns: float | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class TuneFinished:
    """A decision was made (``record``) or the tune raised (``error``).

    Decisions that measure nothing (autotuning disabled, a demotion) arrive with
    ``tune_id=None`` and no :class:`TuneStarted` before them.
    """

    tune_id: int | None
    record: AutotuneRecord | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PhaseStarted:
    """A batch's schedule entered a phase: ``warmup``, ``admission`` (each candidate's first samples), a round of
    ``rounds`` (``number`` 2, 3, ...), or the ``runoff``.

    ``candidates``: those still in it; ``limit``: the most rounds (``rounds``) or pairs (``runoff``) the phase
    may take, so a display can say how far it is without claiming the batch done while samples are still taken.
    """

    tune_id: int
    phase: str
    candidates: tuple[str, ...]
    number: int = 0
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class SearchStarted:
    """A search began (``tk.search``, ``tk.tune_objective``, or a set's ``with_search`` inside its tune).

    ``search_id`` is the tune's ``tune_id`` for a search inside a tune, so its events and the tune's go together.
    """

    search_id: int
    tuner: str
    device_id: str
    key: Mapping[str, object]
    space_size: int | None
    max_evals: int | None
    max_seconds: float | None
    size_counted: bool = True
    """False when ``space_size`` is the Cartesian size of a restricted space not counted: an upper bound."""


@dataclass(frozen=True, slots=True)
class SearchAdvanced:
    """A search measured a batch (``stage="search"``) or is re-measuring its finalists (``stage="finalists"``)."""

    search_id: int
    evaluated: int
    best: str | None
    best_ns: float | None
    stage: Literal["search", "finalists"] = "search"
    finalists: int = 0


@dataclass(frozen=True, slots=True)
class SearchFinished:
    """A search ended: what it evaluated, why it stopped, what its two phases took, and its record.

    ``record`` is the search's own (``tk.search``, ``tk.tune_objective``); None for a search inside a tune,
    whose :class:`TuneFinished` follows with the tune's.
    """

    search_id: int
    evaluated: int
    stopped_by: str
    search_seconds: float
    finalists: int
    finalists_seconds: float
    record: AutotuneRecord | None = None
    error: str | None = None


TuneEvent = (
    CacheLookup
    | TuneStarted
    | BatchStarted
    | CandidateProgress
    | PhaseStarted
    | TuneFinished
    | SearchStarted
    | SearchAdvanced
    | SearchFinished
)


@runtime_checkable
class TuneObserver(Protocol):
    """Receives :data:`TuneEvent` values, on the tuning thread; must be quick and must not raise."""

    def observe(self, event: TuneEvent) -> None:
        """Take one event; ``match`` on its type and ignore the kinds you do not need."""
        ...
