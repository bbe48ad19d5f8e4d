"""A machine as the model sees it: capacities per SM cycle, DMMA and DFMA prices, SM count, clock.

Why separate from the machine table: the model also runs on a machine cut to fewer SMs (the
balance axis, paper §8.4). Restricting SMs removes SMs, not bandwidth, so the DRAM capacity per
active-SM cycle grows by N_full / N_active while every other per-SM capacity, the clock and the
prices stay; the demands then divide by the active SM count. Measured on the H200 (session 8: a
copy kernel in green contexts keeps 3.7 TB/s down to 52 SMs, 1.55 TB/s on 16), the growth stops at
what one SM can draw on its own, ``capacity.dram_sm_ceiling`` where the machine table has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from composer.arch.machines import CAPACITY_KEYS, DMMA_FLOOR_CYCLES, Machine
from composer.arch.mma import mma_shape
from composer.model.errors import MissingCapacityError
from composer.runtime.green import check_sm_count

#: The model's resources (Equation 3), in the order reports list them.
RESOURCES: tuple[str, ...] = ("fp64", "dram", "lsu_wavefronts", "l2_bytes", "issue", "alu", "fma")


@dataclass(frozen=True)
class Capacities:
    """Capacities per (active) SM cycle of one machine, possibly restricted to ``sms`` SMs."""

    machine: str
    arch: str
    sm_count: int  # SMs the demands divide by: the active ones
    full_sm_count: int
    clock_hz: float  # boost clock: the prediction's f_m
    per_sm_cycle: dict[str, float]  # resource -> capacity (fp64 is 1: the budget is in cycles)
    dmma_prices: dict[str, float]  # native SASS shape ("16x8x4") -> c_tc
    dfma_price: float  # c_cc
    tc_flop_per_sm_cycle: float
    floor: bool = True

    @property
    def dmma_shapes(self) -> tuple[str, ...]:
        """Shapes the machine issues as one SASS instruction (Equation 8 enumerates these)."""
        return tuple(self.dmma_prices)

    def dmma_price(self, shape: str) -> float:
        """c_tc of one SASS DMMA of ``shape`` on this machine (Equation 6)."""
        if shape in self.dmma_prices:
            return self.dmma_prices[shape]
        flop = mma_shape(shape).flop / self.tc_flop_per_sm_cycle
        return max(DMMA_FLOOR_CYCLES, flop) if self.floor else flop

    @property
    def label(self) -> str:
        """``h200`` for the whole machine, ``h200@96`` for 96 active SMs."""
        return self.machine if self.sm_count == self.full_sm_count else f"{self.machine}@{self.sm_count}"

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "arch": self.arch, "sm_count": self.sm_count,
                "full_sm_count": self.full_sm_count, "clock_hz": self.clock_hz,
                "per_sm_cycle": self.per_sm_cycle, "dmma_prices": self.dmma_prices,
                "dfma_price": self.dfma_price, "floor": self.floor}


def capacities(machine: Machine, sms: int | None = None, floor: bool = True) -> Capacities:
    """The model's view of ``machine``, at ``sms`` active SMs when given (checked: a count a
    green-context split can give)."""
    if machine.capacity is None or machine.dram_bytes_per_sm_cycle is None:
        raise MissingCapacityError(
            f"machine {machine.name!r} has no capacities per SM cycle ([machines.{machine.name}.capacity] "
            f"in the machine table); the model cannot price it")
    active = machine.sm_count if sms is None else check_sm_count(sms, machine.sm_count, f"machine {machine.name}")
    dram = machine.dram_bytes_per_sm_cycle * machine.sm_count / active
    if machine.capacity.dram_sm_ceiling is not None:
        dram = min(dram, machine.capacity.dram_sm_ceiling)
    per_cycle = {"fp64": 1.0, "dram": dram, **machine.capacity.per_sm_cycle(),
                 "l2_bytes": machine.capacity.l2_at(active, machine.clock_hz)}
    assert set(per_cycle) == set(RESOURCES) and set(CAPACITY_KEYS) <= set(per_cycle)
    prices = {mma_shape(s).name: machine.dmma_price(mma_shape(s).flop, floor) for s in machine.dmma_shapes}
    return Capacities(machine=machine.name, arch=machine.arch, sm_count=active,
                      full_sm_count=machine.sm_count, clock_hz=machine.clock_hz,
                      per_sm_cycle=per_cycle, dmma_prices=prices, dfma_price=machine.dfma_price,
                      tc_flop_per_sm_cycle=machine.fp64_tc_flop_per_sm_cycle, floor=floor)
