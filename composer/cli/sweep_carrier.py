"""``composer sweep-carrier``: every legal GEMM_FUSED setting of one order (carrier, fold, flux
source, carrier tile), each validated on the GPU against the reference on the point-varying input,
the validated ones timed in interleaved rounds; the fastest written into ``[paths.GEMM_FUSED]``."""

from __future__ import annotations

import argparse
import os
import json
from pathlib import Path
from typing import Any, Callable

from composer.cli.arguments import positive_int
from composer.epilogues.carrier_sweep import (Candidate, build_command, candidates, not_built_note, sweep,
                                              with_build, write_winner)
from composer.errors import ComposerError
from composer.runtime.manifest import BUILD_DIR_ENV

#: What `composer report` recognises a carrier sweep's report by (composer.report.sources).
CARRIER_SWEEP_SCHEMA = "composer.carrier-sweep"
DEFAULT_ROUNDS = 5
DEFAULT_CALLS = 20
DEFAULT_ARCH = "sm_90"  # the arch --dry-run lists for when no GPU says otherwise


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep-carrier", help="choose GEMM_FUSED's carrier, fold, flux source and carrier tile by measurement (GPU)",
        description="Lists every legal GEMM_FUSED setting of the order (carrier x, y or z; the fold with z; "
        "the flux from arrays, formed in the mainloop at the fragment loads or once per staged element; the schedule's carrier tile and a few alternatives; with "
        "--tiles the schedule's setting on every carrier tile and MMA shape), "
        "validates each built one against the NumPy reference on the point-varying input, times the "
        "validated ones in interleaved rounds (median of device time per call) and writes the fastest "
        "into the schedule's [paths.GEMM_FUSED] table.")
    parser.add_argument("--order", "-p", type=positive_int, required=True, metavar="P")
    parser.add_argument("--mma", default=None, metavar="SHAPE", help="default: GEMM_FUSED's shape of the schedule")
    parser.add_argument("--arch", default=None, metavar="sm_XX",
                        help=f"with --dry-run: the target to list for (default {DEFAULT_ARCH}); else the GPU's")
    parser.add_argument("--build-dir", default=None, metavar="DIR", help="composer build output (default: $COMPOSER_BUILD_DIR, else build/<arch>)")
    parser.add_argument("--rounds", type=positive_int, default=DEFAULT_ROUNDS)
    parser.add_argument("--calls", type=positive_int, default=DEFAULT_CALLS, help="tendency calls per sample")
    parser.add_argument("--schedules-dir", default=None, metavar="DIR",
                        help="directory whose pNNNN.toml to write (default: the user schedules directory, "
                        "$COMPOSER_SCHEDULES or ~/.config/composer/schedules); a missing file starts as a "
                        "copy of the schedule in use")
    parser.add_argument("--tiles", action="store_true",
                        help="the schedule's carrier, fold and flux only, with every carrier tile and MMA shape "
                        "(cuBLAS's tiles, the schedule tile's neighbourhood; built by composer build "
                        "--fused-variants tiles)")
    parser.add_argument("--async-epilogue", action="store_true",
                        help="with --tiles: also the carriers whose epilogue runs on warps of its own "
                        "(async_epilogue_tiles 4 and 8; built by --fused-variants tiles; not yet run on a GPU)")
    parser.add_argument("--only", action="append", default=None, metavar="TEXT",
                        help="keep only the candidates whose label contains TEXT (repeatable: any of them), "
                        "and the schedule's own setting as the reference (e.g. --only e64s at an order "
                        "whose whole tile sweep takes minutes)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="also write the JSON report (candidates, verdicts, medians, winner) to FILE, atomically")
    parser.add_argument("--dry-run", action="store_true", help="list the candidates and which are built; no GPU")
    parser.set_defaults(func=run)


def gpu_steps(order: int, build_dir: str, calls: int) -> tuple[Callable, Callable, Callable[[], None]]:
    """(validate, measure, close) on the GPU (``composer.bench.resident``): validation on the
    schedule's validation grid with its tolerance, timing on the benchmark grid (events around
    ``calls`` launches after a warm-up), GEMM_FUSED with each candidate's options."""
    from composer.bench.resident import resident_steps

    return resident_steps(order, calls, lambda candidate: ("GEMM_FUSED", {"build_dir": build_dir,
                                                                         **candidate.options()}))


def selected(cands: list[Candidate], only: list[str], paths: Any, order: int,
             mma: str | None = None) -> list[Candidate]:
    """The schedule's own setting on its own tile first (the reference every other time is read
    against), then the candidates whose label contains any of ``only``; none matching is an error."""
    from composer.epilogues.settings import fused_settings

    own = fused_settings(order, paths, {"mma": mma} if mma else {})
    kept = [c for c in cands if any(text in c.label for text in only)]
    if not kept:
        raise ComposerError(f"--only {' '.join(only)}: no candidate of p={order} matches; "
                            f"composer sweep-carrier --order {order} --dry-run (without --only) lists their labels")
    reference = [c for c in cands if c.shipped and c.mma == "" and (c.carrier, c.fold, c.flux)
                 == (own.carrier, own.fold, own.flux)]
    if not reference or not reference[0].runnable:
        raise ComposerError(f"p={order}: the schedule's own GEMM_FUSED setting, the reference of --only, is not "
                            "built; --dry-run lists what is missing")
    return reference[:1] + [c for c in kept if c not in reference]


def listing(cands: list[Candidate], command: str) -> list[dict[str, Any]]:
    """Each candidate's label and state: runnable, skipped (why) or not built (what to run)."""
    rows = []
    for c in cands:
        state = ("skipped: " + c.skipped if c.settings is None
                 else not_built_note(c, command) if c.missing else "built")
        rows.append({"candidate": c.label, "tile": dict(c.tile), "state": state})
    return rows


def run(args: argparse.Namespace, steps: Callable[[int, str, int], tuple[Callable, Callable, Callable]] = gpu_steps) -> int:
    """``steps`` is the GPU seam (tests pass fakes): ``(order, build_dir, calls) -> (validate,
    measure, close)``."""
    from composer.arch.mma import mma_shape
    from composer.config.schedule_files import writable_schedule_file
    from composer.config.schedules import load_schedule
    from composer.runtime.manifest import read_manifest

    if args.mma is not None:
        mma_shape(args.mma)
    paths = load_schedule(args.order).paths  # an unknown order fails here, before the GPU is touched
    arch = args.arch
    if not args.dry_run:
        from composer.runtime import gpu_available

        if steps is gpu_steps and not gpu_available():
            raise ComposerError("composer sweep-carrier validates and times on a GPU, and none is usable here; "
                                "--dry-run lists the candidates without one")
        if steps is gpu_steps:
            from composer.runtime.device import ensure_context

            gpu_arch = ensure_context(None).arch
            if arch is not None and arch != gpu_arch:
                raise ComposerError(f"--arch {arch}: this GPU is {gpu_arch}; leave --arch out to sweep on it")
            arch = gpu_arch
    arch = arch or DEFAULT_ARCH
    build_dir = args.build_dir or os.environ.get(BUILD_DIR_ENV) or str(Path("build") / arch)
    manifest = Path(build_dir) / "manifest.json"
    entries = read_manifest(manifest) if manifest.is_file() else []
    tiles_only = getattr(args, "tiles", False)
    cands = with_build(candidates(args.order, paths, arch, args.mma, tiles_only=tiles_only,
                                  async_epilogue=getattr(args, "async_epilogue", False)), entries, arch)
    only = getattr(args, "only", None)
    if only:
        cands = selected(cands, only, paths, args.order, args.mma)
        if not args.dry_run and not any(c.runnable for c in cands[1:]):
            states = "; ".join(f"{c.label}: {c.skipped or ('missing ' + ', '.join(c.missing))}" for c in cands[1:])
            raise ComposerError(f"--only {' '.join(only)}: no matching candidate can run ({states}); "
                                "nothing timed or written")
    mma = next((c.settings.mma for c in cands if c.settings is not None), args.mma or "?")
    command = build_command(args.order, arch, mma, build_dir, "tiles" if tiles_only else "all")
    report: dict[str, Any] = {"schema": CARRIER_SWEEP_SCHEMA, "order": args.order, "arch": arch,
                              "build_dir": build_dir, "candidates": listing(cands, command)}
    if args.dry_run:
        print(json.dumps(report, indent=2))
        return 0
    if not any(c.runnable for c in cands):
        raise ComposerError(f"p={args.order}: no GEMM_FUSED candidate is built in {build_dir}; run: {command}")
    validate, measure, close = steps(args.order, build_dir, args.calls)
    try:
        result = sweep(cands, validate, measure, args.rounds)
    finally:
        close()
    from datetime import datetime, timezone

    report.update({"validation": {k: {"passed": ok, "measured": m} for k, (ok, m) in result.verdicts.items()},
                   "medians_s": result.medians, "winner": result.winner.label if result.winner else None,
                   "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    print(json.dumps(report, indent=2))
    if result.winner is None:
        raise ComposerError(f"p={args.order}: no GEMM_FUSED candidate passed validation; nothing written")
    target = writable_schedule_file(args.order, args.schedules_dir)
    write_winner(target, result.winner)
    print(f"wrote {result.winner.label} to {target}")
    if getattr(args, "out", None) is not None:  # last: a campaign takes the file as "this step is done"
        from composer.fileio import atomic_write_text

        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, json.dumps({**report, "written_to": str(target)}, indent=2) + "\n")
    return 0
