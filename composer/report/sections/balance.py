"""The balance axis (the paper's Fig. 6 analogue): the paths timed on fewer SMs (``composer bench
--sms N``, a green context), against the machine balance they imply.

Coordinate (paper §8): peak HBM bandwidth / (active SMs × boost clock), bytes per active-SM cycle
— restricting SMs removes SMs, not bandwidth, so the coordinate grows as N falls. The full machine
(the default cells) is the point at the table's SM count. Ratios are every other path over
``REFERENCE`` (the paper's headline is GEMM_FUSED/FUSED_TC) within the run at each SM count;
predicted ratios (``composer model predict --sms N``) are drawn beside them when present.
"""

from __future__ import annotations

import re

from composer.report.cells import key, ordered_paths
from composer.report.document import ReportData, Section, us
from composer.report.figures import Figure, Panel, Point, Ref, Series
from composer.report.tables import Column, Table, plain, sig

REFERENCE = "FUSED_TC"
_SMS = re.compile(r"^sms=(\d+)$")


def sm_counts(data: ReportData) -> list[int]:
    found = {int(m.group(1)) for c in data.index.measured() if (m := _SMS.match(c.variant))}
    return sorted(found)


def coordinate(data: ReportData, sms: int) -> float:
    m = data.machine
    return m.hbm_bandwidth_nominal / (sms * m.clock_hz)


def _variants(data: ReportData, sms: int) -> list[tuple[str, ...]]:
    """The variants that stand for ``sms`` active SMs: at the full count a run in a green context of
    all SMs or a plain bench run."""
    return [(f"sms={sms}", "")] if sms == data.machine.sm_count else [(f"sms={sms}",)]


def axis_commits(data: ReportData, order: int) -> frozenset[str] | None:
    """The commits of the restricted runs at ``order``: a balance axis compares one build across SM
    counts, so at the full count a run of the same commit stands for the point before a newer run
    of other kernels (session 7: the device's NVRTC built FUSED_TC at p = 255 10 % faster than the
    CUBINs the restricted runs used)."""
    commits = {c.source.identity.commit for c in data.index.measured()
               if c.order == order and _SMS.match(c.variant) and c.source.identity.commit}
    return frozenset(commits) or None


def _at(data: ReportData, order: int, sms: int, pick):
    """``pick(variants, commits)`` for the variants of ``sms``: the axis's commits first, then any."""
    commits = axis_commits(data, order) if sms == data.machine.sm_count else None
    for variants in _variants(data, sms):
        for allowed in ((commits, None) if commits else (None,)):
            found = pick(variants, allowed)
            if found is not None:
                return found
    return None


