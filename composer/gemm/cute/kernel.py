"""The FP64 GEMM kernel family in CuTe DSL: multistage cp.async mainloop, swizzled shared
memory, our DMMA atom, predicated ragged edges, strided batching, pluggable epilogue.

One traced kernel per :class:`GemmConfig`. All tile sizes, the MMA shape, the operand majors and
the epilogue are compile-time constants (closed over by the generated kernel); sizes, leading
dimensions and batch strides are runtime parameters in the fixed C ABI ``KERNEL_PARAMS``, so the
CUBIN launches with cuda-bindings alone.

Block work: grid.x enumerates (m tile, n tile, batch) with the m tile fastest, so consecutive
blocks share the B tile (for the x role: the flux slab, the big operand) while the small D
operand stays in L2.

Shared memory: per operand ``stages`` tiles of (rows x bk) doubles, stored with the contiguous
global mode fastest (so each cp.async writes 16 contiguous bytes) and XOR-swizzled: the fragment
loads of a half-warp touch rows g = 0..3 and columns t = 0..3, which without swizzle all fall on
the same four banks; XOR-ing bits 2..3 of the contiguous index with the low two bits of the other
index spreads the 16 doubles over all 32 banks (see ``swizzle_bits``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import cutlass
import cutlass.cute as cute
from cutlass import Float64, Int32, Int64

from composer.gemm.cute.atom import a_coord, b_coord, cp_async, cp_async_full, d_coord, dmma, lds_f64
from composer.gemm.cute.config import GemmConfig
from composer.gemm.cute.epilogue import EpilogueContext, get_epilogue

ENTRY_PREFIX = "composer_dgemm"


def swizzle_bits(contig: int) -> tuple[int, int, int]:
    """(B, M, S) of the XOR swizzle for a tile whose contiguous extent is ``contig`` doubles.

    The fragment loads of a half-warp read (row g, col t), g, t in 0..3, on a tile stored with
    ``contig`` doubles per line. Bits [2, 4) of the in-line index are XORed with the two lowest
    line-index bits, which sit at bit log2(contig); for contig = 8 only line bit 1 is needed
    (line bit 0 already lands on the other half of the 32 banks); contig = 4 is conflict-free
    as is. M = 2 keeps pairs (16 B cp.async chunks) and quads contiguous.
    """
    if contig >= 16:
        return 2, 2, int(math.log2(contig)) - 2
    if contig == 8:
        return 1, 2, 2
    return 0, 2, 0


def smem_layout(rows: int, bk: int, mn_major: bool, stages: int) -> Any:
    """(rows, bk, stages) layout of one operand's pipeline buffers, swizzled as above."""
    if mn_major:
        plain = cute.make_layout((rows, bk, stages), stride=(1, rows, rows * bk))
        contig = rows
    else:
        plain = cute.make_layout((rows, bk, stages), stride=(bk, 1, rows * bk))
        contig = bk
    b, m, s = swizzle_bits(contig)
    if b == 0:
        return plain
    return cute.make_composed_layout(cute.make_swizzle(b, m, s), 0, plain)


def swizzled_offset(r: int, kk: int, stage: int, rows: int, bk: int, mn_major: bool) -> int:
    """Element offset of (r, kk, stage) in ``smem_layout(rows, bk, mn_major, stages)``, in plain
    Python (cute's ``Swizzle(B, M, S)``: bits [M+S, M+S+B) are XORed into bits [M, M+B))."""
    contig = rows if mn_major else bk
    plain = (r + kk * rows if mn_major else r * bk + kk) + stage * rows * bk
    b, m, s = swizzle_bits(contig)
    if b == 0:
        return plain
    yyy = ((1 << b) - 1) << (m + s)
    return plain ^ ((plain & yyy) >> s)


