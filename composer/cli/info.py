"""``composer info``: what one order costs before anything runs — work and traffic per tendency
call, device memory per path against the machine, and the roofline lower bounds."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from rich.console import Console

from composer import counts
from composer.arch.machines import DEFAULT_MACHINE, Machine, get_machine
from composer.cli import output
from composer.cli.arguments import fraction, options_by_path, parse_grid, path_option, positive_int
from composer.config.schedules import available_orders, load_schedule, schedule_file_name
from composer.paths.registry import PATHS, paths_with, requested_path_options

DEFAULT_RESERVE = 0.05


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="counts, memory fit and roofline bounds of one order",
        description="FLOP, unique bytes and index-map bytes per tendency call, device memory per "
        "path and whether it fits the machine, and roofline lower bounds (FP64 Tensor Core peak, "
        "HBM bandwidth).",
    )
    parser.add_argument(
        "--order", "-p", type=positive_int, required=True, metavar="P", help="polynomial order p"
    )
    parser.add_argument(
        "--machine",
        default=DEFAULT_MACHINE,
        metavar="NAME",
        help=f"machine name (default: {DEFAULT_MACHINE})",
    )
    parser.add_argument(
        "--machines-file",
        default=None,
        metavar="TOML",
        help="user machine table adding or overriding machines",
    )
    parser.add_argument(
        "--grid",
        type=parse_grid,
        default=None,
        metavar="N|NX,NY,NZ",
        help="element grid (default: the schedule's benchmark grid)",
    )
    parser.add_argument(
        "--reserve",
        type=fraction,
        default=DEFAULT_RESERVE,
        metavar="FRACTION",
        help=f"fraction of device memory kept free in the fit check (default: {DEFAULT_RESERVE})",
    )
    parser.add_argument("--option", dest="options", action="append", type=path_option, default=None,
                        metavar="PATH.KEY=VALUE",
                        help="a path option the memory estimate builds that path with, repeatable "
                             "(e.g. GEMM.parity=on, GEMM_FUSED.flux=mainloop)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The report for ``--machine``, with that machine's schedule overlay where one ships (its fused
    tables are the ones a run there uses, so their byte floors are that machine's)."""
    from composer.config.machine_schedules import overlay_machines, using_machine
    from composer.config.schedule_files import packaged_dir

    machine = get_machine(args.machine, args.machines_file)
    with using_machine(machine.name if machine.name in overlay_machines(packaged_dir()) else None):
        return _run(args, machine)


def _run(args: argparse.Namespace, machine: Machine) -> int:
    if args.grid is None:
        schedule = load_schedule(args.order)
        grid, grid_source = schedule.benchmark.grid, schedule.file or schedule_file_name(args.order)
    else:
        grid, grid_source = args.grid, "--grid"
    options = requested_path_options(options_by_path(args.options), [cls.name for cls in PATHS])
    report = build_report(args.order, grid, machine, args.reserve, options)
    report["grid_source"] = grid_source
    if args.order in available_orders():
        report["schedule"] = load_schedule(args.order).provenance()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        render(report, output.console())
    return 0


