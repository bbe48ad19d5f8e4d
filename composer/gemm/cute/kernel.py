"""The FP64 GEMM kernel family in CuTe DSL: multistage cp.async mainloop, swizzled shared
memory, our DMMA atom, predicated ragged edges, strided batching, pluggable epilogue.

One :class:`TensorOpDgemm` per :class:`GemmConfig`, shaped like the CUTLASS CuTe DSL examples'
``TensorOpGemm``: ``__init__`` checks the configuration and plans the trace-time address
arithmetic, the host ``__call__`` launches, ``kernel`` is the device code. All tile sizes, the
MMA shape, the operand majors and the epilogue are compile-time constants (attributes of the
instance); sizes, leading dimensions and batch strides are runtime parameters in the fixed C ABI
``KERNEL_PARAMS``, which host and kernel take as one :data:`KernelArgs`, so the CUBIN launches
with cuda-bindings alone.

Block work: grid.x enumerates (m tile, n tile, batch) with the m tile fastest, so consecutive
blocks share the B tile (for the x role: the flux slab, the big operand) while the small D
operand stays in L2.

Shared memory: per operand ``stages`` tiles of (rows x bk) doubles, stored with the contiguous
global mode fastest (so each cp.async writes 16 contiguous bytes) and XOR-swizzled: the fragment
loads of a half-warp touch rows g = 0..3 and columns t = 0..3, which without swizzle all fall on
the same four banks; XOR-ing bits 2..3 of the contiguous index with the low two bits of the other
index spreads the 16 doubles over all 32 banks (the model: :mod:`composer.gemm.cute.swizzle`).
"""

from __future__ import annotations

from dataclasses import make_dataclass
from typing import Any

import cutlass
import cutlass.cute as cute
from cutlass import Float64, Int32, Int64

from composer.gemm.cute.atom import (a_coord, b_coord, cp_async, cp_async_full, d_coord, dmma, lds_f64, lds_f64x2,
                                     nsmid, sts_f64, sts_f64x2, wait_ns)
from composer.gemm.cute.config import AUX_SLOTS, KERNEL_PARAMS, GemmConfig, resolve_epilogue
from composer.gemm.cute.epilogue import Epilogue, EpilogueContext, OutputSite
from composer.gemm.cute.swizzle import frag_plan, interior_steps, swizzle_bits, swizzled_offset

#: Named barriers of an async-epilogue block (0 is the whole block's): the MMA warps' own, and per
#: accumulator buffer b one that says "full" (MMA -> epilogue warps) and one "empty" (back).
MMA_BARRIER, FULL_BARRIER, EMPTY_BARRIER = 1, 2, 4

#: The DSL type of each C type tag the ABI uses.
_DSL_TYPES: dict[str, Any] = {"ptr": cute.Pointer, "i32": Int32, "i64": Int64, "f64": Float64}

#: The kernel's runtime parameters as one frozen dataclass with a field per KERNEL_PARAMS entry,
#: in that order. The DSL flattens it into one kernel parameter per field, so host and kernel take
#: a single argument while the CUBIN's C ABI stays the list KERNEL_PARAMS declares.
KernelArgs = make_dataclass("KernelArgs", [(p.name, _DSL_TYPES[p.ctype]) for p in KERNEL_PARAMS],
                            frozen=True)


def placeholder_args() -> Any:
    """A KernelArgs to trace the host with (``cute.compile``): every field is a dynamic value, so
    only the types shape the code, and the pointers carry the 16-byte alignment the kernel assumes."""
    def value(ctype: str) -> Any:
        if ctype == "ptr":
            return cute.runtime.make_ptr(Float64, 0x1000, cute.AddressSpace.gmem, assumed_align=16)
        return _DSL_TYPES[ctype](0)

    return KernelArgs(**{p.name: value(p.ctype) for p in KERNEL_PARAMS})


def smem_layout(rows: int, bk: int, mn_major: bool, stages: int) -> Any:
    """(rows, bk, stages) layout of one operand's pipeline buffers, swizzled as ``swizzle_bits`` says."""
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


