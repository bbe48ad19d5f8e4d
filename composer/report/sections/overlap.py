"""The scheduler's overlap figures (``composer graph --measure``) and the volume flux's share of a
call (the paper's Fig. 4a analogue), from the graph files' node times.

Figures per path and order (composer/sched/measure.py defines them): the serial sum of the kernels'
times inside the serial plan, the critical path with those times, the serial plan and the path's
own plan each timed as one call, the overlap gained (serial call − measured call), the launch gaps
and the contention estimate. The newest file measuring a (path, order) stands.
"""

from __future__ import annotations

from typing import Any

from composer.report.cells import ordered_paths
from composer.report.document import ORDER_LABEL, ReportData, Section
from composer.report.figures import Figure, Panel, Point, Ref, Series
from composer.report.sources import DataFile
from composer.report.tables import Column, Table, sig

VOLUME_FLUX_ROLE = "volume_flux"


def measured_reports(data: ReportData) -> dict[tuple[str, int], tuple[DataFile, dict[str, Any]]]:
    found: dict[tuple[str, int], tuple[DataFile, dict[str, Any]]] = {}
    for f in data.inputs.of_kind("graph"):  # oldest first: newer ones replace older ones
        doc = f.document
        reports = doc["paths"] if isinstance(doc.get("paths"), list) else [doc]
        for report in reports:
            found[(str(report["path"]), int(doc["order"]))] = (f, report)
    return found


def _ms_to_us(x: float | None) -> float | None:
    return None if x is None else 1e3 * float(x)


def overlap_table(reports: dict) -> Table:
    table = Table("overlap", "Scheduler: overlap per path and order (µs per tendency call, medians)", [
        Column("p", "p"), Column("path", "path"), Column("streams", "streams"),
        Column("serial_sum_us", "serial sum", sig), Column("critical_path_us", "critical path", sig),
        Column("serial_call_us", "serial call", sig), Column("measured_us", "measured call", sig),
        Column("overlap_us", "overlap gained", sig), Column("overlap_pct", "overlap %", lambda x: f"{x:.2f}"),
        Column("launch_gaps_us", "launch gaps", sig), Column("predicted_us", "contention estimate", sig),
        Column("prediction_error_pct", "estimate error %", lambda x: f"{x:+.1f}"), Column("repeats", "repeats"),
        Column("sm_clock_mhz_median", "SM clock MHz", sig), Column("source", "file")])
    for (path, order), (f, report) in sorted(reports.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        m = report["measure"]
        clocks = report.get("clocks") or {}
        table.add(p=order, path=path, streams=m.get("streams"), serial_sum_us=_ms_to_us(m.get("serial_sum_ms")),
                  critical_path_us=_ms_to_us(m.get("critical_path_ms")),
                  serial_call_us=_ms_to_us(m.get("serial_call_ms")), measured_us=_ms_to_us(m.get("measured_ms")),
                  overlap_us=_ms_to_us(m.get("overlap_ms")), overlap_pct=m.get("overlap_pct"),
                  launch_gaps_us=_ms_to_us(m.get("launch_gaps_ms")), predicted_us=_ms_to_us(m.get("predicted_ms")),
                  prediction_error_pct=m.get("prediction_error_pct"), repeats=m.get("repeats"),
                  sm_clock_mhz_median=clocks.get("sm_clock_mhz_median"), source=f.label)
    table.notes.append("Overlap % of the serial call. Launch gaps: serial call − serial sum (negative when the "
                       "events around each kernel cost more than the gaps between back-to-back kernels).")
    return table


def volume_flux_table(reports: dict) -> Table:
    table = Table("volume_flux_share", "Volume flux share of the serial sum", [
        Column("p", "p"), Column("path", "path"), Column("volume_flux_us", "volume flux µs", sig),
        Column("serial_sum_us", "serial sum µs", sig), Column("share_pct", "share %", lambda x: f"{x:.1f}"),
        Column("source", "file")])
    for (path, order), (f, report) in sorted(reports.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        names = [n["name"] for n in report.get("nodes", []) if n.get("role") == VOLUME_FLUX_ROLE]
        node_ms = report["measure"].get("node_ms", {})
        if not names or not all(n in node_ms for n in names):
            continue
        vf = sum(node_ms[n] for n in names)
        total = report["measure"]["serial_sum_ms"]
        table.add(p=order, path=path, volume_flux_us=1e3 * vf, serial_sum_us=1e3 * total, share_pct=100 * vf / total,
                  source=f.label)
    return table


def _by_path(table: Table, y: str) -> list[Series]:
    series = []
    for path in ordered_paths({r["path"] for r in table.rows}):
        rows = [(i, r) for i, r in enumerate(table.rows) if r["path"] == path and r.get(y) is not None]
        series.append(Series(path, [Point(r["p"], r[y], Ref(table.name, i, "p", y)) for i, r in rows], path=path))
    return series


def build(data: ReportData) -> list[Section]:
    reports = measured_reports(data)
    if not reports:
        return []
    overlap, share = overlap_table(reports), volume_flux_table(reports)
    orders = sorted({r["p"] for r in overlap.rows})
    figures = [Figure("overlap", "Scheduler: overlap gained against p", "Overlap gained by the path's launch plan "
                      "over its serial plan, in % of the serial call (composer graph --measure).", [
                          Panel("", ORDER_LABEL, "overlap gained (% of the serial call)", _by_path(overlap, "overlap_pct"),
                                yscale="linear", xticks=orders, hlines=[(0.0, "")])])]
    tables = [overlap]
    if share.rows:
        tables.append(share)
        figures.append(Figure("volume_flux_share", "Volume flux share of a call against p", "The volume flux "
                              "kernel's time over the serial sum of the path's kernels (Fig. 4a analogue).", [
                                  Panel("", ORDER_LABEL, "volume flux share (% of the serial sum)",
                                        _by_path(share, "share_pct"), yscale="linear",
                                        xticks=sorted({r["p"] for r in share.rows}))]))
    return [Section("overlap", "Scheduler: overlap and the volume flux share", [], tables, figures)]
