"""``composer profile``: Nsight Compute on one tendency call per (path, order); the binding resource."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from composer.fileio import atomic_write_text
from composer.cli import output
from composer.cli.arguments import csv_list, options_by_path, parse_grid, path_option, positive_float, positive_int
from composer.errors import ComposerError
from composer.model.counters import REQUESTED_METRICS
from composer.profile.ncu import REPLAY_MODES, SECTIONS, UNIT_BREAKDOWNS, available_sections, find_ncu, ncu_command, parse_raw_csv, summarize

SUMMARY = "profile.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile", help="Nsight Compute metrics of one tendency call per path and order (needs a GPU and ncu)",
        description="Runs each (path, order) in its own process under ncu (--clock-control none), "
        "after one untimed warm-up call, and reduces every kernel of the profiled call to its time, "
        "DRAM traffic, unit and pipe utilization, occupancy and top stall reasons, naming the binding "
        "resource. Raw CSV per pair and a JSON summary go to --out; finished pairs are skipped on a rerun.")
    parser.add_argument("--paths", type=csv_list(str), required=True, help="comma-separated paths")
    parser.add_argument("--orders", type=csv_list(positive_int), required=True, help="comma-separated orders")
    parser.add_argument("--grid", type=parse_grid, default=None, metavar="N|NX,NY,NZ",
                        help="element grid (default: each schedule's benchmark grid)")
    parser.add_argument("--out", type=Path, default=Path("results/profile"), help="output directory")
    parser.add_argument("--timeout", type=positive_float, default=600.0, help="seconds per (path, order)")
    parser.add_argument("--option", dest="options", action="append", type=path_option, default=None,
                        metavar="PATH.KEY=VALUE", help="a path option, repeatable (e.g. GEMM_CUTE.mma=8x8x4)")
    parser.add_argument("--sections-only", action="store_true",
                        help="collect ncu's sections without the model's extra counters (what composer model "
                        "reads; a profile made so cannot calibrate the model): to tell a counter that fails "
                        "from a replay that fails")
    parser.add_argument("--replay", choices=REPLAY_MODES, default=None,
                        help="ncu's replay mode: kernel (ncu's default: each kernel rerun per pass with its "
                        "memory saved and restored) or application (the profiled call rerun per pass)")
    parser.add_argument("--sms", type=positive_int, default=None,
                        help="run in a green context of N SMs (even, >= 2); the active SM count read "
                             "back with %%smid is recorded in the summary")
    parser.add_argument("--json", action="store_true",
                        help="print the summary of the requested pairs as JSON (progress stays on stderr)")
    parser.set_defaults(func=run)


def _sections(ncu: str) -> list[str]:
    listing = subprocess.run([ncu, "--list-sections"], capture_output=True, text=True, timeout=120)
    have = available_sections(listing.stdout)
    return [s for s in SECTIONS if s in have] or ["SpeedOfLight"]


def run(args: argparse.Namespace) -> int:
    from composer.paths.registry import path_class, requested_path_options
    from composer.runtime import NoGpuError, device_count

    for name in args.paths:
        cls = path_class(name)
        for order in args.orders:
            cls.check_order(order)
    options = requested_path_options(options_by_path(args.options), args.paths)
    ncu = find_ncu()
    if device_count() == 0:  # raises NoGpuError without a driver
        raise NoGpuError("NVIDIA driver present but no CUDA device found")
    if args.sms is not None:
        _check_sms(args.sms)
    sections = _sections(ncu)
    args.out.mkdir(parents=True, exist_ok=True)
    summary_path = args.out / SUMMARY
    summary = _read_summary(summary_path)
    console = output.console(stderr=True)
    for order in args.orders:
        for name in args.paths:
            key = f"{name}@p{order}"
            if key in summary:
                done_sms = (summary[key].get("sms") or {}).get("active")
                if done_sms != args.sms:
                    raise ComposerError(f"{summary_path} holds {key} at {done_sms or 'all'} SMs, not "
                                        f"{args.sms or 'all'}; profile into another --out")
                console.print(f"[dim]{key}: already profiled, skipped[/dim]")
                continue
            log = args.out / f"{name}-p{order}.csv"
            target = [sys.executable, "-m", "composer.profile.target", name, str(order),
                      *(str(g) for g in (args.grid or []))]
            smid_file = args.out / f"{name}-p{order}.smid.json"
            if args.sms is not None:
                target += ["--sms", str(args.sms), "--smid-out", str(smid_file)]
            for option, value in options.get(path_class(name).name, {}).items():
                target += ["--option", f"{option}={value}"]
            console.print(f"profiling {key} ...")
            metrics = () if args.sections_only else (*REQUESTED_METRICS, *UNIT_BREAKDOWNS)
            proc, replay = _run_ncu(ncu, sections, log, target, metrics, args.replay, args.timeout, key, console)
            kernels = [summarize(row).as_dict() for row in parse_raw_csv(log.read_text())]
            summary[key] = {"path": name, "order": order, "sections": sections, "kernels": kernels,
                            "model_counters": not args.sections_only, "replay": replay,
                            "options": options.get(path_class(name).name, {}),
                            "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}  # newest wins in reports
            if args.sms is not None:
                summary[key]["sms"] = _active_sms(smid_file, args.sms, key)
            atomic_write_text(summary_path, json.dumps(summary, indent=1))
            if not args.json:
                _print(console, key, kernels)
    if args.json:
        keys = [f"{name}@p{order}" for order in args.orders for name in args.paths]
        print(json.dumps({key: summary[key] for key in keys}, indent=1))
    return 0


#: What ncu logs when the profiled process itself failed (sessions 6 and 7: at p = 63 under kernel
#: replay, with no Python traceback from the target).
TARGET_FAILED = "The application returned an error code"


def _run_ncu(ncu: str, sections: list[str], log: Path, target: list[str], metrics: tuple[str, ...],
             replay: str | None, timeout: float, key: str, console: Console) -> tuple[subprocess.CompletedProcess, str]:
    """ncu on ``target``: (the finished process, the replay mode that worked). Without ``--replay``,
    kernel replay first (ncu's default) and, when the profiled process itself fails under it,
    application replay (the call rerun once per pass, no per-kernel memory save and restore:
    slower, and the path's kernels must give the same counters each run, which they do); with
    ``--replay`` that mode alone. A failure is one line with what ncu and the target said."""
    modes = [replay] if replay is not None else ["kernel", "application"]
    failures = []
    for i, mode in enumerate(modes):
        try:
            proc = subprocess.run(ncu_command(ncu, sections, log, target, metrics, None if mode == "kernel" and
                                              replay is None else mode),
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ComposerError(f"ncu on {key} ({mode} replay) ran past --timeout {timeout:g} s; "
                                "give it more with --timeout") from None
        if proc.returncode == 0 and log.exists():
            return proc, mode
        text = _failure_text(proc, log)
        failures.append(f"{mode} replay: exit {proc.returncode}: {text}")
        if i + 1 < len(modes) and _crashed_natively(proc, log):
            console.print(f"[yellow]{key}: the profiled process failed under kernel replay; "
                          f"retrying with application replay[/yellow]")
            continue
        break
    raise ComposerError(f"ncu failed for {key}: " + " || ".join(failures))


def _crashed_natively(proc: subprocess.CompletedProcess, log: Path) -> bool:
    """ncu says the profiled process failed, and the process left no Python traceback (a failure of
    our code, a missing build say, fails the same way under any replay: not worth a second run)."""
    said = log.read_text(errors="replace") if log.exists() else ""
    said += proc.stdout or ""
    return TARGET_FAILED in said and "Traceback (most recent call last)" not in (proc.stderr or "") + said


def _failure_text(proc: subprocess.CompletedProcess, log: Path) -> str:
    """What ncu and its target said: with ``--log-file`` ncu writes its own errors (==ERROR==,
    ==WARNING==) into the log, not to stderr, so the log's non-CSV lines come first, then the
    target's stderr; one line, the tail only."""
    said = []
    if log.exists():
        said += [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("==")]
    said += (proc.stderr or proc.stdout or "").strip().splitlines()
    text = " | ".join(ln.strip() for ln in said if ln.strip()) or "no message from ncu or its target"
    return text[-1500:]


def _check_sms(sms: int) -> None:
    """Refuse an SM count no green context of this device can have, before any ncu run."""
    from composer.runtime import Device
    from composer.runtime.green import check_sm_count

    device = Device()
    try:
        check_sm_count(sms, device.sm_count)
    finally:
        device.close()


def _active_sms(smid_file: Path, requested: int, key: str) -> dict[str, int]:
    """The target's %smid read-back; an error when the green context ran on another SM count."""
    try:
        sms = json.loads(smid_file.read_text())
    except (OSError, ValueError) as exc:
        raise ComposerError(f"{key}: no active SM count from the profiled process ({exc})") from None
    if sms.get("active") != requested:
        raise ComposerError(f"{key}: asked for {requested} SMs but the kernels ran on {sms.get('active')} "
                            "(%smid); the profile does not count as restricted")
    return {"requested": requested, "active": int(sms["active"])}


def _read_summary(path: Path) -> dict[str, Any]:
    """The summary of earlier runs ({} when there is none); a clear error when it is corrupt."""
    if not path.exists():
        return {}
    try:
        summary = json.loads(path.read_text())
    except ValueError as exc:
        raise ComposerError(f"{path}: not valid JSON ({exc}); remove it to profile afresh") from None
    if not isinstance(summary, dict):
        raise ComposerError(f"{path}: expected a JSON object; remove it to profile afresh")
    return summary


def _fmt(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def _print(console: Console, key: str, kernels: list[dict[str, Any]]) -> None:
    table = output.table(("kernel", "µs", "DRAM TB/s", "regs", "occ %", "units %", "pipes %", "binding"),
                         title=key, right=("µs", "DRAM TB/s", "regs", "occ %"))
    for k in kernels:
        units = " ".join(f"{n} {v:.0f}" for n, v in k["units_pct"].items())
        pipes = " ".join(f"{n} {v:.0f}" for n, v in list(k["pipes_pct"].items())[:2])
        table.add_row(k["kernel"], _fmt(k["duration_us"], ".1f"), _fmt(k["dram_tbps"], ".2f"),
                      _fmt(k["registers"]), _fmt(k["occupancy_achieved_pct"]), units, pipes, k["binding"])
    console.print(table)
