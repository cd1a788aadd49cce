"""The HTML report of one or more records files: one self-contained page, plots as inline SVG, no script, no fetch.

On top, a summary table (per tuner, device and key: winner, runner-up, margin, stage, cost),
then the tuning cost over time, which candidate wins across keys (a key x candidate grid per
tuner), and, when a key was tuned more than once (several files, or one that grew), how its
winner and its time changed. Per key: the figures that decided the winner, for a space the
time against each parameter and a heat map for each pair, every candidate's samples, a table of
them by full name, the failures with their reasons and the events of the decision.

The plots are matplotlib's (the optional ``report`` extra), imported when a report is written,
so ``import tunekit`` and the CLI stay light.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from itertools import groupby
from pathlib import Path
from types import ModuleType

from tunekit._base.counted import counted
from tunekit._base.extras import require_extra
from tunekit._base.units import format_duration_ns
from tunekit._base.version import __version__
from tunekit._observe.event_text import describe_events
from tunekit._observe.reader import BadLine, read_records
from tunekit._observe.report_history import history
from tunekit._observe.report_params import param_table
from tunekit._observe.report_tables import (
    breakable,
    candidates_table,
    device_labels,
    grid_table,
    history_table,
    summary_table,
)
from tunekit._observe.summary import KeySummary, summarise
from tunekit._values.records import AutotuneRecord

__all__ = ["REPORT_NEEDS", "render_report", "write_report"]

REPORT_NEEDS = "the HTML report draws its plots with matplotlib"

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d232a;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin:2.4rem 0 .3rem;border-top:1px solid #d8dee4;padding-top:1rem}
h3{font-size:.95rem;margin:1.2rem 0 .2rem;color:#57606a}
.meta{color:#57606a}
.key{font-family:ui-monospace,monospace;font-size:.9rem;background:#f3f5f7;padding:.1rem .35rem;border-radius:4px}
table{border-collapse:collapse;margin:.6rem 0}
td,th{padding:.2rem .6rem;text-align:left;border-bottom:1px solid #eaeef2;vertical-align:top}
th{font-weight:600;color:#57606a;font-size:.85rem}
.name,.keycell,.source,.device{font-family:ui-monospace,monospace;font-size:.82rem;overflow-wrap:break-word}
.name{min-width:12rem;max-width:34rem}
.summary .name{min-width:7rem;max-width:15rem}
.summary td,.summary th{padding:.2rem .45rem}
.margin{min-width:6rem}
.device,.source{max-width:16rem;color:#57606a}
.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.fail{color:#b42318}
.win,.win .name{color:#1a7f37;font-weight:600}
.wincell{background:#dafbe1;color:#1a7f37;font-weight:600}
.changed td{background:#fff8c5}
.scroll{overflow-x:auto}
svg{display:block;margin:.5rem 0;max-width:100%;height:auto}
.stats{display:flex;gap:2rem;flex-wrap:wrap;margin:.4rem 0}
.stats div{max-width:30rem}
.stats div b{display:block;font-size:1.1rem;overflow-wrap:break-word}
.why{color:#57606a;margin:.2rem 0}
.doubt{color:#9a6700;background:#fff8c5;padding:.3rem .6rem;border-radius:4px;margin:.3rem 0}
a{color:#0969da;text-decoration:none}
summary{cursor:pointer;color:#57606a;margin:.6rem 0}
"""

_log = logging.getLogger("tunekit.records")


def _plots() -> ModuleType:
    """matplotlib's part of the report, imported at the first; ImportError with the install command without it."""
    require_extra("matplotlib", "report", REPORT_NEEDS)
    from tunekit._observe import report_plots  # noqa: PLC0415 - the optional report extra

    return report_plots


def _t(ns: float | None) -> str:
    return format_duration_ns(ns, for_file=True)


