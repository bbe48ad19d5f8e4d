"""Setting keys of one ``[paths.NAME]`` table in a schedule file, as text edits: comments and the
rest of the schedule stay as they are, and the file is replaced atomically (a schedule is never
left half-written). What the sweep commands use to write their winners."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from composer.fileio import atomic_write_text

_NEXT_SECTION = re.compile(r"^\[", re.M)


def set_table_lines(schedule_file: Path, table: str, lines: Mapping[str, str]) -> None:
    """Make ``lines[key]`` (a whole TOML line ``key = value``) the line of each ``key`` in the
    file's ``[table]`` (e.g. ``paths.GEMM_FUSED``): replaced where the key is set, else added at the
    table's top; the table is appended when the file has none."""
    text = schedule_file.read_text()
    match = re.compile(rf"^\[{re.escape(table)}\]\s*$", re.M).search(text)
    if match is None:
        text = text.rstrip("\n") + f"\n\n[{table}]\n" + "".join(f"{line}\n" for line in lines.values())
    else:
        start = match.end()
        nxt = _NEXT_SECTION.search(text, start)
        end = nxt.start() if nxt else len(text)
        body = text[start:end]
        for key, line in lines.items():
            pattern = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
            body = pattern.sub(lambda _m, line=line: line, body, count=1) if pattern.search(body) else f"\n{line}" + body
        text = text[:start] + body + text[end:]
    atomic_write_text(schedule_file, text)
