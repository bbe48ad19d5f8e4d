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

The calibration a group shares is its best-informed member: the one with the most restricted
calibrations profiled, then GEMM's (the library path every ratio divides by), then
the first path alphabetically (then the earlier launch). Restricted calibrations are records (they only fit the full
calibration's SM scaling) and are left as profiled.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from composer.model.calibrate import CalibratedKernel

#: The path whose calibration a shared binary takes when the others know no more about it.
PREFERRED_PATH = "GEMM"


#: The counters a binary's launch at one problem executes exactly (instruction counts; bytes moved
#: through L2 and DRAM vary from run to run), compared to this many significant digits.
WORK_COUNTERS = ("dmma", "fp64", "issue", "alu", "fma")
_DIGITS = 6


def _significant(x: float) -> float:
    return float(f"{x:.{_DIGITS - 1}e}")


def binary_key(k: CalibratedKernel) -> tuple:
    """What makes two calibrated kernels the same binary doing the same work: name and launch on one
    calibration machine at one order, and the instructions it executed. Not the role: a library
    kernel's role counts its launches within a path (``NAME#2``), so the same cuBLAS kernel serving
    GEMM's z GEMM is ``#2`` there and ``#1`` in GEMM_FUSED, and the y GEMM it also serves in GEMM
    (``#1``, another problem) is another piece of work: the executed instructions tell them apart."""
    c = k.counters
    return (k.machine, k.order, c.name, int(c.grid), int(c.block), int(c.registers),
            tuple(_significant(c.counts[q]) for q in WORK_COUNTERS))


def _information(k: CalibratedKernel, restricted_runs: Counter) -> tuple[int, int, str, int]:
    """Sort key, best first: most restricted calibrations profiled (not the terms fitted from them,
    which depend on the form and the exponent), then the preferred path, the name, the launch."""
    runs = restricted_runs[(k.machine, k.path, k.order, k.role)]
    return (-runs, 0 if k.path == PREFERRED_PATH else 1, k.path, k.counters.index)


def copy_of(source: CalibratedKernel, k: CalibratedKernel) -> CalibratedKernel:
    """``source``'s calibration in ``k``'s place: ``k``'s path, role and launch index."""
    return replace(source, path=k.path, role=k.role, counters=replace(source.counters, index=k.counters.index),
                   shared_from=source.path)


def share_identical_kernels(kernels: Iterable[CalibratedKernel]) -> list[CalibratedKernel]:
    """The kernel list with every full-SM binary that several paths launch replaced, in each path,
    by one calibration of it (``shared_from`` names the path it came from); order is kept."""
    kernels = list(kernels)
    restricted_runs = Counter((k.machine.split("@")[0], k.path, k.order, k.role) for k in kernels if "@" in k.machine)
    groups: dict[tuple, list[CalibratedKernel]] = {}
    for k in kernels:
        if "@" not in k.machine:
            groups.setdefault(binary_key(k), []).append(k)
    source = {key: min(members, key=lambda m: _information(m, restricted_runs)) for key, members in groups.items()
              if len({m.path for m in members}) > 1}
    out = []
    for k in kernels:
        rep = source.get(binary_key(k)) if "@" not in k.machine else None
        out.append(k if rep is None or rep is k else copy_of(rep, k))
    return out


def reshare(refitted: Sequence[CalibratedKernel], originals: Sequence[CalibratedKernel]) -> list[CalibratedKernel]:
    """After a refit of a shared model's kernels (``refitted[i]`` from ``originals[i]``), each copy
    taken again from the refitted kernel it was copied from (its recorded ``shared_from`` path), so
    that the choice of source, which can depend on the refit (a latency term under one exponent and
    not another), stays the fit's."""
    own = {(binary_key(o), o.path): i for i, o in enumerate(originals) if o.shared_from is None}
    out = list(refitted)
    for i, o in enumerate(originals):
        if o.shared_from is not None:
            out[i] = copy_of(refitted[own[(binary_key(o), o.shared_from)]], o)
    return out
