"""``composer bench``: the paper's timing protocol over paths and orders, interleaved rounds."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from composer.arch.machines import DEFAULT_MACHINE
from composer.cli.arguments import csv_list, options_by_path, path_option, positive_int
from composer.config.crossover import expand_auto, is_auto
from composer.config.schedules import available_orders
from composer.errors import ComposerError
from composer.paths.registry import paths_with, requested_path_options

# the crossover the tool is for: the library path against the fused paths (a path that needs a
# `composer build` directory, GEMM_CUTE, is opt-in, and so is the CuPy baseline); GEMM first, so
# ratios divide by it
DEFAULT_PATHS = tuple(cls.name for cls in paths_with(needs_build=False) if cls.family != "baseline")
DEFAULT_ORDERS = (7, 15, 31, 63, 127, 255)
DEFAULT_ROUNDS = 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench", help="time paths with the paper's protocol (needs a GPU)",
        description="Per run: warm-up steps, then the step-loop wall time per RK stage (primary), "
        "the CUDA-event device time per tendency call and the end-to-end wall time per step, with "
        "NVML clocks and throttle reasons. Paths run in interleaved rounds; each (path, order) is "
        "validated on the point-varying input first. Results (JSONL runs, JSON/CSV/Markdown "
        "summaries, provenance) go to --out; an interrupted sweep resumes there.")
    parser.add_argument("--paths", type=csv_list(str), default=list(DEFAULT_PATHS),
                        help=f"comma-separated paths (default: {','.join(DEFAULT_PATHS)}); `auto`: the fastest "
                             "path of each order on this GPU from the crossover map (composer campaign writes it)")
    parser.add_argument("--orders", type=csv_list(positive_int), default=list(DEFAULT_ORDERS),
                        help=f"comma-separated orders (default: {','.join(map(str, DEFAULT_ORDERS))})")
    parser.add_argument("--rounds", type=positive_int, default=DEFAULT_ROUNDS, help="interleaved rounds (default: 3)")
    parser.add_argument("--graph", action="store_true", help="replay each RK stage as a CUDA graph (off in the paper)")
    parser.add_argument("--no-validate", dest="validate", action="store_false",
                        help="skip the field check before timing (timings then do not count)")
    parser.add_argument("--out", type=Path, default=Path("results/bench"), help="results directory (resumable)")
    parser.add_argument("--baseline", default=None, help="path the ratios divide by (default: the first path)")
    parser.add_argument("--option", dest="options", action="append", type=path_option, default=None,
                        metavar="PATH.KEY=VALUE", help="a path option, repeatable (e.g. GEMM_CUTE.mma=8x8x4)")
    parser.add_argument("--machine", default=None,
                        help="machine entry for the roof fractions (default: the GPU the run opens, identified "
                             f"in the machine table; {DEFAULT_MACHINE} where it is not there)")
    parser.add_argument("--sms", type=positive_int, default=None,
                        help="run in a green context of N SMs (even, >= 2): the balance axis; the "
                             "active SM count is read back with %%smid in every run and recorded")
    parser.add_argument("--json", action="store_true",
                        help="print the summary (OUT/summary.json) instead of the Markdown table; "
                             "progress and notes go to stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from composer.arch.machines import get_machine
    from composer.bench.results import ResultStore
    from composer.bench.runner import BenchPlan, run_sweep
    from composer.runtime.green import open_device

    unknown = sorted(set(args.orders) - set(available_orders()))
    if unknown:
        raise ComposerError(f"no schedule for orders {unknown}; available: {available_orders()}")
    # checked before the GPU is opened; with `auto` once its choices name the paths
    auto = any(is_auto(p) for p in args.paths)
    options = None if auto else requested_path_options(options_by_path(args.options), args.paths)
    machine = get_machine(args.machine) if args.machine else None  # a wrong name stops before the GPU opens
    _check_out_sms(Path(args.out), args.sms)
    device = open_device(args.sms)  # NoGpuError says what works without a GPU
    if machine is None:
        machine = roof_machine(device)
    paths, cells = expand_auto(args.paths, args.orders, device)  # prints each auto choice on stderr
    if options is None:
        options = requested_path_options(options_by_path(args.options), paths)
    plan = BenchPlan(paths=paths, orders=args.orders, rounds=args.rounds, graph=args.graph,
                     validate=args.validate, out_dir=args.out, baseline=args.baseline,
                     options=options, cells=cells)
    if not args.json:
        print(run_sweep(plan, machine, device))
        return 0
    with contextlib.redirect_stdout(sys.stderr):  # the sweep's notes must not mix into the JSON
        run_sweep(plan, machine, device)
    print((Path(args.out) / ResultStore.SUMMARY_JSON).read_text(), end="")
    return 0


def roof_machine(device: Any) -> Any:
    """The machine whose capacities the roof fractions divide by: the opened GPU's entry in the machine
    table (an H100's 3.35 TB/s, not the H200's 4.24), else the default machine with a note on stderr."""
    from composer.arch.machines import get_machine
    from composer.config.crossover import machine_of_device

    name = machine_of_device(device)  # the identification `composer campaign` and `path="auto"` use
    if name:
        return get_machine(name)
    print(f"note: {getattr(device, 'name', 'this GPU')} is not in the machine table: the roof fractions use "
          f"{DEFAULT_MACHINE}'s capacities (--machine names another)", file=sys.stderr)
    return get_machine(DEFAULT_MACHINE)


def _check_out_sms(out: Path, sms: int | None) -> None:
    """A results directory holds runs at one SM count: resuming it at another would mix them."""
    import json

    from composer.bench.results import ResultStore

    provenance = out / ResultStore.PROVENANCE
    if not provenance.is_file():
        return
    try:
        sessions = json.loads(provenance.read_text())["sessions"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # an unreadable provenance is the store's to report
    earlier = {(session.get("plan") or {}).get("sms") for session in sessions}
    if earlier and earlier != {sms}:
        shown = ", ".join(str(s or "all") for s in sorted(earlier, key=lambda s: s or 0))
        raise ComposerError(f"{out} holds runs at {shown} SMs, not {sms or 'all'}; give another --out")
