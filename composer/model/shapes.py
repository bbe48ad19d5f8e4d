"""DMMA counts carried across instruction shapes (paper §6.3, §6.4, A3).

The executed DMMA count is read only on a machine that runs. For a target, the model keeps the
FLOP a kernel executes through DMMA and divides by the FLOP of the SASS instruction the target
binary issues: ``N_target = N_calib x F(calib shape) / F(target shape)``. A DMMA.8x8x4 count on
the H200 therefore halves at 16x8x4, and a 16x8x4 kernel on sm_100, which the assembler expands
into two DMMA.8x8x4, doubles. Library roles (cuBLAS) have no cross-compiled binary: Equation 8
prices each of the target's shapes and keeps the cheapest.
"""

from __future__ import annotations

from typing import Callable, Mapping

from composer.arch.mma import mma_shape
from composer.model.kernels import shape_flop


def transfer_dmma(count: float, source_shape: str, target_shares: Mapping[str, float]) -> dict[str, float]:
    """Executed DMMA per target SASS shape for ``count`` instructions of ``source_shape``.

    ``target_shares`` weighs the target shapes (a build kernel's static SASS counts; one shape in
    practice): the DMMA FLOP are held fixed and split in proportion to the FLOP each shape's
    instructions carry in the binary.
    """
    total_share = sum(target_shares.values())
    if count == 0:
        return {mma_shape(s).name: 0.0 for s in target_shares}
    if total_share <= 0:
        raise ValueError("no target DMMA shape to carry the count to")
    flop = count * shape_flop(source_shape)
    weighted = {mma_shape(s).name: w * shape_flop(s) for s, w in target_shares.items() if w > 0}
    scale = sum(weighted.values())
    return {s: flop * (w / scale) / shape_flop(s) for s, w in weighted.items()}


def cheapest_shape(count: float, source_shape: str, shapes: tuple[str, ...],
                   seconds: Callable[[dict[str, float]], float]) -> tuple[str, dict[str, float]]:
    """Equation 8 for one library role: the shape among ``shapes`` whose carried count gives the
    smallest predicted time (``seconds`` of a DMMA-count dict), and the time of each shape.

    Ties (the wide shapes tie where the floor does not bind) go to the first listed shape.
    """
    if not shapes:
        raise ValueError("the target issues no DMMA shape")
    times = {mma_shape(s).name: seconds(transfer_dmma(count, source_shape, {s: 1.0})) for s in shapes}
    best = min(times, key=lambda s: (times[s], list(times).index(s)))
    return best, times
