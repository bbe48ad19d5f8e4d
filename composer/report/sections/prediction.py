"""The model's predictions against the measurements (the paper's Fig. 5 analogue), when
``composer model predict`` files are among the inputs, and the summaries of ``composer model
score`` files.

What the section reads of a predictions file (schema ``composer.model-predictions``, written by
composer/model/predict.py): ``target`` (``label``, ``machine``, ``sm_count``, ``full_sm_count``),
``paths`` (``path``, ``order``, ``seconds``: the predicted device time per call) and ``fastest``
(``order``, ``path``, ``se``, ``screened``). A prediction is matched with the report's own cell of
the path and order measured on the target's machine (the machine-table entry its GPU is) at the
target's SM count (``sms=N`` variant; the default variant at the full count). Errors are 100 ln(predicted / measured). Of a score file (``composer.model-score``) the
section shows ``summary`` as it is.
"""

from __future__ import annotations

import math
from typing import Any

from composer.report.cells import Cell, key, ordered_paths
from composer.report.document import ReportData, Section, us
from composer.report.figures import Figure, Panel, Point, Ref, Series
from composer.report.tables import Column, Table, plain, sig


def target_variants(target: dict[str, Any]) -> tuple[str, ...]:
    sms, full = target.get("sm_count"), target.get("full_sm_count")
    if sms is None or sms == full:
        return ("", f"sms={full}") if full else ("",)
    return (f"sms={sms}",)


def source_machine(data: ReportData, cell: Cell) -> str | None:
    """The machine-table entry of the GPU a cell was measured on (composer.arch.identify)."""
    from composer.arch.identify import identify_machine

    i = cell.source.identity
    if not (i.arch and i.sm_count and i.gpu_memory_bytes):
        return data.machine.name  # a run that does not say: the report's machine
    found = identify_machine(i.arch, i.sm_count, i.gpu_memory_bytes)
    return found.name if found else None


def measured_cell(data: ReportData, target: dict[str, Any], path: str, order: int) -> Cell | None:
    """The newest cell of ``path`` at ``order`` measured on the target's machine at its SM count;
    at the full count, where a balance axis was measured at that order, the newest of the axis's
    own commit first (``balance.axis_commits``: the point the axis and its score compare)."""
    from composer.report.sections.balance import axis_commits

    sms, full = target.get("sm_count"), target.get("full_sm_count")
    commits = axis_commits(data, order) if sms is None or sms == full else None
    for allowed in ((commits, None) if commits else (None,)):  # the balance axis's build first
        found = data.index.candidates(key(path, *target_variants(target)), order, allowed)
        cell = next((c for c in found if source_machine(data, c) == target.get("machine")), None)
        if cell is not None:
            return cell
    return None


def predicted_table(data: ReportData) -> Table:
    table = Table("predicted", f"Predicted against measured ({data.metric_label}, µs)", [
        Column("target", "target"), Column("path", "path"), Column("p", "p"),
        Column("predicted_us", "predicted", sig), Column("measured_us", "measured", sig),
        Column("error_pct", "error % (100 ln pred/meas)", lambda x: plain(x) if x is None else f"{x:+.1f}"),
        Column("measured_source", "run"), Column("predictions", "file")])
    for f in data.inputs.of_kind("predictions"):
        target = f.document.get("target") or {}
        for p in f.document.get("paths", []):
            cell = measured_cell(data, target, p["path"], int(p["order"]))
            meas = cell.median(data.metric) if cell is not None else None
            table.add(target=target.get("label", target.get("machine")), path=p["path"], p=int(p["order"]),
                      predicted_us=us(float(p["seconds"])), measured_us=us(meas),
                      error_pct=100 * math.log(float(p["seconds"]) / meas) if meas else None,
                      measured_source=cell.source.label if cell is not None else None, predictions=f.label)
    return table


def fastest_table(data: ReportData) -> Table:
    table = Table("predicted_fastest", "Predicted fastest path per order and its separation-to-error ratio", [
        Column("target", "target"), Column("p", "p"), Column("predicted", "predicted fastest"),
        Column("se", "S/E", lambda x: plain(x) if x is None else f"{x:.2f}"), Column("screened", "screened in"),
        Column("measured", "measured fastest"), Column("right", "right"), Column("predictions", "file")])
    for f in data.inputs.of_kind("predictions"):
        target = f.document.get("target") or {}
        for row in f.document.get("fastest", []):
            order = int(row["order"])
            predicted = {p["path"] for p in f.document.get("paths", []) if int(p["order"]) == order}
            cells = [c for c in (measured_cell(data, target, p, order) for p in predicted) if c is not None]
            best = min(cells, key=lambda c: c.median(data.metric)).path if len(cells) == len(predicted) > 1 else None
            table.add(target=target.get("label"), p=order, predicted=row.get("path"), se=row.get("se"),
                      screened=row.get("screened"), measured=best,
                      right=None if best is None else best == row.get("path"), predictions=f.label)
    table.notes.append("S/E = |ln r| / ε of the pair's family (paper §9.1); screened in at S/E ≥ 1. Measured "
                       "fastest: only where every predicted path was measured.")
    return table


