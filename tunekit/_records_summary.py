"""What a records file says per tuner and key: winner, runner-up, margin, cost, failures."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from tunekit._records import AutotuneRecord, CandidateRecord

__all__ = ["Failure", "KeySummary", "summarise"]


@dataclass(frozen=True, slots=True)
class Failure:
    """A candidate that failed or was skipped in the latest tune of a key, and why."""

    name: str
    status: str
    stage: str | None
    reason: str


@dataclass(slots=True)
class KeySummary:
    """The decisions about one key of one tuner on one device.

    The winner, runner-up and failures come from the latest ``tuned`` decision (a key is
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
    latest: AutotuneRecord | None = None

    @property
    def margin(self) -> float | None:
        """How much slower the runner-up's median is than the winner's (0.05 = 5 %)."""
        if self.winner_median_ns is None or self.runner_up_median_ns is None or self.winner_median_ns <= 0:
            return None
        return self.runner_up_median_ns / self.winner_median_ns - 1.0

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
            "samples": self.samples,
            "tuning_time_s": self.tuning_time_s,
            "failures": [
                {"name": f.name, "status": f.status, "stage": f.stage, "reason": f.reason} for f in self.failures
            ],
        }


def _median(candidate: CandidateRecord) -> float | None:
    return candidate.stats.median_ns if candidate.stats is not None else None


def _apply_tune(summary: KeySummary, record: AutotuneRecord, winner: str | None) -> None:
    medians = {c.name: m for c in record.candidates if (m := _median(c)) is not None}
    summary.winner = winner
    summary.winner_median_ns = medians.get(winner) if winner is not None else None
    others = sorted((m, name) for name, m in medians.items() if name != winner)
    summary.runner_up, summary.runner_up_median_ns = (others[0][1], others[0][0]) if others else (None, None)
    summary.failures = [
        Failure(c.name, c.status, c.stage, c.error or "") for c in record.candidates if c.status != "measured"
    ]
    summary.latest = record


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
        summary.samples += sum(len(c.samples_ns) for c in record.candidates)
        if record.decision == "tuned":
            _apply_tune(summary, record, record.winner)
        elif record.decision == "demoted" and summary.latest is not None and summary.latest.decision == "tuned":
            _apply_tune(summary, summary.latest, record.winner)  # the measured runner-up now leads
        elif summary.latest is None:
            summary.winner = record.winner
            summary.latest = record
    return [summaries[k] for k in sorted(summaries, key=lambda k: (k[0], k[2], k[1]))]
