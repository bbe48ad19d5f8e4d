"""Measure each FP64 MMA shape's latency and issue interval with register-only loops (GPU)
(composer.bench.dmma_pipe): per shape the dependent latency, the shortest interval per
sub-partition and the DMMAs in flight it needs, one line each; with --json (and in --out) also
every (shape, chains, warps) point's cycles per DMMA of one warp.

    python3 tools/dmma_pipe.py [--shapes 8x8x4,16x8x4,16x8x8] [--chains 1,2,4,8] [--warps 1,2,4,8,16] [--out FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.arch.mma import SHAPES  # noqa: E402
from composer.bench.dmma_pipe import CHAINS, TRIPS, UNROLL, WARPS, measure, summarize  # noqa: E402
from composer.cli.arguments import csv_list, positive_int  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fileio import atomic_write_text, emit_json  # noqa: E402


def _shape(text: str) -> str:
    if text not in SHAPES:
        raise argparse.ArgumentTypeError(f"unknown MMA shape {text!r} (known: {', '.join(SHAPES)})")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=csv_list(_shape), default=["8x8x4", "16x8x4", "16x8x8"])
    parser.add_argument("--chains", type=csv_list(positive_int), default=list(CHAINS),
                        help="independent accumulator chains per warp")
    parser.add_argument("--warps", type=csv_list(positive_int), default=list(WARPS),
                        help="warps per block (one block per SM)")
    parser.add_argument("--trips", type=positive_int, default=TRIPS)
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON (default: one line per shape)")
    args = parser.parse_args(argv)
    if args.trips % UNROLL:
        print(f"error: --trips: {args.trips} is not a multiple of the loop's unroll {UNROLL}", file=sys.stderr)
        return 2
    if any(w > 32 for w in args.warps):
        print("error: --warps: at most 32 warps (1024 threads) per block", file=sys.stderr)
        return 2
    try:
        from composer.runtime import Device

        device = Device()
        try:
            points = measure(device, args.shapes, tuple(args.chains), tuple(args.warps), args.trips)
        finally:
            device.close()
    except ComposerError as exc:  # no GPU, a compile error: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = {"device": repr(device), "trips": args.trips, "points": [p.to_dict() for p in points],
              "shapes": summarize(points)}
    if args.json:
        emit_json(report, args.out)
        return 0
    if args.out:
        atomic_write_text(Path(args.out), json.dumps(report, indent=2) + "\n")
    try:
        for line in summary_lines(report["shapes"], points):
            print(line)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def summary_lines(shapes: dict, points: list) -> list[str]:
    """One line per shape (latency, interval, DMMAs in flight to saturate), and any point whose blocks
    did not each have an SM."""
    lines = [f"{'shape':8s} {'latency':>9s} {'interval':>9s} {'in flight':>9s}  (SM cycles; interval per sub-partition)"]
    for shape, s in shapes.items():
        lines.append(f"{shape:8s} {s['latency_cycles']:9.1f} {s['interval_cycles']:9.1f} {s['in_flight_to_saturate']:9.1f}")
    shared = [p for p in points if p.distinct_sms != p.blocks]
    if shared:
        lines.append(f"warning: {len(shared)} points ran blocks on shared SMs (the one-block-per-SM padding did not hold)")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
