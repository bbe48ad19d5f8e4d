"""The landscape (the paper's Fig. 2): every path's time against p, the fastest marked; the
fastest path per order with its margin; every cell that stands in the report."""

from __future__ import annotations

import math

from composer.report.cells import Cell, Winner, key
from composer.report.document import ORDER_LABEL, ReportData, Section, us
from composer.report.figures import Figure, Panel, Point, Ref, Series, spans_decades
from composer.report.tables import Column, Table, pct, plain, sig


def _grid(g: tuple[int, int, int] | None) -> str:
    return "x".join(map(str, g)) if g else "—"


def winners(data: ReportData) -> dict[int, Winner]:
    found = {order: data.index.fastest(order) for order in data.orders}
    return {o: w for o, w in found.items() if w is not None}


def fastest_table(data: ReportData) -> Table:
    table = Table("fastest", f"Fastest path per order ({data.metric_label})", [
        Column("p", "p"), Column("grid", "grid"), Column("fastest", "fastest"),
        Column("time_us", "µs", sig), Column("runner_up", "runner-up"),
        Column("runner_up_us", "runner-up µs", sig), Column("margin_pct", "margin %", lambda x: plain(x) if x is None else f"{x:.1f}"),
        Column("ranges_overlap", "min–max ranges overlap"), Column("resolved", "resolved"),
        Column("criterion", "criterion"), Column("paths", "paths compared"), Column("sources", "runs")])
    for order, w in sorted(winners(data).items()):
        runner = w.runner_up
        table.add(p=order, grid=_grid(w.cell.grid), fastest=w.cell.path, time_us=us(w.cell.median(data.metric)),
                  runner_up=runner.path if runner else None,
                  runner_up_us=us(runner.median(data.metric)) if runner else None,
                  margin_pct=100 * w.margin if math.isfinite(w.margin) else None,
                  ranges_overlap=w.overlap, resolved=w.resolved, criterion=w.criterion, paths=w.paths,
                  sources=", ".join(sorted({w.cell.source.label, *( [runner.source.label] if runner else [])})))
    table.notes.append("Margin: runner-up / fastest − 1. Resolved (paper §4.5): within one run, the rounds' "
                       "min–max ranges must not overlap (range; with four rounds or more) or |ratio − 1| > 1 % "
                       "(1%; fewer rounds); across runs the 1 % criterion.")
    return table


def landscape_table(data: ReportData) -> Table:
    """Wide: one row per order, a column per path (its median), the fastest named."""
    paths = data.index.paths()
    cols = [Column("p", "p"), Column("grid", "grid")]
    for p in paths:
        cols += [Column(f"{p}_us", p, sig), Column(f"{p}_mad_us", f"{p} MAD", sig, show=False),
                 Column(f"{p}_source", f"{p} run", show=False)]
    cols.append(Column("fastest", "fastest"))
    table = Table("landscape", f"{data.metric_label} (µs, median over rounds; run in parentheses)", cols)
    best = winners(data)
    for order in data.orders:
        row = {"p": order, "grid": _grid(data.index.grid(order)), "fastest": best[order].cell.path if order in best else None}
        for p in paths:
            cell = data.index.latest(key(p), order)
            if cell is not None:
                row[f"{p}_us"] = us(cell.median(data.metric))
                row[f"{p}_mad_us"] = us(cell.summary.stats[data.metric].mad)
                row[f"{p}_source"] = cell.source.label
        table.add(**row)

    def shown(p: str):
        def text(row: dict) -> str:
            if row.get(f"{p}_us") is None:
                return "—"
            value = f"{sig(row[f'{p}_us'])} ± {sig(row[f'{p}_mad_us'], 2)}"
            value = f"**{value}**" if row.get("fastest") == p else value
            return f"{value} ({row[f'{p}_source']})"
        return text

    table.display = [("p", lambda r: str(r["p"])), ("grid", lambda r: r["grid"])] + [(p, shown(p)) for p in paths]
    table.notes.append("Bold: the fastest path of the order. Each cell is the newest run that measured it; "
                       "the runs are listed under Provenance.")
    return table


def cells_table(data: ReportData) -> Table:
    """Long: every cell that stands for a (path, variant, order), pandas-ready."""
    table = Table("cells", "Every cell in the report (one row per path, variant and order; times in µs)", [
        Column("path", "path"), Column("variant", "variant"), Column("p", "p"), Column("grid", "grid"),
        Column("rounds", "N"), Column("failed", "failed"),
        Column("median_us", f"{data.metric_label} µs", sig), Column("mad_us", "MAD µs", sig),
        Column("min_us", "min µs", sig), Column("max_us", "max µs", sig), Column("width_pct", "width", pct),
        Column("stage_us", "stage µs", sig), Column("device_us", "device µs", sig),
        Column("validation_error", "max|diff|/max|ref|", lambda x: "—" if x is None else f"{x:.2e}"),
        Column("source", "run")])
    for cell in standing_cells(data):
        st = cell.summary.stats[data.metric]
        table.add(path=cell.path, variant=cell.variant, p=cell.order, grid=_grid(cell.grid),
                  rounds=cell.summary.n_rounds, failed=cell.summary.n_failed, median_us=us(st.median),
                  mad_us=us(st.mad), min_us=us(st.min), max_us=us(st.max),
                  width_pct=st.width if math.isfinite(st.width) else None,
                  stage_us=us(cell.summary.stats["stage_wall_s"].median),
                  device_us=us(cell.summary.stats["device_per_call_s"].median),
                  validation_error=cell.summary.validation_error_max, source=cell.source.label)
    return table


def standing_cells(data: ReportData) -> list[Cell]:
    """The newest cell of every (path, variant, order), ordered by order, path, variant."""
    out = []
    for order in data.index.orders(None):
        for path in data.index.paths(None):
            for variant in data.index.variants(path):
                cell = data.index.latest(key(path, variant), order)
                if cell is not None:
                    out.append(cell)
    return out


def landscape_figure(data: ReportData, table: Table) -> Figure:
    series = []
    values = []
    highlight = []
    for p in data.index.paths():
        points = []
        for i, row in enumerate(table.rows):
            y = row.get(f"{p}_us")
            if y is None:
                continue
            point = Point(row["p"], y, Ref(table.name, i, "p", f"{p}_us"))
            points.append(point)
            values.append(y)
            if row.get("fastest") == p:
                highlight.append(point)
        series.append(Series(p, points, path=p))
    panel = Panel("", ORDER_LABEL, f"{data.metric_label} (µs)", series, xscale="log",
                  yscale="log" if spans_decades(values) else "linear", xticks=data.orders, highlight=highlight)
    return Figure("landscape", f"Landscape: {data.metric_label} against p", "Every path at every order it ran "
                  "(the newest run of each cell); the ringed point is the fastest path of its order. "
                  "For p ≤ 255 the grids hold the same number of points (Table S29); from p = 511 one element, "
                  "so times across that boundary are not comparable.", [panel])


def build(data: ReportData) -> list[Section]:
    fastest = fastest_table(data)
    land = landscape_table(data)
    summary = Section("summary", "Summary", tables=[fastest])
    landscape = Section("landscape", "Landscape (Fig. 2)", tables=[land, cells_table(data)],
                        figures=[landscape_figure(data, land)])
    return [summary, landscape]
