"""CPU checks of the shared-memory fragment addressing (no compile, no GPU needed).

The kernel loads each MMA fragment element from ``base[group] + immediate``; ``frag_plan``
groups elements whose swizzled offsets differ by the same constant in every thread. These tests
check the Python swizzle model (a bijection per stage, stage-linear) and that the plan reproduces
the swizzled offset of every element in every thread for the tiles the schedules use.
"""

from __future__ import annotations

import pytest

from composer.arch.mma import mma_shape
from composer.gemm.cute import swizzle

# skip without the DSL only (atom.py imports it): an import error of our own module fails
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")

from composer.gemm.cute.atom import a_coord, b_coord  # noqa: E402


@pytest.mark.parametrize("rows", [8, 16, 64, 128])
@pytest.mark.parametrize("bk", [4, 8, 16, 32])
@pytest.mark.parametrize("mn_major", [True, False])
def test_swizzle_model_is_a_stage_linear_bijection(rows, bk, mn_major):
    sw = swizzle.swizzled_offset
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
        groups, plan = swizzle.frag_plan(rows, bk, mnm, parts, elems)
        assert len(groups) <= 8  # a handful of base registers, not one per element
        for key, (rc, kc) in elems.items():
            gi, off = plan[key]
            grc, gkc = groups[gi]
            for rt, kt in parts:
                want = swizzle.swizzled_offset(rt + rc, kt + kc, 0, rows, bk, mnm)
                base = swizzle.swizzled_offset(rt + grc, kt + gkc, 0, rows, bk, mnm)
                assert 8 * want == 8 * base + off


def test_interior_steps_are_constant_offsets_for_every_thread():
    steps = swizzle.interior_steps
    assert steps(128, 32, 2, 256, False) == (16, [4096 * i for i in range(8)])  # k-major: 16 rows per copy
    assert steps(128, 32, 2, 256, True) == (4, [4096 * i for i in range(8)])  # mn-major: 4 k-lines
    # a thread whose copies land in different swizzle classes has no constant offsets
    assert steps(64, 8, 2, 64, True) is None
    assert steps(128, 32, 2, 96, False) is None  # copies do not tile the block evenly
    for rows, bk, vec, threads, mn in ((128, 16, 2, 256, False), (64, 16, 2, 128, True), (128, 32, 1, 256, True)):
        found = steps(rows, bk, vec, threads, mn)
        if found is None:
            continue
        line_step, offsets = found
        per_line = (rows if mn else bk) // vec
        for tid in range(threads):
            for it, off in enumerate(offsets):
                c0, c1 = tid, tid + it * threads
                rk0 = ((c0 % per_line) * vec, c0 // per_line) if mn else (c0 // per_line, (c0 % per_line) * vec)
                rk1 = ((c1 % per_line) * vec, c1 // per_line) if mn else (c1 // per_line, (c1 % per_line) * vec)
                assert 8 * (swizzle.swizzled_offset(*rk1, 0, rows, bk, mn)
                            - swizzle.swizzled_offset(*rk0, 0, rows, bk, mn)) == off
                assert (rk1[1] - rk0[1] if mn else rk1[0] - rk0[0]) == it * line_step


@pytest.mark.parametrize("role", ["x", "y", "z"])
@pytest.mark.parametrize("nq", [128, 256, 512])
def test_interior_copies_serve_the_high_order_tiles(role, nq):
    """The GEMMs that bind at high order must take the unpredicated copy path on interior tiles."""
    from composer.gemm.cute.tiles import role_kernel

    for mma in ("16x8x4", "16x8x8"):
        cfg = role_kernel(role, nq, 1, mma).config
        for rows, major in ((cfg.bm, cfg.a_major == "m"), (cfg.bn, cfg.b_major == "n")):
            assert swizzle.interior_steps(rows, cfg.bk, cfg.vec, cfg.threads, major) is not None, (cfg, rows)
