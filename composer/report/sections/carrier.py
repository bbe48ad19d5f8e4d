"""GEMM_FUSED's carrier sweeps (``composer sweep-carrier --out``): per order every setting it
validated and timed, the winner marked. The paper's carrier and fold choice (reports/
gemm_assignment_and_carrier.md of its code base) is one setting per order; this table is the
evidence for the choice the schedules ship on this machine. The newest sweep of an order stands.
"""

from __future__ import annotations

from typing import Any

from composer.report.document import ReportData, Section
from composer.report.sources import DataFile
from composer.report.tables import Column, Table, sig


def newest_sweeps(data: ReportData) -> dict[int, DataFile]:
    found: dict[int, DataFile] = {}
    for f in data.inputs.of_kind("carrier"):  # oldest first: newer ones replace older ones
        found[int(f.document["order"])] = f
    return found


def _measured_error(verdict: dict[str, Any] | None) -> float | None:
    if not verdict:
        return None
    text = str(verdict.get("measured", ""))
    try:
        return float(text.rsplit("=", 1)[-1])
    except ValueError:
        return None


def carrier_table(sweeps: dict[int, DataFile]) -> Table:
    table = Table("carrier", "GEMM_FUSED carrier sweeps: device µs per tendency call (median of the rounds)", [
        Column("p", "p"), Column("setting", "carrier, fold, flux, tile"), Column("us", "µs", sig),
        Column("vs_winner", "/ winner", lambda x: "" if x is None else f"{x:.3f}"),
        Column("error", "max|diff|/max|ref|", lambda x: "—" if x is None else f"{x:.1e}"),
        Column("winner", "winner", lambda x: "**yes**" if x else ""), Column("source", "file")])
    for order, f in sorted(sweeps.items()):
        doc = f.document
        medians = {k: float(v) for k, v in (doc.get("medians_s") or {}).items()}
        winner = doc.get("winner")
        best = medians.get(winner) if winner else None
        verdicts = doc.get("validation") or {}
        for label, seconds in sorted(medians.items(), key=lambda kv: kv[1]):
            table.add(p=order, setting=label.replace(",tile=shipped", ""), us=1e6 * seconds,
                      vs_winner=seconds / best if best else None, error=_measured_error(verdicts.get(label)),
                      winner=label == winner, source=f.label)
    table.notes.append("Each setting validated on the point-varying input at the schedule's validation grid "
                       "before it was timed; the winner is written into [paths.GEMM_FUSED] of the schedules. "
                       "Times exclude the RK update (composer bench's device time includes it).")
    return table


#: The carrier x fold x flux settings of a sweep (the shipped tile), in the order of the paper's
#: table plus the flux formed in the mainloop and in the stage: (column key, setting label without the tile).
SETTINGS = tuple((f"{c}{'_fold' if fold else ''}_{flux}", f"carrier={c},fold={'on' if fold else 'off'},flux={flux}")
                 for flux in ("array", "mainloop", "staged")
                 for c, fold in (("x", False), ("y", False), ("z", False), ("z", True)))
#: Flux sources whose columns the table always shows (the others only where a sweep timed them).
ALWAYS_SHOWN = ("array", "mainloop")


def _head(key: str) -> str:
    carrier, *rest = key.split("_")
    flux = rest[-1]
    return f"{carrier}{' + fold' if 'fold' in rest else ''}{'' if flux == 'array' else ', ' + flux}"


def settings_table(sweeps: dict[int, DataFile]) -> Table:
    """One row per order, one column per setting on the shipped tile (µs), and the winner."""
    timed = {label for f in sweeps.values() for label in (f.document.get("medians_s") or {})}
    shown = [(key, label) for key, label in SETTINGS
             if key.rsplit("_", 1)[1] in ALWAYS_SHOWN or f"{label},tile=shipped" in timed]
    columns = [Column("p", "p")] + [Column(key, _head(key), sig) for key, _ in shown]
    table = Table("carrier_settings", "GEMM_FUSED carrier sweeps by setting, shipped tile (µs per call, median)",
                  [*columns, Column("winner", "winner"), Column("source", "file")])
    for order, f in sorted(sweeps.items()):
        medians = f.document.get("medians_s") or {}
        row: dict[str, Any] = {"p": order, "source": f.label}
        for key, label in shown:
            seconds = medians.get(f"{label},tile=shipped")
            row[key] = None if seconds is None else 1e6 * float(seconds)
        winner = str(f.document.get("winner") or "")
        row["winner"] = winner.replace(",tile=shipped", "")
        table.add(**row)
    table.notes.append("— : not built or not legal at that order (the flux formed in the mainloop does not fit "
                       "GEMM_CUTE's x tile at p = 511). Times exclude the RK update.")
    return table


def build(data: ReportData) -> list[Section]:
    sweeps = newest_sweeps(data)
    if not sweeps:
        return []
    return [Section("carrier", "GEMM_FUSED: the carrier sweeps", [],
                    [settings_table(sweeps), carrier_table(sweeps)], [])]


__all__ = ["SETTINGS", "build", "carrier_table", "newest_sweeps", "settings_table"]