def _signs(ratios: dict, right: str, total: str, ties: str) -> str:
    """"right/total", or with ties in the measurement (``--measured-resolution``) "right/signed (k ties)":
    a tie has no measured sign, so it is neither right nor wrong."""
    tied = ratios.get(ties)
    if tied is None:
        return f"{ratios.get(right)}/{ratios.get(total)}"
    return f"{ratios.get(right)}/{ratios.get(total, 0) - tied} ({tied} ties)"


def score_table(data: ReportData) -> Table:
    table = Table("score_summary", "Scores (composer model score)", [
        Column("score", "file"), Column("targets", "targets"), Column("cells", "cells"),
        Column("median_abs_pct", "median |error| %", sig), Column("p90_abs_pct", "p90 |error| %", sig),
        Column("ratio_signs", "ratio signs right"), Column("screened", "screened right"),
        Column("choices", "choices right"),
        Column("median_loss_pct", "median loss %", sig)])
    for f in data.inputs.of_kind("score"):
        s = f.document.get("summary") or {}
        paths, ratios, choices = s.get("paths") or {}, s.get("ratios") or {}, s.get("choices") or {}
        table.add(score=f"{f.label} ({f.display})", targets=", ".join(f.document.get("targets", [])),
                  cells=paths.get("n"), median_abs_pct=paths.get("median_abs_pct"), p90_abs_pct=paths.get("p90_abs_pct"),
                  ratio_signs=_signs(ratios, "sign_right", "n", "unresolved") if ratios else None,
                  screened=_signs(ratios, "screened_right", "screened", "screened_unresolved") if ratios else None,
                  choices=f"{choices.get('right')}/{choices.get('n')}" if choices else None,
                  median_loss_pct=choices.get("median_loss_pct"))
    return table


def choices_table(data: ReportData) -> Table:
    table = Table("score_choices", "Scored choices: the predicted fastest path against the measured one", [
        Column("target", "target"), Column("p", "p"), Column("predicted", "predicted fastest"),
        Column("measured", "measured fastest"), Column("right", "right"),
        Column("loss_pct", "loss % (chosen/best − 1)", lambda x: plain(x) if x is None else f"{x:.1f}"),
        Column("se", "S/E", lambda x: plain(x) if x is None else f"{x:.2f}"), Column("screened", "screened in"),
        Column("score", "file")])
    for f in data.inputs.of_kind("score"):
        for c in f.document.get("choices", []):
            table.add(target=c.get("target"), p=c.get("order"), predicted=c.get("predicted"), measured=c.get("measured"),
                      right=c.get("right"), loss_pct=c.get("loss_pct"), se=c.get("se"), screened=c.get("screened"),
                      score=f.label)
    given = sorted({f.label for f in data.inputs.of_kind("score") if f.document.get("family_error_rule") == "given"})
    table.notes.append("From the score file: S/E with the family errors of the other targets (leave-target-out)"
                       + (f"; in {', '.join(given)} with family errors fixed before the test, per SM band "
                          "(`composer model score --family-rule given`)." if given else "."))
    return table


