"""AutotuneRecord: one JSON object per tuning decision, the published contract for tools."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag

from tunekit._base.persisted import JsonScalar, Persisted
from tunekit._base.version import __version__
from tunekit._values.durations import BenchmarkDurations
from tunekit._values.outcome import Failed, Measured, Outcome, Skipped
from tunekit._values.set_origin import SetOrigin

__all__ = [
    "AutotuneRecord",
    "CandidateRecord",
    "CheckResult",
    "Demoted",
    "Eliminated",
    "FallbackBatch",
    "PhaseTimes",
    "Prepared",
    "RecordEvent",
    "Round",
    "Runoff",
    "SampleStats",
    "SamplingStopped",
    "SearchEnded",
    "SharedTunerName",
    "ShortCircuit",
    "Stage",
    "StopReason",
    "UnknownEvent",
    "Verdict",
    "Warmup",
]

SCHEMA_VERSION: Literal[1] = 1


class SampleStats(Persisted):
    """Statistics of a candidate's timed samples, all in ns (variance in ns^2)."""

    count: int = Field(ge=0)
    min_ns: float = Field(ge=0)
    median_ns: float = Field(ge=0)
    mean_ns: float = Field(ge=0)
    variance_ns2: float = Field(ge=0)
    spread: float = Field(0.0, ge=0, description="Interquartile range over the median (0.05 = 5%).")

    @classmethod
    def of(cls, durations: BenchmarkDurations) -> SampleStats:
        """Summarise timed samples."""
        samples = durations.samples_ns
        spread = 0.0
        if len(samples) >= 2 and durations.median_ns > 0:
            quartiles = statistics.quantiles(samples, n=4, method="inclusive")
            spread = (quartiles[2] - quartiles[0]) / durations.median_ns
        return cls(
            count=len(samples),
            min_ns=durations.min_ns,
            median_ns=durations.median_ns,
            mean_ns=durations.mean_ns,
            variance_ns2=durations.variance_ns2,
            spread=spread,
        )


class CandidateRecord(Persisted):
    """One candidate's part in a decision: its status, samples and, if it failed, why."""

    name: str
    status: Literal["measured", "failed", "skipped"]
    batch: int = Field(ge=0, description="Index of the plan batch the candidate belonged to.")
    stats: SampleStats | None = None
    samples_ns: list[int] = Field(default_factory=list)
    discarded_ns: list[int] = Field(
        default_factory=list, description="Timed samples left out of the statistics (the warm-up-biased first)."
    )
    stage: str | None = Field(None, description="For a failure: compile, check, run, timeout or crash.")
    error: str | None = None

    @classmethod
    def of(cls, name: str, batch: int, outcome: Outcome) -> CandidateRecord:
        """The record of ``outcome``."""
        match outcome:
            case Measured(durations, discarded):
                return cls(
                    name=name,
                    status="measured",
                    batch=batch,
                    stats=SampleStats.of(durations),
                    samples_ns=list(durations.samples_ns),
                    discarded_ns=list(discarded),
                )
            case Failed(reason, stage):
                return cls(name=name, status="failed", batch=batch, stage=stage, error=reason)
            case Skipped(reason):
                return cls(name=name, status="skipped", batch=batch, error=reason)


class FallbackBatch(Persisted):
    """Every candidate of the batches before ``batch`` failed, so the next tier ran."""

    kind: Literal["fallback"] = "fallback"
    batch: int


class Demoted(Persisted):
    """A cached winner raised on real inputs; the next-ranked candidate took its place."""

    kind: Literal["demoted"] = "demoted"
    name: str
    error: str
    replacement: str | None


class CacheRecovered(Persisted):
    """A cache row or file was unreadable and was discarded; the key was re-tuned."""

    kind: Literal["cache_recovered"] = "cache_recovered"
    detail: str


class SharedTunerName(Persisted):
    """The key's cache row was written by a different tunable set under the same tuner name.

    Two operations given one tuner name in programs sharing a cache re-tune the key over each
    other's winner, so neither keeps one (``tunekit._tune.stale``). The log warns once per pair of
    sets in a process; every record of a tune it causes carries this event, so a sink that sees
    records but not logs (a dashboard, a JSONL file read later) sees it too.
    """

    kind: Literal["shared_tuner_name"] = "shared_tuner_name"
    stored: SetOrigin = Field(description="The set that wrote the row being re-tuned over.")
    current: SetOrigin = Field(description="The set of this tune.")


