"""What a search leaves behind: its record for the sinks, and the error when it measured nothing."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from tunekit._base.errors import NoValidKernelFound
from tunekit._candidates.config import Config
from tunekit._candidates.search_spec import config_name
from tunekit._keys.key import key_to_dict
from tunekit._observe.sinks import RecordSink, emit_to_all
from tunekit._search.result import SearchResult
from tunekit._values.outcome import outcome_reason
from tunekit._values.records import AutotuneRecord, CandidateRecord, SearchEnded

__all__ = ["emit_search_record", "no_winner_note", "raise_if_no_winner", "search_ended"]

_BUDGETS = ("max_evals", "max_seconds")


def search_ended(result: SearchResult) -> SearchEnded:
    """The record event that says how a search went."""
    return SearchEnded(
        strategy=result.strategy,
        seed=result.seed,
        space_hash=result.space.hash,
        evaluations=result.evaluations,
        resumed=sum(t.resumed for t in result.trials),
        stopped_by=result.stopped_by,
        strategy_seconds=result.strategy_seconds,
        earlier_seconds=result.earlier_seconds,
    )


def emit_search_record(
    result: SearchResult, key: object, sinks: Sequence[RecordSink], name_of: Callable[[Config], str] = config_name
) -> AutotuneRecord:
    """The record of a search run on its own (``tk.search``, ``tk.tune_objective``), to every sink.

    Candidates are named by ``name_of``, as the set being tuned names them, so that the record
    and a tuner's record of the same candidates agree. Returns the record sent.
    """
    ranking = result.ranking
    # The finalists' re-measurement decided the winner, so it is what the record shows for them:
    # beside the search-phase medians, a summary could show the winner slower than its runner-up.
    final = {t.config: t.outcome for t in result.finalists}
    record = AutotuneRecord(
        tuner=result.tuner,
        device_id=result.device_id,
        key=key_to_dict(key) if key is not None else {},
        checksum=result.space.hash,
        decision="tuned",
        candidates=[CandidateRecord.of(name_of(t.config), 0, final.get(t.config, t.outcome)) for t in result.trials],
        winner=name_of(ranking[0].config) if ranking else None,
        stored=False,
        wall_time_s=result.wall_seconds,
        events=[search_ended(result), *result.final_events],  # the finalists' batch decided: how, is kept
    )
    emit_to_all(record, sinks)
    return record


def raise_if_no_winner(
    result: SearchResult,
    key: object,
    log: str | os.PathLike[str] | None,
    name_of: Callable[[Config], str] = config_name,
) -> None:
    """Raise ``NoValidKernelFound`` when no evaluated configuration was measured, as ``execute`` does.

    Called once the record is emitted and the trial log closed, so the failures are kept in
    both: a rerun with a larger budget resumes the log instead of measuring them again.
    """
    if result.ranking:
        return
    final = {t.config: t.outcome for t in result.finalists}  # a finalist's failure is its last word
    failures = [(name_of(t.config), outcome_reason(final.get(t.config, t.outcome), staged=True)) for t in result.trials]
    raise NoValidKernelFound(result.tuner, key, failures, recorded=no_winner_note(search_ended(result), log))


def no_winner_note(ended: SearchEnded, log: str | os.PathLike[str] | None) -> str:
    """How a search that measured nothing ended, and where its trials are kept (``NoValidKernelFound.recorded``)."""
    kept = f"; every trial is kept in {os.fspath(log)}: a rerun with the same log resumes it" if log is not None else ""
    budget_empty_at_start = not ended.evaluations and ended.stopped_by == "objective_budget"
    why = " (the objective's remaining() was 0 before anything was measured)" if budget_empty_at_start else ""
    # Cut short by the budget, the rest of the space was never tried: a larger one tries more of it.
    more = "; a larger max_evals or max_seconds evaluates more of the space" if ended.stopped_by in _BUDGETS else ""
    return (
        f"the search ({ended.strategy}, seed {ended.seed}) evaluated {ended.evaluations} "
        f"configuration{'s' if ended.evaluations != 1 else ''} and stopped at {ended.stopped_by}{why}{more}{kept}"
    )
