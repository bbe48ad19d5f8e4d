"""Absolute times in the form of the paper's Tables S23–S25: a row per path, a column per order,
each cell "stage time / device time" of the same cell (the newest run that measured it).

Both timers are shown because they must not be interchanged (S13): the stage time includes the RK
update and the launch gaps at stage boundaries, the device time only the tendency call.
"""

from __future__ import annotations

from composer.report.cells import key
from composer.report.document import ReportData, Section, us
from composer.report.tables import Column, Table

#: Cells at or above this many µs are printed in ms, as the paper's tables do.
MS_FROM_US = 10_000.0


def _three(x: float) -> str:
    """Three significant digits as the paper prints them (1540, 12.0, 0.902), no exponent."""
    return f"{x:#.3g}".rstrip(".") if x < 1000 else f"{x:.0f}"


def cell_text(stage_us: float | None, device_us: float | None) -> str:
    if stage_us is None or device_us is None:
        return "—"
    if stage_us >= MS_FROM_US:
        return f"{_three(stage_us / 1e3)} ms / {_three(device_us / 1e3)} ms"
    return f"{_three(stage_us)} / {_three(device_us)}"


def absolute_table(data: ReportData) -> Table:
    orders = data.orders
    cols = [Column("path", "path")]
    for order in orders:
        cols += [Column(f"p{order}_stage_us", f"p={order} stage µs"), Column(f"p{order}_device_us", f"p={order} device µs"),
                 Column(f"p{order}_source", f"p={order} run")]
    table = Table("absolute", "Absolute time per RK stage: stage time / device time (µs unless marked ms)", cols)
    for path in data.index.paths():
        row = {"path": path}
        for order in orders:
            cell = data.index.latest(key(path), order)
            if cell is not None:
                row[f"p{order}_stage_us"] = us(cell.summary.stats["stage_wall_s"].median)
                row[f"p{order}_device_us"] = us(cell.summary.stats["device_per_call_s"].median)
                row[f"p{order}_source"] = cell.source.label
        table.add(**row)
    table.display = [("p", lambda r: r["path"])] + [
        (str(o), (lambda o: lambda r: cell_text(r.get(f"p{o}_stage_us"), r.get(f"p{o}_device_us")))(o)) for o in orders]
    grids = ", ".join(f"p={o}: {'x'.join(map(str, data.index.grid(o) or ()))}" for o in orders)
    table.notes.append("Medians over interleaved rounds; the device value is the CUDA-event sum divided by the number "
                       f"of calls it covers. A dash: not run. Grids: {grids}.")
    return table


def build(data: ReportData) -> list[Section]:
    return [Section("absolute", "Absolute times (Tables S23–S25)", tables=[absolute_table(data)])]
