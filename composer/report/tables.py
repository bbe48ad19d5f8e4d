"""The report's tables: raw values kept for the CSV (and for the figures drawn from them), formatted
only where Markdown and HTML show them.

Why raw values in the CSV: a reader loads the CSV into pandas and recomputes; a figure's points
name the table cell they were drawn from, so a test compares the plotted numbers with the CSV
cells exactly (floats are written with ``repr``, which reads back to the same float).
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Formatter = Callable[[Any], str]


def sig(x: float | None, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits, no exponent for the magnitudes the report shows."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f} %"


def plain(x: Any) -> str:
    """The default cell text: floats to 4 significant digits, booleans yes/no, None a dash."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return sig(x)
    return str(x)


@dataclass(frozen=True)
class Column:
    """One CSV column: ``key`` (the CSV header, units in it: ``device_us``), ``title`` shown, and how
    Markdown/HTML format its value; ``show=False`` keeps a column in the CSV only."""

    key: str
    title: str
    fmt: Formatter = plain
    show: bool = True


@dataclass
class Table:
    """A titled table: ``rows`` are dicts keyed by the columns' keys, raw values."""

    name: str  # file stem of its CSV: tables/<name>.csv
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Optional presentation: (title, cell text of a row) pairs replacing the shown columns, for a
    #: table whose readable form merges columns (e.g. "stage / device" in one cell).
    display: Sequence[tuple[str, Callable[[dict[str, Any]], str]]] | None = None

    def column(self, key: str) -> Column:
        return next(c for c in self.columns if c.key == key)

    def add(self, **values: Any) -> int:
        """Append a row; returns its index (what a figure's point refers to)."""
        unknown = set(values) - {c.key for c in self.columns}
        if unknown:
            raise KeyError(f"table {self.name}: no columns {sorted(unknown)}")
        self.rows.append(values)
        return len(self.rows) - 1

    # output ----------------------------------------------------------------------------------
    def csv_text(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([c.key for c in self.columns])
        for row in self.rows:
            writer.writerow([_csv_value(row.get(c.key)) for c in self.columns])
        return buf.getvalue()

    def _shown(self) -> tuple[list[str], list[list[str]]]:
        if self.display is not None:
            return [t for t, _ in self.display], [[fn(row) for _, fn in self.display] for row in self.rows]
        cols = [c for c in self.columns if c.show]
        return [c.title for c in cols], [[c.fmt(row.get(c.key)) for c in cols] for row in self.rows]

    def markdown(self) -> str:
        head, body = self._shown()
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
        return "\n".join(lines)

    def html(self) -> str:
        head, body = self._shown()
        out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
        for row in body:
            out.append("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in row) + "</tr>")
        out.append("</tbody></table>")
        return "\n".join(out)


def pivot(source: Table, name: str, title: str, row: str, column: str, value: str,
          text: Callable[[dict[str, Any]], str], columns: Sequence[Any] | None = None,
          where: Callable[[dict[str, Any]], bool] | None = None) -> Table:
    """A wide view of a long table: one row per ``row`` value (ascending when they are numbers), one
    column per ``column`` value, of the source rows ``where`` keeps; the CSV holds ``value`` raw and
    Markdown/HTML show ``text(source_row)`` ("—" where absent)."""
    kept = [r for r in source.rows if where is None or where(r)]
    cols = list(columns) if columns is not None else list(dict.fromkeys(r[column] for r in kept))
    rows = list(dict.fromkeys(r[row] for r in kept))
    if all(isinstance(k, (int, float)) for k in rows):
        rows.sort()
    cells = {(r[row], r[column]): r for r in kept}
    wide = Table(name, title, [Column(row, row)] + [Column(f"{c}", f"{c}") for c in cols],
                 notes=[f"The same numbers as the table `{source.name}`, one row per {row}."])
    for key in rows:
        wide.add(**{row: key}, **{f"{c}": cells[(key, c)][value] for c in cols if (key, c) in cells})
    wide.display = [(row, lambda r: str(r[row]))] + [
        (f"{c}", (lambda c: lambda r: text(cells[(r[row], c)]) if (r[row], c) in cells else "—")(c)) for c in cols]
    return wide


def _csv_value(x: Any) -> Any:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, bool):
        return "true" if x else "false"
    return x


def _html_cell(text: str) -> str:
    """Escaped text; ``**bold**`` (the Markdown the cells use to mark the fastest) becomes <b>."""
    escaped = html.escape(text)
    while escaped.count("**") >= 2:
        escaped = escaped.replace("**", "<b>", 1).replace("**", "</b>", 1)
    return escaped


__all__ = ["Column", "Formatter", "Table", "pct", "pivot", "plain", "sig"]
