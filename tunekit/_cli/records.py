"""``tunekit records summary|tail``, ``tunekit schema`` and ``tunekit report``."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, deque
from pathlib import Path

from pydantic import ValidationError

from tunekit._base.counted import counted
from tunekit._base.file_look import binary_kind_of
from tunekit._base.persisted import STORED
from tunekit._base.short_id import short_device_id
from tunekit._base.units import format_duration_ns
from tunekit._base.validation_text import validation_text
from tunekit._cli.error import CliError
from tunekit._cli.key_match import fields_match, held_values_hint, key_filter, key_matches
from tunekit._cli.listings import LISTINGS, KeyFailure, KeySkip, KeySummaryEntry, RecordsSummary
from tunekit._cli.table import Output, fixed, print_json
from tunekit._observe.hit_count import HitSummary
from tunekit._observe.reader import HIT_SUMMARY_PREFIX, NOT_JSON, BadLine, RecordLine, follow_records, read_records
from tunekit._observe.report import render_report
from tunekit._observe.summary import KeySummary, summarise
from tunekit._store.file_kind import other_kind
from tunekit._values.decision import decision_of
from tunekit._values.records import AutotuneRecord

__all__ = ["BAD_LINES_SHOWN", "read_or_fail", "report", "schema", "summary", "tail"]

BAD_LINES_SHOWN = 20
"""Bad lines listed one by one; past these, a count: a binary file read as records would list thousands."""


def read_or_fail(file: str) -> tuple[list[RecordLine], list[BadLine]]:
    """Every line of a records file, split into records and bad lines; a file that cannot be read is a CliError."""
    path = Path(file)
    if path.is_dir():
        raise CliError(f"{file} is a directory, not a records file")
    # Looked at first: read line by line, a SQLite cache would list 31 bad lines, and 5 MB of binary 19,000.
    looks = binary_kind_of(path)
    if looks is not None and other_kind(path, "records") is None:
        hint = "; tunekit's persistent cache is one: read it with tunekit cache list" if "SQLite" in looks else ""
        raise CliError(f"{file} is {looks}, not a records file (JSONL of tk.AutotuneRecord){hint}")
    good: list[RecordLine] = []
    bad: list[BadLine] = []
    try:
        for line in read_records(path):
            (good if isinstance(line, RecordLine) else bad).append(line)  # type: ignore[arg-type]
    except FileNotFoundError as exc:
        # The reader's message says why a warm run leaves no file; the CLI's own one used to drop that.
        raise CliError(exc.strerror or f"no records file at {file}") from exc
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror or exc}") from exc
    # A trial log or committed record given here would list every one of its lines as a bad record.
    if bad and not good and (kind := other_kind(path, "records")):
        raise CliError(f"{file} is {kind}, not a records file")
    # A text file of another kind (a script, a log, a TOML file) would list each of its lines as "not valid JSON".
    # Two lines at least: a records file whose first record is still being written holds one torn line.
    if len(bad) > 1 and not good and all(line.reason.startswith(NOT_JSON) for line in bad):
        raise CliError(
            f"{file} is not a records file: none of its {len(bad)} lines is JSON (a records file holds one JSON "
            "record per line, written where TUNEKIT_RECORD or tk.configure(record=...) points)"
        )
    return good, bad


def _report_bad(file: str, bad: list[BadLine]) -> None:
    for line in bad[:BAD_LINES_SHOWN]:
        print(f"{file}:{line.line}: {line.reason}", file=sys.stderr)
    if len(bad) > BAD_LINES_SHOWN:
        print(f"{file}: ... and {len(bad) - BAD_LINES_SHOWN} more bad lines ({len(bad)} in all)", file=sys.stderr)


def summary(args: argparse.Namespace) -> int:
    """Per tuner and key: winner, runner-up, margin, samples, time, search, failures, skipped; exit 1 on bad lines.

    A table per device, its id above it; ``--json``: :class:`~tunekit._cli.listings.RecordsSummary`.
    """
    out = Output.of(args)
    good, bad = read_or_fail(args.file)
    hit_summaries, hits, bad_summaries = _hits(args.file)
    bad = sorted([*bad, *bad_summaries], key=lambda line: line.line)
    _report_bad(args.file, bad)
    unfiltered = summarise(line.record for line in good)
    everything = len(unfiltered)
    summaries, hits = _filtered(unfiltered, hits, args.tuner, key_filter(args.key))
    if args.json:
        keys = [_summary_entry(s) for s in summaries]
        print_json(
            RecordsSummary(
                file=args.file,
                records=len(good),
                bad_lines=len(bad),
                keys=keys,
                hit_summaries=hit_summaries,
                cache_hits=sum(hits.values()),
            )
        )
        return 1 if bad else 0
    skipped = f", {counted(len(bad), 'bad line')} skipped" if bad else ""
    hit_counts = f"; {counted(hit_summaries, 'hit summary')}, {counted(sum(hits.values()), 'cache hit')}"
    matching = ""
    if args.tuner is not None or args.key:
        # Records hold anchored keys: --key n=1000 (the call's size) matches nothing where they hold 1024.
        of_tuner = (s.key for s in unfiltered if args.tuner is None or s.tuner == args.tuner)
        held = held_values_hint("recorded", of_tuner, key_filter(args.key)) if not summaries else ""
        matching = f" ({len(summaries)} matching the filters{'; ' + held if held else ''})"
    shown = f"{counted(len(good), 'record')}, {counted(everything, 'key')}{matching}{skipped}"
    out.line(f"{args.file}: {shown}{hit_counts if hit_summaries else ''}")
    if hit_summaries:
        _print_hits(out, hit_summaries, hits)
    # A column for the search that chose a winner (its strategy, what stopped it) only where one did:
    # a file of plain tunes keeps the narrower table.
    searched = any(s.search is not None for s in summaries)
    for device_id, group in _by_device(summaries):
        out.line()
        out.line(f"device {out.device(device_id)}")
        out.table(
            (
                "tuner",
                "key",
                "winner",
                "runner-up",
                "margin [95%]",
                "decided by",
                "cost",
                *(("search",) if searched else ()),
            ),
            [
                (
                    s.tuner,
                    s.key_json,
                    _winner_cell(s),
                    f"{s.runner_up} {format_duration_ns(s.runner_up_median_ns)}" if s.runner_up else "-",
                    s.decision.margin_text if s.decision is not None else "-",
                    _decided_by(s),
                    _cost(s),
                    *((s.search_text,) if searched else ()),
                )
                for s in group
            ],
        )
    # Why a winner stands beside a faster-looking median, and decisions the noise leaves in doubt.
    notes = [(s, why) for s in summaries if s.decision is not None and (why := s.decision.why())]
    doubts = [(s, text) for s in summaries if s.decision is not None and (text := s.decision.warning(s.tuner))]
    failures = [
        (s, f"{f.name} {f.status}{f' at {f.stage}' if f.stage else ''}: {f.reason}")
        for s in summaries
        for f in s.failures
    ]
    # Apart from the failures, which they are not: not measured by design (does not apply, short circuit).
    skips = [(s, f"{skip.name}: {skip.reason}") for s in summaries for skip in s.skipped]
    for title, items in (
        ("why:", notes),
        ("not trusted (spread wider than the margin):", doubts),
        ("failures:", failures),
        ("skipped (not measured, by design):", skips),
    ):
        if items:
            out.line()
            out.line(title)
            for s, text in items:
                out.line(f"{s.tuner} {s.key_json}: {text}", indent=2)
    return 1 if bad else 0


_Hit = tuple[str, str, str, str]  # device, tuner, key JSON, source


def _filtered(
    summaries: list[KeySummary], hits: Counter[_Hit], tuner: str | None, wanted: dict[str, str]
) -> tuple[list[KeySummary], Counter[_Hit]]:
    """The keys (and hit counts) of ``tuner`` whose fields hold ``wanted``; a usage error for a name the file lacks.

    A misspelt tuner or field would match nothing and print an empty summary, exit 0: it is named
    instead, with the tuners or fields the file does hold, as ``cache list`` names them.
    """
    if tuner is not None:
        tuners = sorted({s.tuner for s in summaries} | {h[1] for h in hits})
        if tuner not in tuners:
            raise CliError(f"no record of tuner {tuner!r} in the file (tuners there: {', '.join(tuners) or 'none'})")
        summaries = [s for s in summaries if s.tuner == tuner]
    if wanted:
        fields = sorted({name for s in summaries for name in s.key})
        unknown = [name for name in wanted if name not in fields]
        if summaries and unknown:
            raise CliError(f"no recorded key has a field named {unknown[0]!r} (key fields there: {', '.join(fields)})")
        summaries = [s for s in summaries if fields_match(s.key, wanted)]
    if tuner is None and not wanted:
        return summaries, hits
    kept = Counter({h: n for h, n in hits.items() if (tuner is None or h[1] == tuner) and key_matches(h[2], wanted)})
    return summaries, kept


def _hits(file: str) -> tuple[int, Counter[_Hit], list[BadLine]]:
    """How many cache-hit summaries the file holds (``TUNEKIT_COUNT_HITS=1``), their hits added up, and the bad ones.

    The records reader skips them, so a file of a warm run's hits alone read as "0 records". A
    whole JSON line that starts as a summary but is none (a field of another version, say) is
    a bad line here: the reader skips it as a summary, so nothing else would say it was left out.
    A summary cut short is no JSON, and the reader reports it.
    """
    summaries = 0
    hits: Counter[_Hit] = Counter()
    bad: list[BadLine] = []
    with open(file, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            if not raw.startswith(HIT_SUMMARY_PREFIX):
                continue
            try:
                summary = HitSummary.model_validate_json(raw, context=STORED)
            except ValidationError as exc:
                if exc.errors()[0]["type"] != "json_invalid":
                    bad.append(BadLine(number, f"not a valid hit summary: {validation_text(exc, limit=1)}"))
                continue
            summaries += 1
            for c in summary.counts:
                hits[(c.device_id, c.tuner, json.dumps(c.key, sort_keys=True, separators=(",", ":")), c.source)] += (
                    c.hits
                )
    return summaries, hits, bad


def _print_hits(out: Output, summaries: int, hits: Counter[_Hit]) -> None:
    """The hit summaries' totals per device, tuner and key, by where the winner came from."""
    out.line()
    out.line(f"cache hits, added up over {counted(summaries, 'hit summary')} (tk.read_hit_summaries reads each):")
    keys = sorted({(device, tuner, key) for device, tuner, key, _ in hits})
    for device_id in dict.fromkeys(device for device, _, _ in keys):
        out.line()
        out.line(f"device {out.device(device_id)}")
        out.table(
            ("tuner", "key", fixed("from memory"), fixed("from the cache file")),
            [
                (tuner, key, str(hits[(device, tuner, key, "memory")]), str(hits[(device, tuner, key, "persistent")]))
                for device, tuner, key in keys
                if device == device_id
            ],
        )