def check_swizzle_model(layout: Any, rows: int, bk: int, mn_major: bool, stages: int) -> None:
    """At trace time: ``swizzled_offset`` must agree with cute's layout (static coordinates)."""
    for r, kk, st in ((0, 0, 0), (1, 5 % bk, 0), (5 % rows, 3 % bk, stages - 1),
                      (rows - 1, bk - 1, stages - 1), (3 % rows, bk - 2, 0),
                      (rows // 2 + 6 % rows, 1, stages // 2), (7 % rows, 2 % bk, 1)):
        want = layout((r, kk, st))
        if swizzled_offset(r, kk, st, rows, bk, mn_major) != want:
            raise AssertionError(f"swizzle model disagrees with cute at {(r, kk, st)}: {want}")


class TensorOpDgemm:
    """The kernel of one GemmConfig for one architecture, with entry symbol ``<name>_0``.

    Construction compiles nothing: it rejects a configuration the kernel cannot be built for
    (GemmConfigError, or UnsupportedShapeError for an MMA shape ``arch`` lacks) and precomputes,
    in plain Python, which fragment loads and cp.async copies share an address register.
    ``cute.compile(gemm, placeholder_args(), options=...)`` then traces ``__call__``.

    ``epilogue`` is the epilogue instance for a specialized family (``cfg.epilogue == "tree"``:
    an epilogue visitor tree); the parameterless ones (``"store"``) are built from the name.
    """

    def __init__(self, cfg: GemmConfig, arch: str, name: str, epilogue: Epilogue | None = None) -> None:
        self.cfg = cfg.validate(arch)
        self.arch = arch
        self.name = name
        self.shape = cfg.shape
        self.bm, self.bn, self.bk = cfg.bm, cfg.bn, cfg.bk
        self.stages, self.vec, self.threads = cfg.stages, cfg.vec, cfg.threads
        self.warps_m = cfg.warps_m
        self.wm, self.wn = cfg.warp_tile
        self.tiles_m, self.tiles_n = cfg.mma_tiles
        self.k_steps = cfg.bk // self.shape.k
        self.a_mn_major = cfg.a_major == "m"
        self.b_mn_major = cfg.b_major == "n"
        self.c_m_major = cfg.c_major == "m"
        self.epilogue = resolve_epilogue(cfg, epilogue)
        # pair sites: C n-contiguous puts a thread's registers (r, r+1) at adjacent columns 2t, 2t+1
        self.pairs = not self.c_m_major and self.epilogue.pairs

        shape, bm, bn, bk = self.shape, self.bm, self.bn, self.bk
        lanes = [(w, ln // 4, ln % 4) for w in range(self.threads // 32) for ln in range(32)]
        self.a_frags = frag_plan(
            bm, bk, self.a_mn_major, [((w % self.warps_m) * self.wm + g, t) for w, g, t in lanes],
            {(ks, i, r): (i * shape.m + a_coord(r)[0], ks * shape.k + a_coord(r)[1])
             for ks in range(self.k_steps) for i in range(self.tiles_m) for r in range(shape.a_regs)})
        self.b_frags = frag_plan(
            bn, bk, self.b_mn_major, [((w // self.warps_m) * self.wn + g, t) for w, g, t in lanes],
            {(ks, j, r): (j * shape.n, ks * shape.k + b_coord(r))
             for ks in range(self.k_steps) for j in range(self.tiles_n) for r in range(shape.b_regs)})
        self.a_copy_steps = interior_steps(bm, bk, self.vec, self.threads, self.a_mn_major)
        self.b_copy_steps = interior_steps(bn, bk, self.vec, self.threads, self.b_mn_major)
        # the product operand's factor tiles sit right after its own stages in one buffer, so a
        # factor element is at its operand element's address plus this compile-time byte offset
        self.product = cfg.product
        self.factor_offset = {"a": 8 * self.stages * bm * bk, "b": 8 * self.stages * bn * bk}.get(cfg.product, 0)
        # product_staged: the product is formed in shared memory once per element (_stage_product), so
        # the fragment loads read a plain operand
        self.product_staged = cfg.product_staged
        # the epilogue's L2 prefetch (k-tiles before the end; 0 when the epilogue reads no array)
        self.prefetch_at = cfg.epilogue_prefetch if self.epilogue.prefetch_slots else 0
        #: blocks per SM the first-wave stagger spreads (the smaller of what shared memory and the register
        #: cap hold; ptxas may use fewer registers, so more may be resident: a lower bound)
        self.stagger_slots = max(1, min(cfg.smem_blocks(self.arch), cfg.register_blocks(self.arch)))
        self.prefetch_split = cfg.epilogue_prefetch_split and self.prefetch_at > 0
        self.fragment_pipeline = cfg.fragment_pipeline
        self.async_tiles = cfg.async_epilogue_tiles
        self.acc_regs = self.tiles_m * self.tiles_n * self.shape.c_regs

    @cute.jit
    def __call__(self, args: KernelArgs):
        """Host entry: one block per (m tile, n tile, batch) on a linear grid."""
        # the DSL keeps the name on the (class-level) kernel function: set it for this trace
        self.kernel.set_name_prefix(self.name, remove_cutlass_symbol=True, keep_mangled_name=False)
        blocks = ((args.m + self.bm - 1) // self.bm) * ((args.n + self.bn - 1) // self.bn) * args.batch
        # min_blocks: ptxas caps the registers (nvvm.minctasm); the carveout is given, so that the DSL
        # does not ask a device for its shared memory (builds cross-compile without one)
        blocks = self.cfg.resident_blocks(self.arch)
        bounds = {"min_blocks_per_mp": blocks, "preferred_smem_carveout": 100} if blocks else {}
        if cutlass.const_expr(self.async_tiles > 0):
            self.kernel_ws.set_name_prefix(self.name, remove_cutlass_symbol=True, keep_mangled_name=False)
            self.kernel_ws(args).launch(grid=[(blocks + self.async_tiles - 1) // self.async_tiles, 1, 1],
                                        block=[2 * self.threads, 1, 1], smem=self.cfg.smem_bytes, **bounds)
        else:
            self.kernel(args).launch(grid=[blocks, 1, 1], block=[self.threads, 1, 1], smem=self.cfg.smem_bytes,
                                     **bounds)

    @cute.kernel
    def kernel(self, args: KernelArgs):
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        if cutlass.const_expr(self.cfg.stagger_us > 0):
            self._stagger(bid)
        n_tiles_m = (args.m + self.bm - 1) // self.bm
        n_tiles_n = (args.n + self.bn - 1) // self.bn
        if cutlass.const_expr(self.cfg.n_fastest):
            tile_n = bid % n_tiles_n
            rest = bid // n_tiles_n
            tile_m = rest % n_tiles_m
            batch = rest // n_tiles_m
        else:
            tile_m = bid % n_tiles_m
            rest = bid // n_tiles_m
            tile_n = rest % n_tiles_n
            batch = rest // n_tiles_n
        ibatch = Int64(batch)
        m0 = tile_m * self.bm
        n0 = tile_n * self.bn
        pa = args.a + ibatch * args.stride_a
        pb = args.b + ibatch * args.stride_b
        allocator = cutlass.memory.SmemAllocator()
        a_layout, b_layout, sa_base, sb_base = self._operand_buffers(allocator)
        acc = cute.make_rmem_tensor(cute.make_layout((self.tiles_m, self.tiles_n, self.shape.c_regs)), Float64)
        self._mainloop(args, tidx, ibatch, m0, n0, pa, pb, sa_base, sb_base, a_layout, b_layout, acc, False)
        warp = tidx // 32
        t = (tidx % 32) % 4
        row_a = (warp % self.warps_m) * self.wm + (tidx % 32) // 4
        self._store_tile(args, acc, batch, ibatch, m0, n0, row_a, warp, t)

    @cute.jit
    def _stagger(self, bid: Int32):
        """``stagger_us``: block ``bid`` of the first wave (``resident`` = %nsmid x the blocks per SM the
        shared memory and the register cap hold) waits ``bid / resident`` of the period. The block
        scheduler hands out the first wave one block per SM before any SM gets a second, so the blocks
        of one SM start ``period / blocks`` apart and the SMs' phases cover the period evenly."""
        resident = nsmid() * self.stagger_slots
        if bid < resident:
            wait_ns(Int64(bid) * Int64(self.cfg.stagger_us * 1000) // Int64(resident))

    def _operand_buffers(self, allocator: Any) -> tuple:
        """(a_layout, b_layout, sa_base, sb_base): the A and B pipeline buffers, allocated first."""
        a_layout = smem_layout(self.bm, self.bk, self.a_mn_major, self.stages)
        b_layout = smem_layout(self.bn, self.bk, self.b_mn_major, self.stages)
        check_swizzle_model(a_layout, self.bm, self.bk, self.a_mn_major, self.stages)
        check_swizzle_model(b_layout, self.bn, self.bk, self.b_mn_major, self.stages)
        s_a = allocator.allocate_tensor(Float64, self._buffer_layout(a_layout, "a", self.bm), 128)
        s_b = allocator.allocate_tensor(Float64, self._buffer_layout(b_layout, "b", self.bn), 128)
        return a_layout, b_layout, s_a.iterator.toint(), s_b.iterator.toint()

    def _fragment_coords(self, tid: Any) -> tuple:
        """(row_a, warp, t) of MMA thread ``tid``: what the epilogue needs to place its accumulators."""
        warp = tid // 32
        return (warp % self.warps_m) * self.wm + (tid % 32) // 4, warp, (tid % 32) % 4

    def _tile_origin(self, args: KernelArgs, tile: Any) -> tuple:
        """(batch, ibatch, m0, n0, pa, pb) of linear tile ``tile`` (m tile fastest, then n, batch; n
        first with ``n_fastest``)."""
        n_tiles_m = (args.m + self.bm - 1) // self.bm
        n_tiles_n = (args.n + self.bn - 1) // self.bn
        if self.cfg.n_fastest:
            rest = tile // n_tiles_n
            batch = rest // n_tiles_m
            m0 = (rest % n_tiles_m) * self.bm
            n0 = (tile % n_tiles_n) * self.bn
        else:
            rest = tile // n_tiles_m
            batch = rest // n_tiles_n
            m0 = (tile % n_tiles_m) * self.bm
            n0 = (rest % n_tiles_n) * self.bn
        ibatch = Int64(batch)
        return batch, ibatch, m0, n0, args.a + ibatch * args.stride_a, args.b + ibatch * args.stride_b

    @cute.kernel
    def kernel_ws(self, args: KernelArgs):
        """async_epilogue_tiles = T: block b runs tiles b*T ... b*T+T-1 (the last block those that
        remain). Threads [0, threads) are the MMA warps: each tile's mainloop (their own barrier),
        its accumulators into buffer j % B (B = async_buffers; after the epilogue warps freed it:
        EMPTY_BARRIER + j % B, from tile B on), then FULL_BARRIER + j % B and the next tile. Threads
        [threads, 2 threads) are the epilogue warps: wait for the buffer, take thread tid - threads's
        accumulators in the MMA fragment order, free the buffer, run the epilogue of that tile.
        Buffers are thread-major (conflict-free)."""
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        allocator = cutlass.memory.SmemAllocator()
        a_layout, b_layout, sa_base, sb_base = self._operand_buffers(allocator)
        nbuf = self.cfg.async_buffers
        s_acc = allocator.allocate_tensor(Float64, cute.make_layout(nbuf * self.acc_regs * self.threads), 128)
        acc_base = s_acc.iterator.toint()
        total = ((args.m + self.bm - 1) // self.bm) * ((args.n + self.bn - 1) // self.bn) * args.batch
        first = bid * self.async_tiles
        count = cutlass.select_(total - first < self.async_tiles, total - first, Int32(self.async_tiles))
        pair = 2 * self.threads  # both groups take part in the full and empty barriers
        buffer_bytes = self.acc_regs * self.threads * 8
        acc = cute.make_rmem_tensor(cute.make_layout((self.tiles_m, self.tiles_n, self.shape.c_regs)), Float64)
        if tidx < self.threads:
            for j in cutlass.range(count, unroll=1):
                batch, ibatch, m0, n0, pa, pb = self._tile_origin(args, first + j)
                self._mainloop(args, tidx, ibatch, m0, n0, pa, pb, sa_base, sb_base, a_layout, b_layout, acc, True)
                buf = j % nbuf
                if j >= nbuf:
                    cute.arch.barrier(barrier_id=EMPTY_BARRIER + buf, number_of_threads=pair)
                mine = acc_base + buf * buffer_bytes + tidx * 8
                for r, index in enumerate(self._acc_order()):
                    sts_f64(mine, r * self.threads * 8, acc[index])
                cute.arch.barrier_arrive(barrier_id=FULL_BARRIER + buf, number_of_threads=pair)
                # the next tile's prologue overwrites stages the last k-steps read
                cute.arch.barrier(barrier_id=MMA_BARRIER, number_of_threads=self.threads)
        else:
            et = tidx - self.threads
            row_a, warp, t = self._fragment_coords(et)
            for j in cutlass.range(count, unroll=1):
                batch, ibatch, m0, n0, pa, pb = self._tile_origin(args, first + j)
                buf = j % nbuf
                cute.arch.barrier(barrier_id=FULL_BARRIER + buf, number_of_threads=pair)
                theirs = acc_base + buf * buffer_bytes + et * 8
                for r, index in enumerate(self._acc_order()):
                    acc[index] = lds_f64(theirs, r * self.threads * 8)
                # the buffer is free once its values are in registers (bar.arrive orders the loads)
                if j + nbuf < count:
                    cute.arch.barrier_arrive(barrier_id=EMPTY_BARRIER + buf, number_of_threads=pair)
                self._store_tile(args, acc, batch, ibatch, m0, n0, row_a, warp, t)

    def _acc_order(self) -> list[tuple[int, int, int]]:
        """The accumulator registers in hand-over order (the buffer's r index)."""
        return [(i, j, r) for i in range(self.tiles_m) for j in range(self.tiles_n) for r in range(self.shape.c_regs)]

    @cute.jit
    def _mainloop(self, args: KernelArgs, tidx: Int32, ibatch: Int64, m0: Int32, n0: Int32, pa: Any, pb: Any,
                  sa_base: Int32, sb_base: Int32, a_layout: Any, b_layout: Any, acc: Any, mma_warps_only: bool):
        """One tile's mainloop into ``acc`` (zeroed here): the copy plans, the cp.async prologue
        and the k-tile loop, its barriers those of the whole block or, ``mma_warps_only`` (an
        async-epilogue block), of the MMA warps alone; every cp.async group is drained at the end."""
        a_plan_copy = self._interior_plan(pa, args.lda, m0, sa_base, a_layout, self.bm, self.a_mn_major, tidx,
                                          self.a_copy_steps)
        b_plan_copy = self._interior_plan(pb, args.ldb, n0, sb_base, b_layout, self.bn, self.b_mn_major, tidx,
                                          self.b_copy_steps)
        factor = None
        if cutlass.const_expr(self.product == "a"):
            pf = args.factor + ibatch * args.stride_a
            factor = (pf, self._interior_plan(pf, args.lda, m0, sa_base + self.factor_offset, a_layout, self.bm,
                                              self.a_mn_major, tidx, self.a_copy_steps))
        if cutlass.const_expr(self.product == "b"):
            pf = args.factor + ibatch * args.stride_b
            factor = (pf, self._interior_plan(pf, args.ldb, n0, sb_base + self.factor_offset, b_layout, self.bn,
                                              self.b_mn_major, tidx, self.b_copy_steps))
        k_tiles = (args.k + self.bk - 1) // self.bk
        # prologue: stages - 1 tiles in flight (one commit group each, empty past the end)
        ops = (pa, pb, args.lda, args.ldb, args.m, args.n, args.k, m0, n0, sa_base, sb_base, a_layout,
               b_layout, a_plan_copy, b_plan_copy, factor)
        for st in cutlass.range_constexpr(self.stages - 1):
            if st < k_tiles:
                self._load_operands(ops, Int32(st * self.bk), Int32(st), tidx)
            cute.arch.cp_async_commit_group()

        acc.fill(0.0)

        warp = tidx // 32
        lane = tidx % 32
        g = lane // 4
        t = lane % 4
        row_a = (warp % self.warps_m) * self.wm + g
        row_b = (warp // self.warps_m) * self.wn + g

        # fragment addresses: one runtime base per group of fragment elements whose swizzled
        # offsets differ by a compile-time constant for every thread (frag_plan checks it), so
        # the mainloop's LDS use [base + immediate] instead of recomputing the XOR per load
        a_bases = [a_layout((row_a + rc, t + kc, 0)) * 8 for rc, kc in self.a_frags[0]]
        b_bases = [b_layout((row_b + rc, t + kc, 0)) * 8 for rc, kc in self.b_frags[0]]

        if cutlass.const_expr(self.prefetch_split):
            # epilogue_prefetch_split: one array every `gap` k-tiles from the window's start (a K
            # longer than the mainloop starts at its first k-tile; a short mainloop squeezes the gap
            # to one k-tile); config.split_prefetch_k_tiles is the same rule in Python
            window = cutlass.select_(k_tiles > self.prefetch_at, Int32(self.prefetch_at), k_tiles)
            gap = cutlass.select_(window >= self.prefetch_count, window // self.prefetch_count, Int32(1))
            start = k_tiles - window
            split_at = [cutlass.select_(start + j * gap < k_tiles, start + j * gap, k_tiles - 1)
                        for j in range(len(self.epilogue.prefetch_slots))]
        # fragment_pipeline: the registers that carry a k-tile's first fragments into its iteration
        # (unused, and so removed, by the plain loop)
        carry_a = cute.make_rmem_tensor(cute.make_layout((self.tiles_m, self.shape.a_regs)), Float64)
        carry_b = cute.make_rmem_tensor(cute.make_layout((self.tiles_n, self.shape.b_regs)), Float64)
        if cutlass.const_expr(self.fragment_pipeline):
            # tile 0's first fragments before the loop; each iteration then ends by waiting for the
            # next tile and loading its first fragments (_pipelined_k_tile)
            cute.arch.cp_async_wait_group(self.stages - 2)
            self._sync(mma_warps_only)
            self._keep_fragments(carry_a, carry_b, *self._load_fragments(
                *self._stage_addresses(sa_base, sb_base, a_bases, b_bases, Int32(0)), 0))
        for kt in cutlass.range(k_tiles, unroll=1):
            if cutlass.const_expr(not self.fragment_pipeline):
                # tile kt has landed (at most stages-2 younger groups pending) and every warp is done
                # with the stage the next load overwrites (it was read in iteration kt-1)
                cute.arch.cp_async_wait_group(self.stages - 2)
                if cutlass.const_expr(self.product_staged):
                    # this thread's own copies of tile kt have landed (wait_group makes them visible to
                    # it): it forms their products before the barrier publishes the stage
                    self._stage_product(ops, kt * self.bk, kt % self.stages, tidx)
                self._sync(mma_warps_only)
            # (with fragment_pipeline the same wait and barrier ended iteration kt-1)
            nxt = kt + self.stages - 1
            if nxt < k_tiles:
                self._load_operands(ops, nxt * self.bk, nxt % self.stages, tidx)
            cute.arch.cp_async_commit_group()
            if cutlass.const_expr(self.prefetch_at > 0 and not self.prefetch_split):
                # at least once: a K of fewer k-tiles than the distance prefetches in the first
                if kt == cutlass.select_(k_tiles > self.prefetch_at, k_tiles - self.prefetch_at, Int32(0)):
                    self._prefetch_epilogue(args, ibatch, m0, n0, tidx, self.epilogue.prefetch_slots)
            if cutlass.const_expr(self.prefetch_split):
                for j, slot in enumerate(self.epilogue.prefetch_slots):
                    if kt == split_at[j]:
                        self._prefetch_epilogue(args, ibatch, m0, n0, tidx, (slot,))
            a_addr, b_addr = self._stage_addresses(sa_base, sb_base, a_bases, b_bases, kt % self.stages)
            if cutlass.const_expr(self.fragment_pipeline):
                self._pipelined_k_tile(acc, carry_a, carry_b, a_addr, b_addr, sa_base, sb_base, a_bases, b_bases,
                                       (kt + 1) % self.stages)
            else:
                for ks in cutlass.range_constexpr(self.k_steps):
                    self._mma_step(acc, *self._load_fragments(a_addr, b_addr, ks))
        cute.arch.cp_async_wait_group(0)

    def _sync(self, mma_warps_only: bool) -> None:
        """The mainloop's barrier: the block's, or named barrier MMA_BARRIER of the MMA warps only."""
        if mma_warps_only:
            cute.arch.barrier(barrier_id=MMA_BARRIER, number_of_threads=self.threads)
        else:
            cute.arch.sync_threads()

    @property
    def prefetch_count(self) -> int:
        """Aux arrays the epilogue reads (what the split spreads)."""
        return max(1, len(self.epilogue.prefetch_slots))

    def _prefetch_epilogue(self, args: KernelArgs, ibatch: Int64, m0: Int32, n0: Int32, tidx: Int32,
                           slots: tuple[int, ...]) -> None:
        """L2 prefetches of this tile's region of the arrays ``slots`` the epilogue reads per element.

        The region is ``runs`` lines of C's contiguous mode (rows of an n-contiguous C), each
        ``span`` elements long; a run is covered by one prefetch per 16 elements (128 bytes) and
        one at its last element (a run need not start on a line), the tile's threads taking them
        in turn. Out-of-bounds elements of a ragged tile are predicated off."""
        from composer.gemm.cute.atom import prefetch_l2_if

        runs, span = (self.bn, self.bm) if self.c_m_major else (self.bm, self.bn)
        chunks = (span + 15) // 16
        per_run = chunks + 1
        items = runs * per_run
        ld = args.ldc
        # a ragged tile's runs end at C's edge: their last prefetch goes to the last element inside
        inside = (args.m - m0) if cutlass.const_expr(self.c_m_major) else (args.n - n0)
        last = cutlass.select_(inside < span, inside - 1, Int32(span - 1))
        for slot in slots:
            base = getattr(args, f"aux{slot}") + ibatch * args.stride_c
            for i in range(self.prefetch_rounds(items)):
                idx = tidx + i * self.threads
                run = idx // per_run
                chunk = idx % per_run
                along = cutlass.select_(chunk < chunks, chunk * 16, last)
                if cutlass.const_expr(self.c_m_major):
                    gm, gn = m0 + along, n0 + run
                    offset = Int64(gn) * ld + Int64(gm)
                else:
                    gm, gn = m0 + run, n0 + along
                    offset = Int64(gm) * ld + Int64(gn)
                ok = (idx < items) & (gm < args.m) & (gn < args.n)
                prefetch_l2_if((base + offset).toint(), cutlass.select_(ok, Int32(1), Int32(0)))

    def prefetch_rounds(self, items: int) -> int:
        """Prefetches per thread per array for ``items`` lines over the block's threads."""
        return (items + self.threads - 1) // self.threads

    # --- the mainloop's pieces ---------------------------------------------------------------
    # Plain Python methods are unrolled at trace time (every DSL value they use comes in as an
    # argument); the @cute.jit ones hold runtime branches, which the DSL rewrites.

    def _interior_plan(self, gptr: cute.Pointer, ld: Int64, row0: Int32, sbase: Int32, layout: Any, rows: int,
                       mn_major: bool, tidx: Int32, steps: tuple[int, list[int]] | None) -> Any:
        """This thread's first copy (global address at k0 = 0, swizzled shared address in stage 0)
        and the strides to its other copies: three registers, computed before the mainloop
        (None when ``interior_steps`` found no constant offsets: the predicated path serves all)."""
        if steps is None:
            return None
        line_step, dst_steps = steps
        per_line = (self.bk if not mn_major else rows) // self.vec
        if mn_major:
            r, kk = (tidx % per_line) * self.vec, tidx // per_line
            offset = Int64(row0 + r) + Int64(kk) * ld
        else:
            r, kk = tidx // per_line, (tidx % per_line) * self.vec
            offset = Int64(kk) + Int64(row0 + r) * ld
        # the next copy is line_step k-lines (mn-major) or rows (k-major) further: line_step * ld
        return ((gptr + offset).toint(), sbase + layout((r, kk, 0)) * 8, Int64(line_step) * ld * 8, dst_steps)

    @cute.jit
    def _load_tile(self, gptr: cute.Pointer, ld: Int64, rows_total: Int32, row0: Int32, k_total: Int32,
                   k0: Int32, sbase: Int32, layout: cutlass.Constexpr, rows: cutlass.Constexpr,
                   mn_major: cutlass.Constexpr, stage: Int32, tidx: Int32, plan: cutlass.Constexpr):
        """cp.async one (rows x bk) tile; elements outside (rows_total, k_total) become 0.

        Interior tiles (every element in bounds: the common case from Nq = 64 on) copy from the
        addresses ``_interior_plan`` computed before the mainloop, plus the k-tile offset: a few
        integer instructions per cp.async instead of the ~20 of the predicated path (ncu at
        Nq = 512: with predication on every tile the kernel issued 1.4x cuBLAS's instructions).
        """
        chunks = rows * self.bk // self.vec
        if cutlass.const_expr(plan is not None):
            interior = (row0 + rows <= rows_total) & (k0 + self.bk <= k_total)
            if interior:
                src0, dst0, src_step, dst_steps = plan
                src = src0 + (Int64(k0) * ld * 8 if mn_major else Int64(k0) * 8)
                dst = dst0 + stage * (rows * self.bk * 8)  # above the swizzled bits (validate checks)
                for it in cutlass.range_constexpr(chunks // self.threads):
                    cp_async_full(dst + dst_steps[it], src + Int64(it) * src_step, self.vec)
            else:
                self._copy_predicated(gptr, ld, rows_total, row0, k_total, k0, sbase, layout, rows, mn_major,
                                      stage, tidx)
        else:
            self._copy_predicated(gptr, ld, rows_total, row0, k_total, k0, sbase, layout, rows, mn_major,
                                  stage, tidx)

    @cute.jit
    def _copy_predicated(self, gptr: cute.Pointer, ld: Int64, rows_total: Int32, row0: Int32, k_total: Int32,
                         k0: Int32, sbase: Int32, layout: cutlass.Constexpr, rows: cutlass.Constexpr,
                         mn_major: cutlass.Constexpr, stage: Int32, tidx: Int32):
        """Ragged tiles: per-chunk source sizes (zero fill past the edges)."""
        chunks = rows * self.bk // self.vec
        for it in cutlass.range_constexpr((chunks + self.threads - 1) // self.threads):
            cidx = tidx + it * self.threads
            r, kk = self._chunk_coords(cidx, rows, mn_major)
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
            nbytes = cutlass.select_(other_ok, 8 * cutlass.max(cutlass.min(left, self.vec), 0), 0)
            if cutlass.const_expr(chunks % self.threads != 0):
                nbytes = cutlass.select_(cidx < chunks, nbytes, 0)
            # with nothing to read, point at the (valid) base: cp.async still issues the zero fill
            src = cutlass.select_(nbytes > 0, (gptr + offset).toint(), gptr.toint())
            dst = sbase + layout((r, kk, stage)) * 8
            if cutlass.const_expr(chunks % self.threads != 0):
                if cidx < chunks:
                    cp_async(dst, src, nbytes, self.vec)
            else:
                cp_async(dst, src, nbytes, self.vec)

    def _chunk_coords(self, cidx: Any, rows: int, mn_major: bool) -> tuple[Any, Any]:
        """(row, k) in the tile of predicated chunk ``cidx``: chunks run along the contiguous mode."""
        if mn_major:
            return (cidx % (rows // self.vec)) * self.vec, cidx // (rows // self.vec)
        return cidx // (self.bk // self.vec), (cidx % (self.bk // self.vec)) * self.vec

    def _stage_product(self, ops: tuple, k0: Any, stage: Any, tidx: Any) -> None:
        """product_staged: the product operand's tile of k offset ``k0`` in ``stage`` times its factor
        tile, in place, over the chunks this thread copied (``_load_tile``'s interior or predicated
        mapping, chosen by the same bounds): zero-filled chunks are zero in both tiles, so their
        products are zero, and chunks no thread copied are left alone."""
        _, _, _, _, m, n, k, m0, n0, sa_base, sb_base, a_layout, b_layout, a_copy, b_copy, _ = ops
        if self.product == "a":
            self._product_tile(m, m0, k, k0, sa_base, a_layout, self.bm, self.a_mn_major, stage, tidx, a_copy)
        else:
            self._product_tile(n, n0, k, k0, sb_base, b_layout, self.bn, self.b_mn_major, stage, tidx, b_copy)

    @cute.jit
    def _product_tile(self, rows_total: Int32, row0: Int32, k_total: Int32, k0: Int32, sbase: Int32,
                      layout: cutlass.Constexpr, rows: cutlass.Constexpr, mn_major: cutlass.Constexpr,
                      stage: Int32, tidx: Int32, plan: cutlass.Constexpr):
        """The in-place product of one staged tile over this thread's chunks (see _stage_product)."""
        chunks = rows * self.bk // self.vec
        if cutlass.const_expr(plan is not None):
            interior = (row0 + rows <= rows_total) & (k0 + self.bk <= k_total)
            if interior:
                _, dst0, _, dst_steps = plan
                dst = dst0 + stage * (rows * self.bk * 8)
                for it in cutlass.range_constexpr(chunks // self.threads):
                    self._multiply_chunk(dst + dst_steps[it])
            else:
                self._product_predicated(sbase, layout, rows, mn_major, stage, tidx)
        else:
            self._product_predicated(sbase, layout, rows, mn_major, stage, tidx)

    @cute.jit
    def _product_predicated(self, sbase: Int32, layout: cutlass.Constexpr, rows: cutlass.Constexpr,
                            mn_major: cutlass.Constexpr, stage: Int32, tidx: Int32):
        """The chunks ``_copy_predicated`` gave this thread (the same index arithmetic)."""
        chunks = rows * self.bk // self.vec
        for it in cutlass.range_constexpr((chunks + self.threads - 1) // self.threads):
            cidx = tidx + it * self.threads
            r, kk = self._chunk_coords(cidx, rows, mn_major)
            dst = sbase + layout((r, kk, stage)) * 8
            if cutlass.const_expr(chunks % self.threads != 0):
                if cidx < chunks:
                    self._multiply_chunk(dst)
            else:
                self._multiply_chunk(dst)

    def _multiply_chunk(self, addr: Any) -> None:
        """One copied chunk (``vec`` doubles at ``addr``) times its factor chunk, stored in place."""
        if self.vec == 2:
            x0, x1 = lds_f64x2(addr, 0)
            f0, f1 = lds_f64x2(addr, self.factor_offset)
            sts_f64x2(addr, 0, x0 * f0, x1 * f1)
        else:
            sts_f64(addr, 0, lds_f64(addr, 0) * lds_f64(addr, self.factor_offset))

    def _buffer_layout(self, layout: Any, operand: str, rows: int) -> Any:
        """What an operand's shared buffer is allocated with: its pipeline layout, or for the
        product operand room for its factor's stages after its own (addressed with ``layout``
        plus ``factor_offset``)."""
        if operand != self.product:
            return layout
        return cute.make_layout(2 * self.stages * rows * self.bk)

    def _load_operands(self, ops: tuple, k0: Any, stage: Any, tidx: Any) -> None:
        """cp.async the A and B tiles of k offset ``k0`` into pipeline ``stage`` (``ops``: the
        kernel's operand pointers, sizes, block origin, shared bases, layouts and copy plans, and
        the product operand's factor pointer and copy plan), the factor tile with its operand's."""
        pa, pb, lda, ldb, m, n, k, m0, n0, sa_base, sb_base, a_layout, b_layout, a_copy, b_copy, factor = ops
        self._load_tile(pa, lda, m, m0, k, k0, sa_base, a_layout, self.bm, self.a_mn_major, stage, tidx,
                        a_copy)
        if self.product == "a":
            self._load_tile(factor[0], lda, m, m0, k, k0, sa_base + self.factor_offset, a_layout, self.bm,
                            self.a_mn_major, stage, tidx, factor[1])
        self._load_tile(pb, ldb, n, n0, k, k0, sb_base, b_layout, self.bn, self.b_mn_major, stage, tidx,
                        b_copy)
        if self.product == "b":
            self._load_tile(factor[0], ldb, n, n0, k, k0, sb_base + self.factor_offset, b_layout, self.bn,
                            self.b_mn_major, stage, tidx, factor[1])

    def _stage_addresses(self, sa_base: Any, sb_base: Any, a_bases: list, b_bases: list, stage: Any
                         ) -> tuple[list[Any], list[Any]]:
        """The fragment base addresses of pipeline ``stage``."""
        a_stage = sa_base + stage * (self.bm * self.bk * 8)
        b_stage = sb_base + stage * (self.bn * self.bk * 8)
        return [a_stage + x for x in a_bases], [b_stage + x for x in b_bases]

    def _load_fragments(self, a_addr: list[Any], b_addr: list[Any], ks: int) -> tuple[list, list]:
        """This thread's A and B fragments of k-step ``ks``: one LDS [base + immediate] each."""
        shape, a_plan, b_plan = self.shape, self.a_frags[1], self.b_frags[1]
        a_frag = [[self._operand_element(a_addr[a_plan[(ks, i, r)][0]], a_plan[(ks, i, r)][1], "a")
                   for r in range(shape.a_regs)] for i in range(self.tiles_m)]
        b_frag = [[self._operand_element(b_addr[b_plan[(ks, j, r)][0]], b_plan[(ks, j, r)][1], "b")
                   for r in range(shape.b_regs)] for j in range(self.tiles_n)]
        return a_frag, b_frag

    def _keep_fragments(self, carry_a: Any, carry_b: Any, a_frag: list, b_frag: list) -> None:
        """Store fragments into the register tensors that carry them into the next iteration."""
        for i in range(self.tiles_m):
            for r in range(self.shape.a_regs):
                carry_a[(i, r)] = a_frag[i][r]
        for j in range(self.tiles_n):
            for r in range(self.shape.b_regs):
                carry_b[(j, r)] = b_frag[j][r]

    def _pipelined_k_tile(self, acc: Any, carry_a: Any, carry_b: Any, a_addr: list, b_addr: list,
                          sa_base: Any, sb_base: Any, a_bases: list, b_bases: list, next_stage: Any) -> None:
        """One k-tile of the fragment pipeline: k-step ks's MMAs issue after ks + 1's fragments
        are loaded; before the last k-step's MMAs the next tile is waited for (at most stages - 2
        younger groups pending), the block syncs (every warp is done reading the stage the next
        iteration's cp.async overwrites) and the next tile's first fragments are loaded into the
        carry. Past the last tile that load reads a stage no MMA uses. Each accumulator sums its k
        products in the same order as the plain loop, so the results are bitwise the same."""
        frags = ([[carry_a[(i, r)] for r in range(self.shape.a_regs)] for i in range(self.tiles_m)],
                 [[carry_b[(j, r)] for r in range(self.shape.b_regs)] for j in range(self.tiles_n)])
        for ks in range(self.k_steps):
            if ks + 1 < self.k_steps:
                following = self._load_fragments(a_addr, b_addr, ks + 1)
            else:
                cute.arch.cp_async_wait_group(self.stages - 2)
                cute.arch.sync_threads()
                next_a, next_b = self._stage_addresses(sa_base, sb_base, a_bases, b_bases, next_stage)
                following = self._load_fragments(next_a, next_b, 0)
                self._keep_fragments(carry_a, carry_b, *following)
            self._mma_step(acc, *frags)
            frags = following

    def _operand_element(self, base: Any, offset: int, operand: str) -> Any:
        """One fragment element: an LDS, times its factor's element for the product operand (unless
        the product was formed in the stage)."""
        value = lds_f64(base, offset)
        if operand == self.product and not self.product_staged:
            value = value * lds_f64(base, offset + self.factor_offset)
        return value

    def _mma_step(self, acc: Any, a_frag: list, b_frag: list) -> None:
        """Every MMA of one k-step: the warp tile's tiles_m x tiles_n instructions."""
        shape = self.shape
        for i in range(self.tiles_m):
            for j in range(self.tiles_n):
                d = dmma(shape, a_frag[i], b_frag[j], [acc[(i, j, r)] for r in range(shape.c_regs)])
                for r in range(shape.c_regs):
                    acc[(i, j, r)] = d[r]

    @cute.jit
    def _store_tile(self, args: KernelArgs, acc: Any, batch: Int32, ibatch: Int64, m0: Int32, n0: Int32,
                    row_a: Int32, warp: Int32, t: Int32):
        """The epilogue: every in-bounds accumulator through ``self.epilogue``.

        Interior tiles (the common case) run without a branch, computing a group of sites' values
        before their stores (no store between the loads of a group); ragged tiles check each site.
        """
        ctx = EpilogueContext(
            c=args.c + ibatch * args.stride_c,
            aux=tuple(getattr(args, f"aux{s}") + ibatch * args.stride_c for s in range(AUX_SLOTS)),
            face=args.face, batch=batch,
            c_stride_m=Int64(1) if self.c_m_major else args.ldc,
            c_stride_n=args.ldc if self.c_m_major else Int64(1),
            alpha=args.alpha, beta=args.beta)
        row0 = m0 + row_a
        col0 = n0 + (warp // self.warps_m) * self.wn + 2 * t
        interior = (m0 + self.bm <= args.m) & (n0 + self.bn <= args.n)
        if cutlass.const_expr(self.pairs):
            pair_ok = self._pair_condition(args, ctx)
            if interior & pair_ok:
                self._store_sites(ctx, acc, row0, col0, 2)
            else:
                self._store_ragged(args, ctx, acc, row0, col0, pair_ok)
        else:
            if interior:
                self._store_sites(ctx, acc, row0, col0, 1)
            else:
                self._store_ragged(args, ctx, acc, row0, col0, False)

    def _pair_condition(self, args: KernelArgs, ctx: EpilogueContext) -> Any:
        """Whether two-element sites are legal at run time: an even leading dimension and batch
        stride keep every pair 16-byte aligned given an aligned C (and what the epilogue needs)."""
        ok = ((args.ldc % 2) == 0) & ((args.stride_c % 2) == 0) & ((args.c.toint() % 16) == 0)
        extra = self.epilogue.pair_condition(ctx)
        return ok if extra is None else ok & extra

    def _site(self, ctx: EpilogueContext, row0: Any, col0: Any, i: int, j: int, r: int) -> OutputSite:
        """The site of accumulator register (i, j, r)."""
        gm = row0 + i * self.shape.m + d_coord(r)[0]
        gn = col0 + j * self.shape.n + d_coord(r)[1]
        return OutputSite(gm, gn, Int64(gm) * ctx.c_stride_m + Int64(gn) * ctx.c_stride_n)

    def _store_sites(self, ctx: EpilogueContext, acc: Any, row0: Any, col0: Any, width: int) -> None:
        """Every site of an interior tile, in groups of ``epilogue.store_group`` sites (None: the
        whole tile): a group's values first, then its stores, so its loads overlap each other
        while the registers they occupy stay bounded by the group."""
        group = self.epilogue.store_group or self.tiles_m * self.tiles_n * self.shape.c_regs
        pending: list = []
        for i in range(self.tiles_m):
            for j in range(self.tiles_n):
                for r in range(0, self.shape.c_regs, width):
                    site = self._site(ctx, row0, col0, i, j, r)
                    pending.append((site, self.epilogue.values(ctx, site, [acc[(i, j, r + w)] for w in range(width)])))
                    if len(pending) >= group:
                        for done, values in pending:
                            self.epilogue.store(ctx, done, values)
                        pending = []
        for done, values in pending:
            self.epilogue.store(ctx, done, values)

    @cute.jit
    def _store_ragged(self, args: KernelArgs, ctx: EpilogueContext, acc: Any, row0: Int32, col0: Int32,
                      pair_ok: Any):
        """A tile on the edge of C: each site checked; pairs where both elements are in bounds."""
        step = 2 if self.pairs else 1
        for i in cutlass.range_constexpr(self.tiles_m):
            for j in cutlass.range_constexpr(self.tiles_n):
                for r in cutlass.range_constexpr(0, self.shape.c_regs, step):
                    site = self._site(ctx, row0, col0, i, j, r)
                    if site.m < args.m:
                        if cutlass.const_expr(self.pairs):
                            if pair_ok and site.n + 1 < args.n:
                                self._apply(ctx, site, [acc[(i, j, r)], acc[(i, j, r + 1)]])
                            else:
                                if site.n < args.n:
                                    self._apply(ctx, site, [acc[(i, j, r)]])
                                if site.n + 1 < args.n:
                                    self._apply(ctx, self._site(ctx, row0, col0, i, j, r + 1), [acc[(i, j, r + 1)]])
                        else:
                            if site.n < args.n:
                                self._apply(ctx, site, [acc[(i, j, r)]])

    def _apply(self, ctx: EpilogueContext, site: OutputSite, acc: list) -> None:
        self.epilogue.store(ctx, site, self.epilogue.values(ctx, site, acc))
