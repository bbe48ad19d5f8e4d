"""``composer validate``: the two validation levels (paper Section 4.4) for one backend, with a verdict.

Time integration of the benchmark problem at dt, dt/2 and dt/4 (temporal convergence ratio, mass
drift, errors against the exact solution; composer/validation.py states the criteria) and, for GPU
paths, the field check of one tendency call on the point-varying input against the NumPy
reference. Exit 0 when every criterion passes, 1 when one fails.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from composer import dg
from composer.cli import output
from composer.cli.arguments import parse_grid, positive_float, positive_int
from composer.config.schedules import available_orders, load_schedule
from composer.errors import CheckFailed
from composer.validation import Criterion, default_integration, field_check, integration_check

NUMPY_BACKEND = "numpy"
DEFAULT_TOLERANCE = 1e-12


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate", help="validate a backend: time integration vs the exact solution, field check",
        description="Integrate the benchmark problem with SSP-RK3 at dt, dt/2 and dt/4 and judge it: "
        "the temporal convergence ratio |q(dt) - q(dt/2)| / |q(dt/2) - q(dt/4)| must be near 8 "
        "(third order; the spatial error cancels in the differences), the mass drift at round-off, "
        "every error finite. Grid, dt and steps default to values derived from the order (no schedule "
        "needed). For a GPU path, also compare one tendency call on the point-varying input with the "
        "NumPy reference (max|diff|/max|ref|). Exit 1 when a criterion fails.")
    parser.add_argument("--backend", default=NUMPY_BACKEND, metavar="NAME",
                        help="numpy (the reference) or a GPU path name such as GEMM (default: numpy)")
    parser.add_argument("--order", "-p", type=positive_int, required=True, metavar="P", help="polynomial order p")
    parser.add_argument("--grid", type=parse_grid, default=None, metavar="N|NX,NY,NZ",
                        help="element grid of the time integration (default: one element from p = 7, more "
                             "below, to put 8 nodes on the solution's period)")
    parser.add_argument("--dt", type=positive_float, default=None,
                        help="time step (default: 1 / the spectral radius of the operator on the grid)")
    parser.add_argument("--nstep", type=positive_int, default=None,
                        help="steps at dt (default: 20, fewer for large orders, at least 2)")
    parser.add_argument("--field-grid", type=parse_grid, default=None, metavar="N|NX,NY,NZ",
                        help="grid of the field check (GPU backends; default: the schedule's validation "
                             "grid, else the integration grid)")
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
    settings = default_integration(args.order, args.grid, args.dt, args.nstep)
    tendency = backend_tendency(args.backend)
    result: dict[str, Any] = {"backend": args.backend, "order": args.order}
    criteria: list[Criterion] = []
    if args.backend.lower() != NUMPY_BACKEND:
        val = load_schedule(args.order).validation if args.order in available_orders() else None
        field_grid = args.field_grid or (val.grid if val else settings.grid)
        check = field_check(tendency, args.order, field_grid, val.tolerance if val else DEFAULT_TOLERANCE)
        result["field_check"] = {"grid": list(check.grid), "error": check.error,
                                 "tolerance": check.tolerance, "passed": check.passed}
        criteria.append(check.criterion())
    nstep = settings.nstep
    with output.console(stderr=True).status(
            f"integrating p={args.order} on {settings.grid}: {nstep} + {2 * nstep} + {4 * nstep} steps") as status:
        integ = integration_check(tendency, args.order, settings.grid, settings.dt, nstep,
                                  on_step=lambda done, total: status.update(f"step {done}/{total}"))
    criteria += integ.criteria()
    result["integration"] = integ.as_dict()
    result["passed"] = all(c.passed for c in criteria)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render(args, integ, criteria)
    failed = [c for c in criteria if not c.passed]
    if failed:
        raise CheckFailed(f"validate --backend {args.backend} --order {args.order}: "
                          + "; ".join(f"{c.name}: {c.measured}" for c in failed))
    return 0


def render(args: argparse.Namespace, integ: Any, criteria: list[Criterion]) -> None:
    table = output.table(("quantity", "value"), right={"value"},
                         title=f"composer validate --backend {args.backend} --order {args.order}")
    table.add_row("grid, dt, steps", f"{integ.grid}, {integ.dt:.6g}, {integ.nstep}, "
                                     f"{2 * integ.nstep} and {4 * integ.nstep} to t = {integ.end_time:.6g}")
    for label, error in zip(("dt", "dt/2", "dt/4"), integ.errors):
        table.add_row(f"relative L2 error against the exact solution, {label}", f"{error:.6e}")
    table.add_row("|q(dt) - q(dt/2)|, |q(dt/2) - q(dt/4)| (relative L2)",
                  f"{integ.differences[0]:.3e}, {integ.differences[1]:.3e}")
    table.add_row("temporal convergence ratio (third order: 8)", f"{integ.convergence_ratio:.3f}")
    table.add_row("max |mass drift|", f"{integ.mass_drift:.3e}")
    verdict = output.table(("criterion", "verdict", "measured", "required"), title="verdict")
    for c in criteria:
        verdict.add_row(c.name, "pass" if c.passed else "[red]FAIL[/red]", c.measured, c.required)
    console = output.console()
    console.print(table)
    console.print(verdict)
