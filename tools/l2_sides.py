"""Map the GPU's L2 partitions from its SMs and measure what a read across them costs (JSON).

    python3 tools/l2_sides.py [--out FILE] [--probe-lines 512] [--read-mib 4] [--repeats 8]

Issue 16's p = 7 and 15 kernels are bound by the link between the L2 partitions (results.md section 7).
This tool answers, on the GPU it runs on, what a design that crosses the link less can count on
(composer/bench/l2_sides.py says why each step):
1. every SM times L2-only loads of ``--probe-lines`` consecutive 128-byte lines and as many lines
   8 KiB apart: the SMs fall into sides by the lines they reach quickly (near/far cycles);
2. the lowest SM of each side times every line of a ``--read-mib`` buffer: each line's home side, and
   how finely homes interleave (runs, and the share of a 4-KiB element, p = 7's q, on its minority side);
3. every SM reads, from L2, only lines homed on its side, only the other side's, or all: the bandwidth
   of each (own/other is the price of a crossing at full load).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.bench.l2_sides import (  # noqa: E402
    LINE_BYTES,
    L2Probe,
    coarse_offsets,
    element_home_split,
    fine_offsets,
    home_runs,
    homes_from_pair,
    sides_from_latency,
)
from composer.cli.arguments import positive_int  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fileio import emit_json  # noqa: E402
from composer.runtime import Device, DeviceBuffer  # noqa: E402

COARSE_STRIDE = 8192
ELEMENT_BYTES = (4096, 32768)  # q of one element at p = 7 and at p = 15
MIN_LINES_PER_SIDE = 256  # 32 KiB: enough lines that a read pass is not a handful of L2 slices


def main() -> int:
    try:
        return _run()
    except ComposerError as exc:  # no GPU, a failed compile or launch: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--probe-lines", type=positive_int, default=512,
                        help="lines of each probe set every SM times (default 512)")
    parser.add_argument("--read-mib", type=positive_int, default=4,
                        help="MiB of the L2-resident buffer whose homes are mapped and read (default 4)")
    parser.add_argument("--repeats", type=positive_int, default=8, help="dependent loads timed per line (default 8)")
    args = parser.parse_args()
    read_lines = args.read_mib * 2**20 // LINE_BYTES
    probe_bytes = args.probe_lines * LINE_BYTES + args.probe_lines * COARSE_STRIDE
    nbytes = max(read_lines * LINE_BYTES, probe_bytes)
    device = Device()
    report: dict = {"device": device.name, "sm_count": device.sm_count, "buffer_bytes": nbytes,
                    "repeats": args.repeats}
    buffer = DeviceBuffer(nbytes, device)
    probe = L2Probe(device)
    try:
        buffer.zero()
        device.synchronize()
        offsets = np.concatenate([fine_offsets(args.probe_lines),
                                  coarse_offsets(args.probe_lines, COARSE_STRIDE, args.probe_lines * LINE_BYTES)])
        t0 = time.perf_counter()
        lat = probe.latency(buffer, offsets, repeats=args.repeats)
        smids, first, repeat = lat.measured()
        report["probe_seconds"] = time.perf_counter() - t0
        report["probing_sms"] = len(smids)
        sides = sides_from_latency(repeat, smids)
        report["sides_repeat"] = sides.as_dict()
        report["sides_first"] = sides_from_latency(first, smids).as_dict()
        report["probe_fine_runs"] = home_runs(sides.home[:args.probe_lines], LINE_BYTES)
        report["probe_coarse_homes"] = {str(d): sum(1 for h in sides.home[args.probe_lines:] if h == d)
                                        for d in (0, 1)}
        print(f"sides: {len(sides.members(0))} + {len(sides.members(1))} SMs, two-level lines "
              f"{sides.two_level_lines}/{sides.lines}, near {sides.near_cycles:.0f} far {sides.far_cycles:.0f} cycles",
              file=sys.stderr)
        if sides.partitioned:
            refs = (min(sides.members(0)), min(sides.members(1)))
            pair = probe.latency(buffer, fine_offsets(read_lines), repeats=max(2, args.repeats // 2),
                                 active_smids=list(refs))
            rows = {s: pair.repeat[b] for b, s in enumerate(pair.smids) if s in refs}
            homes = homes_from_pair(rows[refs[0]], rows[refs[1]], sides.near_cycles, sides.far_cycles)
            report["reference_sms"] = list(refs)
            report["read_homes"] = {"0": homes.count(0), "1": homes.count(1), "unknown": homes.count(None)}
            report["read_runs"] = home_runs(homes, LINE_BYTES)
            report["element_minority_share"] = {str(b): element_home_split(homes, LINE_BYTES, b)
                                                for b in ELEMENT_BYTES}
            by_side = ([i for i, h in enumerate(homes) if h == 0], [i for i, h in enumerate(homes) if h == 1])
            if min(len(by_side[0]), len(by_side[1])) < MIN_LINES_PER_SIDE:
                report["read_bandwidth_skipped"] = (
                    f"the two reference SMs placed {len(by_side[0])} and {len(by_side[1])} lines: fewer than "
                    f"{MIN_LINES_PER_SIDE} on a side, so no own/other read could be formed")
                print(report["read_bandwidth_skipped"], file=sys.stderr)
            else:
                side_of = dict(zip(sides.smids, sides.side))
                bw = probe.read_bandwidth(buffer, by_side, side_of)
                report["read_bandwidth"] = bw
                report["own_over_other"] = bw["own"]["median_Bps"] / bw["other"]["median_Bps"]
                print("L2 reads, TB/s: " + ", ".join(f"{k} {v['median_Bps'] / 1e12:.2f}" for k, v in bw.items())
                      + f"; own/other {report['own_over_other']:.3f}", file=sys.stderr)
    finally:
        probe.close()
        buffer.free()
        device.close()
    emit_json(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
