"""The events of a decision in words, for the CLI and the report.

A record of an adaptive tune holds one ``round`` event per sampling round and one
``check`` per gated candidate; listed one by one they bury the few that explain the
decision, so repeated kinds are folded into one line.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunekit._base.counted import counted
from tunekit._base.units import format_duration_ns
from tunekit._values.records import (
    CacheRecovered,
    CheckResult,
    Demoted,
    Eliminated,
    FallbackBatch,
    Prepared,
    RecordEvent,
    Round,
    Runoff,
    SamplingStopped,
    SearchEnded,
    SharedTunerName,
    ShortCircuit,
    UnknownEvent,
    Warmup,
)

__all__ = ["describe_events"]


def _one(event: RecordEvent) -> str | None:
    match event:
        case FallbackBatch(batch=batch):
            return f"batch {batch} ran as a fallback: every candidate before it failed"
        case Demoted(name=name, error=error, replacement=replacement):
            return f"{name} failed on real inputs ({error}); replaced by {replacement or 'nothing'}"
        case CacheRecovered(detail=detail):
            return f"cache recovered: {detail}"
        case SharedTunerName(stored=stored, current=current):
            return (
                f"re-tuned over the winner of a different tunable set under the same tuner name "
                f"({stored.describe()}; this one: {current.describe()}): give each operation its own name"
            )
        case CheckResult(passed=False, name=name, against=against, detail=detail):
            return f"{name} failed its correctness check against {against}: {detail}"
        case Prepared(batch=batch, candidates=count, failed=failed, workers=workers, wall_time_s=wall):
            broken = f", {failed} failed" if failed else ""
            here = f"; compiled in the tuning process: {event.compiled_in_process}" if event.compiled_in_process else ""
            return (
                f"batch {batch}: {counted(count, 'candidate')} compiled on {counted(workers, 'worker')} "
                f"in {wall:.3g} s{broken}{here}"
            )
        case Warmup(duration_ms=ms, method=method):
            return f"device warm-up: {ms:.0f} ms ({method})"
        case Eliminated(name=name, round=number, reason=reason, median_ns=median, leader=leader, leader_median_ns=lm):
            return (
                f"{name} eliminated in round {number} ({reason}): median {format_duration_ns(median)} "
                f"against {leader}'s {format_duration_ns(lm)}"
            )
        case ShortCircuit(name=name, limit_ns=limit, skipped=skipped):
            return f"{name} met the roofline limit of {format_duration_ns(limit)}; skipped {', '.join(skipped) or '-'}"
        case SamplingStopped(reason=reason, rounds=rounds, survivors=survivors):
            return f"sampling stopped after {counted(rounds, 'round')} ({reason}); left: {', '.join(survivors)}"
        case Runoff(finalists=finalists, pairs_ns=pairs, ratio=ratio, winner=winner, forfeit=forfeit):
            among = " vs ".join(finalists)
            if forfeit is not None and ratio is None:
                return f"runoff {among}: {forfeit} raised and forfeited; {winner} wins"
            # The ratio as it was decided on (winner over runner-up); the margin as the reader compares it
            # is the decision's, shown above the events, not a second figure here.
            ratio_text = (
                f", ratio {winner}/{event.runner_up} {ratio:.4f}" if ratio is not None and event.runner_up else ""
            )
            rounds_text = counted(len(event.rounds_ns) or len(pairs), "round")
            return f"paired runoff {among}: {rounds_text}{ratio_text}; {winner} wins"
        case SearchEnded(strategy=strategy, evaluations=evaluations, stopped_by=stopped_by, resumed=resumed):
            earlier = event.earlier_seconds
            spent = f"; earlier runs spent {earlier:.3g} s of its time" if earlier else ""
            again = f" ({resumed} resumed from the trial log{spent})" if resumed or earlier else ""
            evaluated = counted(evaluations, "configuration")
            return f"search ({strategy}): {evaluated} evaluated{again}, stopped by {stopped_by}"
        case _:
            return None


def describe_events(events: Sequence[RecordEvent]) -> list[str]:
    """One line per event worth reading; sampling rounds and passed checks are counted, not listed."""
    lines = [text for event in events if (text := _one(event)) is not None]
    rounds = sum(isinstance(e, Round) for e in events)
    passed = sum(isinstance(e, CheckResult) and e.passed for e in events)
    if passed:
        lines.insert(0, f"{counted(passed, 'candidate')} passed the correctness check")
    if rounds and not any(isinstance(e, SamplingStopped) for e in events):
        lines.append(f"{counted(rounds, 'sampling round')}")
    lines.extend(f"{event.kind}: {event.model_dump_json()}" for event in events if isinstance(event, UnknownEvent))
    return lines
