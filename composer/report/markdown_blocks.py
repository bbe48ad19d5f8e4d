"""Generated blocks in a hand-written Markdown file: ``composer report --update-markdown FILE``.

Why: docs/results.md keeps its narrative by hand, but every table of current figures in it is one
of the report's tables, rewritten from the data by the report itself, so the document cannot drift
from docs/data. A block is delimited by two HTML comments (invisible in rendered Markdown)::

    <!-- composer report: landscape begin -->
    ... replaced on every update ...
    <!-- composer report: landscape end -->

``landscape`` names a table of the report (its CSV stem, tables/landscape.csv). Only the text
between the markers changes; the file is rewritten atomically, and not at all when a block is
malformed (unclosed, nested, repeated) or names no table of this report.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from composer.errors import ComposerError
from composer.fileio import atomic_write_text
from composer.report.tables import Table

_MARKER = re.compile(r"^<!-- composer report: (?P<name>\S+) (?P<end>begin|end) -->$")


class MarkdownBlockError(ComposerError):
    """A generated block of the Markdown file is malformed or names no table of the report."""


def block_text(table: Table, caption: str) -> str:
    """What a block holds: the caption (how the cells were chosen), the table, its notes."""
    lines = [caption, "", table.markdown()]
    if table.notes:
        lines += [""] + [f"- {n}" for n in table.notes]
    return "\n".join(lines)


def replace_blocks(text: str, contents: Mapping[str, str], where: str = "the file") -> tuple[str, list[str]]:
    """``text`` with every block's body replaced by ``contents[name]``; also the names replaced, in
    order. MarkdownBlockError (one line) for a block ``contents`` has no entry for, or a bad marker."""
    out: list[str] = []
    names: list[str] = []
    open_name: str | None = None
    for number, line in enumerate(text.split("\n"), 1):
        m = _MARKER.match(line.rstrip())
        if m is None:
            if open_name is None:
                out.append(line)
            continue
        name, is_end = m.group("name"), m.group("end") == "end"
        if not is_end:
            if open_name is not None:
                raise MarkdownBlockError(f"{where}:{number}: block {name!r} begins inside block {open_name!r}")
            if name not in contents:
                raise MarkdownBlockError(f"{where}:{number}: unknown block {name!r}: the report has no table of that "
                                         f"name (tables: {', '.join(sorted(contents))})")
            if name in names:
                raise MarkdownBlockError(f"{where}:{number}: block {name!r} appears twice")
            out += [line, contents[name]]
            open_name = name
        else:
            if open_name != name:
                raise MarkdownBlockError(f"{where}:{number}: end of block {name!r} without its begin")
            out.append(line)
            names.append(name)
            open_name = None
    if open_name is not None:
        raise MarkdownBlockError(f"{where}: block {open_name!r} has no end marker")
    return "\n".join(out), names


def updated_markdown(path: str | os.PathLike[str], tables: Sequence[Table],
                     caption: Callable[[Table], str]) -> tuple[str, list[str]]:
    """The new text of ``path`` with its generated blocks rewritten from ``tables`` (nothing is
    written), and the block names. MarkdownBlockError when the file is missing, has no block, or a
    block is bad (see replace_blocks)."""
    target = Path(path)
    if not target.is_file():
        raise MarkdownBlockError(f"{target}: no such Markdown file to update")
    text = target.read_text(encoding="utf-8")
    new, names = replace_blocks(text, {t.name: block_text(t, caption(t)) for t in tables}, str(target))
    if not names:
        raise MarkdownBlockError(f"{target}: no `<!-- composer report: NAME begin -->` block to update")
    return new, names


def write_if_changed(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` atomically with ``text`` unless it already holds exactly that."""
    if Path(path).read_text(encoding="utf-8") != text:
        atomic_write_text(path, text)


__all__ = ["MarkdownBlockError", "block_text", "replace_blocks", "updated_markdown", "write_if_changed"]
