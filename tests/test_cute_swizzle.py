"""CPU checks of the shared-memory fragment addressing (no DSL, no GPU needed).

The kernel loads each MMA fragment element from ``base[group] + immediate``; ``frag_plan``
groups elements whose swizzled offsets differ by the same constant in every thread. These tests
check the Python swizzle model (a bijection per stage, stage-linear) and that the plan reproduces
the swizzled offset of every element in every thread for the tiles the schedules use.
"""

from __future__ import annotations

import pytest

kernel = pytest.importorskip("composer.gemm.cute.kernel")

from composer.gemm.cute.atom import a_coord, b_coord  # noqa: E402
from composer.gemm.cute.shapes import mma_shape  # noqa: E402


@pytest.mark.parametrize("rows", [8, 16, 64, 128])
@pytest.mark.parametrize("bk", [4, 8, 16, 32])
@pytest.mark.parametrize("mn_major", [True, False])
def test_swizzle_model_is_a_stage_linear_bijection(rows, bk, mn_major):
    sw = kernel.swizzled_offset
    offs = {sw(r, k, 0, rows, bk, mn_major) for r in range(rows) for k in range(bk)}
    assert offs == set(range(rows * bk))
    for r in range(rows):
        for k in range(bk):
            assert sw(r, k, 2, rows, bk, mn_major) == sw(r, k, 0, rows, bk, mn_major) + 2 * rows * bk


@pytest.mark.parametrize("mma,bm,bn,bk,wm,wn,amaj,bmaj", [
    ("16x8x4", 128, 128, 16, 2, 4, False, False),
    ("16x8x8", 128, 128, 32, 2, 4, False, False),
    ("8x8x4", 64, 64, 16, 2, 2, True, False),
    ("16x8x16", 64, 8, 16, 2, 1, False, False),
    ("16x8x4", 128, 64, 16, 4, 2, True, False),
])
def test_frag_plan_reproduces_every_offset(mma, bm, bn, bk, wm, wn, amaj, bmaj):
    s = mma_shape(mma)
    tm, tn = (bm // wm) // s.m, (bn // wn) // s.n
    lanes = [(w, ln // 4, ln % 4) for w in range(wm * wn) for ln in range(32)]
    for rows, mnm, parts, elems in (
        (bm, amaj, [((w % wm) * (bm // wm) + g, t) for w, g, t in lanes],
         {(ks, i, r): (i * s.m + a_coord(r)[0], ks * s.k + a_coord(r)[1])
          for ks in range(bk // s.k) for i in range(tm) for r in range(s.a_regs)}),
        (bn, bmaj, [((w // wm) * (bn // wn) + g, t) for w, g, t in lanes],
         {(ks, j, r): (j * s.n, ks * s.k + b_coord(r))
          for ks in range(bk // s.k) for j in range(tn) for r in range(s.b_regs)}),
    ):
        groups, plan = kernel.frag_plan(rows, bk, mnm, parts, elems)
        assert len(groups) <= 8  # a handful of base registers, not one per element
        for key, (rc, kc) in elems.items():
            gi, off = plan[key]
            grc, gkc = groups[gi]
            for rt, kt in parts:
                want = kernel.swizzled_offset(rt + rc, kt + kc, 0, rows, bk, mnm)
                base = kernel.swizzled_offset(rt + grc, kt + gkc, 0, rows, bk, mnm)
                assert 8 * want == 8 * base + off