def _winner_cell(s: KeySummary) -> str:
    # No winner: said as `records tail` says it, rather than "- -" (a name and a time, both missing).
    if not s.winner:
        return "no valid candidate"
    return s.winner if s.winner_median_ns is None else f"{s.winner} {format_duration_ns(s.winner_median_ns)}"


def _decided_by(s: KeySummary) -> str:
    """The deciding stage; for a key only ever taken with autotuning off, that, rather than "-"."""
    if s.decision is not None:
        return s.decision.stage_text
    if s.latest is not None and s.latest.decision == "disabled":
        return "autotuning off: taken unmeasured"
    return "-"


def _cost(s: KeySummary) -> str:
    """What tuning the key took: its time, samples, and how many tunes the file holds when more than one."""
    tunes = f", {s.decisions} tunes" if s.decisions != 1 else ""
    return f"{s.tuning_time_s:.3g} s, {counted(s.samples, 'sample')}{tunes}"


def _by_device(summaries: list[KeySummary]) -> list[tuple[str, list[KeySummary]]]:
    """The keys grouped by device, devices in the order they first come."""
    groups: dict[str, list[KeySummary]] = {}
    for s in summaries:
        groups.setdefault(s.device_id, []).append(s)
    return list(groups.items())


def _summary_entry(s: KeySummary) -> KeySummaryEntry:
    return KeySummaryEntry(
        device_id=s.device_id,
        device_short=short_device_id(s.device_id),
        tuner=s.tuner,
        key=dict(s.key),
        decisions=s.decisions,
        winner=s.winner,
        winner_median_ns=s.winner_median_ns,
        runner_up=s.runner_up,
        runner_up_median_ns=s.runner_up_median_ns,
        margin=s.margin,
        decided_by=s.decided_by,
        decision=s.decision,
        samples=s.samples,
        tuning_time_s=s.tuning_time_s,
        failures=[KeyFailure(name=f.name, status=f.status, stage=f.stage, reason=f.reason) for f in s.failures],
        skipped=[KeySkip(name=k.name, reason=k.reason) for k in s.skipped],
        strategy=s.search.strategy if s.search else None,
        evaluations=s.search.evaluations if s.search else None,
        stopped_by=s.search.stopped_by if s.search else None,
    )


