"""``composer report``: the study's figures and tables from results directories (no GPU needed)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from composer.bench.stats import METRICS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report", help="render the figures and tables of results directories as HTML, Markdown and CSV (no GPU)",
        description="Reads every `composer bench` results directory, `composer profile` summary, `composer graph "
        "--measure` file and `composer model predict`/`score` file under DIR... and writes one self-contained HTML "
        "page, the same content as Markdown, a CSV per table and a PNG + JSON per figure into --out: the landscape, "
        "the crossover ratios, the ablations, the roofline, the absolute times, the scheduler's overlap, the "
        "model's predictions and the balance axis (when their data exist), and the provenance. Directories named "
        "*_invalid are skipped.")
    parser.add_argument("inputs", nargs="+", type=Path, metavar="DIR", help="results directories or files")
    parser.add_argument("--out", type=Path, required=True, metavar="REPORT_DIR", help="report directory (rewritten)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="skip paths matching GLOB (relative to their DIR, or a name), repeatable")
    parser.add_argument("--metric", choices=METRICS, default="device_per_call_s",
                        help="timer of the figures and ratios (default: device_per_call_s)")
    parser.add_argument("--machine", default=None, metavar="NAME",
                        help="machine-table entry of the roofs and the balance axis (default: the runs' GPU)")
    parser.add_argument("--update-markdown", action="append", default=[], type=Path, metavar="FILE",
                        help="also rewrite the generated blocks of FILE (`<!-- composer report: TABLE begin -->` … "
                        "`<!-- composer report: TABLE end -->`) from the report's table TABLE, atomically; repeatable")
    parser.add_argument("--title", default="composer: crossover report", help="the page's title")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from composer.report import build_report

    command = "composer " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["report"] else None
    report = build_report(args.inputs, args.out, exclude=args.exclude, metric=args.metric, machine=args.machine,
                          title=args.title, command=command,
                          update_markdown=args.update_markdown)
    data = report.data
    print(f"report of {len(data.inputs.bench)} benchmark runs and {len(data.inputs.files)} other files "
          f"({len(report.rendered.tables)} tables, {len(report.rendered.figures)} figures) in {report.rendered.directory}:")
    for name in ("report.html", "report.md"):
        print(f"  {report.rendered.directory / name}")
    for path in args.update_markdown:
        print(f"  {path} (generated blocks)")
    for line in data.inputs.skipped:
        print(f"note: skipped {line}", file=sys.stderr)
    return 0
