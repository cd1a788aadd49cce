"""The report's plots, drawn by matplotlib as inline SVG (the optional ``report`` extra).

Text stays text (``svg.fonttype: none``): names can be searched and selected in the page, and
the SVG stays small. Hover tips are SVG ``<title>`` elements the browser shows without any
script: an artist is given an id (``gid``), and its group in the SVG gets the tip.
Only :class:`matplotlib.figure.Figure` is used, never pyplot: no global figure state, no GUI backend.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any, ParamSpec

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from tunekit._base.counted import counted
from tunekit._base.units import format_duration_ns
from tunekit._observe.report_history import KeyHistory
from tunekit._observe.report_params import ParamTable, ParamValue
from tunekit._values.records import AutotuneRecord, CandidateRecord

_P = ParamSpec("_P")

__all__ = ["cost_svg", "distribution_svg", "heatmaps_svg", "history_svg", "params_svg", "wrap_name"]

WIN = "#1a7f37"
OTHER = "#0969da"
MUTED = "#57606a"
GRID = "#eaeef2"
_WIDTH_IN = 10.5
_PAIRS_SHOWN = 6  # heat maps of at most this many parameter pairs: 4 parameters' worth
_RC: dict[Any, Any] = {  # rc_context's keys are a Literal of every rcParam name
    "svg.fonttype": "none",
    "text.parse_math": False,  # a name holding "$" is text, not TeX
    "svg.hashsalt": None,  # ids unique per figure: several SVGs share one page
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "sans-serif"],
    "font.size": 9,
    "axes.edgecolor": "#8c959f",
    "axes.labelcolor": MUTED,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _styled(draw: Callable[_P, str]) -> Callable[_P, str]:
    """Draw under the report's style: rc settings apply to artists as they are made, so the whole drawing."""

    @functools.wraps(draw)
    def styled(*args: _P.args, **kwargs: _P.kwargs) -> str:
        with matplotlib.rc_context(_RC):
            return draw(*args, **kwargs)

    return styled


def _t(ns: float | None) -> str:
    return format_duration_ns(ns, for_file=True)


def wrap_name(name: str, width: int = 40) -> str:
    """A candidate's full name on as many lines as it needs, broken after ``,`` or ``[`` where it can."""
    if len(name) <= width:
        return name
    parts = re.split(r"(?<=[,\[])", name)
    lines: list[str] = []
    line = ""
    for part in parts:
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    lines.append(line)
    return "\n".join(piece for line in lines for piece in (textwrap.wrap(line, width, break_on_hyphens=False) or [""]))


