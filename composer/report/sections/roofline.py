"""The roofline with each path's intensity (the paper's Fig. S4) and the measured traffic (S37).

Filled markers: FLOP and unique bytes of one tendency call (``composer.counts``, operator.md's
counts; the same intensity for every path at an order) against the measured device time. Hollow
markers, where a ``composer profile`` of the cell exists: the same FLOP over the DRAM bytes ncu
counted (the path's own intensity) and over the sum of its kernels' durations. Roofs: the machine
table's FP64 tensor-core peak and HBM bandwidth (measured copy bandwidth where the table has it).
"""

from __future__ import annotations

from typing import Any

from composer import counts
from composer.report.cells import key
from composer.report.document import ReportData, Section, us
from composer.report.figures import Figure, Panel, Point, Ref, Series
from composer.report.sources import DataFile
from composer.report.tables import Column, Table, pct, pivot, sig

#: Intensities (FLOP/byte) the roof curves are drawn over.
ROOF_RANGE = (0.5, 500.0)


def _grid_for(data: ReportData, order: int) -> tuple[int, int, int] | None:
    grid = data.index.grid(order)
    if grid is not None:
        return grid
    from composer.config.schedules import load_schedule
    from composer.errors import ComposerError

    try:
        return load_schedule(order).benchmark.grid
    except ComposerError:
        return None


def profiles(data: ReportData) -> dict[tuple[str, int], tuple[DataFile, dict[str, Any]]]:
    """The newest profile of each (path, order) run as scheduled (no options, all SMs)."""
    found: dict[tuple[str, int], tuple[DataFile, dict[str, Any]]] = {}
    for f in data.inputs.of_kind("profile"):  # oldest first: newer ones replace older ones
        for entry in f.document.values():
            if entry.get("options") or entry.get("sms") or not entry.get("kernels"):
                continue
            found[(str(entry["path"]), int(entry["order"]))] = (f, entry)
    return found


def roofs_table(data: ReportData) -> Table:
    m = data.machine
    table = Table("roofs", f"Roofs of {m.name}", [
        Column("machine", "machine"), Column("peak_tflops", "FP64 TC peak TFLOP/s", sig),
        Column("bandwidth_tbs", "HBM TB/s", sig), Column("balance_flop_per_byte", "balance FLOP/byte", sig),
        Column("description", "entry")])
    table.add(machine=m.name, peak_tflops=m.fp64_tc_peak_flops / 1e12, bandwidth_tbs=m.hbm_bandwidth / 1e12,
              balance_flop_per_byte=m.fp64_tc_peak_flops / m.hbm_bandwidth, description=m.description)
    return table


def roofline_table(data: ReportData) -> Table:
    m = data.machine
    table = Table("roofline", f"Intensity, attained rate and roof fraction ({data.metric_label})", [
        Column("path", "path"), Column("p", "p"), Column("grid", "grid"), Column("flop", "FLOP", sig),
        Column("unique_bytes", "unique bytes", sig), Column("intensity_flop_per_byte", "FLOP/byte", sig),
        Column("time_us", "µs", sig), Column("tflops", "TFLOP/s", sig), Column("roof_fraction", "roof", pct),
        Column("binding", "binding roof"), Column("source", "run")])
    for path in data.index.paths():
        for order in data.orders:
            cell = data.index.latest(key(path), order)
            if cell is None:
                continue
            flop, nbytes = counts.flop(order, cell.grid), counts.unique_bytes(order, cell.grid)
            t = cell.median(data.metric)
            compute, memory = flop / m.fp64_tc_peak_flops, nbytes / m.hbm_bandwidth
            table.add(path=path, p=order, grid="x".join(map(str, cell.grid)), flop=float(flop),
                      unique_bytes=float(nbytes), intensity_flop_per_byte=flop / nbytes, time_us=us(t),
                      tflops=flop / t / 1e12, roof_fraction=max(compute, memory) / t,
                      binding="FP64" if compute >= memory else "HBM", source=cell.source.label)
    return table