class Warmup(Persisted):
    """The device was kept busy before the first timed sample so its clocks ramped up."""

    kind: Literal["warmup"] = "warmup"
    duration_ms: float = Field(ge=0)
    method: Literal["device", "candidates"] = Field(
        description="device: the client's own warm-up; candidates: the batch ran untimed for that wall time."
    )


class Round(Persisted):
    """One round of interleaved sampling: one timed sample of every live candidate."""

    kind: Literal["round"] = "round"
    number: int = Field(ge=1)
    samples_ns: dict[str, int] = Field(description="Candidate name -> its sample this round, in sampling order.")


class Eliminated(Persisted):
    """A candidate stopped being sampled because it cannot be the winner."""

    kind: Literal["eliminated"] = "eliminated"
    name: str
    round: int = Field(ge=1)
    reason: Literal["slower", "separated"] = Field(
        description="slower: median above speed_factor x the leader's best sample; "
        "separated: slower than the leader beyond the noise of both."
    )
    median_ns: float
    leader: str
    leader_best_ns: float
    leader_median_ns: float


class ShortCircuit(Persisted):
    """A candidate met the roofline time limit in its kept sample and in confirming samples taken
    after other candidates' runs, so the rest of its batch was skipped."""

    kind: Literal["short_circuit"] = "short_circuit"
    name: str
    limit_ns: float
    samples_ns: list[int] = Field(
        description="The samples that met the limit: the kept one, then the confirming ones (in records of older "
        "tunekits: two, taken back to back)."
    )
    skipped: list[str]


StopReason = Literal["decided", "two_left", "one_left", "max_samples", "short_circuit"]


class SamplingStopped(Persisted):
    """Why the rounds ended: one left after eliminations (decided), two close finalists left
    (the runoff decides), a single candidate, ``max_samples`` reached, or a short circuit.

    Never empty: a batch whose candidates all failed has no rounds to stop, and no such event."""

    kind: Literal["sampling_stopped"] = "sampling_stopped"
    reason: StopReason
    rounds: int = Field(ge=0)
    survivors: list[str]


class Runoff(Persisted):
    """The finalists the rounds could not separate, timed back to back in rounds (A B C, C B A, ...);
    each compared with the leader through the trimmed mean of their paired log-ratios."""

    kind: Literal["runoff"] = "runoff"
    finalists: list[str] = Field(min_length=2, description="Every candidate still in when the rounds ended.")
    pairs_ns: list[tuple[int, int]] = Field(
        description="With exactly two finalists: (A, B) samples of each pair, in the finalists' order; else empty."
    )
    rounds_ns: list[dict[str, int]] = Field(
        default_factory=list, description="Each runoff round: finalist name -> its sample, in sampling order."
    )
    ratio: float | None = Field(
        description="The winner's time over the runner-up's, as their paired samples estimate it (rounds' pairs "
        "included); None when no comparison decided (a forfeit left one finalist)."
    )
    margin: float = Field(ge=0, description="How far the ratio is from a tie (0.02 = 2%).")
    winner: str
    runner_up: str | None = Field(None, description="The finalist closest to the winner at the end.")
    dropped: list[str] = Field(
        default_factory=list, description="Finalists separated from the leader before the end, in order."
    )
    forfeit: str | None = Field(None, description="The (first) finalist that raised during the runoff and lost by it.")
    stopped_early: bool = Field(False, description="The decision was clear before the last round.")
    tied: list[str] = Field(
        default_factory=list,
        description="When the runoff ended tied: the finalists besides the winner, each known to within 0.5% of a "
        "tie with it (estimate and interval), or undecidable in what was left of the runoff's sample budget, so "
        "more rounds were not worth it.",
    )
    ended: Literal["separated", "tied", "max_rounds", "forfeit"] | None = Field(
        None,
        description="What ended the runoff: every other finalist separated from the winner; the rest known to "
        "within 0.5% of a tie with it or undecidable in the budget; the last round or the sample budget (the lowest "
        "paired estimate decided); forfeits alone. None in "
        "records written before tunekit said.",
    )