def _one_line(record: AutotuneRecord) -> str:
    decision = decision_of(record)
    median = ""
    if decision is not None:
        margin = f" {decision.margin_text}" if decision.margin is not None else ""
        median = f"{format_duration_ns(decision.winner_ns)}{margin} ({decision.stage_text})"
    failed = sum(1 for c in record.candidates if c.status == "failed")
    extra = f", {failed} failed" if failed else ""
    key = json.dumps(record.key, sort_keys=True, separators=(",", ":"))
    return (
        f"{record.timestamp.strftime('%H:%M:%S')} {record.tuner} {key} -> {record.winner or 'no valid candidate'}"
        f" {median} [{record.decision}, {counted(len(record.candidates), 'candidate')}{extra}, "
        f"{record.wall_time_s:.3g} s]"
    ).replace("  ", " ")


def tail(args: argparse.Namespace) -> int:
    """The last records of a file, then each new one as it is appended, until interrupted."""
    try:
        with open(args.file, "rb") as file:
            # A last line still being written is left to the follower, which reads it once complete.
            # Counted before the read below, so a line appended between the two is the follower's.
            complete = sum(1 for raw in file if raw.endswith(b"\n"))
    except OSError:
        complete = 0  # read_or_fail names what is wrong with the file
    good, bad = read_or_fail(args.file)
    lines: list[RecordLine | BadLine] = [*good, *bad]
    shown = sorted((item for item in lines if item.line <= complete), key=lambda item: item.line)
    for line in deque(shown, maxlen=args.lines):
        _print_line(args.file, line)
    sys.stdout.flush()
    for line in follow_records(args.file, from_line=complete + 1):
        _print_line(args.file, line)
        sys.stdout.flush()
    return 0


