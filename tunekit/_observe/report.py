"""The HTML report of a records file: one self-contained page, plots as inline SVG, no script, no fetch.

Per key: the figures that decided the winner (its time and the runner-up's as the deciding
stage measured them, the margin with its 95% interval, the stage, why a faster-looking median
lost, and a warning when the spread leaves the margin in doubt), every candidate's samples as a
strip plot over its min-median-max range (the winner in green), the failures with their reasons
and the events of the decision. On top: the cumulative tuning cost over time.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path

from tunekit._base.units import format_duration_ns
from tunekit._base.version import __version__
from tunekit._observe.event_text import describe_events
from tunekit._observe.reader import BadLine, read_records
from tunekit._observe.summary import KeySummary, summarise
from tunekit._values.records import AutotuneRecord, CandidateRecord

__all__ = ["render_report", "write_report"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1000px;color:#1d232a;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}
h2{font-size:1.1rem;margin:2.2rem 0 .3rem;border-top:1px solid #d8dee4;padding-top:1rem}
.meta{color:#57606a}
.key{font-family:ui-monospace,monospace;font-size:.9rem;background:#f3f5f7;padding:.1rem .35rem;border-radius:4px}
table{border-collapse:collapse;margin:.6rem 0}
td,th{padding:.2rem .7rem;text-align:left;border-bottom:1px solid #eaeef2;vertical-align:top}
th{font-weight:600;color:#57606a}
.fail{color:#b42318}
.win{color:#1a7f37;font-weight:600}
svg{display:block;margin:.5rem 0}
.stats{display:flex;gap:2rem;flex-wrap:wrap;margin:.4rem 0}
.stats div b{display:block;font-size:1.15rem}
.why{color:#57606a;margin:.2rem 0}
.doubt{color:#9a6700;background:#fff8c5;padding:.3rem .6rem;border-radius:4px;margin:.3rem 0}
"""

_log = logging.getLogger("tunekit.records")

_WIDTH = 940
_LABEL = 230
_ROW = 26


def _axis_scale(values: Sequence[float]) -> tuple[float, float, bool]:
    """(low, high, logarithmic): log when the samples span more than 20x, so fast candidates stay visible."""
    low, high = min(values), max(values)
    if low > 0 and high / low > 20:
        return math.log10(low) - 0.05, math.log10(high) + 0.05, True
    span = (high - low) or high or 1.0
    return max(0.0, low - span * 0.1), high + span * 0.1, False


def _x(value: float, scale: tuple[float, float, bool]) -> float:
    low, high, log = scale
    position = math.log10(max(value, 1e-9)) if log else value
    return _LABEL + (position - low) / ((high - low) or 1.0) * (_WIDTH - _LABEL - 20)


