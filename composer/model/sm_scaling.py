"""How one kernel's time changes with the active SM count of its own machine (the balance axis),
fitted from its full and restricted calibrations.

Why a form of its own: the capacities alone, calibrated at the full SM count, predict a kernel's
time on N SMs only while the kernel keeps the same fraction of its roof there. Two effects break
that, and the H200's restricted calibrations (green contexts, 66 SMs) show both:

* **Latency-bound work.** A kernel at low occupancy cannot hold the bytes in flight that its roof
  needs; that part of its work takes SM-cycles (Little's law per SM), a demand ``lambda / N``
  (FUSED_TC at p = 15: 516 us on 132 SMs, 767 on 76, 1342 on 42, its SM-cycles within 3 % from 76
  down).
* **eta drifting with N.** A kernel whose SM-side demands grow as 1/N while its DRAM demand stays
  can keep its time better than the k-norm of those demands says (the p = 7 surface flux ran 452 us
  on 132 SMs and 392 on 66, where the calibration's eta and demands give 539): its eta falls with N.

The form: ``t(N) = eta_L (N / N_full)^gamma * || D(N), lambda / N ||_K / f``: the latency demand
joins the other demands inside the model's k-norm (``overlap``; the max without one), and eta moves
as a power of N. Per kernel, eta_L is anchored exactly at the full calibration and (lambda, gamma)
minimize the squared log error over the restricted calibrations plus ``EXPONENT_PENALTY * gamma^2``:
with one restricted calibration the fit is exact and takes the latency demand when the kernel ran
slower there than its roof (gamma = 0) and the eta exponent when it ran faster (lambda = 0); two or
more restricted SM counts make it a genuine two-parameter fit. Only the machine the kernel was
calibrated on takes it (latency terms of one machine's memory system say nothing of another's).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, Sequence

from composer.model.demand import combined

#: Keeps gamma at 0 where the latency demand alone fits (one restricted calibration: the two
#: parameters are not both determined by one point); small against a 1 % log error (1e-4).
EXPONENT_PENALTY = 1e-6

#: The latency demand's search range, in units of the full calibration's SM-cycles: at most those
#: (session 8's cap: the term never exceeds what the full-SM run took; a kernel slower on fewer SMs
#: than pure 1/N takes the rest in gamma), so that eta_L stays a fraction of the roof reached.
_LAMBDA_RANGE = (1e-4, 1.0)
#: A latency demand is taken only when it lowers the cost by more than this (a cost flat in lambda,
#: e.g. every demand scaling as 1/N under the max, keeps lambda = 0 instead of a rounding winner).
_MIN_COST_GAIN = 1e-10
_GRID = 161
_REFINE = 80
_MINIMA = 6  # grid local minima refined (the lowest)


@dataclass(frozen=True)
class RestrictedRun:
    """One restricted calibration of a kernel: its active SMs, elapsed cycles and its demands there
    (the full calibration's counters priced on the restricted capacities)."""

    label: str
    sm_count: int
    elapsed_cycles: float
    demands: Mapping[str, float]


@dataclass(frozen=True)
class SmScaling:
    """The fitted SM-count dependence of one kernel on its calibration machine."""

    latency_sm_cycles: float  # lambda: the latency demand's SM-cycles (0: none)
    eta: float  # eta_L: elapsed over the k-norm of the demands and lambda / N_full
    eta_sm_exponent: float  # gamma
    full_sm_count: int
    fitted_from: tuple[str, ...]  # the restricted calibrations' labels
    rms_log_error: float  # of the fit over the restricted calibrations
    #: the ``interp`` form (session 12): (SM count, log(measured / fitted)) at each restricted
    #: calibration, interpolated linearly in log N between them and the full run (where it is 0) and
    #: held at the lowest one below it; empty: the plain form
    residuals: tuple[tuple[int, float], ...] = ()

    def cycles(self, demands: Mapping[str, float], sm_count: int, overlap: float | None) -> float:
        """Predicted elapsed cycles on ``sm_count`` SMs from the target's demands there."""
        drift = (sm_count / self.full_sm_count) ** self.eta_sm_exponent
        base = self.eta * drift * combined({**demands, "latency": self.latency_sm_cycles / sm_count}, overlap)
        return base * math.exp(self.correction(sm_count))

    def correction(self, sm_count: int) -> float:
        """The log residual the ``interp`` form adds at ``sm_count`` (0 without residuals)."""
        if not self.residuals:
            return 0.0
        points = sorted({(self.full_sm_count, 0.0), *self.residuals})
        if sm_count <= points[0][0]:
            return points[0][1]
        if sm_count >= points[-1][0]:
            return points[-1][1]
        x = math.log(sm_count)
        for (n0, r0), (n1, r1) in zip(points, points[1:]):
            if n0 <= sm_count <= n1:
                w = (x - math.log(n0)) / (math.log(n1) - math.log(n0))
                return r0 + w * (r1 - r0)
        raise AssertionError("unreachable: sm_count lies between the first and last points")

    def latency_binds(self, demands: Mapping[str, float], sm_count: int) -> bool:
        """Whether the latency demand is the largest one on ``sm_count`` SMs."""
        return self.latency_sm_cycles / sm_count > max(demands.values())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fitted_from"] = list(self.fitted_from)
        if self.residuals:
            out["residuals"] = [list(r) for r in self.residuals]
        else:
            del out["residuals"]  # files of the plain form hash as before
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SmScaling:
        fields = dict(raw)
        fields["fitted_from"] = tuple(raw["fitted_from"])
        fields["residuals"] = tuple((int(n), float(r)) for n, r in raw.get("residuals", ()))
        return cls(**fields)


def _norm(demands: Mapping[str, float], latency: float, overlap: float | None) -> float:
    return combined({**demands, "latency": latency}, overlap)


def fit_sm_scaling(full_elapsed: float, full_demands: Mapping[str, float], full_sm_count: int,
                   restricted: Sequence[RestrictedRun], overlap: float | None,
                   residuals: bool = False) -> SmScaling:
    """(eta_L, lambda, gamma) of one kernel; see the module docstring. ``residuals``: keep the fit's
    log residual at each restricted calibration (the ``interp`` form), so that the prediction
    passes through every calibration and interpolates between them."""
    if not restricted:
        raise ValueError("an SM scaling needs at least one restricted calibration")
    if full_elapsed <= 0 or any(r.elapsed_cycles <= 0 for r in restricted):
        raise ValueError("elapsed cycles must be positive")
    xs = [math.log(r.sm_count / full_sm_count) for r in restricted]
    sxx = sum(x * x for x in xs) + EXPONENT_PENALTY

    def solve(lam: float) -> tuple[float, float, float]:
        eta_l = full_elapsed / _norm(full_demands, lam / full_sm_count, overlap)
        residuals = [math.log(r.elapsed_cycles / (eta_l * _norm(r.demands, lam / r.sm_count, overlap)))
                     for r in restricted]
        gamma = sum(res * x for res, x in zip(residuals, xs)) / sxx
        cost = sum((res - gamma * x) ** 2 for res, x in zip(residuals, xs)) + EXPONENT_PENALTY * gamma * gamma
        return cost, eta_l, gamma

    unit = full_elapsed * full_sm_count
    lo, hi = (math.log(unit * f) for f in _LAMBDA_RANGE)
    grid = [lo + (hi - lo) * i / (_GRID - 1) for i in range(_GRID)]
    costs = [solve(math.exp(g))[0] for g in grid]

    def refine(i: int) -> float:
        """Golden-section search of log lambda between grid point i's neighbours."""
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, _GRID - 1)]
        ratio = (math.sqrt(5.0) - 1.0) / 2.0
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        fc, fd = solve(math.exp(c))[0], solve(math.exp(d))[0]
        for _ in range(_REFINE):
            if fc < fd:
                b, d, fd = d, c, fc
                c = b - ratio * (b - a)
                fc = solve(math.exp(c))[0]
            else:
                a, c, fc = c, d, fd
                d = a + ratio * (b - a)
                fd = solve(math.exp(d))[0]
        return min(math.exp((a + b) / 2.0), unit * _LAMBDA_RANGE[1])

    # every local minimum of the grid is refined: with two restricted runs a broad valley (small
    # lambda, large gamma) can sit beside the narrow one of the exact fit
    minima = [i for i in range(_GRID) if costs[i] <= costs[max(i - 1, 0)] and costs[i] <= costs[min(i + 1, _GRID - 1)]]
    minima = sorted(minima, key=costs.__getitem__)[:_MINIMA]  # a cost flat in lambda has them everywhere
    best_lam, best = 0.0, solve(0.0)
    for lam in (refine(i) for i in minima):
        trial = solve(lam)
        if trial[0] < best[0] - _MIN_COST_GAIN:
            best_lam, best = lam, trial
    cost, eta_l, gamma = best
    rms = math.sqrt(max(cost - EXPONENT_PENALTY * gamma * gamma, 0.0) / len(restricted))
    fitted = SmScaling(latency_sm_cycles=best_lam, eta=eta_l, eta_sm_exponent=gamma, full_sm_count=full_sm_count,
                       fitted_from=tuple(r.label for r in restricted), rms_log_error=rms)
    if not residuals:
        return fitted
    kept = tuple((r.sm_count, math.log(r.elapsed_cycles / fitted.cycles(r.demands, r.sm_count, overlap)))
                 for r in restricted)
    return replace(fitted, residuals=kept)