def traffic_table(data: ReportData) -> Table:
    table = Table("traffic", "Measured traffic of the profiled calls (ncu, one tendency call)", [
        Column("path", "path"), Column("p", "p"), Column("kernels", "kernels"),
        Column("ncu_us", "kernel time µs", sig), Column("dram_bytes", "DRAM bytes", sig),
        Column("unique_bytes", "unique bytes", sig), Column("measured_over_unique", "DRAM/unique", sig),
        Column("dram_intensity_flop_per_byte", "FLOP/DRAM byte", sig), Column("ncu_tflops", "TFLOP/s", sig),
        Column("bindings", "binding per kernel"), Column("profile", "profile")])
    for (path, order), (f, entry) in sorted(profiles(data).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        grid = _grid_for(data, order)
        kernels = entry["kernels"]
        durations = [k.get("duration_us") for k in kernels]
        dram = [k.get("dram_bytes") for k in kernels]
        if grid is None or None in durations or None in dram:
            continue
        flop, nbytes = counts.flop(order, grid), counts.unique_bytes(order, grid)
        total_us, total_bytes = float(sum(durations)), float(sum(dram))
        table.add(path=path, p=order, kernels=len(kernels), ncu_us=total_us, dram_bytes=total_bytes,
                  unique_bytes=float(nbytes), measured_over_unique=total_bytes / nbytes,
                  dram_intensity_flop_per_byte=flop / total_bytes if total_bytes else None,
                  ncu_tflops=flop / (total_us * 1e-6) / 1e12 if total_us else None,
                  bindings="; ".join(f"{k.get('kernel')}: {k.get('binding')}" for k in kernels), profile=f.label)
    table.notes.append("Grid: the bench cells' grid of the order (the schedule's benchmark grid). DRAM/unique: "
                       "measured DRAM bytes over the compulsory traffic of operator.md.")
    return table


def roofline_figure(data: ReportData, roofline: Table, traffic: Table, roofs: Table) -> Figure:
    m = data.machine
    peak, bw = m.fp64_tc_peak_flops / 1e12, m.hbm_bandwidth / 1e12
    lo, hi = ROOF_RANGE
    knee = peak / bw
    roof = Series(f"roof ({m.name}: {peak:.1f} TFLOP/s, {bw:.2f} TB/s)",
                  [Point(lo, lo * bw), Point(knee, peak), Point(hi, peak)], color="#000000", style="curve",
                  derived=True, source=roofs.name)
    series = [roof]
    labelled: set[int] = set()  # the unique-bytes intensity is the order's: label each order once
    for path in data.index.paths():
        rows = [(i, r) for i, r in enumerate(roofline.rows) if r["path"] == path]
        if rows:
            points = []
            for i, r in rows:
                points.append(Point(r["intensity_flop_per_byte"], r["tflops"],
                                    Ref(roofline.name, i, "intensity_flop_per_byte", "tflops"),
                                    label="" if r["p"] in labelled else f"p{r['p']}"))
                labelled.add(r["p"])
            series.append(Series(f"{path} (unique bytes)", points, path=path, style="scatter"))
        rows = [(i, r) for i, r in enumerate(traffic.rows) if r["path"] == path and r["ncu_tflops"] is not None]
        if rows:
            series.append(Series(f"{path} (ncu DRAM bytes)", [
                Point(r["dram_intensity_flop_per_byte"], r["ncu_tflops"],
                      Ref(traffic.name, i, "dram_intensity_flop_per_byte", "ncu_tflops"), label=f"p{r['p']}")
                for i, r in rows], path=path, style="scatter", hollow=True, marker="s"))
    panel = Panel("", "arithmetic intensity (FLOP/byte)", "attained FP64 rate (TFLOP/s)", series)
    return Figure("roofline", f"Roofline on {m.name}", "Filled: FLOP over operator.md's unique bytes, timed by the "
                  f"bench ({data.metric_label}); hollow squares: FLOP over the DRAM bytes ncu measured, timed by the "
                  "profiled kernels' durations. Labels: the order.", [panel])


def build(data: ReportData) -> list[Section]:
    roofs, roofline, traffic = roofs_table(data), roofline_table(data), traffic_table(data)
    text = [f"Roofs: machine table entry `{data.machine.name}`" + (f" ({data.machine_note})" if data.machine_note else "")
            + "; the byte roof is the measured copy bandwidth where the entry has one."]
    fractions = pivot(roofline, "roof_fractions", f"Roof fractions ({data.metric_label})", "p", "path",
                      "roof_fraction", lambda r: f"{100 * r['roof_fraction']:.1f} % ({r['binding']})",
                      columns=data.index.paths())
    fractions.notes.append("max(FLOP / peak, unique bytes / bandwidth) / time, against the roofs above.")
    tables = [fractions, roofs, roofline] + ([traffic] if traffic.rows else [])
    if not traffic.rows:
        text.append("No `composer profile` summary of a scheduled (path, order): no measured intensity.")
    return [Section("roofline", "Roofline (Fig. S4) and measured traffic (S37)", text, tables,
                    [roofline_figure(data, roofline, traffic, roofs)])]


__all__ = ["build", "profiles"]
