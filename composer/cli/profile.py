"""``composer profile``: Nsight Compute on one tendency call per (path, order); the binding resource."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from composer.fileio import atomic_write_text
from composer.cli.arguments import csv_list
from composer.errors import ComposerError
from composer.profile.ncu import SECTIONS, available_sections, find_ncu, ncu_command, parse_raw_csv, summarize

SUMMARY = "profile.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile", help="Nsight Compute metrics of one tendency call per path and order (needs a GPU and ncu)",
        description="Runs each (path, order) in its own process under ncu (--clock-control none), "
        "after one untimed warm-up call, and reduces every kernel of the profiled call to its time, "
        "DRAM traffic, unit and pipe utilization, occupancy and top stall reasons, naming the binding "
        "resource. Raw CSV per pair and a JSON summary go to --out; finished pairs are skipped on a rerun.")
    parser.add_argument("--paths", type=csv_list(str), required=True, help="comma-separated paths")
    parser.add_argument("--orders", type=csv_list(int), required=True, help="comma-separated orders")
    parser.add_argument("--grid", type=csv_list(int), default=None,
                        help="element grid NEX,NEY,NEZ (default: each schedule's benchmark grid)")
    parser.add_argument("--out", type=Path, default=Path("results/profile"), help="output directory")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per (path, order)")
    parser.set_defaults(func=run)


def _sections(ncu: str) -> list[str]:
    listing = subprocess.run([ncu, "--list-sections"], capture_output=True, text=True, timeout=120)
    have = available_sections(listing.stdout)
    return [s for s in SECTIONS if s in have] or ["SpeedOfLight"]


def run(args: argparse.Namespace) -> int:
    from composer.paths.registry import path_class

    if args.grid is not None and len(args.grid) != 3:
        raise ComposerError("--grid needs three integers NEX,NEY,NEZ")
    for name in args.paths:
        cls = path_class(name)
        for order in args.orders:
            cls.check_order(order)
    ncu = find_ncu()
    sections = _sections(ncu)
    args.out.mkdir(parents=True, exist_ok=True)
    summary_path = args.out / SUMMARY
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    console = Console(stderr=True)
    for order in args.orders:
        for name in args.paths:
            key = f"{name}@p{order}"
            if key in summary:
                console.print(f"[dim]{key}: already profiled, skipped[/dim]")
                continue
            log = args.out / f"{name}-p{order}.csv"
            target = [sys.executable, "-m", "composer.profile.target", name, str(order),
                      *(str(g) for g in (args.grid or []))]
            console.print(f"profiling {key} ...")
            proc = subprocess.run(ncu_command(ncu, sections, log, target), capture_output=True,
                                  text=True, timeout=args.timeout)
            if proc.returncode != 0 or not log.exists():
                raise ComposerError(f"ncu failed for {key} (exit {proc.returncode}): "
                                    f"{(proc.stderr or proc.stdout)[-2000:]}")
            kernels = [summarize(row).as_dict() for row in parse_raw_csv(log.read_text())]
            summary[key] = {"path": name, "order": order, "sections": sections, "kernels": kernels}
            atomic_write_text(summary_path, json.dumps(summary, indent=1))
            _print(console, key, kernels)
    return 0


def _fmt(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def _print(console: Console, key: str, kernels: list[dict[str, Any]]) -> None:
    table = Table(title=key)
    for col in ("kernel", "µs", "DRAM TB/s", "regs", "occ %", "units %", "pipes %", "binding"):
        table.add_column(col)
    for k in kernels:
        units = " ".join(f"{n} {v:.0f}" for n, v in k["units_pct"].items())
        pipes = " ".join(f"{n} {v:.0f}" for n, v in list(k["pipes_pct"].items())[:2])
        table.add_row(k["kernel"][:40], _fmt(k["duration_us"], ".1f"), _fmt(k["dram_tbps"], ".2f"),
                      _fmt(k["registers"]), _fmt(k["occupancy_achieved_pct"]), units, pipes, k["binding"])
    console.print(table)
