"""Table 6 from the capacity table: the cycle price of one DMMA instruction per machine and shape,
``c_tc = max(4, F_DMMA / C_tc)``, and of one warp-wide DFMA, ``c_cc = 64 / C_cc``; with the
capacities per SM cycle and their sources (Tables 5, S13)."""

from __future__ import annotations

from typing import Any

from composer.arch.machines import DMMA_FLOOR_CYCLES, Machine
from composer.arch.mma import mma_shape
from composer.model.capacity import capacities


def price_rows(machine: Machine) -> list[dict[str, Any]]:
    """One row per DMMA shape the machine issues: FLOP, FLOP price, price with the floor."""
    rows = []
    for shape in machine.dmma_shapes:
        flop = mma_shape(shape).flop
        rows.append({"machine": machine.name, "shape": shape, "flop": flop,
                     "flop_price": machine.dmma_price(flop, floor=False), "c_tc": machine.dmma_price(flop),
                     "floor_binds": machine.dmma_price(flop, floor=False) < DMMA_FLOOR_CYCLES})
    return rows


def machine_prices(machine: Machine) -> dict[str, Any]:
    """Prices, capacities per SM cycle and their sources of one machine (MissingCapacityError
    without a capacity table)."""
    caps = capacities(machine)
    assert machine.capacity is not None
    return {
        "machine": machine.name, "arch": machine.arch, "sm_count": machine.sm_count,
        "boost_clock_ghz": machine.boost_clock_ghz,
        "fp64_tc_flop_per_sm_cycle": machine.fp64_tc_flop_per_sm_cycle,
        "fp64_core_flop_per_sm_cycle": machine.fp64_core_flop_per_sm_cycle,
        "dmma": price_rows(machine), "c_cc": machine.dfma_price,
        "capacity_per_sm_cycle": {**caps.per_sm_cycle, **({"dram_sm_ceiling": machine.capacity.dram_sm_ceiling}
                                                          if machine.capacity.dram_sm_ceiling is not None else {}),
                                  **({"l2_copy_tbs": dict(machine.capacity.l2_copy_tbs)}
                                     if machine.capacity.l2_copy_tbs else {}),
                                  **({"dram_scale": machine.capacity.dram_scale}  # a fraction of the datasheet
                                     if machine.capacity.dram_scale is not None else {})},
        "dram_from": machine.capacity.dram_from,
        "sources": ({**machine.capacity.source, "l2_bytes": machine.capacity.source["l2_copy_tbs"]}
                    if machine.capacity.l2_from == "copy" else machine.capacity.source),
    }
