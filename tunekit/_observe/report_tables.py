"""The report's tables, as HTML: the summary on top, the key x candidate grid, each key's candidates, the history.

Tables, not plots, where a name must be read in full: a cell wraps a long candidate name
rather than clipping it, and its ``title`` repeats the figures on hover.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from tunekit._base.counted import counted
from tunekit._base.units import format_duration_ns
from tunekit._observe.report_history import KeyHistory
from tunekit._observe.summary import KeySummary
from tunekit._values.records import CandidateRecord

__all__ = [
    "breakable",
    "candidates_table",
    "device_cell",
    "device_labels",
    "grid_table",
    "history_table",
    "summary_table",
]


def _t(ns: float | None) -> str:
    return format_duration_ns(ns, for_file=True)


def _name(name: str, css: str = "name") -> str:
    """A name in full, breakable after its commas and brackets so a narrow column wraps it there."""
    return f'<td class="{css}">{breakable(name)}</td>'


def breakable(text: str) -> str:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each comma and opening bracket."""
    return escape(text).replace(",", ",<wbr>").replace("[", "[<wbr>")


def device_labels(device_ids: Sequence[str]) -> dict[str, str]:
    """A short label per device for the tables: the client's kind (``cpu``, ``opencl``), numbered where two share it.

    A PoCL device id runs to 250 characters: in a table column it would wrap over a dozen lines.
    The page lists each label with its full id, and a labelled cell gives the id on hover.
    """
    kinds = [device.split(":", 1)[0] or device for device in device_ids]
    labels: dict[str, str] = {}
    for device, kind in zip(device_ids, kinds, strict=True):
        same = [d for d, k in zip(device_ids, kinds, strict=True) if k == kind]
        labels[device] = kind if len(same) == 1 else f"{kind} {same.index(device) + 1}"
    return labels


def device_cell(device_id: str, labels: dict[str, str]) -> str:
    """A table cell with the device's short label, its full id on hover."""
    return f'<td class="device" title="{escape(device_id)}">{escape(labels.get(device_id, device_id))}</td>'


