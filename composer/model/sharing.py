"""One calibration per kernel binary: a kernel that several paths launch at one order is priced once.

Why: GEMM_CUTE runs cuBLAS wherever cuBLAS is faster (p >= 127 on the H200), so there it launches
exactly GEMM's kernels, and both paths share the support kernels (``surface_flux_nq128``,
``volume_flux_nq128``, ``separable_lift_nq128``) everywhere. Calibrated separately, the same binary
gets two etas that differ by the profiles' noise (0.1-2 %), and with restricted calibrations two SM
scalings; the predicted ratio of two identical paths then differs from 1 by that noise and can pass
the S/E screen with either sign (balance test 6, session 11: GEMM_CUTE/GEMM at p = 127 on 26 SMs,
measured 1.000, predicted 1.013 and screened). A binary is its kernel name plus its launch (grid,
block, registers) at one order on one calibration machine; the same name at another launch is
another kernel (a library picks its kernel per shape, a fused symbol can stand for several tables).

The calibration a group shares is its best-informed member: the one whose SM scaling was fitted
from the most restricted calibrations, then GEMM's (the library path every ratio divides by), then
the first path alphabetically. Restricted calibrations are records (they only fit the full
calibration's SM scaling) and are left as profiled.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from composer.model.calibrate import CalibratedKernel

#: The path whose calibration a shared binary takes when the others know no more about it.
PREFERRED_PATH = "GEMM"


def binary_key(k: CalibratedKernel) -> tuple[str, int, str, str, int, int, int]:
    """What makes two calibrated kernels the same binary at the same work."""
    c = k.counters
    return (k.machine, k.order, k.role, c.name, int(c.grid), int(c.block), int(c.registers))


def _information(k: CalibratedKernel) -> tuple[int, int, str]:
    """Sort key, best first: most restricted calibrations, then the preferred path, then the name."""
    runs = len(k.sm_scaling.fitted_from) if k.sm_scaling is not None else int(k.latency_sm_cycles is not None)
    return (-runs, 0 if k.path == PREFERRED_PATH else 1, k.path)


def share_identical_kernels(kernels: Iterable[CalibratedKernel]) -> list[CalibratedKernel]:
    """The kernel list with every full-SM binary that several paths launch replaced, in each path,
    by one calibration of it (``shared_from`` names the path it came from); order is kept."""
    kernels = list(kernels)
    groups: dict[tuple, list[CalibratedKernel]] = {}
    for k in kernels:
        if "@" not in k.machine:
            groups.setdefault(binary_key(k), []).append(k)
    source = {key: min(members, key=_information) for key, members in groups.items()
              if len({m.path for m in members}) > 1}
    out = []
    for k in kernels:
        rep = source.get(binary_key(k)) if "@" not in k.machine else None
        if rep is None or rep is k:
            out.append(k)
            continue
        out.append(replace(rep, path=k.path, counters=replace(rep.counters, index=k.counters.index),
                           shared_from=rep.path))
    return out
