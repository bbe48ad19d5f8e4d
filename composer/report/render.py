"""Writing a report directory: one self-contained HTML page, the same content as Markdown, a CSV
per table, a PNG and a JSON (the plotted data) per figure, and an index.

Layout of REPORT_DIR::

    report.html          the page; figures embedded as base64 PNG, styles inline: no network
    report.md            the same sections, tables and figures (figures/NAME.png)
    report.json          index: sections with their tables and figures, the inputs, the command
    tables/NAME.csv      every table, raw values (seconds shown as µs, floats written by repr)
    figures/NAME.png     every figure
    figures/NAME.json    what each figure plots, point by point, with the table cell of each value

Every file is written atomically; files of an earlier report in tables/ and figures/ that this one
does not write are removed, so the directory always holds one report.
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.fileio import atomic_write_bytes, atomic_write_text
from composer.report.document import Section
from composer.report.figures import Figure, draw, figure_data

HTML_NAME, MARKDOWN_NAME, INDEX_NAME = "report.html", "report.md", "report.json"
TABLES, FIGURES = "tables", "figures"

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;
color:#222;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em}table{border-collapse:collapse;font-size:.82em;margin:.5em 0 1em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right;white-space:nowrap}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}figure{margin:1em 0}figure img{max-width:100%}
figcaption{font-size:.85em;color:#444}code{background:#f3f3f3;padding:0 .2em}.note{font-size:.85em;color:#444}
nav ul{columns:2;font-size:.9em}.csv{font-size:.8em}
"""


@dataclass(frozen=True)
class Rendered:
    """What was written: the report directory and the names of its tables and figures."""

    directory: Path
    tables: list[str]
    figures: list[str]


def inline_html(text: str) -> str:
    """Escaped text with the two Markdown marks the report's text uses: `code` and **bold**."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def _check_names(sections: list[Section]) -> None:
    names = [t.name for s in sections for t in s.tables]
    figures = [f.name for s in sections for f in s.figures]
    for kind, found in (("table", names), ("figure", figures)):
        dupes = sorted({n for n in found if found.count(n) > 1})
        if dupes:
            raise ValueError(f"report: two {kind}s named {dupes}")


def markdown(title: str, preamble: list[str], sections: list[Section]) -> str:
    lines = [f"# {title}", ""]
    for text in preamble:
        lines += [text, ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        for text in s.text:
            lines += [text, ""]
        for t in s.tables:
            lines += [f"### {t.title}", "", t.markdown(), ""]
            lines += [f"- {n}" for n in t.notes] + ([""] if t.notes else [])
            lines += [f"CSV: [`{TABLES}/{t.name}.csv`]({TABLES}/{t.name}.csv)", ""]
        for f in s.figures:
            lines += [f"![{f.title}]({FIGURES}/{f.name}.png)", "", f"*{f.title}.* {f.caption} "
                      f"(data: [`{FIGURES}/{f.name}.json`]({FIGURES}/{f.name}.json))", ""]
    return "\n".join(lines).rstrip() + "\n"


def page(title: str, preamble: list[str], sections: list[Section], pngs: dict[str, bytes]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>"]
    out += [f"<p>{inline_html(t)}</p>" for t in preamble]
    out.append("<nav><ul>" + "".join(f'<li><a href="#{s.id}">{html.escape(s.title)}</a></li>' for s in sections)
               + "</ul></nav>")
    for s in sections:
        out.append(f'<section id="{s.id}"><h2>{html.escape(s.title)}</h2>')
        out += [f"<p>{inline_html(t)}</p>" for t in s.text]
        for t in s.tables:
            out.append(f'<h3 id="table-{t.name}">{html.escape(t.title)}</h3>')
            out.append(t.html())
            out += [f'<p class="note">{inline_html(n)}</p>' for n in t.notes]
            out.append(f'<p class="csv">CSV: <code>{TABLES}/{t.name}.csv</code></p>')
        for f in s.figures:
            data = base64.b64encode(pngs[f.name]).decode("ascii")
            out.append(f'<figure id="figure-{f.name}"><img alt="{html.escape(f.title)}" '
                       f'src="data:image/png;base64,{data}"><figcaption><b>{html.escape(f.title)}.</b> '
                       f"{inline_html(f.caption)}</figcaption></figure>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _prune(directory: Path, keep: set[str]) -> None:
    if not directory.is_dir():
        return
    for file in directory.iterdir():
        if file.is_file() and file.suffix in (".csv", ".png", ".json") and file.name not in keep:
            file.unlink()


def write_report(out: Path, title: str, preamble: list[str], sections: list[Section],
                 index: dict[str, Any]) -> Rendered:
    """Write the report directory (see the module docstring)."""
    _check_names(sections)
    out = Path(out)
    tables = [t for s in sections for t in s.tables]
    figures: list[Figure] = [f for s in sections for f in s.figures]
    pngs = {f.name: draw(f) for f in figures}
    for t in tables:
        atomic_write_text(out / TABLES / f"{t.name}.csv", t.csv_text())
    for f in figures:
        atomic_write_bytes(out / FIGURES / f"{f.name}.png", pngs[f.name])
        atomic_write_text(out / FIGURES / f"{f.name}.json", json.dumps(figure_data(f), indent=1) + "\n")
    _prune(out / TABLES, {f"{t.name}.csv" for t in tables})
    _prune(out / FIGURES, {f"{f.name}{ext}" for f in figures for ext in (".png", ".json")})
    atomic_write_text(out / MARKDOWN_NAME, markdown(title, preamble, sections))
    atomic_write_text(out / HTML_NAME, page(title, preamble, sections, pngs))
    index = {**index, "title": title, "sections": [
        {"id": s.id, "title": s.title, "tables": [t.name for t in s.tables], "figures": [f.name for f in s.figures]}
        for s in sections]}
    atomic_write_text(out / INDEX_NAME, json.dumps(index, indent=1) + "\n")
    return Rendered(out, [t.name for t in tables], [f.name for f in figures])


__all__ = ["FIGURES", "HTML_NAME", "INDEX_NAME", "MARKDOWN_NAME", "Rendered", "TABLES", "inline_html", "markdown",
           "page", "write_report"]
