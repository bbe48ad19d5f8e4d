"""Predict, before measuring, what the overlapped volume flux gives a library path at one order
(composer.paths.overlap): the path's launch plan with and without ``overlap_sms``, each kernel's
time from a saved ``composer profile`` (ncu durations), the confined products' time from the copy
curve inside green contexts and the DRAM the concurrent GEMM draws, and the call's time from the
contention estimate (``composer.sched.contention``: SMs shared, the confined kernel's reserved).

    python3 tools/overlap_predict.py --path GEMM_FUSED --order 511 --profile P.json --curve B.json \
        --sms 24,32,44,56 [--out F] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.arch.machines import load_machines  # noqa: E402
from composer.cli.arguments import csv_list, positive_int  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fileio import emit_json  # noqa: E402
from composer.paths.overlap import confined_seconds  # noqa: E402
from composer.paths.program import volume_bytes  # noqa: E402
from composer.paths.registry import path_class  # noqa: E402
from composer.sched import contended_timeline  # noqa: E402

#: Profile kernel names -> node names of the unsplit plan (the library paths' support kernels; the GEMMs by role).
SUPPORT = {"volume_flux": "volume_flux", "surface_flux": "surface_flux", "separable_lift": "lift"}


def _load(path: str) -> Any:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def node_times(profile: dict, path: str, order: int, gemm_kernels: dict[str, str]) -> tuple[dict, dict]:
    """(node -> µs, node -> DRAM bytes/s) of ``path`` at ``order`` from a profile: support kernels by
    name, GEMMs by the substrings ``gemm_kernels`` gives per node."""
    key = f"{path}@p{order}"
    if key not in profile:
        raise ComposerError(f"the profile has no {key} (it has {', '.join(profile)})")
    times, dram = {}, {}
    for k in profile[key]["kernels"]:
        name = k["kernel"]
        node = next((n for prefix, n in SUPPORT.items() if name.startswith(prefix + "_nq")), None)
        node = node or next((n for n, sub in gemm_kernels.items() if sub in name), None)
        if node is None:
            raise ComposerError(f"{key}: kernel {name} matches no node; name it with --gemm NODE=SUBSTRING")
        times[node], dram[node] = float(k["duration_us"]), 1e12 * float(k.get("dram_tbps", 0.0))
    return times, dram


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", required=True)
    parser.add_argument("--order", type=positive_int, required=True)
    parser.add_argument("--profile", required=True, help="composer profile JSON (profile.json[.gz]) of the path")
    parser.add_argument("--curve", required=True, help="tools/measure_bandwidth.py --sms JSON (kernel_copy_by_sms)")
    parser.add_argument("--sms", type=csv_list(positive_int), required=True)
    parser.add_argument("--gemm", action="append", default=[], metavar="NODE=SUBSTRING",
                        help="which profiled kernel is which GEMM node, repeatable")
    parser.add_argument("--out")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        machine = load_machines()["h200"]
        cls = path_class(args.path)
        gemms = dict(item.split("=", 1) for item in args.gemm)
        times, dram = node_times(_load(args.profile), cls.name, args.order, gemms)
        curve = {int(s): float(v["median_Bps"]) for s, v in _load(args.curve)["kernel_copy_by_sms"].items()}
        nq, ne = args.order + 1, 1
        from composer.config.schedules import load_schedule
        from composer import counts

        ne = counts.num_elements(load_schedule(args.order).benchmark.grid)
        vol = volume_bytes(nq, ne)
        big = {n: 10**9 for n in [*times, "volume_flux_x", "volume_flux_y", "volume_flux_z", "volume_flux_xy",
                                  "volume_flux_xz", "volume_flux_yz"]}
        # the unsplit call: one volume_flux kernel, whatever overlap the schedule ships (0 turns it off)
        plain = cls.parse_options({"overlap_sms": 0})
        unsplit = contended_timeline(cls.launch_plan(args.order, ne, machine, **plain), times,
                                     machine.sm_count, blocks=big).call_time
        flux_Bps = 7 * vol / (1e-6 * times["volume_flux"])  # the single kernel's measured rate
        rows = []
        for sms in args.sms:
            options = cls.parse_options({"overlap_sms": sms})
            launch = cls.launch_plan(args.order, ne, machine, **options)
            first = next(n for n in launch.issue_order if n.startswith("volume_flux_") and launch.node(n).sm_limit is None)
            rest = next(n for n in launch.issue_order if launch.node(n).sm_limit is not None)
            beside = next(s for s in launch.graph.successors(first) if s.startswith("gemm_"))
            t = {n: v for n, v in times.items() if n != "volume_flux"}
            t[first] = 1e6 * 3 * vol / flux_Bps
            t[rest] = 1e6 * confined_seconds(5 * vol, sms, machine.sm_count, curve, flux_Bps, dram[beside])
            call = contended_timeline(launch, t, machine.sm_count, blocks=big).call_time
            rows.append({"sms": sms, "first": first, "confined": rest, "beside": beside, "first_us": t[first],
                         "confined_us": t[rest], "call_us": call, "ratio_to_unsplit": call / unsplit})
    except (ComposerError, KeyError, ValueError) as exc:
        print(f"overlap_predict: {exc}", file=sys.stderr)
        return 2
    document = {"path": cls.name, "order": args.order, "profile": args.profile, "curve": args.curve,
                "node_us": times, "unsplit_call_us": unsplit, "predictions": rows}
    if args.json or args.out:
        emit_json(document, args.out) if args.json else Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    if not args.json:
        print(f"{cls.name} p={args.order}: unsplit {unsplit:.0f} us (contention estimate of the profiled kernels)")
        for r in rows:
            print(f"  overlap_sms={r['sms']:3d}: {r['first']} {r['first_us']:.0f} us, {r['confined']} {r['confined_us']:.0f} us "
                  f"beside {r['beside']} -> {r['call_us']:.0f} us, x{r['ratio_to_unsplit']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
