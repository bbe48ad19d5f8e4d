"""Demands per resource in SM cycles (Equations 3, 5-7), the binding resource, the calibration
factor eta and the FP64-budget closure.

    D_fp64 = (sum_s c_tc(s) N_DMMA,s + c_cc N_fp64) / N_SM       (Equations 5-7)
    D_r    = X_r / (C_r N_SM)   for DRAM bytes, L1 LSU wavefronts, L2 bytes, issue, ALU, FMA
    T      = eta max_r D_r   SM cycles;   t = T / f_m             (Equations 3-4)
    eta    = elapsed SM cycles / max_r D_r  on the calibration machine

A model with an overlap exponent k replaces max_r D_r by the k-norm (sum_r D_r^k)^(1/k) in both
eta and T (``combined``): resources that a kernel does not overlap perfectly add time, so when a
transfer shrinks the binding demand (8x8x4 -> 16x8x4 halves the DMMA budget) the others show
through instead of the time falling by the whole factor (the eta drift of paper §9.3). k = None
is the paper's max; the model file records k, ``composer model overlap`` chooses it from pairs of
calibrated shapes (composer.model.overlap).

``dmma`` maps SASS shapes to executed instruction counts: a kernel issues one shape in practice,
but a transferred count may split (see ``composer.model.shapes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from composer.model.capacity import RESOURCES, Capacities

#: Counter quantity each non-FP64 resource divides (composer.model.counters names).
NUMERATORS: dict[str, str] = {"dram": "dram_bytes", "lsu_wavefronts": "lsu_wavefronts",
                              "l2_bytes": "l2_bytes", "issue": "issue", "alu": "alu", "fma": "fma"}


def fp64_budget(dmma: Mapping[str, float], fp64: float, machine: Capacities) -> float:
    """S (Equation 5): the priced FP64-budget cycles summed over SMs."""
    return sum(machine.dmma_price(shape) * n for shape, n in dmma.items()) + machine.dfma_price * fp64


@dataclass(frozen=True)
class Demands:
    """Demand per resource in SM cycles, and which one is largest."""

    cycles: dict[str, float]

    @property
    def binding(self) -> str:
        """The resource whose demand sets the prediction (ties: the first in RESOURCES)."""
        return max(RESOURCES, key=lambda r: self.cycles[r])

    @property
    def roof(self) -> float:
        """max_r D_r."""
        return self.cycles[self.binding]

    def combined(self, overlap: float | None = None) -> float:
        """max_r D_r (overlap None) or the k-norm of the demands (see the module docstring)."""
        return combined(self.cycles, overlap)


def combined(cycles: Mapping[str, float], overlap: float | None = None) -> float:
    """The demands combined into one roof: max (the paper) or the ``overlap``-norm (k >= 1).

    Normalized by the max before the power so that k up to 64 stays finite for any cycle count."""
    top = max(cycles.values())
    if overlap is None or top <= 0:
        return top
    if not overlap >= 1:  # NaN too
        raise ValueError(f"overlap exponent {overlap} < 1 (a norm needs k >= 1)")
    return top * sum((v / top) ** overlap for v in cycles.values()) ** (1.0 / overlap)


def demands(counts: Mapping[str, float], dmma: Mapping[str, float], machine: Capacities) -> Demands:
    """Equation 3's demands of one kernel on ``machine`` (at its active SM count)."""
    n = machine.sm_count
    cycles = {"fp64": fp64_budget(dmma, counts["fp64"], machine) / n}
    for resource, quantity in NUMERATORS.items():
        cycles[resource] = counts[quantity] / (machine.per_sm_cycle[resource] * n)
    return Demands({r: cycles[r] for r in RESOURCES})


def eta(elapsed_cycles: float, calibration: Demands, overlap: float | None = None) -> float:
    """Elapsed cycles over the combined demand (the largest: overlap None); 1/eta is the fraction
    of the roof reached."""
    if calibration.roof <= 0:
        raise ValueError("a kernel with no demand on any resource cannot be calibrated")
    return elapsed_cycles / calibration.combined(overlap)


def predicted_seconds(eta_value: float, target: Demands, machine: Capacities, overlap: float | None = None) -> float:
    """Equation 4: eta max_r D_r / f_m (the target's boost clock), the k-norm for max with overlap k."""
    return eta_value * target.combined(overlap) / machine.clock_hz


def closure(budget_cycles: float | None, dmma: Mapping[str, float], fp64: float,
            machine: Capacities) -> float | None:
    """Counter over priced demand of the FP64 budget (Table S12): None without the counter or
    without priced work."""
    priced = fp64_budget(dmma, fp64, machine)
    if budget_cycles is None or priced <= 0:
        return None
    return budget_cycles / priced