Stage = Literal["rounds", "runoff", "short_circuit", "single"]

DecidedBy = Literal["eliminations", "separated", "tied", "max_rounds", "forfeit", "short_circuit", "single"]


class Verdict(Persisted):
    """How a batch was decided, as plain figures: who won, the closest other, by how much, how sure.

    ``stage``: ``rounds`` (eliminations left one), ``runoff`` (the runoff among the close
    finalists), ``short_circuit`` (the winner met the roofline limit; nothing was compared) or
    ``single`` (one candidate measured). The margin and its standard error come from the winner's
    and runner-up's paired samples (same rounds), as the decision used them.
    """

    kind: Literal["verdict"] = "verdict"
    stage: Stage
    winner: str
    winner_ns: float = Field(ge=0, description="The winner's median kept sample, in ns.")
    runner_up: str | None = Field(description="The candidate closest to the winner; None when none was compared.")
    runner_up_ns: float | None = Field(
        description="The runner-up's time as the paired comparison puts it: winner_ns x (1 + margin)."
    )
    margin: float | None = Field(
        description="How much slower the runner-up is (0.02 = 2%), from the pairs' trimmed mean log-ratio; "
        "negative when the pairs favour the runner-up but the decision did not (a tie within indifference)."
    )
    margin_se: float | None = Field(description="Standard error of the margin (of its log; 0.01 ~ 1 percentage point).")
    pairs: int = Field(ge=0, description="Paired samples behind the margin.")
    samples: int = Field(
        ge=0,
        description="Kept samples the batch took, runoff included: each candidate's first, warm-up-biased sample "
        "(its discarded_ns) is not one, so this is the batch's share of a key's cost in records summary.",
    )
    decided_by: DecidedBy | None = Field(
        None,
        description="What decided: the rounds' eliminations left one; the runoff separated the winner from every "
        "other finalist; the runoff ended with the rest tied with the winner within 0.5% (the winner kept by its "
        "paired score, the margin then says how close); the runoff's last round; forfeits; the roofline short "
        "circuit; a single candidate. None in records written before tunekit said.",
    )


class SearchEnded(Persisted):
    """A search over a declared space finished: how, and which limit ended it."""

    kind: Literal["search"] = "search"
    strategy: str
    seed: int
    space_hash: str
    evaluations: int = Field(ge=0, description="Distinct configurations evaluated, resumed ones included.")
    resumed: int = Field(ge=0, description="Trials answered from the trial log of an earlier run.")
    stopped_by: Literal["max_evals", "max_seconds", "exhausted", "objective_budget", "roofline"]
    strategy_seconds: float = Field(ge=0, description="CPU time the strategy itself took to propose and learn.")
    earlier_seconds: float | None = Field(
        None,
        ge=0,
        description="Seconds earlier runs of a resumed search spent, as its trial log holds them (max_seconds counts "
        "them; the record's wall_time_s is this run's alone); 0 for a search not resumed. None in records written "
        "before it was kept.",
    )


class CheckResult(Persisted):
    """One candidate's correctness check, run once before any timing."""

    kind: Literal["check"] = "check"
    name: str
    passed: bool
    against: str = Field(
        description="'reference' (the set's reference function) or the name of the baseline candidate."
    )
    detail: str = Field(description="What was compared and, on failure, where the worst element is.")
    max_abs_error: float | None = None
    max_rel_error: float | None = None


class Prepared(Persisted):
    """The prepare (compile) phase of a batch: every candidate's hook run concurrently before timing."""

    kind: Literal["prepare"] = "prepare"
    batch: int
    candidates: int = Field(ge=0)
    failed: int = Field(ge=0)
    workers: int = Field(ge=1)
    wall_time_s: float = Field(ge=0)
    compiled_in_process: str | None = Field(
        None,
        description="Why the backend compiled some or all of the batch in the tuning process although it has "
        "worker processes for that (they could not start, or could not take an input); None when it did not.",
    )


