"""The two validation levels of the paper (Section 4.4) for any backend, with their verdicts.

1. Field check: one tendency evaluation on the point-varying input against the NumPy
   reference, ``max|dqdt - ref| / max|ref|``, passed below a tolerance.
2. Time integration of the benchmark problem with SSP-RK3 at dt, dt/2 and dt/4 to the same end
   time. Its verdict has three criteria:

   * temporal convergence: ``|q(dt) - q(dt/2)| / |q(dt/2) - q(dt/4)|`` is 2^3 = 8 for a
     third-order integrator. All three runs solve the same semi-discrete system, so the spatial
     error cancels in each difference and the ratio measures the time integration alone, on any
     grid. (The error against the exact solution at dt over the one at dt/2, the former measure,
     is about 1 whenever the spatial error dominates, which it does at most settings.) The finer
     difference must stand above round-off, or the ratio would measure noise;
   * mass conservation: the drift of ``sum w q`` stays at round-off;
   * finite: every error and difference is a finite number.

``default_integration`` derives grid, dt and step count from the order alone (no schedule):
dt is a fixed fraction of the stability limit of the benchmark operator, where the temporal
error is largest and still in its asymptotic, third-order regime.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from composer import dg

TendencyFn = Callable[[Mapping[str, np.ndarray], int, tuple[int, int, int]], np.ndarray]

EPS = float(np.finfo(np.float64).eps)
THIRD_ORDER_RATIO = 8.0
#: Accepted temporal convergence ratios: observed order log2(ratio) within 3 -0.19/+0.17. SSP-RK2
#: gives 4, forward Euler 2; the defaults measure 7.94 (p = 1) to 8.000 (p >= 15).
RATIO_BAND = (7.0, 9.0)
#: The dt/2 - dt/4 difference must exceed this many eps per step at dt/4: 14 times its round-off
#: when the temporal error is far below it (0.14 eps per step, measured at p = 7, 15, 31), so noise
#: moves the ratio by less than 0.6. With the initial wave at the resolution limit
#: (resolved_wavenumber) the defaults resolve it at every order: p = 127 gives 1.09e-9 against a
#: floor of 3.6e-15, ratio 8.000 (with the k = 1 wave it was 1.65e-14, ratio 8.055, and round-off
#: from p = 255 on).
ROUNDOFF_FACTOR = 2.0
#: Allowed mass drift, relative to the integral of |q0|: this many eps per step taken.
MASS_DRIFT_FACTOR = 10.0
#: dt times the spectral radius of the benchmark operator. SSP-RK3 is stable to about 1.7 on the
#: imaginary axis; at 1.0 the ratio is 7.94 to 8.000, at 1.7 it drops to 7.5 (p = 3).
DEFAULT_CFL = 1.0
#: Smallest default grid: at least this many nodes per unit length (the period of q0) per axis.
MIN_NODES_PER_PERIOD = 8
#: Default step count: about this many points x steps at dt, within [MIN_NSTEP, MAX_NSTEP]. The
#: ratio does not improve with more steps (signal and round-off both grow linearly with them).
POINT_STEPS = 2**21
MIN_NSTEP, MAX_NSTEP = 2, 20


def relative_max_difference(values: np.ndarray, reference: np.ndarray) -> float:
    """``max|values - reference| / max|reference|`` (the paper's field-to-field measure)."""
    return float(np.max(np.abs(values - reference)) / np.max(np.abs(reference)))


@dataclass(frozen=True)
class Criterion:
    """One pass/fail criterion of a verdict: what was measured and what it had to satisfy."""

    name: str
    passed: bool
    measured: str
    required: str


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

    def criterion(self) -> Criterion:
        return Criterion(f"field check on {self.grid}", self.passed,
                         f"max|diff|/max|ref| = {self.error:.3e}", f"<= {self.tolerance:g}")


def field_check(
    tendency: TendencyFn, order: int, grid: object, tolerance: float = 1e-12,
    reference: np.ndarray | None = None, fields: Mapping[str, np.ndarray] | None = None,
) -> FieldCheck:
    """Compare one tendency call of ``tendency`` with the reference on the point-varying input.

    ``fields`` and ``reference`` (that input and its reference tendency, computed once by the
    caller) let a sweep check many candidates against one reference: at p = 767 each costs
    minutes of host time."""
    grid = dg.check_grid(grid)
    if fields is None:
        fields = dg.make_fields(order, grid, varying=True)
    if reference is None:
        reference = dg.reference_tendency(fields, order, grid)
    values = tendency(fields, order, grid)
    return FieldCheck(order, grid, relative_max_difference(values, reference), tolerance,
                      float(np.max(np.abs(reference))))


# --- default settings from the order ------------------------------------------------------------


@lru_cache(maxsize=32)
def spectral_radius_1d(order: int, elements: int) -> float:
    """Largest |eigenvalue| of the benchmark operator along one axis of the unit period.

    For the benchmark input (unit velocity, affine metric 2/h, unit normals, lift 2/(h w_0)) the
    operator of reference_tendency is, per axis, ``-(2/h) (D + e_0 (e_0 - e_N^prev) / w_0)`` on
    each element (the upwind flux leaves the outflow face alone and takes the neighbour's value at
    the inflow face), and the 3-D operator is the Kronecker sum of the three axes' operators, so
    its spectral radius is at most the sum of theirs (equal on a cubic grid).
    """
    _, weights = dg.lgl(order)
    d = dg.diff_matrix(order)
    nq = order + 1
    op = np.kron(np.eye(elements), d)
    for e in range(elements):
        row, upstream = e * nq, ((e - 1) % elements) * nq + order
        op[row, row] += 1.0 / weights[0]
        op[row, upstream] -= 1.0 / weights[0]
    return float(np.max(np.abs(np.linalg.eigvals(-2.0 * elements * op))))


def stable_time_step(order: int, grid: object, cfl: float = DEFAULT_CFL) -> float:
    """``cfl`` over the spectral radius of the benchmark operator on ``grid``."""
    return cfl / sum(spectral_radius_1d(order, n) for n in dg.check_grid(grid))


@dataclass(frozen=True)
class IntegrationSettings:
    grid: tuple[int, int, int]
    dt: float
    nstep: int


def resolved_wavenumber(order: int, grid: object) -> int:
    """The initial condition's wavenumber for the time-integration check: the largest k that keeps
    MIN_NODES_PER_PERIOD nodes on each period along the coarsest axis (k = 1 up to p = 7 on the
    default grids). Why: the stable dt shrinks as 1/p^2 while a k = 1 wave's frequency stays put,
    so at high order its temporal error (dt omega)^3 sinks below FP64 round-off (at p = 255 with
    k = 1 the dt/2 - dt/4 difference was round-off); a wave near the resolution limit keeps
    dt omega of order 1/p and the ratio measurable at every order."""
    nodes = (order + 1) * min(dg.check_grid(grid))
    return max(1, nodes // MIN_NODES_PER_PERIOD)


def default_integration(order: int, grid: object | None = None, dt: float | None = None,
                        nstep: int | None = None) -> IntegrationSettings:
    """Grid, dt and steps for ``integration_check`` at ``order``; given values are kept.

    Grid: the fewest elements that put MIN_NODES_PER_PERIOD nodes on q0's period (one element from
    p = 7 on). dt: DEFAULT_CFL over the spectral radius. Steps: about POINT_STEPS / points.
    """
    if grid is None:
        grid = (max(1, math.ceil(MIN_NODES_PER_PERIOD / (order + 1))),) * 3
    grid = dg.check_grid(grid)
    if dt is None:
        dt = stable_time_step(order, grid)
    if nstep is None:
        points = dg.Mesh(order, grid).num_points
        nstep = min(MAX_NSTEP, max(MIN_NSTEP, round(POINT_STEPS / points)))
    return IntegrationSettings(grid, dt, nstep)


# --- the time-integration check -----------------------------------------------------------------


@dataclass(frozen=True)
class IntegrationCheck:
    """Errors and differences of the runs at dt, dt/2 and dt/4 (``nstep``, 2 and 4 ``nstep`` steps)."""

    order: int
    grid: tuple[int, int, int]
    dt: float
    nstep: int
    end_time: float
    errors: tuple[float, float, float]  # relative L2 error against the exact solution at dt, dt/2, dt/4
    differences: tuple[float, float]  # |q(dt) - q(dt/2)| / |q(dt/2)|, |q(dt/2) - q(dt/4)| / |q(dt/4)|
    mass_drift: float  # largest |mass(q) - mass(q0)| of the three runs
    mass_scale: float  # the integral of |q0|
    wavenumber: int = 1  # of the initial wave sin(2 pi k x) sin(2 pi k y) sin(2 pi k z)

    @property
    def convergence_ratio(self) -> float:
        """Successive differences' ratio: 8 for a third-order scheme (nan when undefined)."""
        coarse, fine = self.differences
        return coarse / fine if fine > 0 else math.nan

    @property
    def roundoff_floor(self) -> float:
        """The finer difference must exceed this for the ratio to measure the time integration."""
        return ROUNDOFF_FACTOR * EPS * 4 * self.nstep

    @property
    def mass_tolerance(self) -> float:
        return MASS_DRIFT_FACTOR * EPS * 7 * self.nstep * self.mass_scale

    def criteria(self) -> list[Criterion]:
        values = (*self.errors, *self.differences, self.mass_drift)
        finite = all(math.isfinite(v) for v in values)
        low, high = RATIO_BAND
        ratio, fine = self.convergence_ratio, self.differences[1]
        resolved = fine > self.roundoff_floor
        if not finite:
            measured = "not computed (a run is not finite)"
        elif not resolved:
            measured = (f"unresolved: |q(dt/2) - q(dt/4)| = {fine:.2e} is round-off (<= {self.roundoff_floor:.1e}): "
                        f"at dt = {self.dt:.3g} the temporal error is below FP64 resolution (the default dt, "
                        "near the stability limit, gives the largest)")
        else:
            measured = (f"ratio {ratio:.3f} (|q(dt) - q(dt/2)| = {self.differences[0]:.3e}, "
                        f"|q(dt/2) - q(dt/4)| = {fine:.3e})")
        return [
            Criterion("finite", finite, "all errors and differences finite" if finite
                      else f"errors {self.errors}, differences {self.differences}, mass drift {self.mass_drift}",
                      "finite numbers"),
            Criterion("temporal convergence", finite and resolved and low <= ratio <= high, measured,
                      f"ratio in [{low:g}, {high:g}] (third order: {THIRD_ORDER_RATIO:g}), "
                      f"difference above {self.roundoff_floor:.1e}"),
            Criterion("mass conservation", finite and self.mass_drift <= self.mass_tolerance,
                      f"max |mass drift| = {self.mass_drift:.3e}",
                      f"<= {self.mass_tolerance:.1e} ({MASS_DRIFT_FACTOR:g} eps per step x integral of |q0|)"),
        ]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.criteria())

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "grid": list(self.grid), "convergence_ratio": self.convergence_ratio,
                "roundoff_floor": self.roundoff_floor, "mass_tolerance": self.mass_tolerance,
                "criteria": [asdict(c) for c in self.criteria()], "passed": self.passed}