class _Tips:
    """Hover tips for one figure: ids unique in the page (``prefix-n``), each with its text."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._count = itertools.count()
        self.texts: dict[str, str] = {}

    def gid(self, text: str) -> str:
        gid = f"{self._prefix}-{next(self._count)}"
        self.texts[gid] = text
        return gid


def _svg(figure: Figure, tips: _Tips | None = None) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", pad_inches=0.08, metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # no XML declaration or DOCTYPE inside HTML
    if tips is not None and tips.texts:
        texts = tips.texts
        svg = re.sub(
            r'<g id="([^"]+)">',
            lambda m: m[0] + f"<title>{escape(texts[m[1]])}</title>" if m[1] in texts else m[0],
            svg,
        )
    return svg


def _figure(height_in: float, width_in: float = _WIDTH_IN) -> Figure:
    return Figure(figsize=(width_in, max(height_in, 1.2)), dpi=72)


def _duration_axis(axes: Axes, values: Sequence[float], *, axis: str) -> None:
    """A time axis in readable units; logarithmic when the values span more than 20x, so fast ones stay visible."""
    positive = [v for v in values if v > 0]
    log = bool(positive) and max(positive) / min(positive) > 20
    formatter = FuncFormatter(lambda value, _: _t(value))
    target = axes.xaxis if axis == "x" else axes.yaxis
    if log:
        (axes.set_xscale if axis == "x" else axes.set_yscale)("log")
        target.set_major_locator(LogLocator(base=10))
        # Two minor ticks a decade: each tick is an artist laid out at every draw, and the default
        # eight made the minor ticks most of a plot's drawing time.
        target.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        target.set_minor_formatter(NullFormatter())
    else:
        target.set_major_locator(MaxNLocator(6))
    target.set_major_formatter(formatter)


@_styled
def distribution_svg(candidates: Sequence[CandidateRecord], winner: str | None, prefix: str) -> str:
    """One row per measured candidate, fastest on top: its samples as dots over its min-max range, the median marked.

    Warm-up-biased samples the statistics leave out are hollow; the winner is green. Each row is
    labelled with the candidate's full name, wrapped; hovering a row's dots gives its figures.
    """
    measured = sorted(
        (c for c in candidates if c.samples_ns and c.stats is not None),
        key=lambda c: c.stats.median_ns if c.stats is not None else math.inf,
    )
    if not measured:
        return ""
    labels = [wrap_name(c.name) for c in measured]
    heights = [0.16 * (label.count("\n") + 1) + 0.1 for label in labels]
    figure = _figure(sum(heights) + 0.55)
    axes = figure.add_subplot()
    tips = _Tips(prefix)
    ticks: list[float] = []
    y = 0.0
    for candidate, height in zip(measured, heights, strict=True):
        y -= height / 2
        ticks.append(y)
        colour = WIN if candidate.name == winner else OTHER
        samples = candidate.samples_ns
        stats = candidate.stats
        assert stats is not None  # measured above
        axes.plot([min(samples), max(samples)], [y, y], color=colour, alpha=0.35, linewidth=2, solid_capstyle="butt")
        axes.plot(
            samples,
            [y] * len(samples),
            "o",
            color=colour,
            alpha=0.45,
            markersize=4.5,
            markeredgewidth=0,
            gid=tips.gid(
                f"{candidate.name}\nmedian {_t(stats.median_ns)}, min {_t(stats.min_ns)}, "
                f"{counted(stats.count, 'sample')}, spread {stats.spread:.1%}"
            ),
        )
        if candidate.discarded_ns:
            axes.plot(
                candidate.discarded_ns,
                [y] * len(candidate.discarded_ns),
                "o",
                markerfacecolor="none",
                markeredgecolor=colour,
                markersize=4.5,
                gid=tips.gid(f"{candidate.name}: discarded (warm-up), left out of the statistics"),
            )
        axes.plot(
            [stats.median_ns],
            [y],
            "|",
            color=colour,
            markersize=13,
            markeredgewidth=2.5,
            gid=tips.gid(f"{candidate.name}: median {_t(stats.median_ns)}"),
        )
        y -= height / 2
    axes.set_ylim(y, 0)
    axes.set_yticks(ticks, labels)
    for label, candidate in zip(axes.get_yticklabels(), measured, strict=True):
        label.set_fontfamily("monospace")
        label.set_fontsize(8)
        if candidate.name == winner:
            label.set_color(WIN)
            label.set_fontweight("bold")
    axes.tick_params(axis="y", length=0)
    axes.grid(axis="x", color=GRID)
    axes.set_axisbelow(True)
    _duration_axis(axes, [s for c in measured for s in (*c.samples_ns, *c.discarded_ns)], axis="x")
    return _svg(figure, tips)


@_styled
def cost_svg(records: Sequence[AutotuneRecord], prefix: str) -> str:
    """Cumulative tuning wall time over the clock: each decision a rise as long as its tune."""
    tuned = sorted((r for r in records if r.wall_time_s > 0), key=lambda r: r.timestamp)
    if not tuned:
        return ""
    start = min(r.timestamp - timedelta(seconds=r.wall_time_s) for r in tuned)
    figure = _figure(2.2)
    axes = figure.add_subplot()
    tips = _Tips(prefix)
    xs: list[float] = [0.0]
    ys: list[float] = [0.0]
    cumulative = 0.0
    for record in tuned:
        began = (record.timestamp - timedelta(seconds=record.wall_time_s) - start).total_seconds()
        xs.append(began)
        ys.append(cumulative)
        cumulative += record.wall_time_s
        end = (record.timestamp - start).total_seconds()
        xs.append(end)
        ys.append(cumulative)
        axes.plot(
            [end],
            [cumulative],
            "o",
            color=OTHER,
            markersize=5,
            gid=tips.gid(f"{record.tuner} {_key(record)}: {record.wall_time_s:.3g} s (total {cumulative:.3g} s)"),
        )
    axes.plot(xs, ys, color=OTHER, linewidth=2)
    axes.set_xlabel(f"seconds since {start.strftime('%Y-%m-%d %H:%M:%S')} UTC")
    axes.set_ylabel("tuning time (s)")
    axes.grid(color=GRID)
    axes.set_axisbelow(True)
    return _svg(figure, tips)


def _key(record: AutotuneRecord) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(record.key.items()))


def _position(values: tuple[ParamValue, ...]) -> dict[ParamValue, int]:
    return {value: index for index, value in enumerate(values)}


@_styled
def params_svg(table: ParamTable, winner: str | None, prefix: str) -> str:
    """Time against each parameter that varies: every configuration a dot, the best at each value joined by a line."""
    varied = table.varied
    if not varied or not table.points:
        return ""
    columns = min(len(varied), 3)
    rows = math.ceil(len(varied) / columns)
    figure = _figure(2.6 * rows)
    tips = _Tips(prefix)
    rng = np.random.default_rng(0)  # the jitter that keeps equal values apart reads the same every time
    medians = [p.median_ns for p in table.points]
    for index, name in enumerate(varied):
        axes = figure.add_subplot(rows, columns, index + 1)
        where = _position(table.values[name])
        best: dict[int, float] = {}
        for point in table.points:
            x = where[point.params[name]]
            best[x] = min(best.get(x, math.inf), point.median_ns)
            won = point.name == winner
            axes.plot(
                [x + rng.uniform(-0.12, 0.12)],
                [point.median_ns],
                "o",
                color=WIN if won else OTHER,
                alpha=1.0 if won else 0.5,
                markersize=7 if won else 4.5,
                markeredgewidth=0,
                zorder=3 if won else 2,
                gid=tips.gid(f"{point.name}: {_t(point.median_ns)}"),
            )
        line = sorted(best.items())
        axes.plot([x for x, _ in line], [t for _, t in line], color=MUTED, linewidth=1, zorder=1)
        axes.xaxis.set_major_locator(FixedLocator(list(range(len(where)))))
        axes.set_xticklabels([str(v) for v in table.values[name]], rotation=45 if len(where) > 6 else 0)
        axes.set_xlim(-0.5, len(where) - 0.5)
        axes.set_xlabel(name, fontweight="bold")
        axes.grid(axis="y", color=GRID)
        axes.set_axisbelow(True)
        _duration_axis(axes, medians, axis="y")
        if index % columns == 0:
            axes.set_ylabel("median time")
    figure.subplots_adjust(wspace=0.35, hspace=0.55)
    return _svg(figure, tips)


@_styled
def heatmaps_svg(table: ParamTable, winner: str | None, prefix: str) -> str:
    """For each pair of parameters that vary, the best median over the others as a heat map, each cell labelled.

    A cell no configuration was measured in is blank (a restriction, or a search that did not go
    there); one whose configurations all failed says so. The winner's cell is outlined.
    """
    pairs = list(itertools.combinations(table.varied, 2))[:_PAIRS_SHOWN]
    if not pairs or not table.points:
        return ""
    best_overall = min(p.median_ns for p in table.points)
    worst_overall = max(p.median_ns for p in table.points)
    winner_point = next((p for p in table.points if p.name == winner), None)
    columns = min(len(pairs), 2)
    rows = math.ceil(len(pairs) / columns)
    cell_rows = max(len(table.values[b]) for _, b in pairs)
    figure = _figure(rows * (0.45 * cell_rows + 1.4))
    tips = _Tips(prefix)
    norm = LogNorm(vmin=best_overall, vmax=max(worst_overall, best_overall * 1.01))
    cmap = matplotlib.colormaps["viridis_r"]
    mesh = None
    for index, (a, b) in enumerate(pairs):
        axes = figure.add_subplot(rows, columns, index + 1)
        xs, ys = _position(table.values[a]), _position(table.values[b])
        grid = np.full((len(ys), len(xs)), np.nan)
        names: dict[tuple[int, int], str] = {}
        for point in table.points:
            cell = (ys[point.params[b]], xs[point.params[a]])
            if np.isnan(grid[cell]) or point.median_ns < grid[cell]:
                grid[cell] = point.median_ns
                names[cell] = point.name
        mesh = axes.pcolormesh(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, edgecolors="white", linewidth=1)
        failed = {(ys[f[b]], xs[f[a]]) for f in table.failed}
        for (row, column), value in np.ndenumerate(grid):
            if np.isnan(value):
                text, colour = ("failed", "#b42318") if (row, column) in failed else ("", MUTED)
            else:
                text = _t(value)
                colour = "white" if norm(value) > 0.55 else "#1d232a"
            if text:
                axes.text(
                    column + 0.5,
                    row + 0.5,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7.5,
                    color=colour,
                    gid=tips.gid(
                        f"best of {a}={table.values[a][column]}, {b}={table.values[b][row]}: "
                        f"{names.get((row, column), 'all failed')} {text}"
                    ),
                )
        if winner_point is not None:
            axes.add_patch(
                Rectangle(
                    (xs[winner_point.params[a]], ys[winner_point.params[b]]),
                    1,
                    1,
                    fill=False,
                    edgecolor=WIN,
                    linewidth=2.5,
                )
            )
        axes.set_xticks([i + 0.5 for i in range(len(xs))], [str(v) for v in table.values[a]])
        axes.set_yticks([i + 0.5 for i in range(len(ys))], [str(v) for v in table.values[b]])
        axes.set_xlabel(a, fontweight="bold")
        axes.set_ylabel(b, fontweight="bold")
        axes.tick_params(length=0)
        for spine in axes.spines.values():
            spine.set_visible(False)
    figure.subplots_adjust(hspace=0.45, wspace=0.3)
    if mesh is not None:
        bar = figure.colorbar(mesh, ax=figure.axes, shrink=0.9, pad=0.02)
        bar.set_label("best median time")
        bar.ax.yaxis.set_major_locator(
            FixedLocator(list(np.geomspace(best_overall, max(worst_overall, best_overall * 1.01), 5)))
        )
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _t(value)))
        bar.ax.yaxis.set_minor_locator(FixedLocator([]))
    return _svg(figure, tips)


def _utc(moments: Sequence[datetime]) -> np.ndarray:
    """Naive UTC datetime64s, which matplotlib's date axis reads without a time-zone setting."""
    return np.array([m.astimezone(UTC).replace(tzinfo=None) for m in moments], dtype="datetime64[ms]")