def balance_tables(data: ReportData, counts: list[int]) -> tuple[Table, Table]:
    times = Table("balance", "Time per call on N active SMs (µs)", [
        Column("path", "path"), Column("p", "p"), Column("sms", "active SMs"),
        Column("bytes_per_sm_cycle", "B per active-SM cycle", sig), Column("time_us", "µs", sig),
        Column("source", "run")])
    ratios = Table("balance_ratios", f"Ratios to {REFERENCE} on N active SMs", [
        Column("ratio", "ratio"), Column("p", "p"), Column("sms", "active SMs"),
        Column("bytes_per_sm_cycle", "B per active-SM cycle", sig),
        Column("value", "value", lambda x: plain(x) if x is None else f"{x:.3f}"), Column("kind", "kind"),
        Column("resolved", "resolved"), Column("source", "run / file")])
    all_counts = sorted(set(counts) | {data.machine.sm_count})
    orders = sorted({c.order for c in data.index.measured() if _SMS.match(c.variant)})
    for order in orders:
        # the paths run on fewer SMs at this order (a path timed only on the whole machine has no axis)
        paths = ordered_paths(c.path for c in data.index.measured() if c.order == order and _SMS.match(c.variant))
        for sms in all_counts:
            x = coordinate(data, sms)
            for path in paths:
                cell = _at(data, order, sms, lambda v, commits: data.index.latest(key(path, *v), order, commits))
                if cell is not None:
                    times.add(path=path, p=order, sms=sms, bytes_per_sm_cycle=x, time_us=us(cell.median(data.metric)),
                              source=cell.source.label)
                if path == REFERENCE:
                    continue
                c = _at(data, order, sms, lambda v, commits: data.index.compare(
                    key(path, *v), key(REFERENCE, *v), order, commits=commits))
                if c is not None:
                    ratios.add(ratio=f"{path}/{REFERENCE}", p=order, sms=sms, bytes_per_sm_cycle=x, value=c.value,
                               kind="measured", resolved=c.resolved, source=", ".join(c.sources))
    for f in data.inputs.of_kind("predictions"):
        target = f.document.get("target") or {}
        sms = target.get("sm_count")
        if target.get("machine") != data.machine.name or sms is None:
            continue
        totals = {(p["path"], int(p["order"])): float(p["seconds"]) for p in f.document.get("paths", [])}
        for (path, order), t in sorted(totals.items()):
            ref = totals.get((REFERENCE, order))
            if path != REFERENCE and ref and order in orders:
                ratios.add(ratio=f"{path}/{REFERENCE}", p=order, sms=int(sms), bytes_per_sm_cycle=coordinate(data, sms),
                           value=t / ref, kind="predicted", resolved=None, source=f.label)
    return times, ratios


def _panels(table: Table, x_key: str, y_key: str, xlabel: str, ylabel: str, yscale: str) -> list[Panel]:
    panels = []
    for order in sorted({r["p"] for r in table.rows}):
        series = []
        found = {r.get("ratio", r.get("path")) for r in table.rows if r["p"] == order}
        order_of = {p: i for i, p in enumerate(ordered_paths(n.split("/")[0] for n in found))}
        names = sorted(found, key=lambda n: (order_of[n.split("/")[0]], n))
        for name in names:
            for kind in ("measured", "predicted"):
                rows = sorted([(i, r) for i, r in enumerate(table.rows) if r["p"] == order
                               and r.get("ratio", r.get("path")) == name and r.get("kind", "measured") == kind],
                              key=lambda ir: ir[1][x_key])
                if rows:
                    series.append(Series(name + (" (predicted)" if kind == "predicted" else ""),
                                         [Point(r[x_key], r[y_key], Ref(table.name, i, x_key, y_key)) for i, r in rows],
                                         path=name.split("/")[0], linestyle="--" if kind == "predicted" else "-",
                                         hollow=kind == "predicted"))
        panels.append(Panel(f"p = {order}", xlabel, ylabel, series, yscale=yscale,
                            xticks=sorted({r[x_key] for r in table.rows if r["p"] == order}),
                            hlines=[(1.0, "1")] if y_key == "value" else []))
    return panels


def build(data: ReportData) -> list[Section]:
    counts = sm_counts(data)
    if not counts:
        return []
    times, ratios = balance_tables(data, counts)
    figures = [Figure("balance_time", "Balance axis: time per call on N active SMs", f"{data.metric_label}; one "
                      "panel per order.", _panels(times, "sms", "time_us", "active SMs", "time per call (µs)", "log"),
                      columns=3)]
    if ratios.rows:
        figures.append(Figure("balance_ratios", f"Balance axis: ratios to {REFERENCE}", "x: HBM bytes per active-SM "
                              f"cycle on {data.machine.name} (datasheet bandwidth over N × boost clock). Dashed, hollow: "
                              "the model's prediction.", _panels(ratios, "bytes_per_sm_cycle", "value",
                                                                  "HBM bytes per active-SM cycle (B/cycle)",
                                                                  "ratio (dimensionless)", "linear"), columns=3))
    text = [f"SM counts measured: {', '.join(map(str, counts))} of {data.machine.sm_count} ({data.machine.name})."]
    return [Section("balance", "Balance axis (Fig. 6 analogue)", text, [times, ratios], figures)]
