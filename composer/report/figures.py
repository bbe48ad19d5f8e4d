"""The report's figures as data first, drawn with matplotlib (Agg) second.

A figure is panels of series of points; every measured point names the table cell its y value (and
x value) was taken from, and ``figure_data`` writes exactly what is plotted as JSON next to the
PNG. So "every number plotted equals its table cell" is checked on data, not on pixels, and a
reader can replot from the JSON. Curves computed from constants (the roofs of a roofline, the
y = x line) are ``derived`` series and name the table holding their constants.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from composer.report.palette import path_color

#: Pixels per inch of the PNGs: small files, readable on a screen.
DPI = 110


@dataclass(frozen=True)
class Ref:
    """Where a plotted value lives: ``table`` (CSV stem), ``row`` index, the x and y column keys."""

    table: str
    row: int
    x: str | None
    y: str


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    ref: Ref | None = None
    label: str = ""  # annotation drawn next to the point (e.g. the order on a roofline)


@dataclass
class Series:
    label: str
    points: list[Point]
    path: str | None = None  # the colour comes from the path
    color: str | None = None  # explicit colour (a series that is no path's: a roof, y = x)
    style: str = "line"  # "line" (markers joined), "scatter" (markers only), "curve" (line only)
    marker: str = "o"
    linestyle: str = "-"
    hollow: bool = False
    derived: bool = False  # computed from constants (see ``source``), not table cells
    source: str = ""  # for derived series: the table holding the constants

    @property
    def resolved_color(self) -> str:
        if self.color:
            return self.color
        return path_color(self.path) if self.path else "#333333"


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    xscale: str = "log"  # "log", "linear"
    yscale: str = "log"
    xticks: Sequence[float] | None = None  # ticks labelled with their values (the orders)
    hlines: list[tuple[float, str]] = field(default_factory=list)  # reference levels, e.g. ratio 1
    highlight: list[Point] = field(default_factory=list)  # the fastest path's points, ringed


@dataclass
class Figure:
    name: str  # file stem: figures/<name>.png and .json
    title: str
    caption: str
    panels: list[Panel]
    columns: int = 1

    def points(self) -> list[tuple[Series, Point]]:
        return [(s, p) for panel in self.panels for s in panel.series for p in s.points]


def figure_data(figure: Figure) -> dict[str, Any]:
    """The JSON-ready content of ``figure``: every panel, series and point as plotted."""
    return asdict(figure)


def spans_decades(values: Sequence[float], decades: float = 1.0) -> bool:
    """Whether positive ``values`` span at least ``decades`` powers of ten (log axis then)."""
    good = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(good) and math.log10(max(good) / min(good)) >= decades


#: Tick labels closer than this (in decades on a log axis) to the last one labelled are left blank.
MIN_TICK_GAP_DECADES = 0.09


def tick_labels(ticks: Sequence[float], log: bool) -> list[str]:
    """Labels of ``ticks``, blank where one would overprint its neighbour (p = 511, 575, 767)."""
    labels, last = [], None
    for t in ticks:
        crowded = log and last is not None and t > 0 and math.log10(t / last) < MIN_TICK_GAP_DECADES
        labels.append("" if crowded else (f"{t:.0f}" if float(t).is_integer() else f"{t:.3g}"))
        if not crowded:
            last = t
    return labels


def draw(figure: Figure) -> bytes:
    """The figure as PNG bytes (matplotlib's Agg backend; no display, no network)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    n = len(figure.panels)
    cols = max(1, min(figure.columns, n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.4 * rows), squeeze=False)
    try:
        for ax, panel in zip(axes.flat, figure.panels):
            _draw_panel(ax, panel, FixedLocator, NullLocator)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        fig.suptitle(figure.title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
        return buf.getvalue()
    finally:
        plt.close(fig)


def _runs(points: Sequence[Point], ticks: Sequence[float] | None) -> list[list[Point]]:
    """``points`` split where the series skips a tick (an order it was not measured at), so a
    line never joins two measurements across a gap and suggests values nobody measured."""
    if not ticks:
        return [list(points)]
    position = {x: i for i, x in enumerate(sorted(ticks))}
    runs: list[list[Point]] = []
    for p in sorted(points, key=lambda q: q.x):
        if runs and p.x in position and runs[-1][-1].x in position and position[p.x] == position[runs[-1][-1].x] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _draw_panel(ax: Any, panel: Panel, fixed_locator: Any, null_locator: Any) -> None:
    for s in panel.series:
        if not s.points:
            continue
        xs = [p.x for p in s.points]
        ys = [p.y for p in s.points]
        color = s.resolved_color
        face = "none" if s.hollow else color
        if s.style == "scatter":
            ax.scatter(xs, ys, label=s.label, marker=s.marker, facecolors=face, edgecolors=color, s=36, zorder=3)
        elif s.style == "curve":
            ax.plot(xs, ys, label=s.label, color=color, linestyle=s.linestyle, linewidth=1.2, zorder=1)
        else:
            for i, run in enumerate(_runs(s.points, panel.xticks)):
                ax.plot([p.x for p in run], [p.y for p in run], label=s.label if i == 0 else None, color=color,
                        linestyle=s.linestyle, marker=s.marker, markerfacecolor=face, markersize=5, linewidth=1.4,
                        zorder=2)
        for p in s.points:
            if p.label:
                ax.annotate(p.label, (p.x, p.y), textcoords="offset points", xytext=(3, 3), fontsize=6, color=color)
    if panel.highlight:
        ax.scatter([p.x for p in panel.highlight], [p.y for p in panel.highlight], s=160, facecolors="none",
                   edgecolors="black", linewidths=1.3, zorder=4, label="fastest")
    for y, label in panel.hlines:
        ax.axhline(y, color="#555555", linewidth=0.8, linestyle=":", zorder=0)
        if label:
            ax.annotate(label, (0.01, y), xycoords=("axes fraction", "data"), fontsize=7, color="#555555",
                        textcoords="offset points", xytext=(0, 2))
    ax.set_xscale(panel.xscale)
    ax.set_yscale(panel.yscale)
    if panel.xticks:
        ticks = sorted(panel.xticks)
        ax.xaxis.set_major_locator(fixed_locator(ticks))
        ax.xaxis.set_minor_locator(null_locator())
        ax.set_xticklabels(tick_labels(ticks, panel.xscale == "log"))
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.set_title(panel.title, fontsize=10)
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, loc="best", framealpha=0.8)


__all__ = ["DPI", "Figure", "Panel", "Point", "Ref", "Series", "draw", "figure_data", "spans_decades"]