def summary_table(summaries: Sequence[KeySummary], anchors: Sequence[str], labels: dict[str, str]) -> str:
    """Per tuner, device and key: winner, runner-up, margin, the deciding stage and the cost; each row links its key."""
    multi_device = len({s.device_id for s in summaries}) > 1
    head = (
        "tuner",
        "key",
        "winner",
        "time",
        "runner-up",
        "time",
        "margin [95%]",
        "decided by",
        "cost",
        *(("device",) if multi_device else ()),
    )
    rows = ['<table class="summary"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"]
    for summary, anchor in zip(summaries, anchors, strict=True):
        decision = summary.decision
        doubt = decision.warning(summary.tuner) if decision is not None else None
        margin = escape(decision.margin_text) if decision is not None else "-"
        if doubt:
            margin = f'<span class="doubt" title="not trusted: {escape(doubt)}">{margin} ⚠</span>'
        cells = [
            f"<td>{escape(summary.tuner)}</td>",
            f'<td class="keycell"><a href="#{anchor}">{breakable(summary.key_json)}</a></td>',
            _name(summary.winner or "no valid candidate", "name win"),
            f'<td class="num">{escape(_t(summary.winner_median_ns))}</td>',
            _name(summary.runner_up or "-"),
            f'<td class="num">{escape(_t(summary.runner_up_median_ns))}</td>',
            f'<td class="margin">{margin}</td>',
            f"<td>{escape(decision.stage_text) if decision is not None else '-'}</td>",
            f'<td class="num" title="{counted(summary.decisions, "decision")}, '
            f'{counted(summary.samples, "sample")}">'
            f"{summary.tuning_time_s:.3g} s</td>",
            *((device_cell(summary.device_id, labels),) if multi_device else ()),
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


def candidates_table(candidates: Sequence[CandidateRecord], winner: str | None) -> str:
    """Every measured candidate of a tune by its full name, fastest first, with its time against the winner's."""
    measured = sorted((c for c in candidates if c.stats is not None), key=lambda c: c.stats.median_ns if c.stats else 0)
    if not measured:
        return ""
    best = next((c.stats.median_ns for c in measured if c.name == winner and c.stats is not None), None)
    rows = [
        '<table class="candidates"><thead><tr><th>#</th><th>candidate</th><th>median</th><th>&times; winner</th>'
        "<th>min</th><th>spread</th><th>samples</th></tr></thead><tbody>"
    ]
    for rank, candidate in enumerate(measured, 1):
        stats = candidate.stats
        assert stats is not None  # measured above
        ratio = f"{stats.median_ns / best:.2f}&times;" if best else "-"
        row = '<tr class="win">' if candidate.name == winner else "<tr>"
        rows.append(
            f'{row}<td class="num">{rank}</td>{_name(candidate.name)}'
            f'<td class="num">{escape(_t(stats.median_ns))}</td><td class="num">{ratio}</td>'
            f'<td class="num">{escape(_t(stats.min_ns))}</td><td class="num">{stats.spread:.1%}</td>'
            f'<td class="num">{stats.count}</td></tr>'
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def _cell_colour(ratio: float) -> str:
    """Green for the winner, then paler to deeper red as a candidate is up to 4x (or more) slower."""
    shade = min(math.log(max(ratio, 1.0)) / math.log(4.0), 1.0)
    return f"rgba(207,34,46,{0.06 + 0.5 * shade:.2f})"


def grid_table(summaries: Sequence[KeySummary]) -> str:
    """Which candidate wins across keys: a row per candidate (full name), a column per key, each cell its time
    over that key's winner's; the winners in green, a count of keys won first."""
    keys = [s for s in summaries if s.latest is not None]
    by_key: list[dict[str, CandidateRecord]] = [
        {c.name: c for c in s.latest.candidates} if s.latest is not None else {} for s in keys
    ]
    names = list(dict.fromkeys(name for found in by_key for name in found))
    # The winner's median over all its samples, as every other cell's: the winner reads 1.00 by the same measure.
    best = [
        _median(found.get(s.winner)) if s.winner is not None else None for s, found in zip(keys, by_key, strict=True)
    ]
    wins = {name: sum(1 for s in keys if s.winner == name) for name in names}

    def ratios(name: str) -> list[float]:
        found = []
        for candidates, winner_ns in zip(by_key, best, strict=True):
            candidate = candidates.get(name)
            if candidate is not None and candidate.stats is not None and winner_ns:
                found.append(candidate.stats.median_ns / winner_ns)
        return found

    def order(name: str) -> tuple[int, float]:
        found = ratios(name)
        mean = math.exp(sum(math.log(r) for r in found) / len(found)) if found else math.inf
        return (-wins[name], mean)

    header = "".join(f'<th class="keycell">{breakable(s.key_json)}</th>' for s in keys)
    rows = [
        '<div class="scroll"><table class="grid"><thead><tr><th>candidate</th><th>keys won</th>'
        f"<th>geo. mean &times; winner</th>{header}</tr></thead><tbody>"
    ]
    for name in sorted(names, key=order):
        found = ratios(name)
        mean = math.exp(sum(math.log(r) for r in found) / len(found)) if found else None
        cells = [_name(name), f'<td class="num">{wins[name] or ""}</td>', f'<td class="num">{_ratio(mean)}</td>']
        for summary, candidates, winner_ns in zip(keys, by_key, best, strict=True):
            candidate = candidates.get(name)
            where = f"{name} at {summary.key_json}"
            if candidate is None:
                cells.append(f'<td title="{escape(where)}: not a candidate"></td>')
            elif candidate.stats is None:
                reason = f": {candidate.error}" if candidate.error else ""
                cells.append(f'<td class="fail" title="{escape(where + reason)}">{candidate.status}</td>')
            elif name == summary.winner:
                cells.append(
                    f'<td class="num wincell" title="{escape(where)}: winner, {escape(_t(candidate.stats.median_ns))}">'
                    "winner</td>"
                )
            else:
                ratio = candidate.stats.median_ns / winner_ns if winner_ns else None
                style = f' style="background:{_cell_colour(ratio)}"' if ratio is not None else ""
                cells.append(
                    f'<td class="num"{style} title="{escape(where)}: {escape(_t(candidate.stats.median_ns))}">'
                    f"{_ratio(ratio)}</td>"
                )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows.append("</tbody></table></div>")
    return "".join(rows)


def _median(candidate: CandidateRecord | None) -> float | None:
    return candidate.stats.median_ns if candidate is not None and candidate.stats is not None else None


def _ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}&times;"


def history_table(key_history: KeyHistory, labels: dict[str, str]) -> str:
    """Each tune of one key: when, from which file, on which device, who won in how long; changes marked."""
    multi_device = len(key_history.devices) > 1
    rows = [
        '<table class="history"><thead><tr><th>when (UTC)</th><th>from</th>'
        + ("<th>device</th>" if multi_device else "")
        + "<th>winner</th><th>time</th><th>margin [95%]</th><th>decided by</th></tr></thead><tbody>"
    ]
    for point in key_history.points:
        changed = ' class="changed" title="the winner changed since the previous tune on this device"'
        rows.append(
            f"<tr{changed if point.changed else ''}><td>{point.timestamp:%Y-%m-%d %H:%M:%S}</td>"
            f'<td class="source">{escape(point.source)}</td>'
            + (device_cell(point.device_id, labels) if multi_device else "")
            + _name(point.winner or "no valid candidate")
            + f'<td class="num">{escape(_t(point.winner_ns))}</td><td class="num">{escape(point.margin_text)}</td>'
            f"<td>{escape(point.stage_text)}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "".join(rows)
