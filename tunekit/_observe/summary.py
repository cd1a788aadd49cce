"""What a records file says per tuner and key: winner, runner-up, margin, cost, failures, skipped, the search."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from tunekit._values.decision import TuneDecision, decision_of
from tunekit._values.records import AutotuneRecord, CandidateRecord, Demoted, Runoff, SearchEnded

__all__ = ["Failure", "KeySummary", "Skip", "kept_samples", "summarise"]


@dataclass(frozen=True, slots=True)
class Failure:
    """A candidate that failed in the latest tune of a key: at which stage, and why."""

    name: str
    status: str
    stage: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Skip:
    """A candidate the latest tune of a key did not measure by design, and why.

    Not a failure: the candidate does not apply to the key, or another one met the roofline
    limit first and ended the batch (short circuit).
    """

    name: str
    reason: str


@dataclass(slots=True)
class KeySummary:
    """The decisions about one key of one tuner on one device.

    The winner, runner-up, failures and skipped candidates come from the latest ``tuned`` decision (a key is
    re-tuned when its candidates change); ``decisions``, ``samples`` and ``tuning_time_s``
    add up every decision in the file.
    """

    tuner: str
    device_id: str
    key: dict[str, object]
    decisions: int = 0
    winner: str | None = None
    winner_median_ns: float | None = None
    runner_up: str | None = None
    runner_up_median_ns: float | None = None
    samples: int = 0
    tuning_time_s: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    latest: AutotuneRecord | None = None
    runoff: Runoff | None = None
    demoted: set[str] = field(default_factory=set)
    search: SearchEnded | None = None
    """How the search that chose the latest winner went (strategy, what stopped it); None: no search chose it."""
    decision: TuneDecision | None = None
    """The figures that decided the latest winner (:func:`tunekit.decision_of`); None when nothing was measured."""

    @property
    def search_text(self) -> str:
        """The search's strategy, evaluations and what stopped it, in a few words; ``-`` without a search."""
        if self.search is None:
            return "-"
        return f"{self.search.strategy}, {self.search.evaluations} evaluated, stopped by {self.search.stopped_by}"

    @property
    def decided_by(self) -> str:
        """The stage that chose the winner (``runoff``, ``rounds``, ...; see ``tk.TuneDecision``); ``-`` without one."""
        return self.decision.stage if self.decision is not None else "-"

    @property
    def margin(self) -> float | None:
        """How far the winner is ahead as the deciding stage measured it (0.05 = 5 %); None without a runner-up."""
        return self.decision.margin if self.decision is not None else None

    @property
    def key_json(self) -> str:
        """The key in the canonical form the cache stores it in."""
        return json.dumps(self.key, sort_keys=True, separators=(",", ":"))

    def as_dict(self) -> dict[str, object]:
        """Plain data for ``--json`` output."""
        return {
            "tuner": self.tuner,
            "device_id": self.device_id,
            "key": self.key,
            "decisions": self.decisions,
            "winner": self.winner,
            "winner_median_ns": self.winner_median_ns,
            "runner_up": self.runner_up,
            "runner_up_median_ns": self.runner_up_median_ns,
            "margin": self.margin,
            "decided_by": self.decided_by,
            "decision": self.decision.model_dump(mode="json") if self.decision is not None else None,
            "samples": self.samples,
            "tuning_time_s": self.tuning_time_s,
            "failures": [
                {"name": f.name, "status": f.status, "stage": f.stage, "reason": f.reason} for f in self.failures
            ],
            "skipped": [{"name": s.name, "reason": s.reason} for s in self.skipped],
            "strategy": self.search.strategy if self.search else None,
            "evaluations": self.search.evaluations if self.search else None,
            "stopped_by": self.search.stopped_by if self.search else None,
        }


def _median(candidate: CandidateRecord) -> float | None:
    return candidate.stats.median_ns if candidate.stats is not None else None


def _apply_tune(summary: KeySummary, record: AutotuneRecord, winner: str | None, demoted: set[str]) -> None:
    medians = {c.name: m for c in record.candidates if (m := _median(c)) is not None and c.name not in demoted}
    summary.winner = winner
    summary.winner_median_ns = medians.get(winner) if winner is not None else None
    others = sorted((m, name) for name, m in medians.items() if name != winner)
    summary.runner_up, summary.runner_up_median_ns = (others[0][1], others[0][0]) if others else (None, None)
    summary.failures = [
        Failure(c.name, c.status, c.stage, c.error or "") for c in record.candidates if c.status == "failed"
    ]
    summary.skipped = [Skip(c.name, c.error or "") for c in record.candidates if c.status == "skipped"]
    summary.latest = record
    summary.runoff = next((e for e in reversed(record.events) if isinstance(e, Runoff)), None)
    summary.search = next((e for e in reversed(record.events) if isinstance(e, SearchEnded)), None)
    summary.decision = decision_of(record, winner=winner, demoted=demoted)
    if summary.decision is not None:  # the figures that decided, not the medians of all samples
        summary.winner_median_ns = summary.decision.winner_ns
        summary.runner_up, summary.runner_up_median_ns = summary.decision.runner_up, summary.decision.runner_up_ns


def kept_samples(record: AutotuneRecord) -> int:
    """The samples a tune took, as its decision counts them: every candidate's kept samples and the runoff's.

    A candidate's first, warm-up-biased sample (``discarded_ns``) is timed but no statistic uses it, so it
    is no sample here, nor in the ``Verdict``: a decision in rounds says as many samples as this.
    """
    # A record written before runoffs kept rounds_ns has its two finalists' pairs only.
    runoff = sum(
        sum(len(r) for r in e.rounds_ns) or 2 * len(e.pairs_ns) for e in record.events if isinstance(e, Runoff)
    )
    return sum(len(c.samples_ns) for c in record.candidates) + runoff


def summarise(records: Iterable[AutotuneRecord]) -> list[KeySummary]:
    """One summary per (tuner, device, key), sorted by tuner then key."""
    summaries: dict[tuple[str, str, str], KeySummary] = {}
    for record in records:
        key_json = json.dumps(record.key, sort_keys=True, separators=(",", ":"))
        summary = summaries.get((record.tuner, record.device_id, key_json))
        if summary is None:
            summary = summaries[(record.tuner, record.device_id, key_json)] = KeySummary(
                record.tuner, record.device_id, dict(record.key)
            )
        summary.decisions += 1
        summary.tuning_time_s += record.wall_time_s
        summary.samples += kept_samples(record)
        if record.decision == "tuned":
            summary.demoted = set()
            _apply_tune(summary, record, record.winner, set())
        elif record.decision == "demoted" and summary.latest is not None and summary.latest.decision == "tuned":
            # The measured runner-up now leads; the demoted candidates failed on real inputs.
            gone = {e.name for e in record.events if isinstance(e, Demoted)}
            _apply_tune(summary, summary.latest, record.winner, gone | summary.demoted)
            summary.demoted |= gone
        elif summary.latest is None:
            summary.winner = record.winner
            summary.latest = record
    return sorted(summaries.values(), key=lambda s: (s.tuner, _key_order(s.key), s.device_id))


def _key_order(key: dict[str, object]) -> tuple[tuple[str, int, float, str], ...]:
    """Keys in natural order: numbers by value (n=4 before n=128), everything else by text."""
    return tuple(
        (name, 0, float(value), "") if isinstance(value, int | float) else (name, 1, 0.0, str(value))
        for name, value in sorted(key.items())
    )
