"""``composer validate``: the two validation levels (paper Section 4.4) for one backend.

Time integration of the benchmark problem against its exact solution (error at dt and dt/2,
the temporal convergence ratio, the mass drift) and, for GPU paths, the field check of one
tendency call on the point-varying input against the NumPy reference.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from composer import dg
from composer.cli.info import parse_grid
from composer.config.schedules import available_orders, load_schedule
from composer.validation import field_check, integration_check

NUMPY_BACKEND = "numpy"
DEFAULT_TOLERANCE = 1e-12


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate", help="validate a backend: time integration vs the exact solution, field check",
        description="Integrate the benchmark problem with SSP-RK3 at dt and dt/2 and report the "
        "relative L2 error against the exact solution, the convergence ratio (about 8 for third "
        "order) and the mass drift. For a GPU path, also compare one tendency call on the "
        "point-varying input with the NumPy reference (max|diff|/max|ref|).")
    parser.add_argument("--backend", default=NUMPY_BACKEND, metavar="NAME",
                        help="numpy (the reference) or a GPU path name such as GEMM (default: numpy)")
    parser.add_argument("--order", "-p", type=int, required=True, metavar="P", help="polynomial order p")
    parser.add_argument("--grid", type=parse_grid, default=None, metavar="N|NX,NY,NZ",
                        help="element grid of the time integration (default: the schedule's integration_grid)")
    parser.add_argument("--dt", type=float, default=None, help="time step (default: the schedule's)")
    parser.add_argument("--nstep", type=int, default=None, help="steps at dt (default: the schedule's)")
    parser.add_argument("--field-grid", type=parse_grid, default=None, metavar="N|NX,NY,NZ",
                        help="grid of the field check (GPU backends; default: the schedule's validation grid)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def backend_tendency(name: str) -> Any:
    """The tendency function of a backend name (the reference or a GPU path)."""
    if name.lower() == NUMPY_BACKEND:
        return dg.reference_tendency
    from composer.paths.registry import path_class
    from composer.runtime import Device

    cls = path_class(name)
    device = Device()

    def gpu(fields: Any, order: int, grid: Any) -> Any:
        from composer.api import tendency

        return tendency(fields, order, grid, path=cls.name, device=device)

    return gpu


def run(args: argparse.Namespace) -> int:
    explicit = args.grid is not None and args.dt is not None and args.nstep is not None
    # Any order works with an explicit grid, dt and nstep; otherwise the schedule supplies them.
    val = None if explicit and args.order not in available_orders() else load_schedule(args.order).validation
    grid = args.grid or val.integration_grid
    dt = args.dt if args.dt is not None else val.integration_dt
    nstep = args.nstep if args.nstep is not None else val.integration_nstep
    tendency = backend_tendency(args.backend)
    console = Console(stderr=True)
    result: dict[str, Any] = {"backend": args.backend, "order": args.order}
    if args.backend.lower() != NUMPY_BACKEND:
        field_grid = args.field_grid or (val.grid if val else grid)
        check = field_check(tendency, args.order, field_grid, val.tolerance if val else DEFAULT_TOLERANCE)
        result["field_check"] = {"grid": list(check.grid), "error": check.error,
                                 "tolerance": check.tolerance, "passed": check.passed}
    with console.status(f"integrating p={args.order} on {tuple(grid)}: {nstep} + {2 * nstep} steps") as status:
        integ = integration_check(tendency, args.order, grid, dt, nstep,
                                  on_step=lambda done, total: status.update(f"step {done}/{total}"))
    result["integration"] = {**integ.as_dict(), "grid": list(integ.grid), "dt": dt}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        table = Table(title=f"composer validate --backend {args.backend} --order {args.order}")
        table.add_column("quantity")
        table.add_column("value", justify="right")
        if "field_check" in result:
            fc = result["field_check"]
            table.add_row(f"field check on {tuple(fc['grid'])}: max|diff|/max|ref|",
                          f"{fc['error']:.3e} ({'pass' if fc['passed'] else 'FAIL'} <= {fc['tolerance']:g})")
        table.add_row("grid, dt, steps", f"{tuple(integ.grid)}, {dt:g}, {nstep} and {2 * nstep}")
        table.add_row(f"relative L2 error at t={integ.end_time:g}, dt", f"{integ.error_dt:.6e}")
        table.add_row("relative L2 error, dt/2", f"{integ.error_half_dt:.6e}")
        table.add_row("convergence ratio (third order: ~8)", f"{integ.convergence_ratio:.3f}")
        table.add_row("max |mass drift|", f"{integ.mass_drift:.3e}")
        Console().print(table)
    passed = result.get("field_check", {}).get("passed", True)
    return 0 if passed else 1
