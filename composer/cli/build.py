"""``composer build``: cross-compile the kernels of a configuration (no GPU needed)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from composer.build import build, plan
from composer.build.plan import BUILDABLE_PATHS, DEFAULT_PATHS, FUSED_VARIANTS
from composer.cli.arguments import csv_list, positive_int
from composer.errors import ComposerError
from composer.paths.registry import paths_with


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "build", help="cross-compile CuTe DSL GEMMs and NVRTC kernels into CUBINs + manifest",
        description="Compile every kernel the given orders and paths need for ARCH into BUILD_DIR "
        "(CUBINs and manifest.json) without a GPU. Up-to-date kernels are reused; missing, corrupt "
        "or stale ones are rebuilt.")
    parser.add_argument("--arch", required=True, metavar="sm_XX", help="target, e.g. sm_80, sm_90, sm_100")
    parser.add_argument("--mma", default=None, metavar="SHAPE",
                        help="FP64 MMA shape of the GEMM_CUTE kernels: 8x8x4 (all), 16x8x4, 16x8x8, "
                             "16x8x16 (sm_90+); default: the shape each order's schedule runs "
                             "GEMM_CUTE with (the fused paths take theirs from their schedules)")
    parser.add_argument("--orders", type=csv_list(positive_int), default=None, metavar="P[,P...]",
                        help="orders to build (default: every scheduled order)")
    parser.add_argument("--paths", default=",".join(DEFAULT_PATHS), metavar="NAME[,NAME...]",
                        help=f"paths whose kernels to build: {', '.join(BUILDABLE_PATHS)} "
                             f"(default: {','.join(DEFAULT_PATHS)})")
    parser.add_argument("--fused-variants", choices=FUSED_VARIANTS, default="schedule",
                        help="GEMM_FUSED: the schedule's carrier, fold and flux source; every legal one "
                             "(all); or the schedule's with every carrier tile and MMA shape the carrier sweep "
                             "tries (tiles; composer sweep-carrier --tiles times them; default: schedule)")
    parser.add_argument("--machine", default=None, metavar="NAME",
                        help="build the schedules as machine NAME runs them (its overlay's path tables, "
                             "schedules/machines/NAME; default: $COMPOSER_SCHEDULE_MACHINE, else the generic ones)")
    parser.add_argument("--out", default=None, metavar="BUILD_DIR", help="output (default: build/<arch>)")
    parser.add_argument("--force", action="store_true", help="recompile everything")
    parser.add_argument("--json", action="store_true", help="print a machine-readable report")
    parser.set_defaults(func=run)


def other_compiler_tables(jobs: list) -> list[str]:
    """``"FUSED_TC p=31 (NVRTC 13.5)"`` for every fused table of ``jobs`` whose ``nvrtc`` differs from
    the loaded NVRTC: its kernels built here are not the ones it was measured with."""
    from composer.fused.config import fused_config
    from composer.runtime.nvrtc import nvrtc_version

    here = "{}.{}".format(*nvrtc_version())
    tables = sorted({(j.order, j.spec["variant"]) for j in jobs if j.kind == "fused" and j.spec.get("variant")})
    wanted = [(order, variant, fused_config(variant, order).nvrtc) for order, variant in tables]
    return [f"{variant} p={order} (NVRTC {nvrtc})" for order, variant, nvrtc in wanted if nvrtc and nvrtc != here]


def run(args: argparse.Namespace) -> int:
    """Build with the schedules of ``--machine`` (else of the active machine: a machine overlay changes
    which kernels a fused table or a GEMM_FUSED carrier needs)."""
    from composer.config.machine_schedules import active_machine, using_machine

    with using_machine(args.machine if args.machine is not None else active_machine(), "--machine"):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path("build") / args.arch
    paths = [p for p in args.paths.split(",") if p]
    readers = [cls.name for cls in paths_with(reads_mma=True)]
    if args.mma is not None and not any(p.upper() in readers for p in paths):
        print(f"note: --mma applies to {', '.join(readers)} only; ignored for {','.join(paths)}", file=sys.stderr)
    try:
        jobs = plan(args.arch, args.mma, args.orders, paths, args.fused_variants)
        report = build(jobs, out, force=args.force,
                       log=None if args.json else lambda msg: print(msg, file=sys.stderr))
    except ImportError as exc:
        raise ComposerError(f"compiling CuTe DSL kernels needs nvidia-cutlass-dsl "
                            f"(pip install 'nvidia-cutlass-dsl[cu13]'): {exc}") from exc
    other = other_compiler_tables(jobs)
    if other:
        print(f"note: {len(other)} fused tables name another NVRTC than this one "
              f"({', '.join(other[:4])}{', ...' if len(other) > 4 else ''}): a run loads their kernels "
              "from this directory only when built by that compiler, else it compiles them itself",
              file=sys.stderr)
    if args.json:
        print(json.dumps({"out": str(out), "manifest": str(report.manifest), "built": report.built,
                          "reused": report.reused, "reasons": report.reasons,
                          "other_compiler_tables": other, "seconds": round(report.seconds, 3)}, indent=2))
    else:
        print(f"{out}: {len(report.built)} compiled, {len(report.reused)} up to date "
              f"({report.seconds:.1f} s); manifest {report.manifest}")
    return 0