def _print_line(file: str, line: RecordLine | BadLine) -> None:
    if isinstance(line, RecordLine):
        print(_one_line(line.record))
    else:
        print(f"{file}:{line.line}: {line.reason}", file=sys.stderr)


def schema(args: argparse.Namespace) -> int:
    """Print the JSON schema every record line conforms to, or (``NAME``) that of a listing's ``--json`` output."""
    name = getattr(args, "name", "record")
    model = AutotuneRecord if name == "record" else LISTINGS[name]
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0


def report(args: argparse.Namespace) -> int:
    """Write the HTML report of one or more records files (several: the history of each key across them).

    Exit 1 when a file held bad lines, each named on stderr as ``FILE:LINE: reason``: the report is
    still written from the valid records, as ``records summary`` still summarises them.
    """
    runs: dict[str, list[AutotuneRecord]] = {}
    bad_lines = 0
    for file in args.files:
        good, bad = read_or_fail(file)
        _report_bad(file, bad)
        bad_lines += len(bad)
        runs[file] = [line.record for line in good]
    if not any(runs.values()):
        raise CliError(f"{' '.join(args.files)}: no valid record to report on", 1)
    output = Path(args.output)
    try:
        html = render_report(runs)
    except ImportError as exc:  # the optional report extra
        raise CliError(str(exc)) from exc
    try:
        output.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from exc
    skipped = f", {counted(bad_lines, 'bad line')} skipped" if bad_lines else ""
    print(f"report of {counted(sum(len(r) for r in runs.values()), 'record')} written to {output}{skipped}")
    return 1 if bad_lines else 0
