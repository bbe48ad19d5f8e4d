"""Render and NVRTC-compile the fused kernels of one (variant, order, arch).

The builder turns a :class:`~composer.fused.config.FusedConfig` into kernel plans (shared-memory
strides, dynamic shared-memory size, blocks per element, entry names), renders the volume template
once per kernel (``fused_volume.cu.j2``, the box kernel, or ``fused_stream.cu.j2`` under
``volume = "stream"``) and, when the flux is precomputed (p >= 63), the face kernel
``fused_face_flux.cu.j2``. Compilation goes through the runtime's disk-cached NVRTC.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from composer.arch.limits import DEFAULT_ARCH, ArchLimits, arch_limits
from composer.errors import ComposerError
from composer.fused.config import (DIR_NAMES, FusedConfig, KernelConfig, box_lines, cluster_problem,
                                   first_table_problem)
from composer.fused.copies import d_trips, f_trips, mirror_trips, panel_strides
from composer.kernels.render import render
from composer.runtime.nvrtc import CompiledKernel, compile_cuda
from composer.runtime.params import Param, params

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
#: No FMA contraction outside the explicit fma()/DMMA of the contractions: the pointwise work then
#: rounds as the NumPy reference does, and FUSED_TC's SASS holds no DFMA at all (a checkable claim).
OPTIONS: tuple[str, ...] = ("--fmad=false",)
FACE_THREADS = 256
VOLUME_SIGNATURE: tuple[Param, ...] = params(
    "q:ptr u:ptr v:ptr w:ptr Ex:ptr Ey:ptr Ez:ptr vmapM:ptr vmapP:ptr nx:ptr ny:ptr nz:ptr F:ptr "
    "fstar:ptr D:ptr dqdt:ptr ne:i64")
#: A chunked table's volume kernels (``FusedConfig.chunk_elements``): the first element of the launch's chunk
#: too (``ne`` is then the chunk's end), so that a launch covers elements e0 .. ne - 1. Unsigned 32-bit, as
#: blockIdx.x: the element index then stays a zero-extended 32-bit value, which ptxas addresses with the
#: unchunked kernel's registers (an i64 e0 spilled 40 B/thread at FUSED_TC p = 31's 64-register cap).
CHUNKED_VOLUME_SIGNATURE: tuple[Param, ...] = VOLUME_SIGNATURE + params("e0:u32")
#: A table with ``element_bricks``: the permutation its blocks take their elements from (int32, one per
#: element; composer.fused.order).
ORDERED_VOLUME_SIGNATURE: tuple[Param, ...] = VOLUME_SIGNATURE + params("order:ptr")
#: A table with ``exterior_maps = false``: the face links its fluxes take the exterior nodes from (an int2 per
#: element face; composer.fused.links), after the permutation when there is one.
LINKS_PARAMS: tuple[Param, ...] = params("links:ptr")
#: A table with ``side_queues``: the L2 side of each SM (a byte per %smid, composer.runtime.l2_sides) and the
#: three counters of the queues (side 0's, side 1's, and the blocks served: the last block resets them).
SIDE_QUEUE_PARAMS: tuple[Param, ...] = params("sm_side:ptr work_queue:ptr")
FACE_SIGNATURE: tuple[Param, ...] = params(
    "q:ptr u:ptr v:ptr w:ptr vmapM:ptr vmapP:ptr nx:ptr ny:ptr nz:ptr F:ptr fstar:ptr ne:i64")


def _stride(base: int, engine: str) -> int:
    """Smallest padded stride >= base that keeps the engine's shared-memory reads conflict-free.

    MMA: A-fragment loads touch 4 strided rows x 4 consecutive doubles per half-warp; a stride of
    4 or 12 mod 16 doubles puts them in 16 distinct banks. CUDA cores: lanes walk strided lines,
    an odd stride is conflict-free.
    """
    stride = base
    if engine == "mma":
        while stride % 16 not in (4, 12):
            stride += 1
    else:
        while stride % 2 == 0:
            stride += 1
    return stride


def paired_stride(base: int, reads: str) -> int:
    """Smallest stride >= base that keeps 16-byte fragment loads conflict-free (a quarter-warp of
    8 lanes is served per pass: 128 bytes, every bank once).

    ``"rows"`` (D, x-direction F): lanes (g, t) read 2 rows g x 4 consecutive pairs 2t, 2t+1:
    the second row must start 64 bytes on, a stride of 8 mod 16 doubles. ``"lines"`` (y/z F,
    [m][line]): lanes read 4 rows 2t (stride 2 rows) x one pair of lines 2g, 2g+1: the rows must
    fall 32 bytes apart mod 128, a stride of 2 or 6 mod 8 doubles."""
    stride = base
    residues = (8,) if reads == "rows" else (2, 6, 10, 14)
    while stride % 16 not in residues:
        stride += 1
    return stride


class BoxGeometry:
    """What both volume-kernel plans derive from their box: blocks per element, lines."""

    kernel: KernelConfig
    nq: int

    @property
    def blocks_per_element(self) -> int:
        bk, bj, bi = self.kernel.box
        return (self.nq // bk) * (self.nq // bj) * (self.nq // bi)

    def lines(self, d: int) -> int:
        """Lines of direction d in the box (= the box's nodes on one face of that direction)."""
        return box_lines(self.kernel.box, d)


@dataclass(frozen=True)
class KernelPlan(BoxGeometry):
    """One volume kernel ready to render: the config plus derived layout and launch geometry."""

    name: str
    index: int
    kernel: KernelConfig
    nq: int
    rs: int  # shared-memory j stride (doubles)
    ps: int  # shared-memory k stride (doubles)
    first: bool  # writes dqdt (else subtracts from it)
    d_panel: int = 0  # d_stage = "smem": k-values per staged D panel (= nq: all of D); 0: D not staged
    q_tile: bool = False  # inline fluxes: q staged in its own tile for the interior traces
    flux_tiles: int = 0  # > 0: at most this many flux tiles resident (the later directions restaged)
    x_traces: bool = False  # traces = "xfaces" in a kernel carrying x: its x-face fluxes formed while staging
    x_pairs: bool = False  # two x-neighbour elements per block, half the threads each (config.x_pairs)
    x_chain: int = 0  # > 0: the chain's length, the block walking that many x neighbours (config.x_chain)
    x_prefetch: bool = False  # the chain's next element copied into shared memory ahead (config.x_prefetch)
    swizzle: bool = False  # unpadded tiles, i XOR-swizzled (config.tile_swizzle; composer.fused.banks)
    parity: bool = False  # contractions through even and odd parts; D is the parity rows (config.parity)

    @property
    def d_rows(self) -> int:
        """Rows of the staged D: all of D's, or the parity rows (half of them)."""
        return self.nq // 2 if self.parity else self.nq

    @property
    def element_threads(self) -> int:
        """Threads that work on one element: the block's, or half of them with x_pairs."""
        return self.kernel.threads // 2 if self.x_pairs else self.kernel.threads

    @property
    def element_doubles(self) -> int:
        """Shared memory of one element's tiles and faces (and staged D)."""
        base = self.ntiles * self.tile_doubles + sum(2 * self.lines(d) for d in self.kernel.dirs)
        if not self.d_panel:
            return base
        return self.d_offset + self.d_bufs * self.d_rows * self.d_panel

    @property
    def flux_tile_count(self) -> int:
        """Flux tiles held at once: one per carried direction, or the table's ``flux_tiles``."""
        ndir = len(self.kernel.dirs)
        return min(ndir, self.flux_tiles) if self.flux_tiles else ndir

    @property
    def ntiles(self) -> int:
        """Box-sized shared-memory tiles: the flux tiles, plus q's with traces from the tiles."""
        return self.flux_tile_count + int(self.q_tile)

    def tile_slot(self, n: int) -> int:
        """The flux tile that holds the kernel's n-th direction: its own, or with ``flux_tiles`` the
        last resident one, which each later direction is staged into once the one before is done."""
        return min(n, self.flux_tile_count - 1)

    def restaged(self, n: int) -> bool:
        """Whether the n-th direction's fluxes are staged after the contractions before it."""
        return n >= self.flux_tile_count

    def positions(self, d: int) -> int:
        """Output positions per line: the box kernel contracts the whole axis (a clustered kernel's
        split direction: the block's own chunk of it)."""
        return self.kernel.positions(d, self.nq)

    @property
    def tile_doubles(self) -> int:
        return self.kernel.box[0] * self.ps

    @property
    def d_bufs(self) -> int:
        """Staged D buffers: one when all of D is staged (once per kernel), else two panels."""
        return 0 if not self.d_panel else 1 if self.d_panel == self.nq else 2

    @property
    def d_offset(self) -> int:
        """Shared-memory offset (doubles, 16-byte aligned) of the staged D, after tiles and faces."""
        base = self.ntiles * self.tile_doubles + sum(2 * self.lines(d) for d in self.kernel.dirs)
        return base + base % 2

    @property
    def smem_doubles(self) -> int:
        """The block's: one element's, or with x_pairs two and the shared face's q, u, v, w on both sides;
        with x_chain one element's, the high-face q, u, v, w of the last two elements (carried to the
        next) and the last element's high-face point pairs waiting for their lift (with x_prefetch then
        the next element's q, u, v, w)."""
        if self.x_pairs:
            return 2 * self.element_doubles + 8 * self.lines(0)
        if self.x_chain and self.x_prefetch:
            return self.raw_offset + 4 * self.nq**3
        if self.x_chain:
            return self.element_doubles + 10 * self.lines(0)
        return self.element_doubles

    @property
    def raw_offset(self) -> int:
        """x_prefetch: where the next element's q, u, v, w start (after the chain's buffers, 16-byte aligned)."""
        end = self.element_doubles + 10 * self.lines(0)
        return end + end % 2

    @property
    def smem_bytes(self) -> int:
        return 8 * self.smem_doubles


@dataclass(frozen=True)
class StreamPlan(BoxGeometry):
    """One streamed volume kernel (``volume = "stream"``): the box is the block's output tile of
    lines x positions; q, the velocity and D stream through ``stages`` shared-memory buffers of
    ``k_panel`` contraction values. Same launch interface as :class:`KernelPlan`."""

    name: str
    index: int
    kernel: KernelConfig
    nq: int
    first: bool
    k_panel: int
    stages: int
    min_blocks: int = 0
    product: bool = False  # a_operand = "product": one F panel of q*vel instead of q and vel
    unrolled: bool = False  # copies = "unrolled": panel copies with a compile-time trip count
    d_panels: bool = False  # d_layout = "panels": D read from its k-panel copy (d_panel_layout)
    paired: bool = False  # fragments = "paired": 16-byte fragment loads (paired_stride)
    axis_order: bool = False  # block_order = "axis": the carried axis's chunks numbered fastest
    prefetch: int = 0  # the kernel's prefetch key: epilogue lines into L2 this many panels before the end
    persistent: bool = False  # the kernel's persistent key: resident blocks walk the tiles, one pipeline
    pointers: bool = False  # copies = "pointers": the copies from per-thread base pointers (composer.fused.copies)
    mma_issue: bool = False  # copy_issue = "mma": the next panel's copies after the first MMA k-step
    l2_fetch: str = ""  # l2_fetch: the copies' L2 fetch-size qualifier ("128B", "256B"; "" none)
    parity: bool = False  # config.parity: the box's positions in the axis's first half, their mirrors with them

    @property
    def dir(self) -> int:
        return self.kernel.dirs[0]

    @property
    def blocks_per_element(self) -> int:
        """Output tiles per element: with parity the boxes tile the carried axis's first half only (each
        block also writes the mirrors of its positions)."""
        whole = BoxGeometry.blocks_per_element.fget(self)
        return whole // 2 if self.parity else whole

    @property
    def contraction(self) -> int:
        """Contraction values per output: Nq, or with parity the half axis (m < h)."""
        return self.nq // 2 if self.parity else self.nq

    @property
    def panels(self) -> int:
        """Panels one output tile streams (the template's NPANEL)."""
        return self.contraction // self.k_panel

    @property
    def virtual_positions(self) -> int:
        """The D rows (and accumulator positions) a block contracts: its positions, or with parity u's
        and w's of each (the template's NV)."""
        return 2 * self.positions(self.dir) if self.parity else self.positions(self.dir)

    @property
    def f_panels(self) -> int:
        """F panels per stage: q*vel (product), q and vel (factors), or the e and o parts (parity)."""
        return 1 if self.product and not self.parity else 2

    def positions(self, d: int) -> int:
        """Output positions per line: the box's extent along the carried axis."""
        return self.kernel.box[2 - d]

    @property
    def f_lines(self) -> bool:
        """F panels as [m][line]: y and z (their lines are contiguous in memory), and x with parity (its
        staging stores each value; line-major rows let paired fragment loads pair its A rows too)."""
        return self.dir != 0 or self.parity

    @property
    def fs(self) -> int:
        """F panel row stride: [line][m] for x (m contiguous in memory), [m][line] for y and z (and for
        x with parity: ``f_lines``)."""
        base = self.lines(self.dir) if self.f_lines else self.k_panel
        if self.paired:
            return paired_stride(base, "lines" if self.f_lines else "rows")
        return _stride(base, "mma")

    @property
    def ds(self) -> int:
        """D panel row stride ([position][m])."""
        return paired_stride(self.k_panel, "rows") if self.paired else _stride(self.k_panel, "mma")

    @property
    def f_panel(self) -> int:
        return self.k_panel * self.fs if self.f_lines else self.lines(self.dir) * self.fs

    @property
    def smem_doubles(self) -> int:
        return self.stages * (self.f_panels * self.f_panel + self.virtual_positions * self.ds)

    @property
    def smem_bytes(self) -> int:
        return 8 * self.smem_doubles


def _d_panel(config: FusedConfig, plan: KernelPlan, limits: ArchLimits) -> int:
    """The staged D panel of ``plan``: the schedule's, else all of D when it fits, else the widest
    double-buffered panel of 64, 32, 16 or 8 k-values that fits (within ``min_blocks`` blocks/SM)."""
    if config.d_stage != "smem":
        return 0
    if config.d_panel or config.parity:  # the parity rows are staged whole (config.parity_problem)
        return config.d_panel or config.nq
    limit = limits.smem_per_block(config.min_blocks)
    split = plan.kernel.split
    chunk = plan.kernel.box[2 - split] if split is not None else config.nq
    for panel in (config.nq, 64, 32, 16, 8):
        # a clustered kernel's panels lie inside one block's chunk of the split axis (or are all of D)
        if panel <= config.nq and config.nq % panel == 0 and (panel == config.nq or chunk % panel == 0):
            trial = dataclasses.replace(plan, d_panel=panel)
            if trial.smem_bytes <= limit:
                return panel
    raise ComposerError(f"path {config.variant} at order {config.order}: kernel {plan.name} has no room "
                        f"for a staged D panel of 8 k-values ({plan.smem_bytes} B without it)")


def d_panel_layout(dmat: np.ndarray, k_panel: int) -> np.ndarray:
    """D regrouped by k-panel, ``[p][a][m] = D[a][p * k_panel + m]``: the copy of D that streamed
    kernels with ``d_layout = "panels"`` read, so that the ``k_panel`` values of consecutive
    positions of one panel lie in one contiguous run (whole 128-byte lines). Also of the parity rows
    (``h`` rows of ``[A | B]``: A's panels, then B's)."""
    rows, cols = dmat.shape
    return np.ascontiguousarray(dmat.reshape(rows, cols // k_panel, k_panel).transpose(1, 0, 2))


def kernel_d_operand(config: FusedConfig, order: int) -> tuple[str, np.ndarray] | None:
    """What a table's volume kernels read where they read D, when it is not D itself: (allocation name,
    matrix) of the parity rows (``parity``, composer.parity), D's k-panel copy (``d_layout = "panels"``),
    or the parity rows' k-panel copy (both). One definition for the path and the emulator."""
    if not config.parity and config.d_layout != "panels":
        return None
    from composer import dg

    matrix, name = dg.diff_matrix(order), "d"
    if config.parity:
        from composer.parity.reference import parity_rows

        matrix, name = parity_rows(matrix), "parity_rows"
    if config.d_layout == "panels":
        matrix, name = d_panel_layout(matrix, config.k_panel), f"{name}_panels"
    return name, matrix


def kernel_plans(config: FusedConfig, arch: str = DEFAULT_ARCH) -> list[KernelPlan] | list[StreamPlan]:
    """Layout and naming of every volume kernel of ``config`` on ``arch``, in launch order.

    ComposerError when a kernel cannot launch there (more shared memory or threads per block than
    the architecture has): the schedule was written for a larger SM."""
    limits = arch_limits(arch)
    plans = _layout(config, limits)
    for plan in plans:
        _check_launchable(config, plan, limits)
    return plans


def _check_launchable(config: FusedConfig, plan: KernelPlan | StreamPlan, limits: ArchLimits) -> None:
    threads = plan.kernel.threads
    if plan.smem_bytes > limits.smem_per_block_optin:
        raise ComposerError(f"path {config.variant} at order {config.order}: kernel {plan.name} needs "
                            f"{plan.smem_bytes} B of shared memory per block; {limits.arch} has "
                            f"{limits.smem_per_block_optin} B")
    if threads > limits.max_threads_per_block:
        raise ComposerError(f"path {config.variant} at order {config.order}: kernel {plan.name} has {threads} "
                            f"threads per block; {limits.arch} allows {limits.max_threads_per_block}")
    # a table built in code (a candidate) skips parse_table: its cluster is checked here as well
    problem = cluster_problem(plan.kernel, config.nq, mma=config.mma, d_stage=config.d_stage,
                              d_panel=getattr(plan, "d_panel", 0), traces=config.traces,
                              epb=config.elements_per_block, volume=config.volume)
    if problem:
        raise ComposerError(f"path {config.variant} at order {config.order}: kernel {plan.name}: {problem[1]}")
    problem = first_table_problem(config)
    if problem:
        key, what = problem
        value = f" {getattr(config, key)}" if key in ("chunk_elements", "trace_cluster") else ""
        raise ComposerError(f"path {config.variant} at order {config.order}: {key}{value} {what}")
    if launch_cluster(config, plan.kernel) > limits.max_cluster_blocks:
        raise ComposerError(f"path {config.variant} at order {config.order}: kernel {plan.name} runs in "
                            f"thread-block clusters of {launch_cluster(config, plan.kernel)}; {limits.arch} has "
                            + ("none (sm_90 and later)" if limits.max_cluster_blocks <= 1
                               else f"at most {limits.max_cluster_blocks} blocks per cluster"))


def _layout(config: FusedConfig, limits: ArchLimits) -> list[KernelPlan] | list[StreamPlan]:
    if config.volume == "stream":
        return [StreamPlan(f"{config.variant.lower()}_p{config.order}_s{index}_{k.dir_names}", index, k,
                           config.nq, index == 0, config.k_panel, k.stages or config.stages, config.min_blocks,
                           (k.a_operand or config.a_operand) == "product", config.copies == "unrolled",
                           config.d_layout == "panels", config.fragments == "paired",
                           (k.block_order or config.block_order) == "axis", k.prefetch or 0, k.persistent,
                           config.copies == "pointers", config.copy_issue == "mma",
                           "" if config.l2_fetch == "none" else config.l2_fetch, config.parity)
                for index, k in enumerate(config.kernels)]
    plans = []
    for index, k in enumerate(config.kernels):
        bk, bj, bi = k.box
        if config.tile_swizzle:  # whole bank rows, permuted instead of padded (tile_off in the template)
            rs, ps = bi, bj * bi
        else:
            rs = _stride(bi, config.engine)
            ps = _stride(bj * rs, config.engine) if config.engine == "mma" else bj * rs
        name = f"{config.variant.lower()}_p{config.order}_k{index}_{k.dir_names}"
        plan = KernelPlan(name, index, k, config.nq, rs, ps, first=index == 0, q_tile=config.traces == "tiles",
                          flux_tiles=config.flux_tiles, x_traces=config.traces == "xfaces" and 0 in k.dirs,
                          x_pairs=config.x_pairs, x_chain=config.elements_per_block if config.x_chain else 0, x_prefetch=config.x_prefetch,
                          swizzle=config.tile_swizzle, parity=config.parity)
        plans.append(dataclasses.replace(plan, d_panel=_d_panel(config, plan, limits)))
    return plans


def launch_cluster(config: FusedConfig, kernel: KernelConfig) -> int:
    """Blocks per thread-block cluster of a volume kernel's launch: its split axis's, or the table's
    trace cluster of consecutive elements (1: a plain launch)."""
    return kernel.cluster if kernel.cluster > 1 else config.trace_cluster


def face_kernel_name(nq: int) -> str:
    return f"fused_face_flux_nq{nq}"


def late_weights(config: FusedConfig, plan: KernelPlan) -> bool:
    """Load the metric weights after the contraction (prefetched to L1 before it) instead of
    holding them in registers across it: under min_blocks >= 2, and for staged kernels capped at
    128 registers (>= 512 threads). Never for a schedule without the new keys. A table's ``weights``
    key overrides the rule."""
    if config.weights:
        return config.weights == "late"
    return config.min_blocks >= 2 or bool(plan.d_panel and plan.kernel.threads >= 512)


def _mma_params(config: FusedConfig) -> dict[str, object]:
    if config.mma is None:
        return {}
    shape = config.mma_shape
    return {"mma_m": shape.m, "mma_k": shape.k, "mma_ptx": shape.ptx}


def _copy_program(plan: StreamPlan) -> dict[str, object]:
    """The pointer program's constants (copies = "pointers") for the template; for the other tables
    only ``pointers = False``, so that they render exactly as before (their sources are pinned by a test)."""
    if not plan.pointers:
        return {"pointers": False}
    f_stride, d_stride = panel_strides(plan)
    mirrors = {"mirror_deltas": [g for g, _ in mirror_trips(plan).deltas]} if plan.parity else {}
    return {"pointers": True, "f_trips": f_trips(plan), "d_trips": d_trips(plan), "f_stride": f_stride,
            "d_stride": d_stride, **mirrors}


def block_number(kernel: KernelConfig, side_queues: bool = False) -> str:
    """The CUDA expression a volume kernel maps to its work (element, box or tile): ``blockIdx.x``, or
    with ``descending`` the block's number counted from the grid's end, so that the first blocks to
    run take the highest elements (what the kernel before it touched last, still in L2), or with
    ``side_queues`` the work number the block took from its L2 side's queue (``work``, set at the
    kernel's start). Plain ``blockIdx.x`` otherwise, so that the other tables render exactly as before
    (pinned sources)."""
    if side_queues:
        return "work"
    return "(gridDim.x - 1 - blockIdx.x)" if kernel.descending else "blockIdx.x"


def render_stream(config: FusedConfig, plan: StreamPlan) -> str:
    """CUDA C++ of one streamed volume kernel (``fused_stream.cu.j2``)."""
    return render(
        "fused_stream.cu.j2", template_dir=TEMPLATE_DIR,
        name=plan.name, nq=plan.nq, dir=plan.dir, box=list(plan.kernel.box), threads=plan.kernel.threads,
        tile=list(plan.kernel.tile), k_panel=plan.k_panel, stages=plan.stages, fs=plan.fs, ds=plan.ds,
        f_panel=plan.f_panel, smem_doubles=plan.smem_doubles, first=plan.first, dfma=config.dfma,
        product=plan.product, unrolled=plan.unrolled, d_panels=plan.d_panels, paired=plan.paired,
        axis_order=plan.axis_order, prefetch=plan.prefetch, persistent=plan.persistent,
        mma_issue=plan.mma_issue, l2_fetch=plan.l2_fetch, min_blocks=config.min_blocks,
        block_number=block_number(plan.kernel), **_copy_program(plan), **_mma_params(config),
        parity=plan.parity)


def render_volume(config: FusedConfig, plan: KernelPlan | StreamPlan) -> str:
    """CUDA C++ of one volume kernel: its family's template, specialized by the plan's parameters."""
    if isinstance(plan, StreamPlan):
        return render_stream(config, plan)
    mma = _mma_params(config)
    # the optional schedule keys reach the template only when set, so that a schedule without them
    # renders exactly the unstaged kernel (a test pins the default sources)
    if plan.d_panel:
        mma.update(d_panel=plan.d_panel, d_offset=plan.d_offset)
    return render(
        "fused_volume.cu.j2", template_dir=TEMPLATE_DIR,
        name=plan.name, nq=plan.nq, box=list(plan.kernel.box), rs=plan.rs, ps=plan.ps,
        threads=plan.element_threads, dirs=list(plan.kernel.dirs), dir_names=plan.kernel.dir_names,
        ndir=len(plan.kernel.dirs), ntiles=plan.ntiles, tile_doubles=plan.tile_doubles,
        slot=[plan.tile_slot(n) for n in range(len(plan.kernel.dirs))],
        restage=[plan.restaged(n) for n in range(len(plan.kernel.dirs))],
        restage_any=plan.restaged(len(plan.kernel.dirs) - 1),
        tile_of=[plan.kernel.dirs.index(c) if c in plan.kernel.dirs else -1 for c in range(3)],
        nlines=[plan.lines(d) for d in range(3)], smem_doubles=plan.smem_doubles, first=plan.first,
        flux=config.flux, engine=config.engine, dfma=config.dfma, unroll=plan.kernel.unroll,
        tile=list(plan.kernel.tile), d_stage="smem" if plan.d_panel else "global",
        min_blocks=config.min_blocks, traces=config.traces, epb=config.elements_per_block,
        late_wgt=late_weights(config, plan), cluster=plan.kernel.cluster, trace_cluster=config.trace_cluster,
        pair_io=config.pair_io, l2_keep=config.l2_keep, pair_x=config.pair_io and config.engine == "mma" and plan.kernel.dirs[0] == 0,
        split=-1 if plan.kernel.split is None else plan.kernel.split, xtraces=plan.x_traces,
        x_pairs=plan.x_pairs, x_chain=plan.x_chain, x_prefetch=plan.x_prefetch, raw_offset=plan.raw_offset,
        element_doubles=plan.element_doubles, swizzle=plan.swizzle,
        chunked=config.chunk_elements > 0, element_order=config.element_bricks is not None, local_interior=not config.interior_maps,
        exterior_links=not config.exterior_maps, block_number=block_number(plan.kernel, config.side_queues),
        side_queues=config.side_queues, parity=config.parity, **mma)


def render_face(nq: int) -> str:
    return render("fused_face_flux.cu.j2", template_dir=TEMPLATE_DIR, name=face_kernel_name(nq), nq=nq,
                  threads=FACE_THREADS)


@dataclass(frozen=True)
class KernelSource:
    """One kernel of a fused configuration before compilation: its CUDA source and launch shape.
    The one list that the run-time build, the build directory's jobs and its loader all walk."""

    name: str
    source: str
    threads: int
    smem_bytes: int
    blocks_per_element: int  # 0 for the grid-stride face kernel
    signature: tuple[Param, ...]
    index: int | None  # position among the volume kernels; None for the face kernel
    cluster: int = 1  # blocks per thread-block cluster of the launch (1: a plain launch)
    persistent: bool = False  # launched with the resident blocks only; they walk the tiles


def face_source(nq: int) -> KernelSource:
    """The face-flux kernel of Nq (the same for every variant and schedule)."""
    return KernelSource(face_kernel_name(nq), render_face(nq), FACE_THREADS, 0, 0, FACE_SIGNATURE, None)


def volume_signature(config: FusedConfig) -> tuple[Param, ...]:
    """The box and streamed kernels' parameters: the unchunked list, with a chunk's first element
    (``chunk_elements``) or the element permutation (``element_bricks``) after it, then the face links
    (``exterior_maps = false``), then the side queues' map and counters (``side_queues``)."""
    if config.chunk_elements:
        base = CHUNKED_VOLUME_SIGNATURE
    else:
        base = ORDERED_VOLUME_SIGNATURE if config.element_bricks is not None else VOLUME_SIGNATURE
    base = base if config.exterior_maps else base + LINKS_PARAMS
    return base + SIDE_QUEUE_PARAMS if config.side_queues else base


def kernel_sources(config: FusedConfig, arch: str = DEFAULT_ARCH) -> list[KernelSource]:
    """Every kernel of ``config`` for ``arch`` in launch order: the face kernel (flux = "array"),
    then the volume kernels (their layout depends on the architecture's shared memory)."""
    sources = [face_source(config.nq)] if config.flux == "array" else []
    for plan in kernel_plans(config, arch):
        sources.append(KernelSource(plan.name, render_volume(config, plan), plan.kernel.threads, plan.smem_bytes,
                                    plan.blocks_per_element,
                                    volume_signature(config), plan.index,
                                    launch_cluster(config, plan.kernel),
                                    isinstance(plan, StreamPlan) and plan.persistent))
    return sources


@dataclass(frozen=True)
class BuiltKernel(KernelSource):
    """A kernel source with its CUBIN: what the launcher needs."""

    compiled: CompiledKernel = dataclasses.field(kw_only=True)  # after KernelSource's defaulted fields

    @classmethod
    def of(cls, kernel: KernelSource, compiled: CompiledKernel) -> BuiltKernel:
        return cls(**{f.name: getattr(kernel, f.name) for f in dataclasses.fields(kernel)}, compiled=compiled)


@dataclass(frozen=True)
class FusedBuild:
    """All kernels of one (variant, order, arch), in launch order (face kernel first if any)."""

    config: FusedConfig
    arch: str
    kernels: tuple[BuiltKernel, ...]


def check_arch(config: FusedConfig, arch: str) -> None:
    """Clear error for an MMA shape the architecture lacks (m16n8k4/k8 before sm_90)."""
    if config.mma is None:
        return
    from composer.arch.mma import check_supported

    try:
        check_supported(config.mma, arch)
    except ValueError as exc:
        raise ComposerError(f"path {config.variant} at order {config.order}: {exc}") from None


def source_sha(source: str) -> str:
    """What a build-directory entry records of the source it compiled (composer.build.plan)."""
    import hashlib

    return hashlib.sha256(source.encode()).hexdigest()


def prebuilt(config: FusedConfig, arch: str, build_dir: Path) -> FusedBuild | None:
    """The kernels of ``config`` from a ``composer build --paths ...`` directory, when every one of
    them is there, built for ``arch`` from the very source this configuration renders (CUBINs
    verified against the manifest's sha256) by the NVRTC the table names (``nvrtc``, if it names
    one); None otherwise, and the caller compiles them."""
    from composer.runtime.errors import ManifestError
    from composer.runtime.manifest import read_manifest

    manifest = Path(build_dir) / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        entries = {e.config.get("job"): e for e in read_manifest(manifest, verify=True)
                   if e.config.get("kind") == "fused"}
    except ManifestError:
        return None
    built = []
    for k in kernel_sources(config, arch):
        entry = entries.get(k.name)
        if entry is None or entry.arch != arch or entry.config.get("source_sha") != source_sha(k.source):
            return None
        if config.nvrtc and str(entry.compiler.get("nvrtc")) != config.nvrtc:
            return None  # the table was measured with another compiler's kernels
        cubin = (Path(build_dir) / entry.cubin).read_bytes()
        version = str(entry.compiler.get("nvrtc", ""))
        compiled = CompiledKernel(k.name, arch, cubin, log="", lowered_names={k.name: entry.symbol},
                                  options=OPTIONS, nvrtc_version=_version(version))
        built.append(BuiltKernel.of(k, compiled))
    return FusedBuild(config, arch, tuple(built))


def _version(text: str) -> tuple[int, int]:
    """(major, minor) of an NVRTC version "13.5"; (0, 0) when a manifest does not record one."""
    return tuple(int(x) for x in text.split(".")[:2]) if re.fullmatch(r"\d+\.\d+", text) else (0, 0)  # type: ignore[return-value]


def kernel_origin(fused: FusedBuild, build_dir: Path | None = None) -> str:
    """Which NVRTC compiled the kernels of ``fused`` and where they came from, as a bench run
    records it: "nvrtc 13.0 (compiled here)", "nvrtc 13.5 (NVRTC cache, compiled elsewhere)" or,
    for ``prebuilt`` kernels, "nvrtc 13.5 (build DIR)"; both versions when they are mixed."""
    from composer.runtime.nvrtc import nvrtc_version

    versions = sorted({k.compiled.nvrtc_version for k in fused.kernels})
    names = ", ".join("nvrtc {}.{}".format(*v) if v != (0, 0) else "nvrtc ?" for v in versions)
    mixed = "; mixed" if len(versions) > 1 else ""
    if build_dir is not None:
        return f"{names} (build {build_dir}{mixed})"
    if versions == [nvrtc_version()]:
        return f"{names} (compiled here)"
    return f"{names} (NVRTC cache, compiled elsewhere{mixed})"


def build(config: FusedConfig, arch: str = DEFAULT_ARCH, cache_dir: Path | None = None) -> FusedBuild:
    """Render and compile (or fetch from the NVRTC cache) every kernel of ``config``; where the
    table names its NVRTC and the cache holds that compiler's CUBIN, that one."""
    check_arch(config, arch)
    prefer = _version(config.nvrtc) if config.nvrtc else None
    built = []
    for k in kernel_sources(config, arch):
        # the table's compiler's CUBIN when the cache holds one (compiled elsewhere), else this NVRTC's
        compiled = compile_cuda(k.source, f"{k.name}.cu", arch=arch, options=OPTIONS, cache_dir=cache_dir,
                                entry_points=[k.name], prefer_version=prefer)
        built.append(BuiltKernel.of(k, compiled))
    return FusedBuild(config, arch, tuple(built))


__all__ = ["DIR_NAMES", "BuiltKernel", "FusedBuild", "KernelPlan", "KernelSource", "StreamPlan", "build",
           "check_arch", "face_source", "kernel_plans", "kernel_sources", "prebuilt", "render_face",
           "render_volume", "source_sha"]
