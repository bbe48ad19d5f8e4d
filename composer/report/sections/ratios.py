"""Ratios of two paths against p: the crossover ratios (the paper's Fig. 1) and the one-axis
ablations (Fig. 3: MMA shape, library, fusion, instruction).

Each ratio at an order is formed as ``composer.report.cells`` says: within the newest run that
timed both, else through GEMM, both quotients within their own runs. A ratio or ablation with no
point in the data is left out; which ones are missing is said in the section text.
"""

from __future__ import annotations

from dataclasses import dataclass

from composer.report.cells import Key, key, series_name
from composer.report.document import ORDER_LABEL, ReportData, Section
from composer.report.figures import Figure, Panel, Point, Ref, Series, spans_decades
from composer.report.palette import variant_style
from composer.report.tables import Column, Table, pct, pivot, plain

BASELINE = key("GEMM")
_ALL_CUTE_16 = key("GEMM_CUTE", "library=cute", "library=cute mma=16x8x4")


@dataclass(frozen=True)
class RatioSpec:
    axis: str  # the panel (crossover ratios: one panel; ablations: one per axis)
    label: str
    numerator: Key
    denominator: Key


CROSSOVER = (
    RatioSpec("crossover", "FUSED_TC/GEMM", key("FUSED_TC"), key("GEMM")),
    RatioSpec("crossover", "FUSED_TC16/GEMM", key("FUSED_TC16"), key("GEMM")),
    RatioSpec("crossover", "FUSED/GEMM", key("FUSED"), key("GEMM")),
    RatioSpec("crossover", "GEMM_CUTE/GEMM", key("GEMM_CUTE"), key("GEMM")),
    RatioSpec("crossover", "GEMM_FUSED/GEMM", key("GEMM_FUSED"), key("GEMM")),
    RatioSpec("crossover", "GEMM_FUSED/FUSED_TC", key("GEMM_FUSED"), key("FUSED_TC")),
    RatioSpec("crossover", "FUSED_DFMA/FUSED_TC", key("FUSED_DFMA"), key("FUSED_TC")),
    RatioSpec("crossover", "FUSED_TC/FUSED_TC16", key("FUSED_TC"), key("FUSED_TC16")),
    RatioSpec("crossover", "EINSUM/GEMM", key("EINSUM"), key("GEMM")),
)

ABLATIONS = (
    RatioSpec("MMA shape", "CuTe GEMMs 8x8x4 / 16x8x4 (all on CuTe)", key("GEMM_CUTE", "library=cute mma=8x8x4"),
              _ALL_CUTE_16),
    RatioSpec("MMA shape", "FUSED_TC (8x8x4) / FUSED_TC16 (16x8x4)", key("FUSED_TC"), key("FUSED_TC16")),
    RatioSpec("library", "all-CuTe GEMM_CUTE (16x8x4) / cuBLAS GEMM", _ALL_CUTE_16, key("GEMM")),
    RatioSpec("library", "all-CuTe GEMM_CUTE (8x8x4) / cuBLAS GEMM", key("GEMM_CUTE", "library=cute mma=8x8x4"),
              key("GEMM")),
    RatioSpec("library", "GEMM_CUTE as scheduled / cuBLAS GEMM", key("GEMM_CUTE"), key("GEMM")),
    RatioSpec("fusion", "GEMM_FUSED / GEMM_CUTE", key("GEMM_FUSED"), key("GEMM_CUTE")),
    RatioSpec("instruction", "FUSED_DFMA / FUSED_TC", key("FUSED_DFMA"), key("FUSED_TC")),
)


def ratio_table(name: str, title: str, data: ReportData, specs: tuple[RatioSpec, ...]) -> Table:
    table = Table(name, title, [
        Column("axis", "axis", show=name == "ablations"), Column("ratio", "ratio"), Column("p", "p"),
        Column("value", "value", lambda x: plain(x) if x is None else f"{x:.3f}"),
        Column("numerator", "numerator"), Column("denominator", "denominator"),
        Column("pairing", "pairing"), Column("ranges_overlap", "ranges overlap"),
        Column("width_pct", "width", pct), Column("resolved", "resolved"), Column("criterion", "criterion"),
        Column("sources", "runs")])
    for spec in specs:
        for order in data.index.orders(None):
            c = data.index.compare(spec.numerator, spec.denominator, order, via=BASELINE)
            if c is None:
                continue
            table.add(axis=spec.axis, ratio=spec.label, p=order, value=c.value, numerator=c.numerator.name,
                      denominator=c.denominator.name, pairing=c.pairing, ranges_overlap=c.overlap,
                      width_pct=c.width, resolved=c.resolved, criterion=c.criterion, sources=", ".join(c.sources))
    table.notes.append(f"Ratios of the {data.metric_label}, numerator over denominator (below 1: the numerator is "
                       "faster). Pairing: within one run, or via GEMM ((A/GEMM)/(B/GEMM), each quotient within its "
                       "own run). Width: (max − min)/min of the per-round ratio within the run.")
    return table


