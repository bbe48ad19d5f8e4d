"""Shared-memory bank wavefronts of the box kernel's tile accesses, counted lane by lane.

Why: the flux tiles' layout (padded strides, or unpadded rows with i XOR-swizzled, ``tile_swizzle``)
decides whether the tensor-core engine's fragment loads serialize. A layout is chosen on the CPU, so
its conflicts are counted here with the template's formulas (``Dir<DIR>::at`` and ``tile_off``, as the
emulator's ``box_point`` and ``tile_offset``; the fragment layouts of ``_engine_mma.cuh.j2``) rather than
discovered in an ncu run.

Model (8-byte accesses, as the engine issues them): a warp's 32 lanes are served a half-warp at a
time; a half-warp's 16 doubles take as many wavefronts as the most distinct addresses that share one
of the 16 eight-byte bank slots (address mod 16 doubles); lanes reading one address share it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from composer.fused.builder import KernelPlan
from composer.fused.emulate import box_point, tile_offset

#: Eight-byte bank slots of shared memory (32 four-byte banks).
SLOTS = 16


def wavefronts(offsets: list[int]) -> int:
    """Wavefronts of one warp-wide 8-byte shared-memory access at ``offsets`` (doubles, lane order)."""
    total = 0
    for half in (offsets[:16], offsets[16:]):
        per_slot = Counter(off % SLOTS for off in set(half))
        total += max(per_slot.values(), default=0)
    return total


@dataclass(frozen=True)
class BankReport:
    """Wavefronts per warp access of one direction's contraction, worst case over the warp tiles:
    ``a_load`` (A fragments, ideal 2) and ``c_point`` (the accumulator tile at Contract::point, ideal 2)."""

    direction: int
    a_load: int
    c_point: int


def direction_report(plan: KernelPlan, d: int, mma_m: int, mma_k: int) -> BankReport:
    """Worst-case wavefronts of the A-fragment loads and the accumulator accesses of direction d
    over every (line origin, k-step, position origin) of the box, for an m{mma_m}n8k{mma_k} shape."""
    mi = mma_m // 8
    lines, positions = plan.lines(d), plan.positions(d)
    lanes = [(lane // 4, lane % 4) for lane in range(32)]
    a_worst = c_worst = 0
    for l0 in range(0, lines, mma_m):
        for m0 in range(0, positions, mma_k):
            for i in range(mma_m * mma_k // 32):
                points = [box_point(d, m0 + t + 4 * (i // mi), l0 + g + 8 * (i % mi), plan) for g, t in lanes]
                a_worst = max(a_worst, wavefronts([tile_offset(plan, *p) for p in points]))
        for a0 in range(0, positions, 8):
            for r in range(mma_m // 4):
                points = [box_point(d, a0 + 2 * t + r % 2, l0 + g + 8 * (r // 2), plan) for g, t in lanes]
                c_worst = max(c_worst, wavefronts([tile_offset(plan, *p) for p in points]))
    return BankReport(d, a_worst, c_worst)


def plan_report(plan: KernelPlan, mma_m: int, mma_k: int) -> list[BankReport]:
    """:func:`direction_report` of every direction the kernel carries."""
    return [direction_report(plan, d, mma_m, mma_k) for d in plan.kernel.dirs]