def paper_table(data: ReportData) -> Table:
    """Our predictions for the paper's machines next to the paper's measured ratios there
    (composer.model.paper): per (machine, order) the newest predictions file of the whole machine."""
    from composer.model.paper import RATIOS, compare, load_paper_times

    names = [f"{a}/{b}" for a, b in RATIOS]
    ratio = lambda x: plain(x) if x is None else f"{x:.3f}"  # noqa: E731
    columns = [Column("machine", "machine"), Column("p", "p")]
    for n in names:
        columns += [Column(f"{n}_ours", f"{n} ours", ratio), Column(f"{n}_paper", "(paper)", ratio)]
    columns += [Column("fastest_ours", "fastest ours"), Column("fastest_paper", "(paper)"), Column("predictions", "file")]
    table = Table("paper_comparison", "Predicted for our kernels on the paper's machines, next to the paper's "
                  "measured ratios of its kernels (a plausibility comparison, not a score)", columns)
    paper = load_paper_times()
    newest: dict[tuple[str, int], Any] = {}
    for f in data.inputs.of_kind("predictions"):  # oldest first: later files replace earlier ones
        target = f.document.get("target") or {}
        if target.get("machine") in paper and target.get("sm_count") == target.get("full_sm_count"):
            for p in f.document.get("paths", []):
                newest[(target["machine"], int(p["order"]))] = f
    for (machine, order), f in sorted(newest.items()):
        doc = {"target": f.document["target"],
               "paths": [p for p in f.document["paths"] if int(p["order"]) == order]}
        rows = compare([doc], {machine: paper[machine]}) if any(order in t for t in paper[machine].values()) else []
        for r in rows:
            cells = {f"{n}_{side}": r.ratios[n][i] for n in names for i, side in enumerate(("ours", "paper"))}
            table.add(machine=machine, p=order, **cells, fastest_ours=r.ours_fastest, fastest_paper=r.paper_fastest,
                      predictions=f.label)
    table.notes.append("The paper's device times: its Tables S23-S25 (schedules/authors_device_times.toml). The "
                       "fastest path is compared among the paths both sides have at that order.")
    return table


def scatter(table: Table) -> Figure:
    matched = [(i, r) for i, r in enumerate(table.rows) if r["measured_us"] is not None]
    series = []
    for path in ordered_paths({r["path"] for _, r in matched}):
        series.append(Series(path, [Point(r["measured_us"], r["predicted_us"], Ref(table.name, i, "measured_us",
                                                                                   "predicted_us"))
                                    for i, r in matched if r["path"] == path], path=path, style="scatter"))
    values = [r[k] for _, r in matched for k in ("measured_us", "predicted_us")]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    series.insert(0, Series("predicted = measured", [Point(lo, lo), Point(hi, hi)], color="#000000", style="curve",
                            linestyle=":", derived=True, source=table.name))
    return Figure("predicted_vs_measured", "Model: predicted against measured", "Each point one path at one order "
                  "on one target (SM count); on the dotted line the prediction is exact.",
                  [Panel("", "measured (µs)", "predicted (µs)", series)])


def paper_scatter(table: Table) -> Figure:
    """One panel per ratio of the paper comparison: ours predicted (y) against the paper's measured
    (x), a series per machine, each point labelled with its order."""
    from composer.model.paper import RATIOS
    from composer.report.palette import MARKERS, spare_color

    machines = sorted({r["machine"] for r in table.rows})
    panels = []
    for a, b in RATIOS:
        name = f"{a}/{b}"
        series = []
        for j, machine in enumerate(machines):
            points = [Point(r[f"{name}_paper"], r[f"{name}_ours"], Ref(table.name, k, f"{name}_paper", f"{name}_ours"),
                            label=str(r["p"]))
                      for k, r in enumerate(table.rows) if r["machine"] == machine
                      and r[f"{name}_ours"] is not None and r[f"{name}_paper"] is not None]
            if points:
                series.append(Series(machine, points, color=spare_color(j), style="scatter",
                                     marker=MARKERS[j % len(MARKERS)]))
        if not series:
            continue
        values = [p.y for s in series for p in s.points] + [p.x for s in series for p in s.points]
        lo, hi = min(values) / 1.2, max(values) * 1.2
        series.insert(0, Series("ours = paper", [Point(lo, lo), Point(hi, hi)], color="#000000", style="curve",
                                linestyle=":", derived=True, source=table.name))
        panels.append(Panel(name, "paper measured", "ours predicted", series, hlines=[(1.0, "1")]))
    return Figure("paper_comparison", "Predicted ratios on the paper's machines against its measured ones",
                  "Each point one order (labelled) on one machine: our kernels predicted (y) against the paper's "
                  "kernels measured (x). Not a score: the kernels differ; points across ratio 1 from the dotted "
                  "line are where the two implementations part.", panels, columns=3)


def build(data: ReportData) -> list[Section]:
    if not data.inputs.of_kind("predictions") and not data.inputs.of_kind("score"):
        return []
    tables, figures = [], []
    if data.inputs.of_kind("predictions"):
        predicted = predicted_table(data)
        tables += [predicted, fastest_table(data)]
        comparison = paper_table(data)
        if comparison.rows:
            tables.append(comparison)
            figures.append(paper_scatter(comparison))
        if any(r["measured_us"] is not None for r in predicted.rows):
            figures.append(scatter(predicted))
    if data.inputs.of_kind("score"):
        tables.append(score_table(data))
        choices = choices_table(data)
        if choices.rows:
            tables.append(choices)
    return [Section("model", "Model: predicted against measured (Fig. 5 analogue)", [], tables, figures)]