def check_swizzle_model(layout: Any, rows: int, bk: int, mn_major: bool, stages: int) -> None:
    """At trace time: ``swizzled_offset`` must agree with cute's layout (static coordinates)."""
    for r, kk, st in ((0, 0, 0), (1, 5 % bk, 0), (5 % rows, 3 % bk, stages - 1),
                      (rows - 1, bk - 1, stages - 1), (3 % rows, bk - 2, 0),
                      (rows // 2 + 6 % rows, 1, stages // 2), (7 % rows, 2 % bk, 1)):
        want = layout((r, kk, st))
        if swizzled_offset(r, kk, st, rows, bk, mn_major) != want:
            raise AssertionError(f"swizzle model disagrees with cute at {(r, kk, st)}: {want}")


def frag_plan(rows: int, bk: int, mn_major: bool, thread_parts: list[tuple[int, int]],
              elems: dict[Any, tuple[int, int]]) -> tuple[list[tuple[int, int]], dict[Any, tuple[int, int]]]:
    """Group fragment elements so each load is ``base[group] + constant``.

    ``thread_parts`` lists every thread's runtime (row, k) part, ``elems`` maps a key to the
    compile-time (row, k) part of a fragment element. Two elements share a base when their
    swizzled offsets differ by the same amount in every thread (checked exhaustively). Returns the
    groups' representative compile-time parts and, per key, (group, byte offset from its base).
    """
    groups: list[tuple[tuple[int, int], list[int]]] = []
    plan: dict[Any, tuple[int, int]] = {}
    for key, (rc, kc) in elems.items():
        vec = [swizzled_offset(rt + rc, kt + kc, 0, rows, bk, mn_major) for rt, kt in thread_parts]
        for gi, (_rep, rvec) in enumerate(groups):
            d = vec[0] - rvec[0]
            if all(v - w == d for v, w in zip(vec, rvec)):
                plan[key] = (gi, 8 * d)
                break
        else:
            groups.append(((rc, kc), vec))
            plan[key] = (len(groups) - 1, 0)
    return [rep for rep, _ in groups], plan


def interior_steps(rows: int, bk: int, vec: int, threads: int, mn_major: bool
                   ) -> tuple[int, list[int]] | None:
    """How one thread's cp.async copies of an interior (rows x bk) tile relate to its first one:
    (lines its chunk index advances per copy along the non-contiguous mode, byte offsets of the
    copies' swizzled shared-memory destinations from the first one), or None when those offsets
    are not the same for every thread (then the predicated path serves every tile).

    Why it matters: when they are, the mainloop needs one address register per operand and
    thread plus immediates, instead of recomputing swizzled addresses per copy. Checked
    exhaustively over the block's threads with the swizzle model (pure Python, at trace time).
    """
    per_line = (rows if mn_major else bk) // vec  # chunks along the contiguous mode
    if (rows * bk // vec) % threads or threads % per_line:
        return None
    copies = rows * bk // vec // threads

    def coords(tid: int, it: int) -> tuple[int, int]:
        cidx = tid + it * threads
        if mn_major:
            return (cidx % per_line) * vec, cidx // per_line
        return cidx // per_line, (cidx % per_line) * vec

    steps = []
    for it in range(copies):
        deltas = {swizzled_offset(*coords(tid, it), 0, rows, bk, mn_major)
                  - swizzled_offset(*coords(tid, 0), 0, rows, bk, mn_major) for tid in range(threads)}
        if len(deltas) != 1:
            return None
        steps.append(8 * deltas.pop())
    return threads // per_line, steps


def make_kernel(cfg: GemmConfig, name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(kernel, host) for ``cfg``: ``host(*KERNEL_PARAMS args)`` launches on one linear grid.

    The kernel entry is named ``name`` (``set_name_prefix``), which the manifest records.
    """
    cfg.validate()
    shape = cfg.shape
    bm, bn, bk, stages, vec = cfg.bm, cfg.bn, cfg.bk, cfg.stages, cfg.vec
    threads = cfg.threads
    warps_m = cfg.warps_m
    wm, wn = cfg.warp_tile
    tiles_m, tiles_n = cfg.mma_tiles
    k_steps = bk // shape.k
    a_mn_major = cfg.a_major == "m"
    b_mn_major = cfg.b_major == "n"
    c_m_major = cfg.c_major == "m"
    epilogue = get_epilogue(cfg.epilogue)

    lanes = [(w, ln // 4, ln % 4) for w in range(threads // 32) for ln in range(32)]
    a_fp = frag_plan(bm, bk, a_mn_major, [((w % warps_m) * wm + g, t) for w, g, t in lanes],
                     {(ks, i, r): (i * shape.m + a_coord(r)[0], ks * shape.k + a_coord(r)[1])
                      for ks in range(k_steps) for i in range(tiles_m) for r in range(shape.a_regs)})
    b_fp = frag_plan(bn, bk, b_mn_major, [((w // warps_m) * wn + g, t) for w, g, t in lanes],
                     {(ks, j, r): (j * shape.n, ks * shape.k + b_coord(r))
                      for ks in range(k_steps) for j in range(tiles_n) for r in range(shape.b_regs)})

    for rows, mn_major in ((bm, a_mn_major), (bn, b_mn_major)):
        # copy_interior adds the stage offset after the swizzle: it must not touch swizzled bits
        b_bits, m_bits, s_bits = swizzle_bits(rows if mn_major else bk)
        if (rows * bk) % (1 << (m_bits + s_bits + b_bits)):
            raise ValueError(f"{cfg}: stage stride {rows * bk} lies inside the swizzled bits")

    def interior_plan(gptr: cute.Pointer, ld: Int64, row0: Int32, sbase: Int32, layout: Any, rows: int,
                      mn_major: bool, tidx: Int32) -> Any:
        """This thread's first copy (global address at k0 = 0, swizzled shared address in stage 0)
        and the strides to its other copies: three registers, computed before the mainloop."""
        steps = interior_steps(rows, bk, vec, threads, mn_major)
        if steps is None:
            return None
        line_step, dst_steps = steps
        per_line = (bk if not mn_major else rows) // vec
        if mn_major:
            r, kk = (tidx % per_line) * vec, tidx // per_line
            offset = Int64(row0 + r) + Int64(kk) * ld
        else:
            r, kk = tidx // per_line, (tidx % per_line) * vec
            offset = Int64(kk) + Int64(row0 + r) * ld
        # the next copy is line_step k-lines (mn-major) or rows (k-major) further: line_step * ld
        return ((gptr + offset).toint(), sbase + layout((r, kk, 0)) * 8, Int64(line_step) * ld * 8, dst_steps)

    @cute.jit
    def load_tile(gptr: cute.Pointer, ld: Int64, rows_total: Int32, row0: Int32, k_total: Int32,
                  k0: Int32, sbase: Int32, layout: cutlass.Constexpr, rows: cutlass.Constexpr,
                  mn_major: cutlass.Constexpr, stage: Int32, tidx: Int32, plan: cutlass.Constexpr):
        """cp.async one (rows x bk) tile; elements outside (rows_total, k_total) become 0.

        Interior tiles (every element in bounds: the common case from Nq = 64 on) copy from the
        addresses ``interior_plan`` computed before the mainloop, plus the k-tile offset: a few
        integer instructions per cp.async instead of the ~20 of the predicated path (ncu at
        Nq = 512: with predication on every tile the kernel issued 1.4x cuBLAS's instructions).
        """
        chunks = rows * bk // vec
        if cutlass.const_expr(plan is not None):
            interior = (row0 + rows <= rows_total) & (k0 + bk <= k_total)
            if interior:
                src0, dst0, src_step, dst_steps = plan
                src = src0 + (Int64(k0) * ld * 8 if mn_major else Int64(k0) * 8)
                dst = dst0 + stage * (rows * bk * 8)  # above the swizzled bits (make_kernel checks)
                for it in cutlass.range_constexpr(chunks // threads):
                    cp_async_full(dst + dst_steps[it], src + Int64(it) * src_step, vec)
            else:
                copy_predicated(gptr, ld, rows_total, row0, k_total, k0, sbase, layout, rows, mn_major,
                                stage, tidx)
        else:
            copy_predicated(gptr, ld, rows_total, row0, k_total, k0, sbase, layout, rows, mn_major,
                            stage, tidx)

    @cute.jit
    def copy_predicated(gptr: cute.Pointer, ld: Int64, rows_total: Int32, row0: Int32, k_total: Int32,
                        k0: Int32, sbase: Int32, layout: cutlass.Constexpr, rows: cutlass.Constexpr,
                        mn_major: cutlass.Constexpr, stage: Int32, tidx: Int32):
        """Ragged tiles: per-chunk source sizes (zero fill past the edges)."""
        chunks = rows * bk // vec
        for it in cutlass.range_constexpr((chunks + threads - 1) // threads):
            cidx = tidx + it * threads
            if cutlass.const_expr(mn_major):
                r = (cidx % (rows // vec)) * vec
                kk = cidx // (rows // vec)
            else:
                kk = (cidx % (bk // vec)) * vec
                r = cidx // (bk // vec)
            grow = row0 + r
            gk = k0 + kk
            if cutlass.const_expr(mn_major):
                left = rows_total - grow  # elements left along the contiguous mode
                other_ok = gk < k_total
                offset = Int64(grow) + Int64(gk) * ld
            else:
                left = k_total - gk
                other_ok = grow < rows_total
                offset = Int64(gk) + Int64(grow) * ld
            nbytes = cutlass.select_(other_ok, 8 * cutlass.max(cutlass.min(left, vec), 0), 0)
            if cutlass.const_expr(chunks % threads != 0):
                nbytes = cutlass.select_(cidx < chunks, nbytes, 0)
            # with nothing to read, point at the (valid) base: cp.async still issues the zero fill
            src = cutlass.select_(nbytes > 0, (gptr + offset).toint(), gptr.toint())
            dst = sbase + layout((r, kk, stage)) * 8
            if cutlass.const_expr(chunks % threads != 0):
                if cidx < chunks:
                    cp_async(dst, src, nbytes, vec)
            else:
                cp_async(dst, src, nbytes, vec)

    # helpers of the mainloops (plain Python, unrolled at trace time): every DSL value they use
    # comes in as an argument
    def load_operands(ops: tuple, k0: Any, stage: Any, tidx: Any) -> None:
        """cp.async the A and B tiles of k offset ``k0`` into pipeline ``stage`` (``ops``: the
        kernel's operand pointers, sizes, block origin, shared bases, layouts and copy plans)."""
        pa, pb, lda, ldb, m, n, k, m0, n0, sa_base, sb_base, a_layout, b_layout, a_copy, b_copy = ops
        load_tile(pa, lda, m, m0, k, k0, sa_base, a_layout, bm, a_mn_major, stage, tidx, a_copy)
        load_tile(pb, ldb, n, n0, k, k0, sb_base, b_layout, bn, b_mn_major, stage, tidx, b_copy)

    def stage_addresses(sa_base: Any, sb_base: Any, a_bases: list, b_bases: list, stage: Any
                        ) -> tuple[list[Any], list[Any]]:
        a_stage = sa_base + stage * (bm * bk * 8)
        b_stage = sb_base + stage * (bn * bk * 8)
        return [a_stage + x for x in a_bases], [b_stage + x for x in b_bases]

    def load_fragments(a_addr: list[Any], b_addr: list[Any], ks: int) -> tuple[list, list]:
        a_frag = [[lds_f64(a_addr[a_fp[1][(ks, i, r)][0]], a_fp[1][(ks, i, r)][1])
                   for r in range(shape.a_regs)] for i in range(tiles_m)]
        b_frag = [[lds_f64(b_addr[b_fp[1][(ks, j, r)][0]], b_fp[1][(ks, j, r)][1])
                   for r in range(shape.b_regs)] for j in range(tiles_n)]
        return a_frag, b_frag

    def mma_step(acc: Any, a_frag: list, b_frag: list) -> None:
        for i in range(tiles_m):
            for j in range(tiles_n):
                d = dmma(shape, a_frag[i], b_frag[j], [acc[(i, j, r)] for r in range(shape.c_regs)])
                for r in range(shape.c_regs):
                    acc[(i, j, r)] = d[r]

    @cute.kernel
    def kernel(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, aux: cute.Pointer,
               m: Int32, n: Int32, k: Int32, batch: Int32,
               lda: Int64, ldb: Int64, ldc: Int64, ld_aux: Int64,
               stride_a: Int64, stride_b: Int64, stride_c: Int64, stride_aux: Int64,
               alpha: Float64, beta: Float64):
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        n_tiles_m = (m + bm - 1) // bm
        n_tiles_n = (n + bn - 1) // bn
        tile_m = bid % n_tiles_m
        rest = bid // n_tiles_m
        tile_n = rest % n_tiles_n
        ibatch = Int64(rest // n_tiles_n)
        m0 = tile_m * bm
        n0 = tile_n * bn
        pa = a + ibatch * stride_a
        pb = b + ibatch * stride_b

        a_layout = smem_layout(bm, bk, a_mn_major, stages)
        b_layout = smem_layout(bn, bk, b_mn_major, stages)
        check_swizzle_model(a_layout, bm, bk, a_mn_major, stages)
        check_swizzle_model(b_layout, bn, bk, b_mn_major, stages)
        allocator = cutlass.memory.SmemAllocator()
        s_a = allocator.allocate_tensor(Float64, a_layout, 128)
        s_b = allocator.allocate_tensor(Float64, b_layout, 128)
        sa_base = s_a.iterator.toint()
        sb_base = s_b.iterator.toint()

        a_plan_copy = interior_plan(pa, lda, m0, sa_base, a_layout, bm, a_mn_major, tidx)
        b_plan_copy = interior_plan(pb, ldb, n0, sb_base, b_layout, bn, b_mn_major, tidx)
        k_tiles = (k + bk - 1) // bk
        # prologue: stages - 1 tiles in flight (one commit group each, empty past the end)
        ops = (pa, pb, lda, ldb, m, n, k, m0, n0, sa_base, sb_base, a_layout, b_layout, a_plan_copy,
               b_plan_copy)
        for st in cutlass.range_constexpr(stages - 1):
            if st < k_tiles:
                load_operands(ops, Int32(st * bk), Int32(st), tidx)
            cute.arch.cp_async_commit_group()

        acc = cute.make_rmem_tensor(cute.make_layout((tiles_m, tiles_n, shape.c_regs)), Float64)
        acc.fill(0.0)

        warp = tidx // 32
        lane = tidx % 32
        g = lane // 4
        t = lane % 4
        row_a = (warp % warps_m) * wm + g
        row_b = (warp // warps_m) * wn + g

        # fragment addresses: one runtime base per group of fragment elements whose swizzled
        # offsets differ by a compile-time constant for every thread (frag_plan checks it), so
        # the mainloop's LDS use [base + immediate] instead of recomputing the XOR per load
        a_bases = [a_layout((row_a + rc, t + kc, 0)) * 8 for rc, kc in a_fp[0]]
        b_bases = [b_layout((row_b + rc, t + kc, 0)) * 8 for rc, kc in b_fp[0]]

        for kt in cutlass.range(k_tiles, unroll=1):
            # tile kt has landed (at most stages-2 younger groups pending) and every warp is done
            # with the stage the next load overwrites (it was read in iteration kt-1)
            cute.arch.cp_async_wait_group(stages - 2)
            cute.arch.sync_threads()
            nxt = kt + stages - 1
            if nxt < k_tiles:
                load_operands(ops, nxt * bk, nxt % stages, tidx)
            cute.arch.cp_async_commit_group()
            a_addr, b_addr = stage_addresses(sa_base, sb_base, a_bases, b_bases, kt % stages)
            for ks in cutlass.range_constexpr(k_steps):
                mma_step(acc, *load_fragments(a_addr, b_addr, ks))
        cute.arch.cp_async_wait_group(0)

        ctx = EpilogueContext(
            c=c + ibatch * stride_c, aux=aux + ibatch * stride_aux,
            c_stride_m=Int64(1) if c_m_major else ldc, c_stride_n=ldc if c_m_major else Int64(1),
            ld_aux=ld_aux, alpha=alpha, beta=beta)
        if cutlass.const_expr(not c_m_major and epilogue.pairs):
            # n-contiguous C: registers (r, r+1) are adjacent columns 2t, 2t+1: one 16-byte store
            # when the leading dimension keeps the pair aligned (even ldc), scalar stores else
            pair_ok = ((ldc % 2) == 0) & ((stride_c % 2) == 0) & ((c.toint() % 16) == 0)
            for i in cutlass.range_constexpr(tiles_m):
                for j in cutlass.range_constexpr(tiles_n):
                    for r in cutlass.range_constexpr(0, shape.c_regs, 2):
                        gm = m0 + row_a + i * shape.m + d_coord(r)[0]
                        gn = n0 + (warp // warps_m) * wn + j * shape.n + 2 * t
                        if gm < m:
                            if pair_ok and gn + 1 < n:
                                epilogue.apply_pair(ctx, Int64(gm), Int64(gn), acc[(i, j, r)],
                                                    acc[(i, j, r + 1)])
                            else:
                                if gn < n:
                                    epilogue.apply(ctx, Int64(gm), Int64(gn), acc[(i, j, r)])
                                if gn + 1 < n:
                                    epilogue.apply(ctx, Int64(gm), Int64(gn + 1), acc[(i, j, r + 1)])
        else:
            for i in cutlass.range_constexpr(tiles_m):
                for j in cutlass.range_constexpr(tiles_n):
                    for r in cutlass.range_constexpr(shape.c_regs):
                        gm = m0 + row_a + i * shape.m + d_coord(r)[0]
                        gn = n0 + (warp // warps_m) * wn + j * shape.n + 2 * t + d_coord(r)[1]
                        if gm < m and gn < n:
                            epilogue.apply(ctx, Int64(gm), Int64(gn), acc[(i, j, r)])

    kernel.set_name_prefix(name, remove_cutlass_symbol=True, keep_mangled_name=False)

    @cute.jit
    def host(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, aux: cute.Pointer,
             m: Int32, n: Int32, k: Int32, batch: Int32,
             lda: Int64, ldb: Int64, ldc: Int64, ld_aux: Int64,
             stride_a: Int64, stride_b: Int64, stride_c: Int64, stride_aux: Int64,
             alpha: Float64, beta: Float64):
        blocks = ((m + bm - 1) // bm) * ((n + bn - 1) // bn) * batch
        kernel(a, b, c, aux, m, n, k, batch, lda, ldb, ldc, ld_aux, stride_a, stride_b, stride_c,
               stride_aux, alpha, beta).launch(grid=[blocks, 1, 1], block=[threads, 1, 1],
                                               smem=cfg.smem_bytes)

    return kernel, host
