"""Where every number came from: the runs and files (commit, host, GPU, driver, clocks, command),
the clocks and power-cap events each cell ran under (the runs' NVML samples), the field check of
each cell, and a warning when the report mixes commits or GPUs."""

from __future__ import annotations

from composer.report.document import ReportData, Section
from composer.report.sections.landscape import cells_table, standing_cells
from composer.report.tables import Column, Table, pct, pivot, sig


def sources_table(data: ReportData) -> Table:
    table = Table("sources", "Runs and files", [
        Column("label", "label"), Column("kind", "kind"), Column("location", "location"), Column("date_utc", "date (UTC)"),
        Column("commit", "commit"), Column("host", "host"), Column("gpu", "GPU"), Column("driver", "driver"),
        Column("cuda_driver", "CUDA"), Column("max_sm_clock_mhz", "max SM MHz"), Column("power_limit_w", "power limit W"),
        Column("runs", "runs"), Column("command", "command"), Column("environment", "environment")])
    for s in data.inputs.bench:
        i = s.identity
        table.add(label=s.label, kind="bench", location=s.display, date_utc=i.date_utc, commit=i.short_commit,
                  host=i.host, gpu=i.gpu, driver=i.driver, cuda_driver=i.cuda_driver, max_sm_clock_mhz=i.max_sm_clock_mhz,
                  power_limit_w=i.power_limit_w, runs=len(s.records),
                  command=" | ".join(x.command or "?" for x in s.sessions) or None,
                  environment=" | ".join(sorted({x.environment for x in s.sessions if x.environment})) or None)
    for f in data.inputs.files:
        i = f.identity
        table.add(label=f.label, kind=f.kind, location=f.display, date_utc=f.date,
                  commit=i.short_commit if i.commit else None, host=i.host, gpu=i.gpu, driver=i.driver,
                  cuda_driver=i.cuda_driver, max_sm_clock_mhz=i.max_sm_clock_mhz, power_limit_w=i.power_limit_w,
                  command=i.command)
    table.notes.append("Dates of profile and graph files without a recorded date: the commit that added the file.")
    return table


def clocks_table(data: ReportData) -> Table:
    table = Table("clocks", "Clocks and power during the timed loops (NVML samples of every round)", [
        Column("path", "path"), Column("variant", "variant"), Column("p", "p"), Column("samples", "samples"),
        Column("sm_clock_mhz_min", "SM MHz min", sig), Column("sm_clock_mhz_median", "median", sig),
        Column("sm_clock_mhz_max", "max", sig), Column("power_w_max", "power max W", sig),
        Column("power_limit_w_min", "limit W", sig), Column("power_capped_fraction", "power-capped", pct),
        Column("reasons_seen", "clock-event reasons"), Column("source", "run")])
    for cell in standing_cells(data):
        c = cell.summary.clocks
        table.add(path=cell.path, variant=cell.variant, p=cell.order, samples=c.n_samples,
                  sm_clock_mhz_min=c.sm_clock_mhz_min, sm_clock_mhz_median=c.sm_clock_mhz_median,
                  sm_clock_mhz_max=c.sm_clock_mhz_max, power_w_max=c.power_w_max, power_limit_w_min=c.power_limit_w_min,
                  power_capped_fraction=c.power_capped_fraction, reasons_seen=", ".join(c.reasons_seen) or None,
                  source=cell.source.label)
    table.notes.append("Power-capped: the share of samples with sw_power_cap or hw_power_brake_slowdown set.")
    return table


def mixed(data: ReportData) -> list[str]:
    """One line per mixture of commits, hosts or GPUs among the bench runs (allowed, but said)."""
    lines = []
    for what, values in (("commits", {s.identity.short_commit for s in data.inputs.bench}),
                         ("GPUs", {s.identity.gpu or "unknown" for s in data.inputs.bench}),
                         ("drivers", {s.identity.driver or "unknown" for s in data.inputs.bench}),
                         ("hosts", {s.identity.host or "unknown" for s in data.inputs.bench})):
        if len(values) > 1:
            lines.append(f"Runs from {len(values)} {what} are mixed in this report ({', '.join(sorted(values))}): "
                         "each cell names its run; comparisons across runs use the 1 % criterion.")
    return lines


def build(data: ReportData) -> list[Section]:
    text = mixed(data)
    if data.inputs.skipped:
        text.append("Skipped: " + "; ".join(data.inputs.skipped) + ".")
    if data.index.dropped:
        text.append("Cells off their order's main grid, not shown: " + "; ".join(data.index.dropped) + ".")
    if data.inputs.damaged:
        text.append("Damaged lines skipped: " + "; ".join(data.inputs.damaged) + ".")
    text.append(f"{data.inputs.ignored} other files under the inputs are of no kind the report reads "
                "(sweep JSON, micro-benchmarks, logs).")
    clocks = clocks_table(data)
    paths = data.index.paths()
    clock_view = pivot(clocks, "clocks_by_order", "SM clock median (min–max) MHz and power-capped share",
                       "p", "path", "sm_clock_mhz_median", clock_text, columns=paths, where=lambda r: not r["variant"])
    cells = cells_table(data)
    validation = pivot(cells, "validation", "Field check of each cell: max|diff|/max|ref| on the point-varying "
                       "input", "p", "path", "validation_error",
                       lambda r: "—" if r["validation_error"] is None else f"{r['validation_error']:.2e}",
                       columns=paths, where=lambda r: not r["variant"])
    validation.notes.append("composer bench checks each (path, order) against the NumPy reference before timing "
                            "it (tolerance in the schedule, 1e-12 shipped).")
    return [Section("provenance", "Provenance", text, [sources_table(data), clock_view, clocks, validation])]


def clock_text(row: dict) -> str:
    if row["sm_clock_mhz_median"] is None:
        return "—"
    capped = row["power_capped_fraction"]
    return (f"{row['sm_clock_mhz_median']:.0f} ({row['sm_clock_mhz_min']}–{row['sm_clock_mhz_max']})"
            + ("" if capped is None else f", {capped:.2f}"))