def _key_section(summary: KeySummary, anchor: str, plots: ModuleType) -> str:
    record = summary.latest
    candidates = list(record.candidates) if record is not None else []
    decision = summary.decision
    margin = escape(decision.margin_text) if decision is not None else "-"
    runner_up = (
        f"{breakable(summary.runner_up)} {escape(_t(summary.runner_up_median_ns))}" if summary.runner_up else "-"
    )
    winner = breakable(summary.winner or "no valid candidate")
    html = [
        f'<h2 id="{anchor}">{escape(summary.tuner)} <span class="key">{escape(summary.key_json)}</span></h2>',
        f'<div class="meta">{escape(summary.device_id)} · {counted(summary.decisions, "decision")} · '
        f"{counted(summary.samples, 'sample')} · {summary.tuning_time_s:.3g} s tuning"
        + (f" · search: {escape(summary.search_text)}" if summary.search is not None else "")
        + "</div>",
        '<div class="stats">',
        f'<div>winner<b class="win">{winner} {escape(_t(summary.winner_median_ns))}</b></div>',
        f"<div>runner-up<b>{runner_up}</b></div>",
        f"<div>margin [95%]<b>{margin}</b></div>",
        f"<div>decided by<b>{escape(decision.stage_text) if decision is not None else '-'}</b></div>",
        "</div>",
    ]
    if decision is not None and (why := decision.why()):
        html.append(f'<p class="why">{escape(why)}</p>')
    if decision is not None and (warning := decision.warning(summary.tuner)):
        html.append(f'<p class="doubt">not trusted: {escape(warning)}</p>')
    table = param_table(candidates)
    if table is not None and table.varied:
        html.append('<h3 class="params">Time against each parameter</h3>')
        html.append(plots.params_svg(table, summary.winner, f"{anchor}-p"))
        if len(table.varied) >= 2:
            html.append('<h3 class="heatmaps">Best time for each pair of parameters</h3>')
            html.append(plots.heatmaps_svg(table, summary.winner, f"{anchor}-h"))
    if any(c.samples_ns for c in candidates):
        html.append('<h3 class="samples">Every sample</h3>')
        html.append(plots.distribution_svg(candidates, summary.winner, f"{anchor}-d"))
        html.append(candidates_table(candidates, summary.winner))
    if summary.failures or summary.skipped:
        html.append("<table><tr><th>candidate</th><th>status</th><th>stage</th><th>reason</th></tr>")
        html.extend(
            f'<tr class="fail"><td>{escape(f.name)}</td><td>{escape(f.status)}</td>'
            f"<td>{escape(f.stage or '')}</td><td>{escape(f.reason)}</td></tr>"
            for f in summary.failures
        )
        html.extend(  # not measured by design: not shown as failures
            f"<tr><td>{escape(s.name)}</td><td>skipped</td><td></td><td>{escape(s.reason)}</td></tr>"
            for s in summary.skipped
        )
        html.append("</table>")
    if record is not None and record.events:
        lines = describe_events(record.events)
        shown = " open" if len(lines) <= 8 else ""  # a long list of eliminations folds away
        events = counted(len(lines), "event")
        html.append(f'<details class="events"{shown}><summary>How it was decided: {events}</summary><ul>')
        html.extend(f"<li>{escape(line)}</li>" for line in lines)
        html.append("</ul></details>")
    return '<section class="key-section">' + "\n".join(html) + "</section>"


def _grids(summaries: list[KeySummary], labels: dict[str, str]) -> list[str]:
    """A key x candidate grid per tuner and device with more than one key."""
    html: list[str] = []
    by_device = sorted(summaries, key=lambda s: (s.tuner, s.device_id))  # stable: keys stay in their order
    for (tuner, device), group in groupby(by_device, key=lambda s: (s.tuner, s.device_id)):
        keys = list(group)
        if len(keys) < 2:
            continue
        devices = len({s.device_id for s in summaries if s.tuner == tuner}) > 1
        on = f" on {escape(labels.get(device, device))}" if devices else ""
        html.append(f'<h2 class="grid-title">Which candidate wins across keys: {escape(tuner)}{on}</h2>')
        html.append(
            "<p class=\"meta\">Each cell: the candidate's median over all its samples, over that key's winner's "
            "(hover for its time); candidates that won some key first. Under 1.00: a median below the winner's "
            "that the side-by-side comparison overruled (the key's section says why).</p>"
        )
        html.append(grid_table(keys))
    return html