def ratio_figure(name: str, title: str, caption: str, data: ReportData, table: Table,
                 specs: tuple[RatioSpec, ...]) -> Figure | None:
    panels: dict[str, Panel] = {}
    for spec in specs:
        rows = [(i, r) for i, r in enumerate(table.rows) if r["ratio"] == spec.label]
        if not rows:
            continue
        same_colour = sum(s.path == spec.numerator[0] for s in panels[spec.axis].series) if spec.axis in panels else 0
        linestyle, marker = variant_style(same_colour)
        points = [Point(r["p"], r["value"], Ref(table.name, i, "p", "value")) for i, r in rows]
        panel = panels.setdefault(spec.axis, Panel(spec.axis if len(specs) > 1 and spec.axis != "crossover" else "",
                                                   ORDER_LABEL, "ratio (dimensionless)", xscale="log",
                                                   hlines=[(1.0, "1")]))
        panel.series.append(Series(spec.label, points, path=spec.numerator[0], linestyle=linestyle, marker=marker))
    if not panels:
        return None
    for panel in panels.values():
        values = [p.y for s in panel.series for p in s.points]
        panel.yscale = "log" if spans_decades(values, 0.7) else "linear"
        panel.xticks = sorted({p.x for s in panel.series for p in s.points})
    return Figure(name, title, caption, list(panels.values()), columns=2)


def ratio_text(row: dict) -> str:
    return (f"{row['value']:.3f}" + ("" if row["resolved"] else " (unresolved)")
            + ("" if row["pairing"] == "same run" else " ‡"))


def _missing(table: Table, specs: tuple[RatioSpec, ...]) -> list[str]:
    have = {r["ratio"] for r in table.rows}
    return [s.label for s in specs if s.label not in have]


def build(data: ReportData) -> list[Section]:
    sections = []
    crossover = ratio_table("ratios", "Crossover ratios", data, CROSSOVER)
    fig = ratio_figure("ratios", "Crossover ratios against p", "Colour: the numerator's path (a second ratio "
                       "with the same numerator is dashed, with another marker). Below the dotted line the numerator is faster.", data, crossover,
                       CROSSOVER)
    text = []
    missing = _missing(crossover, CROSSOVER)
    if missing:
        text.append("No data for " + ", ".join(missing) + ".")
    wide = pivot(crossover, "ratios_by_order", "Crossover ratios by order", "p", "ratio", "value", ratio_text)
    wide.notes.append("Unresolved: below the claim threshold (§4.5); ‡ formed through GEMM across two runs.")
    sections.append(Section("ratios", "Crossover ratios (Fig. 1)", text, [wide, crossover], [fig] if fig else []))
    ablations = ratio_table("ablations", "One-axis ablations", data, ABLATIONS)
    fig = ratio_figure("ablations", "One-axis ablations against p", "One panel per axis: MMA shape, library, "
                       "fusion, instruction; each ratio changes one thing only.", data, ablations, ABLATIONS)
    text = ["Variants: `library=cute` runs all three GEMMs of GEMM_CUTE on CuTe; `mma=…` fixes its MMA shape (a "
            "variant without `mma` runs the schedule's, 16x8x4 in the shipped schedules)."]
    missing = _missing(ablations, ABLATIONS)
    if missing:
        text.append("No data for " + ", ".join(missing) + ".")
    sections.append(Section("ablations", "Ablations (Fig. 3)", text, [ablations], [fig] if fig else []))
    return sections


__all__ = ["ABLATIONS", "CROSSOVER", "RatioSpec", "build", "ratio_table", "series_name"]
