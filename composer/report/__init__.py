"""``composer report``: the study's figures and tables from results directories, on any machine.

The pieces: ``sources`` finds the results (bench directories, profile, graph, model files),
``cells`` decides which measurement stands for each cell and how two are compared (the same rules
the crossover map uses), ``sections`` build the tables and figures (as data), ``render`` writes the
HTML page, the Markdown, the CSVs and the figures. Nothing here needs a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from composer.arch.machines import DEFAULT_MACHINE, Machine, get_machine
from composer.bench.stats import METRICS
from composer.errors import ComposerError
from composer.report.cells import CellIndex
from composer.report.document import ReportData, Section
from composer.report.render import Rendered, write_report
from composer.report.sources import Inputs, discover

DEFAULT_METRIC = "device_per_call_s"


class NoRunsError(ComposerError):
    """The inputs hold no benchmark run: there is nothing to report."""


@dataclass(frozen=True)
class Report:
    data: ReportData
    sections: list[Section]
    rendered: Rendered


def report_machine(inputs: Inputs, name: str | None) -> tuple[Machine, str]:
    """The machine the roofs and the balance coordinate use: ``name``, else the table entry the newest
    run's GPU is (composer.arch.identify), else the default machine; with a note on how it was chosen."""
    if name is not None:
        return get_machine(name), "named with --machine"
    from composer.arch.identify import identify_machine

    for source in reversed(inputs.bench):
        i = source.identity
        if i.arch and i.sm_count and i.gpu_memory_bytes:
            found = identify_machine(i.arch, i.sm_count, i.gpu_memory_bytes)
            if found is not None:
                return found, f"identified from {i.gpu} of run {source.label}"
    return get_machine(DEFAULT_MACHINE), "the default machine: no run's GPU matches a machine-table entry"


def load(arguments: Sequence[str | os.PathLike[str]], exclude: Sequence[str] = (), metric: str = DEFAULT_METRIC,
         machine: str | None = None) -> ReportData:
    """The report's data; NoRunsError when the inputs hold no benchmark run."""
    if metric not in METRICS:
        raise ComposerError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
    inputs = discover(list(arguments), tuple(exclude))
    shown = ", ".join(str(a) for a in arguments)
    if not any(s.records for s in inputs.bench):
        other = f" (found {len(inputs.files)} profile/graph/model files)" if inputs.files else ""
        raise NoRunsError(f"no benchmark runs under {shown}{other}: expected `composer bench --out` directories "
                          "holding runs.jsonl")
    index = CellIndex(inputs.bench, metric)
    if not index.measured():
        raise NoRunsError(f"no successful benchmark run under {shown}: every run recorded failed")
    chosen, note = report_machine(inputs, machine)
    return ReportData(inputs, index, metric, chosen, note)


def preamble(data: ReportData, command: str | None) -> list[str]:
    bench = data.inputs.bench
    gpus = sorted({s.identity.gpu or "unknown GPU" for s in bench})
    commits = sorted({s.identity.short_commit for s in bench})
    dates = sorted(s.date for s in bench if s.date)
    lines = [f"{len(bench)} benchmark runs ({sum(len(s.records) for s in bench)} timed runs) on {', '.join(gpus)}, "
             f"{len(commits)} commit{'s' if len(commits) > 1 else ''}, {dates[0][:10] if dates else '?'} to "
             f"{dates[-1][:10] if dates else '?'}; {len(data.inputs.files)} profile, graph and model files. "
             f"Figures use the {data.metric_label}; roofs and balance: machine `{data.machine.name}` ({data.machine_note}).",
             "Each cell is the newest run that measured it; ratios pair two paths within one run where a run timed "
             "both, else through GEMM. Run labels (b01 …) are listed under Provenance."]
    if command:
        lines.append(f"Generated with `{command}`.")
    return lines


def build_report(arguments: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                 exclude: Sequence[str] = (), metric: str = DEFAULT_METRIC, machine: str | None = None,
                 title: str = "composer: crossover report", command: str | None = None,
                 update_markdown: Sequence[str | os.PathLike[str]] = ()) -> Report:
    """Render the report of ``arguments`` into ``out`` (composer.report.render's layout), and rewrite
    the generated blocks of each ``update_markdown`` file from its tables (markdown_blocks): every
    file's blocks are checked before anything is written."""
    from composer.report.markdown_blocks import updated_markdown, write_if_changed
    from composer.report.sections import build_sections
    from composer.report.sections.provenance import mixed

    data = load(arguments, exclude, metric, machine)
    sections = build_sections(data)
    tables = [t for s in sections for t in s.tables]
    from composer.report.sources import effective_excludes

    skipped = effective_excludes(list(arguments), tuple(exclude))
    caption = lambda t: block_caption(t.name, arguments, skipped)  # noqa: E731
    documents = [(path, updated_markdown(path, tables, caption)[0]) for path in update_markdown]
    lines = preamble(data, command)
    lines += mixed(data)
    index = {"command": command, "metric": metric, "machine": data.machine.name, "inputs": [str(a) for a in arguments],
             "sources": [{"label": s.label, "location": s.display, "date_utc": s.date,
                          "commit": s.identity.commit, "gpu": s.identity.gpu} for s in data.inputs.bench]
             + [{"label": f.label, "kind": f.kind, "location": f.display, "date_utc": f.date} for f in data.inputs.files],
             "warnings": mixed(data)}
    rendered = write_report(Path(out), title, lines, sections, index)
    for path, text in documents:
        write_if_changed(path, text)
    return Report(data, sections, rendered)


def block_caption(table: str, arguments: Sequence[str | os.PathLike[str]], exclude: Sequence[str]) -> str:
    """The line above a generated Markdown block: where its numbers come from and which run stands
    for each cell (the report's rule, narrowed by ``--exclude``); the same wherever it is run from."""
    skipped = f", skipping {', '.join(f'`{g}`' for g in exclude)}" if exclude else ""
    return (f"*Generated by `composer report --update-markdown`: table `{table}` of the report of {', '.join(f'`{a}`' for a in arguments)}"
            f"{skipped}. Each cell is the newest run that measured it; do not edit by hand.*")


__all__ = ["DEFAULT_METRIC", "NoRunsError", "Report", "block_caption", "build_report", "load", "report_machine"]
