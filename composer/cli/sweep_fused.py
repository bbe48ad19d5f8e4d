"""``composer sweep-fused``: tune the fused paths' schedule tables (check on the CPU, run on the
GPU, apply the measured winners to a schedules directory)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
from pathlib import Path
from typing import Any

from composer.fileio import atomic_write_text
from composer.cli.arguments import csv_list, fraction, non_negative_int, positive_float, positive_int
from composer.errors import ComposerError
from composer.fused.candidates import SUBSETS, check_subset


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep-fused", help="fused schedule candidates: check (CPU), run (GPU), apply (write winners)",
        description="check: compile every candidate of the chosen family through NVRTC (into "
        "$COMPOSER_CACHE_DIR, which the GPU machine can reuse), drop those that spill or miss their "
        "blocks per SM, write a plan. run: validate each planned candidate against the NumPy "
        "reference on the point-varying input at the benchmark grid, time it next to the schedule's "
        "own table and FUSED_DFMA, write OUT/sweep.json after each order. apply: write the fastest "
        "validated candidate per (order, variant) into the schedules when it beats the schedule's "
        "own table of the same run by more than --min-gain.")
    sub = parser.add_subparsers(dest="step", metavar="STEP", required=True)
    check = sub.add_parser("check", help="compile and filter candidates on the CPU; write the plan")
    check.add_argument("--orders", type=csv_list(positive_int), required=True)
    check.add_argument("--subset", default="all",
                       help=f"candidate family, or several joined by commas: {', '.join(SUBSETS)} (default: all)")
    check.add_argument("--only", default=None, metavar="REGEX",
                       help="keep the candidates whose label matches REGEX (and the schedule's own table)")
    check.add_argument("--plan", type=Path, default=Path("sweep_plan.json"))
    check.add_argument("--workers", type=positive_int, default=2)
    check.add_argument("--max-spill", type=non_negative_int, default=None, metavar="BYTES",
                       help="spilled bytes per thread a kept candidate may have (default: 16)")
    check.add_argument("--pin-nvrtc", action="store_true",
                       help="every candidate's table names this NVRTC, whose CUBINs stay in $COMPOSER_CACHE_DIR: "
                            "carry that directory and `run` times them on the GPU machine whatever NVRTC it has "
                            "(the schedule's table as shipped is timed too, as \"shipped\")")
    check.add_argument("--machine", default=None, metavar="NAME",
                       help="plan against the tables machine NAME runs (its overlay, schedules/machines/NAME; default: "
                            "$COMPOSER_SCHEDULE_MACHINE, else the generic tables): what `apply --overlay` needs")
    check.add_argument("--json", action="store_true",
                       help="print the plan's summary as JSON (per order and variant: label, kept, registers, spills)")
    run = sub.add_parser("run", help="validate and time the planned candidates (needs a GPU)")
    run.add_argument("--orders", type=csv_list(positive_int), required=True)
    run.add_argument("--plan", type=Path, required=True)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--budget", type=positive_float, default=300.0, help="seconds; no new order starts after it")
    from composer.fused.sweep import TIMINGS

    run.add_argument("--timing", choices=TIMINGS, default=TIMINGS[0],
                     help="calls: back-to-back tendency calls (default); stages: each call followed by the RK "
                          "update, as composer bench runs them (what a descending table's gain depends on)")
    apply = sub.add_parser("apply", help="write the winners of a run into the schedules")
    apply.add_argument("sweep_json", type=Path)
    apply.add_argument("--schedules-dir", "--schedules", dest="schedules_dir", type=Path, default=None,
                       metavar="DIR", help="directory to write into (default: the user schedules directory, "
                       "$COMPOSER_SCHEDULES or ~/.config/composer/schedules); an order without a file there "
                       "gets a copy of the schedule in use first")
    apply.add_argument("--overlay", action="store_true",
                       help="write the winners into the machine overlay of the GPU the run was timed on "
                            "(DIR/machines/<machine>/pNNNN.toml, applied on that machine only; needs "
                            "--schedules-dir, e.g. schedules in a checkout)")
    apply.add_argument("--min-gain", type=fraction, default=None,
                       help="fraction in [0, 1), not percent: 0.01 is 1 %% (default: 0.02)")
    apply.add_argument("--date", default=None, help="date for the notes (default: today, UTC)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from composer.fused import sweep

    if args.step == "check":
        check_subset(args.subset)
        if args.only is not None:
            try:
                re.compile(args.only)
            except re.error as exc:
                raise ComposerError(f"--only {args.only!r}: not a regular expression ({exc})") from None
        spill = sweep.MAX_SPILL if args.max_spill is None else args.max_spill
        from composer.config.machine_schedules import active_machine, using_machine

        machine = args.machine if args.machine is not None else active_machine()
        with using_machine(machine, "--machine"):
            # the checking workers are other processes: they take the machine from the environment
            os.environ["COMPOSER_SCHEDULE_MACHINE"] = (machine or "generic").lower()
            plan = sweep.check(args.orders, workers=args.workers, subset=args.subset, max_spill=spill, only=args.only,
                               pin_nvrtc=args.pin_nvrtc)
        atomic_write_text(args.plan, json.dumps(plan, indent=1))
        kept = sum(row["ok"] for rows in plan.values() for v in rows.values() for row in v)
        if args.json:
            summary = {order: {variant: [{"label": row["label"], "ok": row["ok"],
                                          "registers": [k[0] for k in row["kernels"]],
                                          "spill_bytes": [k[1] for k in row["kernels"]]} for row in rows]
                               for variant, rows in variants.items() if rows}
                       for order, variants in plan.items()}
            print(json.dumps({"plan": str(args.plan), "kept": kept, "orders": summary}, indent=1))
        else:
            print(f"{args.plan}: {kept} candidates kept")
        return 0
    if args.step == "run":
        from composer.runtime import gpu_available

        if not gpu_available():
            raise ComposerError("composer sweep-fused run validates and times on a GPU, and none is "
                                "usable here; `check` and `apply` run without one")
        if not args.plan.is_file():
            raise ComposerError(f"{args.plan}: no such plan; make one with `composer sweep-fused check`")
        sweep.run(str(args.out), args.orders, args.budget, str(args.plan), timing=args.timing)
        return 0
    if not args.sweep_json.is_file():
        raise ComposerError(f"{args.sweep_json}: no such sweep log")
    try:
        json.loads(args.sweep_json.read_text())
    except ValueError as exc:
        raise ComposerError(f"{args.sweep_json}: not a sweep log (invalid JSON: {exc})") from None
    from composer.config.schedules import user_dir

    if args.overlay and args.schedules_dir is None:
        raise ComposerError("--overlay writes into the shipped schedules directory: name it with --schedules-dir "
                            "(schedules in a checkout); the user schedules directory already is one machine's")
    directory = args.schedules_dir or user_dir()
    date = args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    gain = sweep.MIN_GAIN if args.min_gain is None else args.min_gain
    changed = sweep.apply(str(args.sweep_json), str(directory), date, gain, overlay=args.overlay)
    print("\n".join(changed + [f"written into {directory}"]) if changed
          else "no candidate beat its schedule's own table")
    return 0
