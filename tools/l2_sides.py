"""Map the GPU's L2 partitions from its SMs and measure what a read across them costs (JSON).

    python3 tools/l2_sides.py [--out FILE] [--probe-lines 512] [--read-mib 4] [--repeats 8]

Issue 16's p = 7 and 15 kernels are bound by the link between the L2 partitions (results.md section 7).
This tool answers, on the GPU it runs on, what a design that crosses the link less can count on
(composer/runtime/l2_sides.py says why each step):
1. the SMs' sides by the reference design (composer.runtime.l2_sides.sides_from_reference: one SM first-loads a
   pool of lines, every other SM its own part of it); near/far cycles, and whether a side keeps copies of the
   other's lines (``copy_fraction``); beside it the matrix form (every SM times the same lines in turn), whose
   split steps 2 and 3 use where it finds one (``split_source``; the reference design's otherwise);
2. the lowest SM of each side first-loads every line of a ``--read-mib`` buffer: each line's home side, and
   how finely homes interleave (runs, and the share of a 4-KiB element, p = 7's q, on its minority side);
3. every SM reads, from L2, only lines homed on its side, only the other side's, or all: the bandwidth
   of each (own/other is the price of a crossing at full load);
4. the homes of the volume arrays of ``--problem-order``'s benchmark problem, element by element: whether an
   element's arrays share a home (what a side-aware element assignment against the far misses needs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.runtime.l2_sides import (  # noqa: E402
    LINE_BYTES,
    L2Probe,
    coarse_offsets,
    element_home_split,
    fine_offsets,
    home_runs,
    credible_matrix_split,
    element_array_homes,
    reference_pool,
    sides_from_latency,
    sides_from_reference,
)
from composer.cli.arguments import non_negative_int, positive_int  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fileio import emit_json  # noqa: E402
from composer.runtime import Device, DeviceBuffer  # noqa: E402

COARSE_STRIDE = 8192
ELEMENT_BYTES = (4096, 32768)  # q of one element at p = 7 and at p = 15
MAX_LINES_PER_ELEMENT = 64  # of each array's part of an element in step 4 (p = 7: all 32; p = 15: the first 8 KiB)
MIN_LINES_PER_SIDE = 256  # 32 KiB: enough lines that a read pass is not a handful of L2 slices


def main() -> int:
    try:
        return _run()
    except ComposerError as exc:  # no GPU, a failed compile or launch: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2


def problem_homes(device, probe: L2Probe, refs: tuple[int, int], order: int, n_elements: int) -> dict:  # noqa: ANN001
    """The L2 homes of the volume arrays of ``order``'s benchmark problem (uploaded as `composer bench` does: the
    same sizes and order of allocation, not the bench's own pages, so a statistical estimate), for ``n_elements``
    elements spread evenly over the grid: the first MAX_LINES_PER_ELEMENT lines of each element's part of each
    array; then whether an element's arrays share a home
    (composer.runtime.l2_sides.element_array_homes)."""
    from composer import dg
    from composer.config.schedules import load_schedule
    from composer.paths.problem import DeviceProblem

    grid = load_schedule(order).benchmark.grid
    mesh = dg.Mesh(order, grid)
    fields = {k: np.zeros((mesh.num_elements, 6, order + 1, order + 1) if k in ("nx", "ny", "nz", "F")
                          else mesh.volume_shape) for k in dg.FIELD_KEYS}
    problem = DeviceProblem.upload(fields, order, grid, device)
    del fields
    try:
        arrays = {name: problem.ptr(name) for name in ("q", "u", "v", "w", "Ex", "Ey", "Ez")}
        arrays["dqdt"] = problem.dqdt.ptr
        element_bytes = 8 * (order + 1) ** 3
        per = max(1, min(element_bytes // LINE_BYTES, MAX_LINES_PER_ELEMENT))  # an element's first lines
        elements = np.linspace(0, mesh.num_elements - 1, min(n_elements, mesh.num_elements)).astype(np.int64)
        base = min(arrays.values())
        offsets = np.concatenate([(ptr - base + elements[:, None] * element_bytes
                                   + np.arange(per)[None, :] * LINE_BYTES).ravel() // 8
                                  for ptr in arrays.values()])
        homes, _ = probe.homes(base, offsets, refs)
        table = np.array([-1 if h is None else h for h in homes]).reshape(len(arrays), len(elements), per)
        out = element_array_homes(table, list(arrays))
        out.update({"order": order, "grid": list(grid), "element_bytes": element_bytes})
        return out
    finally:
        problem.close()


def _run() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--probe-lines", type=positive_int, default=64,
                        help="lines per SM of the reference design, and of each set every SM times in turn (default 64)")
    parser.add_argument("--read-mib", type=positive_int, default=4,
                        help="MiB of the L2-resident buffer whose homes are mapped and read (default 4)")
    parser.add_argument("--repeats", type=positive_int, default=8, help="dependent loads timed per line (default 8)")
    parser.add_argument("--problem-order", type=positive_int, default=7,
                        help="the order whose benchmark problem's arrays are mapped (default 7)")
    parser.add_argument("--problem-elements", type=non_negative_int, default=256,
                        help="elements of that problem whose lines are mapped, spread over the grid (default 256; "
                             "0: none)")
    args = parser.parse_args()
    device = Device()
    n_sm = device.sm_count
    # three disjoint regions: the reference pool, the lines every SM times in turn, the mapped and read buffer
    pool_bytes = n_sm * args.probe_lines * LINE_BYTES
    common_base = pool_bytes
    common_bytes = args.probe_lines * LINE_BYTES + args.probe_lines * COARSE_STRIDE
    read_base = common_base + common_bytes
    read_lines = args.read_mib * 2**20 // LINE_BYTES
    nbytes = read_base + read_lines * LINE_BYTES
    report: dict = {"device": device.name, "sm_count": n_sm, "buffer_bytes": nbytes, "repeats": args.repeats}
    buffer = DeviceBuffer(nbytes, device)
    probe = L2Probe(device)
    try:
        buffer.zero()
        device.synchronize()
        t0 = time.perf_counter()
        # 1. the reference design: block 0 first-loads the pool, each other block its own part
        pool, parts = reference_pool(n_sm, args.probe_lines)
        smids, first, _ = probe.slices(buffer, [pool[q] for q in parts], repeats=0)
        sides = sides_from_reference(first[0], first, parts, smids)
        report["sides"] = sides.as_dict()
        # the raw first loads (cycles; -1 where a block saw no slot), so that a split the analysis refuses
        # can be examined offline: block b's values belong to pool lines reference_lines[b]
        report["reference_raw"] = {"smids": [int(s) for s in smids],
                                   "first": [np.asarray(f, dtype=np.int64).tolist() for f in first],
                                   "per_block": args.probe_lines}
        report["probing_sms"] = len(set(smids))
        print(f"sides: {len(sides.members(0))} + {len(sides.members(1))} SMs (separation {sides.separation:.1f}), "
              f"near {sides.near_cycles:.0f} far {sides.far_cycles:.0f} cycles, far lines the reference's side had "
              f"read found near: {sides.copy_fraction:.0%}", file=sys.stderr)
        # 2. the same lines for every SM in turn (the matrix form: with copies kept it sees one level)
        offsets = np.concatenate([fine_offsets(args.probe_lines) + common_base // 8,
                                  coarse_offsets(args.probe_lines, COARSE_STRIDE, common_base + args.probe_lines * LINE_BYTES)])
        lat = probe.latency(buffer, offsets, repeats=args.repeats)
        ids, first_m, repeat_m = lat.measured()
        report["common_lines"] = {"repeat": sides_from_latency(repeat_m, ids).as_dict(),
                                  "first": sides_from_latency(first_m, ids).as_dict()}
        report["probe_seconds"] = time.perf_counter() - t0
        # the split the homes and reads below use: the matrix form's, else the reference design's, as the side
        # queues' map (composer.runtime.l2_sides.sm_side_map says why the matrix form comes first)
        report["split_source"] = "reference" if sides.partitioned else "none"
        for matrix in (first_m, repeat_m):
            alt = sides_from_latency(matrix, ids)
            if credible_matrix_split(alt):
                sides, report["split_source"] = alt, "lines"
                break
        if sides.partitioned:
            # 3. homes of the read buffer: the lowest SM of each side first-loads every line, in block order;
            # the later one's loads split into its side's homes and the other's
            # the lowest measured SM of each side (the reference design leaves SMs without a verdict on side 0)
            unmeasured = set(getattr(sides, "unmeasured", []))
            refs = tuple(next(s for s in sides.members(d) if s not in unmeasured) for d in (0, 1))
            lines = fine_offsets(read_lines) + read_base // 8
            homes, readers = probe.homes(buffer, lines, refs)
            if readers:
                report["reference_sms"] = list(refs)
                report["read_homes"] = {"0": homes.count(0), "1": homes.count(1), "unknown": homes.count(None)}
                report["read_runs"] = home_runs(homes, LINE_BYTES)
                report["element_minority_share"] = {str(b): element_home_split(homes, LINE_BYTES, b)
                                                    for b in ELEMENT_BYTES}
                base_line = read_base // LINE_BYTES
                by_side = ([base_line + i for i, h in enumerate(homes) if h == 0],
                           [base_line + i for i, h in enumerate(homes) if h == 1])
                if min(len(by_side[0]), len(by_side[1])) < MIN_LINES_PER_SIDE:
                    report["read_bandwidth_skipped"] = (
                        f"the reference SMs placed {len(by_side[0])} and {len(by_side[1])} lines: fewer than "
                        f"{MIN_LINES_PER_SIDE} on a side, so no own/other read could be formed")
                    print(report["read_bandwidth_skipped"], file=sys.stderr)
                else:
                    side_of = dict(zip(sides.smids, sides.side))
                    bw = probe.read_bandwidth(buffer, by_side, side_of)
                    report["read_bandwidth"] = bw
                    report["own_over_other"] = bw["own"]["median_Bps"] / bw["other"]["median_Bps"]
                    print("L2 reads, TB/s: " + ", ".join(f"{k} {v['median_Bps'] / 1e12:.2f}" for k, v in bw.items())
                          + f"; own/other {report['own_over_other']:.3f}", file=sys.stderr)
                print(f"homes: {report['read_homes']}, runs {report['read_runs']}", file=sys.stderr)
            if args.problem_elements and "reference_sms" in report:
                try:  # steps 1-3 are written whatever step 4 meets (an order without a schedule, no memory)
                    report["problem_homes"] = problem_homes(device, probe, refs, args.problem_order,
                                                            args.problem_elements)
                    print(f"problem arrays: all agree on {report['problem_homes']['all_agree']}, independent "
                          f"{report['problem_homes']['all_agree_if_independent']}", file=sys.stderr)
                except (ComposerError, MemoryError, ValueError) as exc:
                    report["problem_homes_error"] = f"{type(exc).__name__}: {exc}"
                    print(f"problem arrays: {report['problem_homes_error']}", file=sys.stderr)
    finally:
        probe.close()
        buffer.free()
        device.close()
    emit_json(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