def build_report(order: int, grid: counts.Grid, machine: Machine, reserve: float,
                 options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Everything ``info`` shows, as JSON-ready data (bytes, FLOP and seconds in base units); each
    path's memory estimated as built with its ``options`` (by registered name; none: the schedule's)."""
    roof = counts.roofline(order, grid, machine)
    usable = counts.memory_limit_bytes(machine, reserve)
    memory = []
    for cls in PATHS:
        path_options = dict((options or {}).get(cls.name, {}))
        estimate = cls.memory_estimate(order, grid, path_options)
        memory.append(
            {
                "path": cls.name,
                "options": path_options,
                "total_bytes": estimate.total_bytes,
                "fits": estimate.total_bytes <= usable,
                "items": [
                    {
                        "name": i.name,
                        "count": i.count,
                        "bytes_each": i.bytes_each,
                        "bytes": i.bytes,
                        "note": i.note,
                    }
                    for i in estimate.items
                ],
            }
        )
    return {
        "order": order,
        "nq": order + 1,
        "grid": list(grid),
        "elements": counts.num_elements(grid),
        "points": counts.num_points(order, grid),
        "per_call": {
            "flop": roof.flop,
            "unique_bytes": roof.bytes,
            "index_map_bytes": counts.index_map_bytes(order, grid),
            "intensity_flop_per_byte": roof.intensity,
        },
        "machine": {
            "name": machine.name,
            "description": machine.description,
            "fp64_tc_peak_flops": machine.fp64_tc_peak_flops,
            "hbm_bandwidth": machine.hbm_bandwidth,
            "hbm_bandwidth_kind": "measured" if machine.hbm_bandwidth_measured_tbs else "nominal",
            "memory_bytes": machine.memory_bytes,
            "reserve_fraction": reserve,
            "usable_bytes": usable,
        },
        "roofline": {
            "t_compute_s": roof.t_compute,
            "t_memory_s": roof.t_memory,
            "roof_s": roof.roof,
            "bound": roof.bound,
            "machine_balance_flop_per_byte": roof.machine_balance,
            # the parity decomposition (composer.parity, odd orders) executes half the contraction FLOP
            "t_compute_parity_s": roof.t_compute / 2 if (order + 1) % 2 == 0 else None,
            "roof_parity_s": max(roof.t_compute / 2, roof.t_memory) if (order + 1) % 2 == 0 else None,
        },
        "memory": memory,
        "fused": _fused_floors(order, grid, machine, roof.bytes),
        "splits": _split_floors(order, grid, machine, roof.bytes),
    }


def _split_floors(order: int, grid: counts.Grid, machine: Machine, unique: int) -> list[dict[str, Any]]:
    """The byte floor of every direction split with each flux source (composer.fused.traffic.split_floors)."""
    from composer.fused.traffic import split_floors

    return [{"split": f.split, "flux": f.flux, "bytes": f.bytes, "floor_s": f.bytes / machine.hbm_bandwidth,
             "over_unique": f.bytes / unique, "staged_bytes": f.staged_bytes, "placement": f.placement}
            for f in split_floors(order, grid, machine.arch)]


def _fused_floors(order: int, grid: counts.Grid, machine: Machine, unique: int) -> list[dict[str, Any]]:
    """Per fused variant with a schedule at ``order``: its kernels' DRAM bytes and the byte floor."""
    from composer.fused.config import fused_config
    from composer.fused.order import gather_rereads, l2_handoffs
    from composer.fused.traffic import operand_bytes_per_flop, schedule_traffic

    if order not in available_orders():  # no schedule file for this order: no fused schedules to show
        return []
    tables = load_schedule(order).paths
    rows = []
    for variant in (cls.name for cls in paths_with(family="fused") if order in cls.orders):
        if variant not in tables:
            continue  # a broken table is reported (fused_config raises), a missing one is skipped
        config = fused_config(variant, order)
        kernels = schedule_traffic(config, grid)
        total = sum(k.total_bytes for k in kernels)
        rows.append({"variant": variant, "flux": config.flux, "nvrtc": config.nvrtc,
                     "kernels": [{"name": k.name, "bytes": k.total_bytes} for k in kernels],
                     "bytes": total, "floor_s": total / machine.hbm_bandwidth,
                     "over_unique": total / unique, "volume": config.volume,
                     "operand_bytes_per_flop": operand_bytes_per_flop(config, machine.arch),
                     "element_bricks": list(config.element_bricks) if config.element_bricks else None,
                     "gather_rereads": gather_rereads(config, grid, machine.l2_bytes),
                     "l2_handoffs": list(l2_handoffs(config))})
    return rows


# --- rendering --------------------------------------------------------------------------------


def _bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,.0f} B"


def _seconds(t: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:,.3f} {unit}"
    return f"{t * 1e9:,.3f} ns"


