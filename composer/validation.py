"""The two validation levels of the paper (Section 4.4) for any backend.

1. Field check: one tendency evaluation on the point-varying input against the NumPy
   reference, ``max|dqdt - ref| / max|ref|``.
2. Time integration of the benchmark problem against its exact solution: the relative L2
   error at two time steps (dt and dt/2), the temporal convergence ratio, and the drift of
   the mass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from composer import dg

TendencyFn = Callable[[Mapping[str, np.ndarray], int, tuple[int, int, int]], np.ndarray]


def relative_max_difference(values: np.ndarray, reference: np.ndarray) -> float:
    """``max|values - reference| / max|reference|`` (the paper's field-to-field measure)."""
    return float(np.max(np.abs(values - reference)) / np.max(np.abs(reference)))


@dataclass(frozen=True)
class FieldCheck:
    order: int
    grid: tuple[int, int, int]
    error: float
    tolerance: float
    reference_max: float

    @property
    def passed(self) -> bool:
        return self.error <= self.tolerance


def field_check(
    tendency: TendencyFn, order: int, grid: object, tolerance: float = 1e-12,
    reference: np.ndarray | None = None,
) -> FieldCheck:
    """Compare one tendency call of ``tendency`` with the reference on the point-varying input."""
    grid = dg.check_grid(grid)
    fields = dg.make_fields(order, grid, varying=True)
    if reference is None:
        reference = dg.reference_tendency(fields, order, grid)
    values = tendency(fields, order, grid)
    return FieldCheck(order, grid, relative_max_difference(values, reference), tolerance,
                      float(np.max(np.abs(reference))))


@dataclass(frozen=True)
class IntegrationCheck:
    order: int
    grid: tuple[int, int, int]
    end_time: float
    nstep: int
    error_dt: float
    error_half_dt: float
    mass_drift: float

    @property
    def convergence_ratio(self) -> float:
        """Error at dt over error at dt/2: about 8 for a third-order scheme."""
        return self.error_dt / self.error_half_dt

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "convergence_ratio": self.convergence_ratio}


def integration_check(
    tendency: TendencyFn, order: int, grid: object, dt: float, nstep: int,
    on_step: Callable[[int, int], None] | None = None,
) -> IntegrationCheck:
    """Integrate the benchmark problem to ``dt * nstep`` with dt and with dt/2."""
    grid = dg.check_grid(grid)
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid)
    end_time = dt * nstep
    exact = dg.exact_solution(mesh, end_time)
    mass0 = dg.mass(fields["q"], mesh)

    def evaluate(q: np.ndarray) -> np.ndarray:
        return tendency({**fields, "q": q}, order, grid)

    errors, drift = [], 0.0
    total = 3 * nstep
    done = 0
    for steps in (nstep, 2 * nstep):
        q = fields["q"]
        for _ in range(steps):
            q = dg.ssp_rk3_step(q, end_time / steps, evaluate)
            done += 1
            if on_step:
                on_step(done, total)
        errors.append(dg.relative_l2_error(q, exact, mesh))
        drift = max(drift, abs(dg.mass(q, mesh) - mass0))
    return IntegrationCheck(order, grid, end_time, nstep, errors[0], errors[1], drift)