@_styled
def history_svg(histories: Sequence[KeyHistory], prefix: str) -> str:
    """The winner's time at each tune of each key, one line per key and device; a filled dot: the winner changed."""
    if not histories:
        return ""
    figure = _figure(3.0)
    axes = figure.add_subplot()
    tips = _Tips(prefix)
    colours = matplotlib.colormaps["tab10"]
    markers = "osD^v<>"
    series = [(h, d) for h in histories for d in h.devices]
    devices = list(dict.fromkeys(d for _, d in series))
    times: list[float] = []
    for number, (key_history, device) in enumerate(series):
        points = [p for p in key_history.points if p.device_id == device and p.winner_ns is not None]
        if not points:
            continue
        colour = colours(number % 10)
        marker = markers[devices.index(device) % len(markers)]
        stamps = _utc([p.timestamp for p in points])
        values = [p.winner_ns for p in points if p.winner_ns is not None]
        times.extend(values)
        label = f"{key_history.tuner} {key_history.key_json}" + (f" · {device}" if len(devices) > 1 else "")
        axes.plot(stamps, values, color=colour, linewidth=1.2, alpha=0.7, label=textwrap.shorten(label, 70))
        for point, value in zip(points, values, strict=True):
            axes.plot(
                _utc([point.timestamp]),
                [value],
                marker,
                color=colour,
                markerfacecolor=colour if point.changed else "white",
                markersize=7 if point.changed else 5.5,
                gid=tips.gid(
                    f"{key_history.tuner} {key_history.key_json} on {device}\n{point.timestamp:%Y-%m-%d %H:%M:%S}"
                    f" ({point.source})\nwinner {point.winner} {_t(value)}" + (" (changed)" if point.changed else "")
                ),
            )
    axes.set_ylabel("winner's time")
    _duration_axis(axes, times, axis="y")
    axes.grid(color=GRID)
    axes.set_axisbelow(True)
    locator = AutoDateLocator()  # type: ignore[no-untyped-call]  # matplotlib.dates has no annotations
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.set_xlabel("UTC")
    axes.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _svg(figure, tips)
