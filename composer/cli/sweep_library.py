"""``composer sweep-library``: time every CuTe-DSL/cuBLAS assignment of the three volume GEMMs
for one order (interleaved rounds, GPU needed) and write the winner into the schedule."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from composer.cli.arguments import positive_int
from composer.errors import ComposerError
from composer.gemm.cute.sweep import Assignment, SweepResult, sweep, write_assignment

DEFAULT_ROUNDS = 5
DEFAULT_CALLS = 20


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep-library", help="choose CuTe DSL or cuBLAS per volume GEMM by measurement (GPU)",
        description="Times the GEMM_CUTE tendency with each of the 8 assignments of the x, y, z "
        "GEMMs to {cute, cublas} in interleaved rounds (median of device time per call), and "
        "writes the fastest into the schedule's [paths.GEMM_CUTE] table.")
    parser.add_argument("--order", "-p", type=positive_int, required=True, metavar="P")
    parser.add_argument("--mma", default="16x8x4", metavar="SHAPE")
    parser.add_argument("--build-dir", default=None, metavar="DIR", help="composer build output")
    parser.add_argument("--rounds", type=positive_int, default=DEFAULT_ROUNDS)
    parser.add_argument("--calls", type=positive_int, default=DEFAULT_CALLS, help="tendency calls per sample")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--schedules-dir", default=None, metavar="DIR",
                        help="directory whose pNNNN.toml to write (default: the user schedules directory, "
                        "$COMPOSER_SCHEDULES or ~/.config/composer/schedules); a missing file starts as a "
                        "copy of the schedule in use")
    target.add_argument("--schedule-file", default=None, metavar="TOML", help="an existing file to write instead")
    parser.add_argument("--dry-run", action="store_true", help="measure and report, write nothing")
    parser.set_defaults(func=run)


def measure_on_gpu(order: int, mma: str, build_dir: str | None, calls: int):
    """A ``measure(assignment) -> seconds per tendency call`` on the schedule's benchmark grid."""
    from composer import dg
    from composer.config.schedules import load_schedule
    from composer.paths.gemm_cute import GemmCutePath
    from composer.paths.problem import DeviceProblem
    from composer.paths.timer import seconds_per_call
    from composer.runtime import Event
    from composer.runtime.device import ensure_context

    device = ensure_context(None)
    grid = load_schedule(order).benchmark.grid
    problem = DeviceProblem.upload(dg.make_fields(order, grid), order, grid, device)
    start, end = Event(device), Event(device)

    def measure(assignment: Assignment) -> float:
        path = GemmCutePath(problem, library=dict(assignment), mma=mma, build_dir=build_dir)
        try:
            return seconds_per_call(path, start, end, calls)
        finally:
            problem.stream.synchronize()
            path.close()

    return measure, problem


def run(args: argparse.Namespace) -> int:
    from composer.arch.mma import mma_shape
    from composer.config.schedules import load_schedule, writable_schedule_file

    mma_shape(args.mma)
    load_schedule(args.order)  # an unknown order fails here, before the GPU is touched
    try:
        measure, problem = measure_on_gpu(args.order, args.mma, args.build_dir, args.calls)
    except ImportError as exc:
        raise ComposerError(f"sweep-library needs the GPU runtime: {exc}") from exc
    try:
        result: SweepResult = sweep(measure, args.rounds)
    finally:
        problem.close()
    report = {"order": args.order, "mma": args.mma, "winner": result.winner,
              "medians_s": result.medians, "speedup_over_cublas": result.speedup_over()}
    print(json.dumps(report, indent=2))
    if not args.dry_run:
        target = (Path(args.schedule_file) if args.schedule_file
                  else writable_schedule_file(args.order, args.schedules_dir))
        if not target.is_file():
            raise ComposerError(f"{target}: schedule file not found; pass --schedule-file")
        write_assignment(target, dict(tuple(p.split("=")) for p in result.winner.split(",")), args.mma)
        print(f"wrote library = {result.winner} (mma {args.mma}) to {target}")
    return 0