def integration_check(
    tendency: TendencyFn, order: int, grid: object, dt: float, nstep: int,
    on_step: Callable[[int, int], None] | None = None, wavenumber: int | None = None,
) -> IntegrationCheck:
    """Integrate the benchmark problem (initial wave of ``wavenumber``, default
    :func:`resolved_wavenumber`) to ``dt * nstep`` with dt, dt/2 and dt/4."""
    if not (math.isfinite(dt) and dt > 0) or isinstance(nstep, bool) or int(nstep) != nstep or nstep < 1:
        raise ValueError(f"need a finite dt > 0 and an integer nstep >= 1, got dt={dt}, nstep={nstep}")
    grid = dg.check_grid(grid)
    mesh = dg.Mesh(order, grid)
    k = resolved_wavenumber(order, grid) if wavenumber is None else int(wavenumber)
    fields = dg.make_fields(order, grid, wavenumber=k)
    end_time = dt * nstep
    exact = dg.exact_solution(mesh, end_time, k)
    q0 = fields["q"]
    mass0 = dg.mass(q0, mesh)

    def evaluate(q: np.ndarray) -> np.ndarray:
        return tendency({**fields, "q": q}, order, grid)

    solutions, done = [], 0
    with np.errstate(all="ignore"):  # a diverging backend is reported by the "finite" criterion
        for refinement in (1, 2, 4):
            q, steps = q0, refinement * nstep
            for _ in range(steps):
                q = dg.ssp_rk3_step(q, end_time / steps, evaluate)
                done += 1
                if on_step:
                    on_step(done, 7 * nstep)
            solutions.append(q)
        errors = tuple(dg.relative_l2_error(q, exact, mesh) for q in solutions)
        differences = tuple(dg.relative_l2_error(a, b, mesh) for a, b in zip(solutions, solutions[1:]))
        drift = float(np.max([abs(dg.mass(q, mesh) - mass0) for q in solutions]))  # nan propagates
    return IntegrationCheck(order, grid, dt, nstep, end_time, errors, differences,  # type: ignore[arg-type]
                            drift, dg.mass(np.abs(q0), mesh), k)