# Every event model this tunekit knows; a kind outside them reads as an UnknownEvent.
_KNOWN_EVENTS = (
    FallbackBatch,
    Demoted,
    CacheRecovered,
    SharedTunerName,
    CheckResult,
    Prepared,
    Warmup,
    Round,
    Eliminated,
    ShortCircuit,
    SamplingStopped,
    Runoff,
    Verdict,
    SearchEnded,
)
_KINDS = frozenset(model.model_fields["kind"].default for model in _KNOWN_EVENTS)


class UnknownEvent(Persisted):
    """An event of a kind this tunekit does not know: written by a newer one, kept as it was read.

    New event kinds are added within ``schema_version`` 1, so a record of a newer tunekit stays
    readable here (``tunekit records summary``, a sink reading a JSONL file), its new events
    kept whole in the model's extra fields rather than failing the record.
    """

    kind: str = Field(json_schema_extra={"not": {"enum": sorted(_KINDS)}})


def _event_kind(event: object) -> str:
    kind = event.get("kind") if isinstance(event, dict) else getattr(event, "kind", None)
    return kind if isinstance(kind, str) and kind in _KINDS else "unknown"


RecordEvent = Annotated[
    Annotated[FallbackBatch, Tag("fallback")]
    | Annotated[Demoted, Tag("demoted")]
    | Annotated[CacheRecovered, Tag("cache_recovered")]
    | Annotated[SharedTunerName, Tag("shared_tuner_name")]
    | Annotated[CheckResult, Tag("check")]
    | Annotated[Prepared, Tag("prepare")]
    | Annotated[Warmup, Tag("warmup")]
    | Annotated[Round, Tag("round")]
    | Annotated[Eliminated, Tag("eliminated")]
    | Annotated[ShortCircuit, Tag("short_circuit")]
    | Annotated[SamplingStopped, Tag("sampling_stopped")]
    | Annotated[Runoff, Tag("runoff")]
    | Annotated[Verdict, Tag("verdict")]
    | Annotated[SearchEnded, Tag("search")]
    | Annotated[UnknownEvent, Tag("unknown")],
    Discriminator(_event_kind),
]


class PhaseTimes(Persisted):
    """Where a tune's wall time went, in seconds of wall time per phase, summed over its batches.

    The phases do not add up to ``wall_time_s`` exactly: the rest is making the inputs, the
    roofline limit and the record itself (``other_s``).
    """

    compile_s: float = Field(0.0, ge=0, description="Compiling the candidates (the prepare hooks).")
    check_s: float = Field(0.0, ge=0, description="Checking each candidate's output against the reference.")
    warmup_s: float = Field(0.0, ge=0, description="The device warm-up before the first timed sample.")
    measure_s: float = Field(0.0, ge=0, description="Admission round and interleaved rounds: the timed sampling.")
    runoff_s: float = Field(0.0, ge=0, description="The paired runoff between two close finalists.")
    other_s: float = Field(0.0, ge=0, description="The rest of the wall time: inputs, roofline limit, bookkeeping.")


Decision = Literal["tuned", "disabled", "demoted"]
"""What a record decided: measured and chose, took the plan order (autotuning off), or demoted a failing winner."""


class AutotuneRecord(Persisted):
    """One tuning decision. ``model_json_schema()`` is the published contract.

    ``decision`` says what happened: ``tuned`` (candidates measured), ``disabled``
    (autotuning off: the first planned candidate was taken unmeasured) or ``demoted``
    (a cached winner failed at launch and was replaced).
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    tunekit_version: str = __version__
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    tuner: str
    device_id: str
    key: dict[str, JsonScalar]
    checksum: str
    decision: Decision
    candidates: list[CandidateRecord] = Field(default_factory=list)
    winner: str | None
    stored: bool = Field(description="Whether the winner was written to the persistent cache.")
    wall_time_s: float = Field(ge=0, description="Wall time of the whole decision, in seconds.")
    events: list[RecordEvent] = Field(default_factory=list)
    phases: PhaseTimes | None = Field(
        None, description="Where the wall time went, per phase; None when nothing was measured (or an older record)."
    )
