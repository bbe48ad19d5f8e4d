"""``composer graph``: a path's kernels as the scheduler sees them, and (``--measure``) what the
plan's concurrency buys on the GPU.

Without ``--measure`` nothing runs: the path's declared kernels (``Path.program``) are planned for
the machine named by ``--machine`` — nodes with their roles, reads and writes, the derived edges,
the stream of each kernel, the events, the critical path — as a table, ``--json`` or ``--dot``.
With ``--measure`` each path is built on the GPU for the order's benchmark grid (or ``--grid``)
and timed by ``composer.sched.measure``: node times, serial sum, critical path, the measured call,
the overlap gained, the launch gaps and the contention estimate with its error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from composer import counts
from composer.arch.machines import DEFAULT_MACHINE, get_machine
from composer.cli import output
from composer.cli.arguments import csv_list, options_by_path, parse_grid, path_option, positive_int
from composer.config.schedules import load_schedule
from composer.errors import ComposerError
from composer.fileio import atomic_write_text
from composer.paths.registry import path_class, requested_path_options
from composer.sched import describe, to_dot


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "graph",
        help="a path's kernel DAG, streams and events; --measure: the overlap on the GPU",
        description="Plan a path's kernels with the dependency-graph scheduler and show the result: "
        "each kernel's role, reads and writes, the edges derived from them, its stream, the events "
        "and the critical path. --measure times the plan on the GPU (serial sum, critical path, "
        "measured call, overlap gained, launch gaps, contention estimate).",
    )
    parser.add_argument("--path", type=csv_list(str), required=True, metavar="P[,P...]",
                        help="path name(s), e.g. GEMM or GEMM,GEMM_CUTE,FUSED_TC16")
    parser.add_argument("--order", "-p", type=positive_int, required=True, metavar="N", help="polynomial order")
    parser.add_argument("--grid", type=parse_grid, default=None, metavar="N|NX,NY,NZ",
                        help="element grid (default: the schedule's benchmark grid)")
    parser.add_argument("--max-streams", type=positive_int, default=None, metavar="S",
                        help="streams the plan may use, main included (1: serial; default: no cap)")
    parser.add_argument("--machine", default=DEFAULT_MACHINE, metavar="NAME",
                        help=f"machine whose capacities price the cost hints (default: {DEFAULT_MACHINE}); "
                        "with --measure the GPU's own")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("--dot", type=Path, default=None, metavar="FILE",
                        help="write the plan as Graphviz DOT (one file; with several paths, PATH is "
                        "inserted before the suffix)")
    parser.add_argument("--measure", action="store_true", help="time the plan on the GPU")
    parser.add_argument("--repeats", type=positive_int, default=20, metavar="R",
                        help="repetitions of each timing with --measure (default: 20)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="also write the JSON to FILE (atomically)")
    parser.add_argument("--record-times", action="store_true",
                        help="with --measure: merge the measured node times into node_times.toml of the user "
                        "schedules directory, where later launch plans of this GPU take them as weights")
    parser.add_argument("--hints", action="store_true",
                        help="plan from the roofline cost hints, not from recorded node times")
    parser.add_argument("--option", dest="options", action="append", type=path_option, default=None,
                        metavar="PATH.KEY=VALUE", help="a path option, repeatable (e.g. GEMM_FUSED.overlap_sms=44: "
                        "the volume flux beside the first GEMM)")
    parser.set_defaults(func=run)


def _grid(order: int, grid: counts.Grid | None) -> counts.Grid:
    if grid is not None:
        return grid
    try:
        return load_schedule(order).benchmark.grid
    except ComposerError as exc:
        raise ComposerError(f"{exc}; give the element grid with --grid") from None


def _dot_file(base: Path, name: str, several: bool) -> Path:
    return base.with_name(f"{base.stem}.{name}{base.suffix}") if several else base


def run(args: argparse.Namespace) -> int:
    classes = [path_class(name) for name in args.path]
    for cls in classes:
        cls.check_order(args.order)
    grid = _grid(args.order, args.grid)
    if args.record_times and not args.measure:
        raise ComposerError("--record-times records what --measure timed; add --measure")
    options: dict[str, Any] = {"max_streams": args.max_streams} if args.max_streams else {}
    if args.hints:
        options["node_us"] = "hints"
    per_path = requested_path_options(options_by_path(args.options), args.path)
    reports = (_measure(classes, args.order, grid, options, args.repeats, per_path) if args.measure
               else _plan_only(classes, args.order, grid, options, get_machine(args.machine), per_path))
    if args.dot is not None:
        for report in reports:
            target = _dot_file(args.dot, report["path"], len(reports) > 1)
            atomic_write_text(target, report.pop("_dot"))
    for report in reports:
        report.pop("_dot", None)
    document: dict[str, Any] = {"order": args.order, "grid": list(grid), "paths": reports}
    if len(reports) == 1:
        document = {"order": args.order, "grid": list(grid), **reports[0]}
    text = json.dumps(document, indent=2)
    if args.out is not None:
        atomic_write_text(args.out, text + "\n")
    if args.record_times:
        from composer.sched.node_times import record_times

        machine = reports[0].get("identified_machine")
        if not machine:
            raise ComposerError("--record-times: this GPU is none of the machine table's entries (architecture, SM "
                                "count and memory; composer.arch.identify), so its times would be filed under "
                                "another GPU's name; add it to machines.toml ($COMPOSER_MACHINES) first")
        target = record_times(document if len(reports) > 1 else {"order": args.order, "paths": reports}, machine)
        output.console(stderr=True).print(f"node times of {', '.join(r['path'] for r in reports)} p={args.order} "
                                          f"({machine}) recorded in {target}")
    if args.json:
        print(text)
    else:
        for report in reports:
            _print(report)
    return 0


def _report(name: str, plan: Any) -> dict[str, Any]:
    return {"path": name, **describe(plan), "_dot": to_dot(plan, title=name)}


def _plan_only(classes: list, order: int, grid: counts.Grid, options: dict, machine: Any,
               per_path: dict | None = None) -> list[dict[str, Any]]:
    reports = []
    for cls in classes:
        parsed = cls.parse_options({**options, **(per_path or {}).get(cls.name, {})})
        plan = cls.launch_plan(order, counts.num_elements(grid), machine, **parsed)
        reports.append({**_report(cls.name, plan), "machine": machine.name,
                        "settings": cls.plan_settings(order, **parsed)})
    return reports


def _measure(classes: list, order: int, grid: counts.Grid, options: dict, repeats: int,
             per_path: dict | None = None) -> list[dict[str, Any]]:
    from composer import dg
    from composer.bench.nvml import ClockSampler
    from composer.bench.provenance import collect_provenance
    from composer.paths.problem import DeviceProblem, check_fits
    from composer.runtime import Device
    from composer.arch.identify import identify_machine
    from composer.paths.base import cost_machine
    from composer.sched.measure import measure_overlap

    device = Device()
    for cls in classes:
        check_fits(order, grid, cls.name, device, {**options, **(per_path or {}).get(cls.name, {})})
    problem = DeviceProblem.upload(dg.make_fields(order, grid), order, grid, device)
    reports = []
    try:
        progress = output.console(stderr=True)
        for i, cls in enumerate(classes, 1):
            progress.print(f"[{i}/{len(classes)}] {cls.name} p={order}: building, then {repeats} timed repetitions")
            impl = cls(problem, **{**options, **(per_path or {}).get(cls.name, {})})
            try:
                with ClockSampler(device.ordinal) as clocks:  # clocks with every figure (power cap)
                    clocks.start()
                    figures = measure_overlap(impl, repeats=repeats)
                    clocks.stop()
                reports.append({**_report(cls.name, impl.plan), "device": device.name,
                                "settings": cls.plan_settings(order, **impl.options),
                                "cost_machine": cost_machine(device.arch, device.sm_count, device.total_memory).name,
                                "identified_machine": getattr(identify_machine(device.arch, device.sm_count,
                                                                               device.total_memory), "name", None),
                                "measure": figures.as_dict(), "clocks": clocks.summary().to_dict(),
                                "diagnostics": impl.diagnostics()})
            finally:
                impl.close()
    finally:
        problem.close()
    provenance = collect_provenance()
    for report in reports:
        report["provenance"] = provenance
    return reports


def _print(report: dict[str, Any]) -> None:
    con = output.console()
    nodes = output.table(["kernel", "role", "stream", "reads", "writes"], title=f"{report['path']}: kernels "
                         f"in issue order ({report['streams']} streams, {len(report['events'])} events)")
    for n in report["nodes"]:
        nodes.add_row(n["name"], n["role"], str(n["stream"]), " ".join(n["reads"]), " ".join(n["writes"]))
    con.print(nodes)
    con.print("edges: " + (", ".join(f"{a} -> {b}" for a, b in report["edges"]) or "none"))
    con.print("critical path: " + " -> ".join(report["critical_path"]))
    priority = set(report.get("priority_streams", ()))
    confined = [f"{n['name']} ({n['sm_limit']} SMs, stream {n['stream']})" for n in report["nodes"]
                if "sm_limit" in n and n["stream"] in priority]
    if confined:
        con.print("confined to part of the SMs, on priority streams: " + ", ".join(confined))
    serial = [n["name"] for n in report["nodes"] if "sm_limit" in n and n["stream"] not in priority]
    if serial:
        con.print("on the main stream, so launched on every SM (nothing runs beside it): " + ", ".join(serial))
    leftover = (report.get("diagnostics") or {}).get("overlap_leftover_chunks")
    if leftover:
        con.print(f"FALLBACK: the confined kernel's last block took {leftover} chunks itself "
                  "(the partition did not do all the work; the overlap is not measured as designed)")
    m = report.get("measure")
    if not m:
        return
    times = output.table(["kernel", "alone ms", "start ms", "end ms"], title="measured (medians over "
                         f"{m['repeats']} repetitions)", right=("alone ms", "start ms", "end ms"))
    for name, ms in m["node_ms"].items():
        start, end = m["spans"][name]
        times.add_row(name, f"{ms:.4f}", f"{start:.4f}", f"{end:.4f}")
    con.print(times)
    summary = output.table(["figure", "ms"], right=("ms",))
    for label, key in (("serial sum", "serial_sum_ms"), ("critical path", "critical_path_ms"),
                       ("serial call", "serial_call_ms"), ("launch gaps", "launch_gaps_ms"),
                       ("measured call", "measured_ms"), ("overlap gained", "overlap_ms"),
                       ("contention estimate", "predicted_ms")):
        summary.add_row(label, f"{m[key]:.4f}")
    con.print(summary)
    con.print(f"overlap {m['overlap_pct']:.2f} % of the serial sum; contention estimate error "
              f"{m['prediction_error_pct']:+.2f} %")
