"""``composer campaign``: the whole study on a GPU — every path at every order, the one-axis
ablations, the scheduler's overlap, profiles and the balance axis — as one resumable command that
prints its plan and estimate first, stops cleanly at ``--budget-s`` and writes the crossover map."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from composer.cli.arguments import csv_list, positive_float, positive_int
from composer.errors import ComposerError


class CampaignNeedsGpu(ComposerError):
    """No GPU: say what the command can do without one."""

    hint = ("without one, `composer campaign --dry-run --out DIR` prints the plan and its estimate, "
            "`composer campaign --write-crossover --predictions P.json --out DIR` writes a model prediction's "
            "choices into the crossover map, and `composer report DIR --out REPORT` renders what DIR holds")


def register(subparsers: Any) -> None:
    from composer.campaign.plan import AXES

    parser = subparsers.add_parser(
        "campaign", help="the whole study on a GPU, resumable, under a time budget; writes the crossover map",
        description="Plans the study as steps (composer bench per axis at the schedules' Table S29 sizes, composer "
        "graph --measure, composer profile, the balance axis with bench --sms), prints the plan and a time estimate, "
        "then runs the steps in order with progress; every timing is preceded by the field check. Results, logs and "
        "the journal go to --out; rerun the same command to resume. At the end (or at the budget) the fastest path "
        "per order goes into the crossover map that path='auto' reads.")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="campaign directory (resumable)")
    parser.add_argument("--orders", type=csv_list(positive_int), default=None,
                        help="comma-separated orders (default: every order with a schedule)")
    parser.add_argument("--axes", default="all", metavar="all|" + ",".join(AXES),
                        help="axes to run (default: all that this installation can run)")
    parser.add_argument("--paths", type=csv_list(str), default=None,
                        help="paths of the paths axis (default: every registered path but the CuPy baseline)")
    parser.add_argument("--rounds", type=positive_int, default=None,
                        help="interleaved rounds per sweep (default: the paper's, 6 at p <= 511, 3 above)")
    parser.add_argument("--budget-s", type=positive_float, default=None, metavar="S",
                        help="stop cleanly after S seconds (no step starts that would not fit)")
    parser.add_argument("--sms-counts", type=csv_list(positive_int), default=None, metavar="N,...",
                        help="active SM counts of the balance axis (default: even counts near 75/50/40/25 %%)")
    parser.add_argument("--machine", default=None, metavar="NAME",
                        help="machine-table entry (default: the one the GPU is; without a GPU h200)")
    parser.add_argument("--predictions", type=Path, action="append", default=[], metavar="P.json",
                        help="`composer model predict` file: its choices fill the crossover map where nothing "
                             "was measured (repeatable)")
    parser.add_argument("--crossover", type=Path, default=None, metavar="FILE",
                        help="crossover map to write (default: crossover.toml in the user schedules directory)")
    parser.add_argument("--retry-failed", action="store_true", help="rerun steps that failed in an earlier session")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and its estimate only (no GPU)")
    parser.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="with --write-crossover: skip results matching GLOB, as composer report --exclude "
                        "(repeatable)")
    parser.add_argument("--write-crossover", action="store_true",
                        help="only write the crossover map from DIR's measurements and --predictions (no GPU)")
    parser.set_defaults(func=run)


def _device_machine(name: str | None) -> tuple[Any, str]:
    """The GPU (None for a dry run) and the machine-table entry it is."""
    from composer.arch.machines import DEFAULT_MACHINE
    from composer.config.crossover import machine_of_device
    from composer.runtime import Device, NoGpuError

    try:
        device = Device()
    except NoGpuError as exc:
        raise CampaignNeedsGpu(f"composer campaign needs an NVIDIA GPU ({str(exc).split(' (')[0]})") from None
    return device, name or machine_of_device(device) or DEFAULT_MACHINE


def run(args: argparse.Namespace) -> int:
    from composer.arch.machines import DEFAULT_MACHINE, get_machine
    from composer.campaign.decide import crossover_entries
    from composer.campaign.estimate import Estimator
    from composer.campaign.journal import Journal
    from composer.campaign.plan import build_plan, detect_capabilities, parse_axes
    from composer.campaign.runner import print_plan, run_campaign
    from composer.config.crossover import read_or_empty, write_crossover
    from composer.config.schedules import available_orders

    axes = parse_axes(args.axes)
    orders = args.orders or available_orders()
    unknown = sorted(set(orders) - set(available_orders()))
    if unknown:
        raise ComposerError(f"no schedule for orders {unknown}; available: {available_orders()}")
    for file in args.predictions:
        if not file.is_file():
            raise ComposerError(f"--predictions {file}: no such file")
    offline = args.dry_run or args.write_crossover
    device, name = (None, args.machine or DEFAULT_MACHINE) if offline else _device_machine(args.machine)
    machine = get_machine(name)
    gpu = getattr(device, "name", None)

    def write_map() -> tuple[Path | None, list[str]]:
        entries = crossover_entries(args.out, machine.name, gpu, args.predictions, exclude=tuple(args.exclude))
        if not entries:
            return None, ["crossover map: nothing measured or predicted yet; not written"]
        crossover = read_or_empty(args.crossover)
        for entry in entries:
            crossover = crossover.with_entry(entry)
        target = write_crossover(crossover, args.crossover)
        lines = [c.describe(gpu if c.decided == "measured" else None).removeprefix("auto: ")
                 for e in entries for c in e.orders.values()]
        return target, lines

    if args.write_crossover:
        if not Path(args.out).is_dir() and not args.predictions:
            raise ComposerError(f"--write-crossover: {args.out} is no results directory and no --predictions are "
                                "given: nothing to decide from")
        target, lines = write_map()
        for line in lines:
            print(line)
        if target is not None:
            print(f"crossover map: {target}")
        return 0
    plan = build_plan(orders, axes, machine, detect_capabilities(machine), paths=args.paths, rounds=args.rounds,
                      sm_counts=args.sms_counts)
    if not plan.steps:
        raise ComposerError("nothing to run: " + ("; ".join(plan.notes) or "no step in the plan"))
    if args.dry_run:
        estimator = Estimator(args.out, machine)
        print_plan(plan, {s.id: estimator.estimate(s) for s in plan.steps}, Journal.open(args.out), args.budget_s,
                   as_json=args.json)
        return 0
    from composer.campaign.execute import CliExecutor

    result = run_campaign(plan, args.out, CliExecutor(), machine, budget_s=args.budget_s, argv=list(sys.argv),
                          retry_failed=args.retry_failed, write_map=write_map)
    if result.failed:
        from composer.errors import CheckFailed

        raise CheckFailed(f"{len(result.failed)} campaign steps failed: {', '.join(result.failed)}")
    return 0