def _sourced(
    records: Iterable[AutotuneRecord] | Mapping[str, Iterable[AutotuneRecord]], source: str
) -> list[tuple[str, AutotuneRecord]]:
    if isinstance(records, Mapping):
        return [(name, record) for name, found in records.items() for record in found]
    return [(source, record) for record in records]


def render_report(
    records: Iterable[AutotuneRecord] | Mapping[str, Iterable[AutotuneRecord]], *, source: str = ""
) -> str:
    """The report of ``records`` as one HTML document.

    ``records``: the records of one file (named by ``source``), or a mapping from each file's name
    to its records; the history view follows each key across them.
    """
    plots = _plots()
    sourced = _sourced(records, source)
    every = [record for _, record in sourced]
    sources = list(dict.fromkeys(name for name, _ in sourced)) or [source]
    summaries = summarise(every)
    anchors = [f"key-{index}" for index in range(len(summaries))]
    histories = history(sourced)
    labels = device_labels(sorted({r.device_id for r in every}))
    total = sum(r.wall_time_s for r in every)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        "<h1>tunekit report</h1>",
        f'<div class="meta">{escape(", ".join(sources))} · {counted(len(every), "record")} · '
        f"{counted(len(summaries), 'key')} · "
        f"{total:.3g} s spent tuning · generated {generated} by tunekit {escape(__version__)}</div>",
        '<div class="meta">devices: '
        + "; ".join(
            f"{escape(label)} = {escape(device)}" if len(labels) > 1 else escape(device)
            for device, label in labels.items()
        )
        + "</div>",
        '<h2 id="summary">Summary</h2>',
        f'<div class="scroll">{summary_table(summaries, anchors, labels)}</div>'
        if summaries
        else '<p class="meta">No decision in these records.</p>',
    ]
    cost = plots.cost_svg(every, "cost")
    body += ['<h2 id="cost">Tuning cost over time</h2>', cost or '<p class="meta">No decision measured anything.</p>']
    body += _grids(summaries, labels)
    if histories:
        body += [
            '<h2 id="history">History</h2>',
            '<p class="meta">Every key tuned more than once: its winner\'s time at each tune, one line per key and '
            "device; a filled mark where the winner changed. Hover a mark for its winner.</p>",
            plots.history_svg(histories, "hist"),
        ]
        for key_history in histories:
            body.append(
                f'<h3 class="history-key">{escape(key_history.tuner)} '
                f'<span class="key">{escape(key_history.key_json)}</span></h3>'
            )
            body.append(history_table(key_history, labels))
    body += [_key_section(s, a, plots) for s, a in zip(summaries, anchors, strict=True)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tunekit report: {escape(', '.join(sources))}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _read(records_file: str | os.PathLike[str]) -> list[AutotuneRecord]:
    records = []
    for line in read_records(records_file):
        if isinstance(line, BadLine):
            _log.warning("%s:%d: %s", os.fspath(records_file), line.line, line.reason)
        else:
            records.append(line.record)
    return records


def write_report(
    records_file: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]
) -> Path:
    """Write the HTML report of one records file (JSONL), or of several, to ``output``; returns its path.

    Given several files (runs on different days or devices), the report also shows how each
    key's winner and its time changed from one to the next. Lines that are not valid records are
    skipped with a warning on ``tunekit.records`` (``tunekit records summary`` lists them with
    their line numbers). Needs the ``report`` extra (matplotlib): ``pip install 'tunekit[report]'``.
    """
    files = [records_file] if isinstance(records_file, str | os.PathLike) else list(records_file)
    if not files:
        raise ValueError("write_report needs at least one records file")
    _plots()  # before reading: a missing extra is told before any work
    runs = {os.fspath(file): _read(file) for file in files}
    target = Path(output)
    target.write_text(render_report(runs), encoding="utf-8")
    return target