def render(report: dict[str, Any], console: Console) -> None:
    m, per, roof = report["machine"], report["per_call"], report["roofline"]
    grid = "x".join(str(n) for n in report["grid"])

    problem = output.table(
        ("quantity", "value"), right={"value"},
        title=f"p = {report['order']} (Nq = {report['nq']}), grid {grid} ({report['grid_source']})",
    )
    problem.add_row("elements Ne", f"{report['elements']:,}")
    problem.add_row("volume points Nq^3 Ne", f"{report['points']:,}")
    problem.add_row("FLOP per tendency call", f"{per['flop']:,} ({per['flop'] / 1e9:,.3f} GFLOP)")
    problem.add_row(
        "unique bytes per call", f"{per['unique_bytes']:,} ({_bytes(per['unique_bytes'])})"
    )
    problem.add_row(
        "index-map bytes (vmapM, vmapP)",
        f"{per['index_map_bytes']:,} ({_bytes(per['index_map_bytes'])})",
    )
    problem.add_row("intensity (FLOP/unique byte)", f"{per['intensity_flop_per_byte']:.3f}")
    console.print(problem)

    bound = output.table(("bound", "time"), right={"time"},
                         title=f"roofline per tendency call on {m['name']}", caption=m["description"])
    bound.add_row(
        f"FP64 TC peak {m['fp64_tc_peak_flops'] / 1e12:.1f} TFLOP/s", _seconds(roof["t_compute_s"])
    )
    bound.add_row(
        f"HBM {m['hbm_bandwidth'] / 1e12:.2f} TB/s ({m['hbm_bandwidth_kind']})",
        _seconds(roof["t_memory_s"]),
    )
    bound.add_row(f"roof ({roof['bound']} bound)", _seconds(roof["roof_s"]), style="bold")
    if roof.get("roof_parity_s") is not None:
        bound.add_row("with parity: half the FLOP (composer.parity)", _seconds(roof["roof_parity_s"]))
    console.print(bound)

    memory = output.table(
        ("path", "estimate", "fits"), right={"estimate"},
        title=f"device memory per path on {m['name']}",
        caption=f"usable {_bytes(m['usable_bytes'])} of {_bytes(m['memory_bytes'])} "
        f"({m['reserve_fraction']:.0%} reserved)",
    )
    for row in report["memory"]:
        memory.add_row(
            _path_label(row), _bytes(row["total_bytes"]), "yes" if row["fits"] else "[red]no[/red]"
        )
    console.print(memory)

    if report.get("fused"):
        numbers = ("total", "x unique", "byte floor", "L2->smem B/FLOP", "layers re-read", "L2 handoffs")
        fused = output.table(("path", "flux", "NVRTC", "kernels (bytes)", *numbers), right=numbers,
                             title=f"fused schedules: DRAM bytes of their kernels on {m['name']}",
                             caption="NVRTC = the compiler whose kernels the table was measured with; "
                                     "byte floor = the kernels' bytes / HBM bandwidth; L2->smem = operand "
                                     "bytes copied into shared memory per contraction FLOP "
                                     "(composer.fused.traffic); layers re-read = the neighbours' face layers "
                                     "estimated read from DRAM twice in the table's element order, above the "
                                     "floor, for L2 windows of 25-75 % (composer.fused.order; one-kernel "
                                     "whole-element tables); L2 handoffs = the kernel boundaries of an RK stage "
                                     "(RK update, face kernel, volume kernels) where a kernel starts on the "
                                     "elements the one before it ended on (descending kernels; l2_handoffs)")
        for row in report["fused"]:
            kernels = ", ".join(f"{k['name']} {_bytes(k['bytes'])}" for k in row["kernels"])
            operand = [b for b in row["operand_bytes_per_flop"] if b is not None]
            fused.add_row(f"{row['variant']}{' (stream)' if row['volume'] == 'stream' else ''}", row["flux"],
                          row["nvrtc"] or "any", kernels, _bytes(row["bytes"]), f"{row['over_unique']:.2f}",
                          _seconds(row["floor_s"]), f"{max(operand):.3f}" if operand else "-",
                          "-" if row["gather_rereads"] is None
                          else f"{_bytes(row['gather_rereads'][0])} - {_bytes(row['gather_rereads'][1])}",
                          "{} of {}".format(*row["l2_handoffs"]))
        console.print(fused)

    if report.get("splits"):
        numbers = ("total", "x unique", "byte floor", "staged per unit")
        splits = output.table(("split", "flux", *numbers, "on chip"), right=numbers,
                              title=f"byte floors of the fused decompositions on {m['name']}",
                              caption="split: the volume kernels' directions (x|y|z one kernel each, xy|z, xyz one "
                                      "kernel); staged: what the widest kernel holds on chip to read each flux value "
                                      "once (a line, a k-plane of two fluxes, an element of three); on chip: where that "
                                      "fits (composer.fused.traffic.split_floors)")
        for row in report["splits"]:
            splits.add_row(row["split"], row["flux"], _bytes(row["bytes"]), f"{row['over_unique']:.2f}",
                           _seconds(row["floor_s"]), _bytes(row["staged_bytes"]), row["placement"])
        console.print(splits)


def _path_label(row: Mapping[str, Any]) -> str:
    """The path's name, with the options its estimate was built with (``GEMM parity=on``)."""
    options = row.get("options") or {}
    return " ".join([row["path"], *(f"{key}={value}" for key, value in sorted(options.items()))])