def _ticks(scale: tuple[float, float, bool]) -> list[float]:
    low, high, log = scale
    if log:
        return [10.0**e for e in range(math.ceil(low), math.floor(high) + 1)]
    step = 10 ** math.floor(math.log10((high - low) / 4 or 1.0))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= 6:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _distribution_svg(candidates: list[CandidateRecord], winner: str | None) -> str:
    """One row per measured candidate: its samples as dots over a min-max line with the median marked."""
    measured = [c for c in candidates if c.samples_ns]
    if not measured:
        return ""
    measured.sort(key=lambda c: c.stats.median_ns if c.stats else math.inf)
    scale = _axis_scale([s for c in measured for s in (*c.samples_ns, *c.discarded_ns)])
    height = len(measured) * _ROW + 34
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="sample distributions">'
    ]
    for tick in _ticks(scale):
        x = _x(tick, scale)
        parts.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 26}" stroke="#eaeef2"/>')
        parts.append(
            f'<text x="{x:.1f}" y="{height - 10}" font-size="11" fill="#57606a" text-anchor="middle">'
            f"{escape(format_duration_ns(tick))}</text>"
        )
    for row, candidate in enumerate(measured):
        y = 8 + row * _ROW + _ROW / 2
        colour = "#1a7f37" if candidate.name == winner else "#0969da"
        label = escape(candidate.name if len(candidate.name) <= 30 else candidate.name[:29] + "…")
        weight = ' font-weight="600"' if candidate.name == winner else ""
        parts.append(f'<text x="{_LABEL - 10}" y="{y + 4:.1f}" font-size="12" text-anchor="end"{weight}>{label}</text>')
        low, high = min(candidate.samples_ns), max(candidate.samples_ns)
        parts.append(
            f'<line x1="{_x(low, scale):.1f}" y1="{y:.1f}" x2="{_x(high, scale):.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-opacity=".35" stroke-width="2"/>'
        )
        for sample in candidate.samples_ns:
            parts.append(
                f'<circle cx="{_x(sample, scale):.1f}" cy="{y:.1f}" r="3" fill="{colour}" fill-opacity=".45"/>'
            )
        for sample in candidate.discarded_ns:  # warm-up-biased: kept in the record, left out of the statistics
            parts.append(
                f'<circle cx="{_x(sample, scale):.1f}" cy="{y:.1f}" r="3" fill="none" stroke="{colour}">'
                "<title>discarded (warm-up)</title></circle>"
            )
        if candidate.stats is not None:
            xm = _x(candidate.stats.median_ns, scale)
            parts.append(
                f'<line x1="{xm:.1f}" y1="{y - 8:.1f}" x2="{xm:.1f}" y2="{y + 8:.1f}" stroke="{colour}" '
                f'stroke-width="3"><title>median {escape(format_duration_ns(candidate.stats.median_ns))}</title></line>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _cost_svg(records: list[AutotuneRecord]) -> str:
    """Cumulative tuning wall time over the clock: each decision a rise as long as its tune."""
    tuned = sorted((r for r in records if r.wall_time_s > 0), key=lambda r: r.timestamp)
    if not tuned:
        return "<p class=meta>No decision in this file measured anything.</p>"
    width, height, left, bottom = _WIDTH, 200, 60, 30
    start = min(r.timestamp - timedelta(seconds=r.wall_time_s) for r in tuned)
    span = max((tuned[-1].timestamp - start).total_seconds(), 1e-3)
    total = sum(r.wall_time_s for r in tuned)

    def x(moment: datetime) -> float:
        return left + (moment - start).total_seconds() / span * (width - left - 20)

    def y(seconds: float) -> float:
        return height - bottom - seconds / total * (height - bottom - 12)

    path = [f"M{left},{y(0):.1f}"]
    dots = []
    cumulative = 0.0
    for record in tuned:
        began = record.timestamp - timedelta(seconds=record.wall_time_s)
        path.append(f"L{x(began):.1f},{y(cumulative):.1f}")
        cumulative += record.wall_time_s
        path.append(f"L{x(record.timestamp):.1f},{y(cumulative):.1f}")
        dots.append(
            f'<circle cx="{x(record.timestamp):.1f}" cy="{y(cumulative):.1f}" r="3.5" fill="#0969da">'
            f"<title>{escape(record.tuner)} {escape(str(record.key))}: {record.wall_time_s:.3g} s "
            f"(total {cumulative:.3g} s)</title></circle>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="tuning cost over time">'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#8c959f"/>'
        f'<line x1="{left}" y1="8" x2="{left}" y2="{height - bottom}" stroke="#8c959f"/>'
        f'<text x="{left - 6}" y="16" font-size="11" text-anchor="end" fill="#57606a">{total:.3g} s</text>'
        f'<text x="{left - 6}" y="{height - bottom}" font-size="11" text-anchor="end" fill="#57606a">0</text>'
        f'<text x="{left}" y="{height - 10}" font-size="11" fill="#57606a">{escape(start.strftime("%H:%M:%S"))}</text>'
        f'<text x="{width - 10}" y="{height - 10}" font-size="11" text-anchor="end" fill="#57606a">'
        f"+{span:.3g} s</text>"
        f'<path d="{" ".join(path)}" fill="none" stroke="#0969da" stroke-width="2"/>{"".join(dots)}</svg>'
    )


def _key_section(summary: KeySummary) -> str:
    record = summary.latest
    candidates = list(record.candidates) if record is not None else []
    decision = summary.decision
    margin = escape(decision.margin_text) if decision is not None else "-"
    runner_up = (
        f"{escape(summary.runner_up)} {escape(format_duration_ns(summary.runner_up_median_ns))}"
        if summary.runner_up
        else "-"
    )
    winner = escape(summary.winner or "no valid candidate")
    html = [
        f'<h2>{escape(summary.tuner)} <span class="key">{escape(summary.key_json)}</span></h2>',
        f'<div class="meta">{escape(summary.device_id)} · {summary.decisions} decision(s) · '
        f"{summary.samples} samples · {summary.tuning_time_s:.3g} s tuning</div>",
        '<div class="stats">',
        f'<div>winner<b class="win">{winner} {escape(format_duration_ns(summary.winner_median_ns))}</b></div>',
        f"<div>runner-up<b>{runner_up}</b></div>",
        f"<div>margin [95%]<b>{margin}</b></div>",
        f"<div>decided by<b>{escape(decision.stage_text) if decision is not None else '-'}</b></div>",
        "</div>",
    ]
    if decision is not None and (why := decision.why()):
        html.append(f'<p class="why">{escape(why)}</p>')
    if decision is not None and (warning := decision.warning(summary.tuner)):
        html.append(f'<p class="doubt">not trusted: {escape(warning)}</p>')
    html.append(_distribution_svg(candidates, summary.winner))
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
        html.append('<ul class="events">')
        html.extend(f"<li>{escape(line)}</li>" for line in describe_events(record.events))
        html.append("</ul>")
    return "\n".join(html)


def render_report(records: list[AutotuneRecord], *, source: str = "") -> str:
    """The report of ``records`` as one HTML document."""
    summaries = summarise(records)
    devices = sorted({r.device_id for r in records})
    total = sum(r.wall_time_s for r in records)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        "<h1>tunekit report</h1>",
        f'<div class="meta">{escape(source)} · {len(records)} records · {len(summaries)} keys · '
        f"{total:.3g} s spent tuning · generated {generated} by tunekit {escape(__version__)}</div>",
        f'<div class="meta">devices: {escape(", ".join(devices))}</div>',
        "<h2>Tuning cost over time</h2>",
        _cost_svg(records),
        *(_key_section(s) for s in summaries),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tunekit report: {escape(source)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_report(records_file: str | os.PathLike[str], output: str | os.PathLike[str]) -> Path:
    """Write the HTML report of a records file (JSONL) to ``output``; returns its path.

    Lines that are not valid records are skipped with a warning on ``tunekit.records``
    (``tunekit records summary`` lists them with their line numbers).
    """
    records = []
    for line in read_records(records_file):
        if isinstance(line, BadLine):
            _log.warning("%s:%d: %s", os.fspath(records_file), line.line, line.reason)
        else:
            records.append(line.record)
    target = Path(output)
    target.write_text(render_report(records, source=os.fspath(records_file)), encoding="utf-8")
    return target
