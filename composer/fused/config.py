"""Per-order configuration of the fused element-local paths, read from ``[paths.FUSED*]`` tables.

A schedule table fixes, per order, everything that specializes the one volume-kernel template:
how the three directions are grouped over kernels, the box of the element a block owns (hence
the blocks per element), the threads, the per-thread (FUSED) or per-warp (tensor-core) output
tile and, for the tensor-core variants, the MMA shape. Example (``schedules/p0031.toml``)::

    [paths.FUSED_TC]
    flux = "inline"            # fstar inside the volume kernels; "array": one face kernel first
    mma = "8x8x4"
    kernels = [
      { dirs = "xy", box = [2, 32, 32], threads = 256, tile = [2, 2] },
      { dirs = "z",  box = [32, 2, 32], threads = 256, tile = [2, 2] },
    ]

    [paths.FUSED_DFMA]
    schedule_of = "FUSED_TC"   # the iso-schedule ablation: FUSED_TC's table, DFMA for DMMA

Optional keys of a tensor-core table (absent = off; the kernels are then exactly the unstaged
ones): ``d_stage = "smem"`` stages D, the B operand, in shared memory (all of it when it fits,
else double-buffered panels of ``d_panel`` k-values, a multiple of 8 dividing Nq) instead of
reading it through the read-only cache; ``min_blocks = N`` (any engine) asks ptxas for N
resident blocks per SM (``__launch_bounds__(THREADS, N)``), which caps the registers per thread;
``traces = "tiles"`` (with ``flux = "inline"``) stages q and the carried velocities as they are, so
that the face fluxes read their interior traces from shared memory instead of gathering them from
global memory (one more box tile; the products q*vel are then formed in place);
``elements_per_block = N`` (whole-element boxes, D not staged) lets each block walk N consecutive
elements, so that the exterior traces on the face shared with the element it just did come from
L1 instead of L2 (the x-face gathers are much of the p = 7 kernel's L1 and L2 tag traffic).
``traces = "xfaces"`` (with ``flux = "inline"``, box kernels) keeps the flux tiles as they are: the
thread that stages a pair of points holding an x-face node forms that node's flux from the q and
velocities it has just loaded, gathering only the exterior trace (the path checks that the mesh's
x-face maps name those nodes: composer.fused.traces). Why: x-face nodes lie Nq doubles apart, so
each of their 8-byte gathers costs a whole 32-byte L2 sector (ncu source counters, session 19: the
eight x-face gathers, interior and exterior, are 30 % of the p = 7 kernel's L2 sector requests with
the L2 at 96 %); the y and z faces' interior nodes are contiguous runs and stay gathered. (Session
21 call 1 measured a first form, the x-face nodes through a small shared buffer read after the
staging barrier: a tie at p = 7, 7-32 % slower at p = 15-63.) ``"tiles"`` stages q and every velocity
whole instead (one more box tile: 8 % slower at p = 7, session 19).

``volume = "stream"`` (tensor-core engine, ``flux = "array"``, one direction per kernel) selects
the streamed volume kernel (``fused_stream.cu.j2``) instead of the box kernel: the box is then the
block's *output* tile (lines x positions along the carried axis, which need not be whole), and the
contraction streams q, the velocity and D through shared memory in ``k_panel``-wide panels with a
``stages``-deep cp.async pipeline, as a GEMM mainloop does. Why: with the whole axis staged, a
block holds only 16 lines at p >= 511 (shared memory), so every staged D panel serves 16 lines
(0.25 B of L2 traffic per FLOP, which bound the box kernels by L2 tag lookups); streaming the
contraction axis frees the line count (64-128 lines per block: 4-8x less D traffic per FLOP). ``a_operand``
(streamed only): ``"factors"`` (default) stages q and vel by cp.async and forms the product in the
fragment loads; ``"product"`` loads them into registers, multiplies and stores one F panel (half
the shared-memory bytes written and read for A; the loads of the next panel stay in flight during
the contraction of the current one). ``d_layout`` (streamed only): ``"rows"`` (default) reads D's
rows, 8 * k_panel bytes per position and panel (half a 128-byte line at k_panel = 8: one L2 tag
lookup per 64 bytes); ``"panels"`` reads a copy of D regrouped by k-panel once per path
(D[p][a][m]), so a block's D panel is one contiguous run of whole lines. ``copies`` (streamed
only): ``"strided"`` (default) issues a thread's panel copies in a loop striding by the block
size; ``"unrolled"`` gives the loops a compile-time trip count, fully unrolled, which removes two
thirds of the hot loop's instructions (index arithmetic, remainder handling) at the price of more
live registers; ``"pointers"`` unrolls them too and issues each from one of three per-thread base
pointers (q, vel, D) at offsets fixed when the kernel is generated, the panels at a constant stride
(composer.fused.copies checks that the offsets are the same for every thread; a block whose copies
do not tile that way is an error): one panel offset per panel instead of a 64-bit address per copy.
Which one is faster depends on the order and pipeline, so the schedule names it
(the measured choice per order: ``docs/results.md``). ``copy_issue`` (streamed only): where a
panel's iteration issues the next copies: ``"barrier"`` (default) right after its barrier, before the
fragment loads; ``"mma"`` after the panel's first MMA k-step, so that the fragment loads follow the
barrier at once and the copies issue while the first k-step's MMAs are queued. ``l2_fetch`` (streamed
only): ``"none"`` (default) or ``"128B"`` / ``"256B"``, the L2 fetch-size hint on the panel copies
(``cp.async.cg.shared.global.L2::128B``, SASS ``LTC128B``, which cuBLAS's DGEMM copies carry): a sector missed in
L2 brings its whole 128- or 256-byte block from DRAM, so the next panel's sectors of the same lines are there. ``fragments``
(streamed only): ``"scalar"`` (default) loads each fragment value by its own 8-byte shared load;
``"paired"`` permutes the panel columns of each 8-wide k-octet (lane t's k indices t and t + 4
become columns 2t and 2t + 1) and, for y and z, pairs a lane's two A rows onto adjacent lines, so
one 16-byte load brings two values (half the LDS in the hot loop), with strides chosen for
conflict-free quarter-warps. Its fragments of both k-steps are live at once (more registers):
it can pay only where the kernel already runs one 128-thread block per 255 registers; a
256-thread kernel crosses 128 registers with it and loses its second block per SM.
``block_order`` (streamed only): ``"kji"`` (default) numbers a kernel's boxes with the i chunks
fastest and the k chunks slowest; ``"axis"`` numbers the chunks along the carried axis fastest, so
that the blocks reading the same lines' q and vel panels run back to back and re-read them from L2
(with "kji" a z kernel's NQ/BK blocks per line set are NQ/BJ * NQ/BI block numbers apart, so the
later ones find the lines gone from L2 and read them from DRAM again). A streamed kernel's own ``block_order``, ``stages`` and
``a_operand`` keys override the table's for that kernel; its ``prefetch = N`` moves the epilogue's metric and dqdt
lines into L2 N panels before the contraction ends.

Why the DFMA variant may not have its own kernels: FUSED_DFMA/FUSED_TC is meant to isolate the
instruction, so its schedule is taken from FUSED_TC by construction, never copied.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from composer.errors import ComposerError, ConfigError
from composer.arch.mma import MmaShape, mma_shape

_LOW_ORDERS = frozenset({7, 15, 31, 63, 127, 255})
#: The fused variants and the orders each implements (the paper's coverage; the tensor-core builds
#: add p = 511, 767). Their Path classes (composer.paths.fused) take their orders from here.
SUPPORTED_ORDERS: dict[str, frozenset[int]] = {
    "FUSED": _LOW_ORDERS,
    "FUSED_TC": _LOW_ORDERS | {511, 767},
    "FUSED_DFMA": _LOW_ORDERS | {511, 767},
    "FUSED_TC16": _LOW_ORDERS | {511, 767},
}
VARIANTS: tuple[str, ...] = tuple(SUPPORTED_ORDERS)
#: MMA shapes a variant may use: FUSED_TC is the paper's m8n8k4 build, FUSED_TC16 the sm_90 one.
ALLOWED_MMA: dict[str, tuple[str, ...]] = {
    "FUSED_TC": ("8x8x4",),
    "FUSED_DFMA": ("8x8x4",),
    "FUSED_TC16": ("16x8x4", "16x8x8"),
}
DIR_NAMES = "xyz"
FLUX_MODES = ("inline", "array")
D_STAGES = ("global", "smem")
TRACE_SOURCES = ("global", "tiles", "xfaces")
WEIGHT_LOADS = ("early", "late")
VOLUME_KINDS = ("box", "stream")
A_OPERANDS = ("factors", "product")
# volume = "stream": how a thread issues its panel copies: a loop striding by the block size, or
# a compile-time trip count fully unrolled (no integer loop overhead per panel, more live addresses),
# or "pointers": unrolled, from three per-thread base pointers at offsets fixed at build time
# (composer.fused.copies: one panel offset per panel instead of a 64-bit address per copy)
COPY_LOOPS = ("strided", "unrolled", "pointers")
# volume = "stream": where a panel's iteration issues the copies of panel p + STAGES - 1: right after
# its barrier (before the fragment loads), or "mma": after the panel's first MMA k-step, so that the
# fragment loads follow the barrier at once and the copies' issue overlaps the queued MMAs
COPY_ISSUE = ("barrier", "mma")
# volume = "stream": the L2 fetch-size hint of the panel copies (cp.async ... .L2::128B, SASS LTC128B, as
# cuBLAS's DGEMM copies carry it): none, or a whole 128- or 256-byte L2 fetch per missed sector
L2_FETCH = ("none", "128B", "256B")
# volume = "stream": D in global memory as its rows (D[a][m]), or regrouped once per path into
# k-panels (D[p][a][m], p = m // k_panel) so that a block's D panel is one contiguous run
D_LAYOUTS = ("rows", "panels")
# volume = "stream": shared-memory fragment loads of one value each (LDS.64), or "paired": the
# panel columns of each 8-wide k-octet permuted (and, for y and z, a thread's two A rows made
# adjacent lines) so that one 16-byte load (LDS.128) brings two of a thread's fragment values
FRAGMENT_LOADS = ("scalar", "paired")
# volume = "stream": how a block's number maps to its box: "kji" (i chunks fastest, k slowest), or
# "axis" (the chunks along the carried axis fastest: the blocks that read the same lines' q and vel
# panels run back to back, so the re-reads hit L2; with "kji" a z kernel's blocks sharing lines are
# NQ/BJ * NQ/BI blocks apart and re-read them from DRAM)
BLOCK_ORDERS = ("kji", "axis")
#: The streamed kernel's switches: table key -> its choices, the first being the default (a
#: FusedConfig field of the same name; parse_table, candidate labels and to_table iterate this).
STREAM_SWITCHES: dict[str, tuple[str, ...]] = {
    "a_operand": A_OPERANDS, "copies": COPY_LOOPS, "d_layout": D_LAYOUTS, "fragments": FRAGMENT_LOADS,
    "block_order": BLOCK_ORDERS, "copy_issue": COPY_ISSUE, "l2_fetch": L2_FETCH,
}


class UnsupportedOrderError(ComposerError, ValueError):
    """A fused variant was asked for an order it does not implement."""


@dataclass(frozen=True)
class KernelConfig:
    """One volume kernel: the directions it carries, the box a block owns, threads, output tile."""

    dirs: tuple[int, ...]
    box: tuple[int, int, int]  # (k, j, i) extents
    threads: int
    tile: tuple[int, int]  # FUSED: (lines, positions) per thread; MMA: (WM, WN) MMAs per warp
    unroll: int = 4
    #: > 1: a thread-block cluster of this many blocks (sm_90) holds the whole axis of one carried
    #: direction (``split``), each block 1/cluster of it; that direction's contraction reads the other
    #: blocks' flux tiles through distributed shared memory
    cluster: int = 1
    #: volume = "stream": this kernel's block numbering (BLOCK_ORDERS) where it differs from the
    #: table's ``block_order``; None: the table's. The y and z kernels re-read their line sets
    #: under different reuse distances, so their best numbering can differ (session 14, p = 511).
    block_order: str | None = None
    #: volume = "stream": this kernel's pipeline depth (panels in flight) where it differs from the
    #: table's ``stages``; None: the table's. A 256-thread kernel alone on its SM has the shared
    #: memory for a deeper pipeline that the table's two-blocks-per-SM kernels do not.
    stages: int | None = None
    #: volume = "stream": prefetch the epilogue's metric and dqdt lines into L2 this many panels
    #: before the last (None: no prefetch). The p = 511 z kernel's epilogue loads, 256 rows 2 MiB
    #: apart per block, are its largest stall after the FP64 pipe (ncu source counters, session 14).
    prefetch: int | None = None
    #: volume = "stream": this kernel's A operand (A_OPERANDS) where it differs from the table's
    #: ``a_operand``; None: the table's. The p = 511 z kernel spends 39 % of its stall samples on the
    #: DMULs that form q*vel at every fragment load (ncu source counters, session 14): "product"
    #: forms it once per staged element, which only the kernels with the registers for it can take.
    a_operand: str | None = None
    #: volume = "stream": persistent blocks (True): the launch holds only the blocks the SMs keep
    #: resident and each walks the output tiles blockIdx.x, + gridDim.x, ... through one continuous
    #: cp.async pipeline, so that the next tile's first panels load while this tile's epilogue runs
    #: (a one-tile block drains its pipeline and refills it: a prologue of STAGES - 1 panels of DRAM
    #: latency per tile, with the epilogue after it, at two 4-warp blocks per SM).
    persistent: bool = False
    #: True: the blocks take the kernel's work from the last element down (block b the work of block
    #: gridDim.x - 1 - b of the ascending launch). Why: the kernel before it in the RK stage (the
    #: previous volume kernel, or the RK update, which streams its arrays upwards) leaves in L2 the
    #: lines it touched last, those of the highest elements; a kernel that starts there reads part of
    #: its first wave from L2 instead of DRAM (``composer.fused.order.l2_handoffs`` counts the kernel
    #: boundaries where this happens). Results do not depend on it: the blocks are independent.
    descending: bool = False

    @property
    def dir_names(self) -> str:
        return "".join(DIR_NAMES[d] for d in self.dirs)

    @property
    def split(self) -> int | None:
        """The carried direction whose axis the cluster splits (None without a cluster)."""
        if self.cluster == 1:
            return None
        # the carried axis the cluster completes (None for a box that matches none: cluster_problem says why)
        return next((d for d in self.dirs if self.box[2 - d] * self.cluster == _box_nq(self)), None)

    def positions(self, d: int, nq: int) -> int:
        """Output positions per line of direction d: the box's extent along its axis (Nq unless split)."""
        return self.box[2 - d] if d == self.split else nq


def _box_nq(k: KernelConfig) -> int:
    """Nq of a clustered box: its whole axes (every carried axis but the split one is whole)."""
    return max(k.box)


#: The largest ``chunk_elements`` a table may name (a chunk beyond the whole mesh is one launch).
MAX_CHUNK_ELEMENTS = 1 << 20
#: The largest brick extent ``element_bricks`` takes (elements along one axis).
MAX_BRICK_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class FusedConfig:
    """Everything that specializes the fused kernels of one (variant, order)."""

    variant: str
    order: int
    flux: str
    kernels: tuple[KernelConfig, ...]
    mma: str | None  # "8x8x4", "16x8x4", "16x8x8"; None for the CUDA-core engine
    dfma: bool = False
    d_stage: str = "global"  # "smem": D staged in shared memory (tensor-core engine only)
    d_panel: int = 0  # k-values per staged D panel; 0: all of D when it fits, else the builder picks
    min_blocks: int = 0  # > 0: __launch_bounds__(THREADS, min_blocks)
    traces: str = "global"  # "tiles" / "xfaces": inline fluxes read interior traces from the staged box
    elements_per_block: int = 1  # > 1: a block walks this many consecutive elements (whole-element box)
    volume: str = "box"  # "stream": the streamed volume kernel (box = output tile)
    k_panel: int = 0  # volume = "stream": contraction values per staged panel
    stages: int = 0  # volume = "stream": cp.async pipeline depth (panels in flight)
    a_operand: str = "factors"  # volume = "stream": "product": q*vel formed as the panel is staged
    copies: str = "strided"  # volume = "stream": the panel-copy loops (COPY_LOOPS)
    d_layout: str = "rows"  # volume = "stream": D as rows or regrouped into k-panels (D_LAYOUTS)
    fragments: str = "scalar"  # volume = "stream": one value per shared load or pairs (FRAGMENT_LOADS)
    block_order: str = "kji"  # volume = "stream": block number -> box (BLOCK_ORDERS)
    copy_issue: str = "barrier"  # volume = "stream": where an iteration issues its panel copies (COPY_ISSUE)
    l2_fetch: str = "none"  # volume = "stream": the L2 fetch-size hint on the panel copies (L2_FETCH)
    #: > 1: thread-block clusters of this many consecutive elements (sm_90; whole-element boxes,
    #: traces = "tiles"): a face node's exterior trace comes from the neighbour's staged tiles through
    #: distributed shared memory when the neighbour is in the cluster (consecutive elements are x
    #: neighbours: the x faces, whose nodes lie Nq doubles apart, are the costly gathers at p = 7)
    trace_cluster: int = 1
    #: The NVRTC ("MAJOR.MINOR") whose kernels of this table were measured: the same source runs up
    #: to 21 % faster or slower compiled by 13.5 than by 13.0 (session 18), so the compiler is part of
    #: the tuned configuration. None: any. The path loads a `composer build` directory's kernels only
    #: from this compiler and notes a run that compiles them with another.
    nvrtc: str | None = None
    #: > 0 (box kernels, traces = "global" or "xfaces"): flux tiles a box kernel holds at once. A kernel carrying
    #: more directions stages only the first ones; each later direction's fluxes go into the tile the
    #: previous direction frees after its contraction (q read again, from L2). Why: p = 15's xyz
    #: kernel holds four 41-KB tiles, one block (16 warps) per SM, latency bound; two tiles let two
    #: blocks share an SM. 0: one tile per carried direction.
    flux_tiles: int = 0
    #: True (box kernels): 16-byte pairs where the box kernel moved two doubles 16 bytes apart with
    #: two 8-byte accesses: the first kernel's dqdt store (ptxas split `make_double2(-a, -b)` into two
    #: STG.E.64) and, on the tensor-core engine, the x contraction's metric weights (a C fragment's
    #: column pair). ncu source counters (session 19): those accesses were 20-25 % of the p = 7 and 15
    #: kernels' L2 sector requests, the L2 at 92-96 % of its throughput.
    pair_io: bool = False
    #: True (with flux_tiles): q's staging loads keep it in L2 (createpolicy evict_last) until the
    #: restage reads it again (evict_first, as the restaged velocity). ncu (session 19 call 6): the
    #: p = 15 flux_tiles kernel moves 1643 MB of DRAM against 1397 for the four-tile one: a block
    #: lives about 30 us, in which the GPU streams more than the 50-MB L2, so the restage misses.
    l2_keep: bool = False
    #: Box kernels: where the metric weights are loaded: "early" (before the contraction, held in
    #: registers across it) or "late" (prefetched into L1 before it, loaded after it). "" (absent):
    #: late under min_blocks >= 2 or a staged kernel of >= 512 threads, else early
    #: (composer.fused.builder.late_weights). Why a key: session 21 call 1 measured the rule's late
    #: loads at p = 7 on the shipped kernel's own 32 registers (min_blocks = 8) at +24 %, so a register
    #: budget could not be tried without them.
    weights: str = ""
    #: True (whole-element box kernels with traces = "xfaces"): a block holds two x-neighbour elements
    #: (2b, 2b + 1), half its threads each (``threads`` is the block's), and the face they share takes
    #: both traces from shared memory; the other x faces as in "xfaces". Why: after "xfaces" the
    #: x-face gathers left are the exterior ones, 8 bytes per 32-byte sector; a pair halves them. The
    #: path checks that the mesh numbers x neighbours so (composer.fused.traces).
    x_pairs: bool = False
    #: True (one whole-element box kernel carrying x, y and z, traces = "xfaces", elements_per_block =
    #: L >= 2): the block's L consecutive elements are an x chain, walked one after another; each
    #: element's high x-face traces (q, u, v, w) stay in shared memory, so that the next element forms
    #: both fluxes of the face they share without a gather; the element's nodes on that face wait in
    #: shared memory for their lift and are stored one element later. Why: after "xfaces" the x-face
    #: gathers left are the exterior ones, 8 bytes per 32-byte sector (30 % of the p = 7 kernel's L2
    #: sector requests, session 19), and the L2 partition link binds at p = 7 and 15 (96 %, 94 %,
    #: session 27); a chain removes (L - 1) / L of them and keeps every warp on one element, which
    #: ``x_pairs`` (half the warps per element) and ``elements_per_block`` alone (the next element's
    #: face from L1, if it is still there) did not. The path checks the mesh (composer.fused.traces).
    x_chain: bool = False
    #: True (with x_chain): the chain's next element's q, u, v, w are copied into shared memory by cp.async
    #: while the current one contracts, and the staging loop reads them there. Why: session 30's ncu of
    #: the chained kernels had their warps waiting on global loads (long-scoreboard 57 % of the cycles
    #: between issues) with fewer blocks per SM than the one-element kernels; copies in flight cost no
    #: registers and overlap the element before. Costs 4 x Nq^3 doubles of shared memory (p = 7 only).
    x_prefetch: bool = False
    #: True (box kernels on the tensor cores, every box's i extent a multiple of 16): the flux tiles
    #: unpadded (j stride BI, k stride BJ*BI doubles), each row's i XOR-swizzled by 4*((j + k) mod 4)
    #: (composer.fused.banks). Why: the padded strides (4 or 12 mod 16 doubles) make p = 15's 16^3
    #: tiles 41.5 KB instead of 32, so three flux tiles (136 KB with the faces) hold one block per SM and
    #: ``flux_tiles = 2`` buys the second block by staging z's fluxes again, re-reading q and w from
    #: DRAM (+246 MB of 1643, ncu s19 c6; 1671 MB on an H100, s27 c2). Unpadded, three tiles and the
    #: faces take 108 KB: two blocks per SM with no restage, the A-fragment loads still conflict-free.
    tile_swizzle: bool = False
    #: > 0 (box kernels, two or more of them): the path launches the volume kernels over chunks of this
    #: many consecutive elements, the first kernel's chunks on one stream and each later kernel's on
    #: another, each chunk after the previous kernel's on the same chunk (``composer.paths.fused``), so
    #: that a later kernel reads the q and dqdt the earlier one touched a chunk ago from L2 instead of
    #: DRAM, and the two kernels run side by side (a shared-pipe-bound xy beside a DRAM-bound z). Why: at
    #: p = 31 and 63 the z kernel re-reads q and reads back the dqdt xy wrote, 3 of the 11-12 arrays
    #: of the xy|z byte floor; one 134-MB launch each streams them through the 50-MB L2 long before the
    #: z kernel comes back to them. 0: one launch per kernel over every element. Session 28 (H100): slower
    #: at every chunk size, 4-10 % at four chunks (each chunk's launch pays its own ramp and tail).
    chunk_elements: int = 0
    #: (bx, by, bz) (box kernels, one element per block): the blocks take the elements brick by brick,
    #: bricks of bx x by x bz elements (composer.fused.order): block b's element is ``order[b]``, a
    #: permutation the path uploads. Why: in the default order a z neighbour's block runs NeX * NeY
    #: blocks away (1024 at p = 7), about one wave, so the face layers a block gathers from it are read
    #: from DRAM again once that block stages them (ncu, p = 7: 111 MB above the kernel's floor, about
    #: what every z-face layer re-read costs). None: block b takes element b.
    element_bricks: tuple[int, int, int] | None = None
    #: False (box kernels with inline fluxes, traces = "global" or "xfaces"): the face fluxes read no
    #: vmapM; each face node's interior trace is the element's own boundary node, addressed from the
    #: layout (the path checks that the mesh's interior map names exactly those nodes, as "xfaces" does
    #: for the x faces). Exterior traces still come through vmapP. Why: vmapM of the y and z faces is
    #: 34 MB of DRAM at p = 7 (2 % of the kernel's bytes) and a dependent load before every interior
    #: gather; on any conforming hexahedral mesh it names the element's own face nodes.
    interior_maps: bool = True
    #: False (with ``interior_maps = false``): the face fluxes read no vmapP either; each face's exterior
    #: nodes come from one link per element face (neighbour element, its face, the orientation:
    #: composer.fused.links), which the path derives from vmapP and checks node for node. Why: vmapP is
    #: 4 Nq^2 bytes per face (50 MB of the p = 7 kernel's 1442 MB of DRAM reads on an H100, whose time
    #: follows its bytes); a link is 8 bytes and serves any conforming hexahedral mesh.
    exterior_maps: bool = True
    #: 1 ... 100 (box kernels): the volume kernels' preferred shared-memory carveout, percent of the
    #: largest (composer.arch.limits.ArchLimits.carveout_capacity; the path's ``carveout`` option wins
    #: over it). None: the driver's choice, which gives the blocks their shared memory and leaves the
    #: rest to L1 (sm_90: FUSED_TC p = 7's eight blocks take 196 KB, 60 KB of L1). Why: the p = 7 and 15
    #: kernels are bound by the L2 and its partition link (ncu, sessions 27-33), so fewer resident blocks
    #: with more L1 for the face gathers' and the staging loads' reuse is a trade worth timing. The
    #: kernels' sources do not change; the path refuses, in one line, a carveout that holds no block.
    carveout: int | None = None
    #: True (box kernels, one grid per kernel): each block takes its work from the queue of the L2 partition
    #: its SM sits on (``composer.runtime.l2_sides``: which SMs are near which partition, probed once per
    #: process): blocks on side 0 take the work numbers upwards from the first, blocks on side 1 downwards
    #: from the last, so that at any moment each side works on its own end of the grid and the two meet
    #: at the end. Why: the p = 7 and 15 kernels are bound by the link between the two L2 partitions
    #: (ncu: ``lts__ltcfabric2ltc_cycles_active`` 95-96 %); session 39 assumed a far-homed sector crosses it
    #: unless a block on the requesting side read it a moment before (a copy kept near). Measured on H100s
    #: (session 40, results.md section 7): copies are kept for about 11 % of lines, the link sectors fell 2 %,
    #: and the ticket each block waits for costs 2-10 %: the key loses at p = 7 and is applied nowhere.
    #: Results do not depend on it: each work number is taken once.
    side_queues: bool = False
    #: Contract through the even and odd parts of each line (composer.parity): half the k-steps of
    #: every tensor-core contraction, D passed as the parity rows. Box kernels, and streamed kernels on the
    #: product operand (the parts formed while staging); odd orders.
    parity: bool = False

    @property
    def nq(self) -> int:
        return self.order + 1

    @property
    def engine(self) -> str:
        return "simt" if self.mma is None else "mma"

    @property
    def mma_shape(self) -> MmaShape | None:
        """The MMA shape's dimensions and fragment sizes (None for the CUDA-core engine)."""
        return mma_shape(self.mma) if self.mma else None


def check_variant(variant: str) -> str:
    key = variant.upper()
    if key not in VARIANTS:
        raise ComposerError(f"unknown fused variant {variant!r}; known: {', '.join(VARIANTS)}")
    return key


def check_order(variant: str, order: int) -> None:
    """Clear error for an order the variant does not implement."""
    supported = SUPPORTED_ORDERS[check_variant(variant)]
    if order not in supported:
        raise UnsupportedOrderError(
            f"path {variant} does not implement order {order}; it supports {sorted(supported)}")


def table_variant(variant: str) -> str:
    """The variant whose ``[paths.<variant>]`` table configures ``variant``: its own, except for
    FUSED_DFMA, which runs FUSED_TC's."""
    variant = check_variant(variant)
    return "FUSED_TC" if variant == "FUSED_DFMA" else variant


def _error(file: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{file}: {key}: {message}")


def _reject_unknown(table: Mapping[str, Any], allowed: tuple[str, ...], file: str, key: str) -> None:
    """The first key of ``table`` not in ``allowed``, named by its dotted key (as the schedule
    loader's other errors are)."""
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise _error(file, f"{key}.{unknown[0]}", f"unknown key (allowed here: {', '.join(sorted(allowed))})")


def _int_list(value: Any, n: int, file: str, key: str) -> tuple[int, ...]:
    if (not isinstance(value, (list, tuple)) or len(value) != n
            or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in value)):
        raise _error(file, key, f"expected a list of {n} positive integers, got {value!r}")
    return tuple(value)


def _parse_kernel(raw: Any, nq: int, file: str, key: str, stream: bool = False) -> KernelConfig:
    if not isinstance(raw, Mapping):
        raise _error(file, key, f"expected a table, got {raw!r}")
    _reject_unknown(raw, ("dirs", "box", "threads", "tile", "unroll", "cluster", "block_order", "stages", "prefetch",
                          "a_operand", "persistent", "descending"), file, key)
    dirs_text = raw.get("dirs")
    if not isinstance(dirs_text, str) or not dirs_text or any(c not in DIR_NAMES for c in dirs_text):
        raise _error(file, f"{key}.dirs", f"expected a string of directions from 'xyz', got {dirs_text!r}")
    dirs = tuple(DIR_NAMES.index(c) for c in dirs_text)
    box = _int_list(raw.get("box"), 3, file, f"{key}.box")
    threads = raw.get("threads")
    if not isinstance(threads, int) or isinstance(threads, bool) or not 32 <= threads <= 1024 or threads % 32:
        raise _error(file, f"{key}.threads", f"expected a multiple of 32 in [32, 1024], got {threads!r}")
    tile = _int_list(raw.get("tile"), 2, file, f"{key}.tile")
    unroll = raw.get("unroll", 4)
    if not isinstance(unroll, int) or isinstance(unroll, bool) or unroll < 1:
        raise _error(file, f"{key}.unroll", f"expected a positive integer, got {unroll!r}")
    for axis, extent in zip("kji", box):
        if nq % extent:
            raise _error(file, f"{key}.box", f"{axis} extent {extent} does not divide Nq = {nq}")
    if stream and len(dirs) != 1:
        raise _error(file, f"{key}.dirs", f'a streamed kernel carries one direction, got {dirs_text!r}')
    cluster = _cluster(raw, file, key)
    block_order = raw.get("block_order")
    if block_order is not None and block_order not in BLOCK_ORDERS:
        raise _error(file, f"{key}.block_order", f"expected one of {BLOCK_ORDERS}, got {block_order!r}")
    if block_order is not None and not stream:
        raise _error(file, f"{key}.block_order", 'a kernel\'s own block_order applies to volume = "stream" only')
    stages = raw.get("stages")
    if stages is not None and (type(stages) is not int or not 2 <= stages <= 8):
        raise _error(file, f"{key}.stages", f"expected an integer in [2, 8], got {stages!r}")
    if stages is not None and not stream:
        raise _error(file, f"{key}.stages", 'a kernel\'s own stages apply to volume = "stream" only')
    prefetch = raw.get("prefetch")
    if prefetch is not None and (type(prefetch) is not int or prefetch < 1):
        raise _error(file, f"{key}.prefetch", f"expected a positive number of panels, got {prefetch!r}")
    if prefetch is not None and not stream:
        raise _error(file, f"{key}.prefetch", 'the epilogue prefetch applies to volume = "stream" only')
    a_operand = raw.get("a_operand")
    if a_operand is not None and a_operand not in A_OPERANDS:
        raise _error(file, f"{key}.a_operand", f"expected one of {A_OPERANDS}, got {a_operand!r}")
    if a_operand is not None and not stream:
        raise _error(file, f"{key}.a_operand", 'a kernel\'s own a_operand applies to volume = "stream" only')
    persistent = raw.get("persistent", False)
    if type(persistent) is not bool:
        raise _error(file, f"{key}.persistent", f"expected true or false, got {persistent!r}")
    if persistent and not stream:
        raise _error(file, f"{key}.persistent", 'persistent blocks apply to volume = "stream" only')
    descending = raw.get("descending", False)
    if type(descending) is not bool:
        raise _error(file, f"{key}.descending", f"expected true or false, got {descending!r}")
    for d in dirs:
        # a direction's contraction needs its whole axis inside the block's box (a streamed kernel
        # streams the axis instead: its box is the output tile; a cluster holds it across its blocks)
        if not stream and cluster == 1 and box[2 - d] != nq:  # a cluster's boxes: cluster_problem
            raise _error(file, f"{key}.box", f"carries {DIR_NAMES[d]} but spans {box[2 - d]} of the "
                                             f"Nq = {nq} nodes along that axis")
    return KernelConfig(dirs, box, threads, tile, unroll, cluster, block_order, stages,  # type: ignore[arg-type]
                        prefetch, a_operand, persistent, descending)


#: Blocks per cluster a schedule may ask for: the portable cluster sizes of sm_90 (up to 8); 1: none.
CLUSTER_SIZES = (1, 2, 4, 8)


def _cluster(raw: Mapping[str, Any], file: str, key: str) -> int:
    """A kernel's ``cluster`` key (its structure is checked by :func:`cluster_problem`)."""
    cluster = raw.get("cluster", 1)
    if type(cluster) is not int or cluster not in CLUSTER_SIZES:
        raise _error(file, f"{key}.cluster", f"expected one of {CLUSTER_SIZES}, got {cluster!r}")
    return cluster


def cluster_problem(k: KernelConfig, nq: int, *, mma: str | None, d_stage: str, d_panel: int, traces: str,
                    epb: int, volume: str) -> tuple[str, str] | None:
    """What is wrong with a clustered kernel, as (the key it concerns, the message); None if nothing.

    Checked where tables are parsed and again where kernels are laid out (candidates are built in
    code). Why these rules: the template maps the cluster's ranks to consecutive boxes, which are the
    split axis's chunks only when every axis numbered faster (i before j before k) is whole; the
    first carried direction's tile becomes the accumulator while the others are still read, so the
    split direction is a later one; the split contraction's k-loop is the staged-D one, its panels
    inside one rank's chunk; a rank's tiles hold only its chunk, so interior traces come from global
    memory; one element per block."""
    if k.cluster == 1:
        return None
    if volume != "box":
        return "cluster", 'clusters apply to the box kernel, not volume = "stream"'
    if mma is None:
        return "cluster", "clusters apply to the tensor-core engine (FUSED_TC, FUSED_DFMA, FUSED_TC16)"
    split = [d for d in k.dirs if k.box[2 - d] != nq]
    if len(split) != 1 or k.box[2 - split[0]] * k.cluster != nq:
        return "cluster", (f"a cluster of {k.cluster} needs exactly one carried axis whose box extent is "
                           f"Nq / {k.cluster} = {nq // k.cluster}, got box {list(k.box)}")
    d = split[0]
    if d == k.dirs[0]:
        return "cluster", (f"the split axis ({DIR_NAMES[d]}) must not be the kernel's first direction (its tile "
                           "becomes the accumulator)")
    faster = {0: (), 1: (0,), 2: (0, 1)}[d]  # the axes numbered faster than d's (x = i, y = j)
    if any(k.box[2 - a] != nq for a in faster):
        return "box", (f"a cluster split along {DIR_NAMES[d]} needs the box whole along "
                       f"{', '.join(DIR_NAMES[a] for a in faster)}")
    if d_stage != "smem":
        return "cluster", 'a clustered kernel needs d_stage = "smem"'
    chunk = k.box[2 - d]
    if d_panel and d_panel != nq and chunk % d_panel:
        return "cluster", f"d_panel {d_panel} must divide the chunk of {chunk} positions"
    if traces not in ("global", "xfaces"):
        return "cluster", (f'a clustered kernel reads its traces from global memory or, with "xfaces", forms its '
                           f'x faces from its own staged pairs (traces = "{traces}" would need the peers\' tiles)')
    if traces == "xfaces" and k.box[2] != nq:
        return "cluster", 'traces = "xfaces" needs the box whole along x (its x-face nodes staged by this block)'

    if epb != 1:
        return "cluster", "a clustered kernel runs one element per block"
    return None


def parse_table(variant: str, order: int, table: Mapping[str, Any], file: str = "<table>",
                dfma: bool = False) -> FusedConfig:
    """Validate one ``[paths.<variant>]`` table (already resolved for FUSED_DFMA)."""
    prefix = f"paths.{variant}"
    nq = order + 1
    _reject_unknown(table, ("flux", "mma", "kernels", "d_stage", "d_panel", "min_blocks", "traces",
                            "elements_per_block", "volume", "k_panel", "stages", "trace_cluster", "nvrtc", "flux_tiles", "pair_io", "l2_keep", "weights", "x_pairs", "x_chain", "x_prefetch",
                            "tile_swizzle", "chunk_elements", "element_bricks", "interior_maps", "exterior_maps",
                            "carveout", "side_queues", "parity", *STREAM_SWITCHES),
                    file, prefix)
    flux = table.get("flux")
    if flux not in FLUX_MODES:
        raise _error(file, f"{prefix}.flux", f"expected one of {FLUX_MODES}, got {flux!r}")
    mma = table.get("mma")
    if variant == "FUSED":
        if mma is not None:
            raise _error(file, f"{prefix}.mma", "FUSED runs on the CUDA cores and takes no MMA shape")
    else:
        try:
            mma = mma_shape(str(mma)).name
        except ValueError as exc:
            raise _error(file, f"{prefix}.mma", str(exc)) from None
        if mma not in ALLOWED_MMA[variant]:
            raise _error(file, f"{prefix}.mma", f"{variant} uses {' or '.join(ALLOWED_MMA[variant])}, got {mma}")
    volume = table.get("volume", "box")
    if volume not in VOLUME_KINDS:
        raise _error(file, f"{prefix}.volume", f"expected one of {VOLUME_KINDS}, got {volume!r}")
    stream = volume == "stream"
    raw_kernels = table.get("kernels")
    if not isinstance(raw_kernels, list) or not raw_kernels:
        raise _error(file, f"{prefix}.kernels", "expected a non-empty list of kernel tables")
    kernels = tuple(_parse_kernel(k, nq, file, f"{prefix}.kernels[{n}]", stream) for n, k in enumerate(raw_kernels))
    carried = sorted(d for k in kernels for d in k.dirs)
    if carried != [0, 1, 2]:
        names = [k.dir_names for k in kernels]
        raise _error(file, f"{prefix}.kernels", f"the kernels must carry x, y and z exactly once, got {names}")
    d_stage = table.get("d_stage", "global")
    if d_stage not in D_STAGES:
        raise _error(file, f"{prefix}.d_stage", f"expected one of {D_STAGES}, got {d_stage!r}")
    if d_stage == "smem" and mma is None:
        raise _error(file, f"{prefix}.d_stage", "D staging applies to the tensor-core engine only")
    d_panel = table.get("d_panel", 0)
    if "d_panel" in table:
        if d_stage != "smem":
            raise _error(file, f"{prefix}.d_panel", 'needs d_stage = "smem"')
        if (not isinstance(d_panel, int) or isinstance(d_panel, bool) or d_panel <= 0 or d_panel % 8
                or nq % d_panel):
            raise _error(file, f"{prefix}.d_panel",
                         f"expected a positive multiple of 8 that divides Nq = {nq}, got {d_panel!r}")
    min_blocks = table.get("min_blocks", 0)
    if "min_blocks" in table and (not isinstance(min_blocks, int) or isinstance(min_blocks, bool)
                                  or not 1 <= min_blocks <= 32):
        raise _error(file, f"{prefix}.min_blocks", f"expected an integer in [1, 32], got {min_blocks!r}")
    traces = table.get("traces", "global")
    if traces not in TRACE_SOURCES:
        raise _error(file, f"{prefix}.traces", f"expected one of {TRACE_SOURCES}, got {traces!r}")
    if traces in ("tiles", "xfaces") and flux != "inline":
        raise _error(file, f"{prefix}.traces", f'interior traces from the staged box (traces = "{traces}") '
                                               'need flux = "inline"')
    epb = table.get("elements_per_block", 1)
    if not isinstance(epb, int) or isinstance(epb, bool) or not 1 <= epb <= 64:
        raise _error(file, f"{prefix}.elements_per_block", f"expected an integer in [1, 64], got {epb!r}")
    if epb > 1 and any(k.box != (nq, nq, nq) for k in kernels):
        raise _error(file, f"{prefix}.elements_per_block", "several elements per block need every box "
                     f"to be the whole element [{nq}, {nq}, {nq}]")
    if epb > 1 and d_stage != "global":
        raise _error(file, f"{prefix}.elements_per_block", 'needs d_stage = "global"')
    for n, k in enumerate(kernels):
        problem = cluster_problem(k, nq, mma=mma, d_stage=str(d_stage), d_panel=d_panel, traces=str(traces),
                                  epb=epb, volume=str(volume))
        if problem:
            raise _error(file, f"{prefix}.kernels[{n}].{problem[0]}", problem[1])
    k_panel, stages = _stream_keys(table, prefix, file, nq, mma, stream)
    switches = {key: _stream_choice(table, key, choices, prefix, file, stream)
                for key, choices in STREAM_SWITCHES.items()}
    for n, k in enumerate(kernels):
        if (k.a_operand or switches["a_operand"]) == "product":
            pairs = box_lines(k.box, k.dirs[0]) * k_panel // 2
            if pairs % k.threads:
                raise _error(file, f"{prefix}.kernels[{n}]", f'a_operand = "product" stages {pairs} pairs per '
                                                             f"panel, not a multiple of {k.threads} threads")
    if stream:
        if mma is None:
            raise _error(file, f"{prefix}.volume", "the streamed kernel runs on the tensor-core engine")
        if flux != "array":
            raise _error(file, f"{prefix}.volume", 'the streamed kernel reads the face array: needs flux = "array"')
        clash = [k for k in ("d_stage", "d_panel", "traces", "elements_per_block") if k in table]
        if clash:
            raise _error(file, f"{prefix}.volume", f"the streamed kernel stages D itself; drop {clash}")
        for n, k in enumerate(kernels):
            _check_stream_tiling(k, str(mma), file, f"{prefix}.kernels[{n}]", switches["fragments"] == "paired")
        for n, k in enumerate(kernels):
            if k.prefetch is not None and k.prefetch > nq // k_panel:
                raise _error(file, f"{prefix}.kernels[{n}].prefetch", f"{k.prefetch} panels before the end: the "
                                                                      f"contraction has {nq // k_panel}")
            if k.stages is not None and k.stages > nq // k_panel:
                raise _error(file, f"{prefix}.kernels[{n}].stages", f"{k.stages} panels of {k_panel} in flight "
                                                                    f"exceed the Nq / k_panel = {nq // k_panel} panels")
        if switches["fragments"] == "paired" and k_panel % 8:
            raise _error(file, f"{prefix}.fragments", f'"paired" permutes 8-wide k-octets: k_panel {k_panel} '
                                                      "is not a multiple of 8")
    trace_cluster = table.get("trace_cluster", 1)
    if type(trace_cluster) is not int or trace_cluster not in CLUSTER_SIZES:
        raise _error(file, f"{prefix}.trace_cluster", f"expected one of {CLUSTER_SIZES}, got {trace_cluster!r}")
    nvrtc = table.get("nvrtc")
    if nvrtc is not None and not (isinstance(nvrtc, str) and re.fullmatch(r"\d+\.\d+", nvrtc)):
        raise _error(file, f"{prefix}.nvrtc", f'expected an NVRTC version "MAJOR.MINOR" (e.g. "13.0"), got {nvrtc!r}')
    flux_tiles = _flux_tiles(table, kernels, str(volume), str(traces), prefix, file)
    pair_io = _flag(table, "pair_io", prefix, file)
    if pair_io and volume != "box":
        raise _error(file, f"{prefix}.pair_io", "applies to the box kernel")
    l2_keep = _flag(table, "l2_keep", prefix, file)
    if l2_keep and not flux_tiles:
        raise _error(file, f"{prefix}.l2_keep", "keeps q in L2 for the restage: needs flux_tiles")
    weights = table.get("weights", "")
    if "weights" in table and weights not in WEIGHT_LOADS:
        raise _error(file, f"{prefix}.weights", f"expected one of {WEIGHT_LOADS}, got {weights!r}")
    if weights and volume != "box":
        raise _error(file, f"{prefix}.weights", "applies to the box kernel")
    x_pairs = _flag(table, "x_pairs", prefix, file)
    x_chain = _flag(table, "x_chain", prefix, file)
    x_prefetch = _flag(table, "x_prefetch", prefix, file)
    tile_swizzle = _flag(table, "tile_swizzle", prefix, file)
    chunk_elements = table.get("chunk_elements", 0)
    if "chunk_elements" in table and (type(chunk_elements) is not int or not 1 <= chunk_elements <= MAX_CHUNK_ELEMENTS):
        raise _error(file, f"{prefix}.chunk_elements",
                     f"expected an integer in [1, {MAX_CHUNK_ELEMENTS}], got {chunk_elements!r}")
    element_bricks = _element_bricks(table, prefix, file)
    interior_maps = table.get("interior_maps", True)
    if type(interior_maps) is not bool:
        raise _error(file, f"{prefix}.interior_maps", f"expected true or false, got {interior_maps!r}")
    exterior_maps = table.get("exterior_maps", True)
    if type(exterior_maps) is not bool:
        raise _error(file, f"{prefix}.exterior_maps", f"expected true or false, got {exterior_maps!r}")
    carveout = table.get("carveout")
    if "carveout" in table and (type(carveout) is not int or not 1 <= carveout <= 100):
        raise _error(file, f"{prefix}.carveout", f"expected a percentage, an integer in [1, 100], got {carveout!r}")
    if carveout is not None and volume != "box":
        raise _error(file, f"{prefix}.carveout", "applies to the box kernel (the streamed kernels size their own split)")
    side_queues = _flag(table, "side_queues", prefix, file)
    parity = _flag(table, "parity", prefix, file)
    config = FusedConfig(variant, order, str(flux), kernels, mma, dfma, str(d_stage), d_panel, min_blocks,
                         str(traces), epb, str(volume), k_panel, stages, **switches, trace_cluster=trace_cluster,
                         nvrtc=nvrtc, flux_tiles=flux_tiles, pair_io=pair_io, l2_keep=l2_keep, weights=str(weights),
                         x_pairs=x_pairs, x_chain=x_chain, x_prefetch=x_prefetch, tile_swizzle=tile_swizzle, chunk_elements=chunk_elements,
                         element_bricks=element_bricks, interior_maps=interior_maps,
                         exterior_maps=exterior_maps, carveout=carveout, side_queues=side_queues,
                         parity=parity)
    problem = first_table_problem(config)
    if problem:
        raise _error(file, f"{prefix}.{problem[0]}", problem[1])
    return config


def first_table_problem(config: FusedConfig) -> tuple[str, str] | None:
    """(key, what is wrong) of the first whole-table key check ``config`` fails, None if none: the checks
    that look at several keys at once. parse_table refuses a schedule's table with it, the builder a
    table built in code (a candidate), so that both refuse the same tables for the same reason."""
    checks = (("chunk_elements", chunk_problem), ("x_pairs", x_pairs_problem), ("x_chain", x_chain_problem),
              ("x_prefetch", x_prefetch_problem), ("tile_swizzle", tile_swizzle_problem),
              ("trace_cluster", trace_cluster_problem), ("element_bricks", element_bricks_problem),
              ("interior_maps", interior_maps_key_problem), ("exterior_maps", exterior_maps_key_problem),
              ("descending", descending_problem), ("side_queues", side_queues_problem), ("parity", parity_problem))
    for key, check in checks:
        problem = check(config)
        if problem:
            return key, problem
    return None


def _flag(table: Mapping[str, Any], key: str, prefix: str, file: str) -> bool:
    """A true/false table key (absent: false)."""
    value = table.get(key, False)
    if type(value) is not bool:
        raise _error(file, f"{prefix}.{key}", f"expected true or false, got {value!r}")
    return value


def _element_bricks(table: Mapping[str, Any], prefix: str, file: str) -> tuple[int, int, int] | None:
    """The table's ``element_bricks`` (None when absent): three positive element counts (bx, by, bz)."""
    if "element_bricks" not in table:
        return None
    value = table["element_bricks"]
    if (not isinstance(value, list) or len(value) != 3
            or any(type(n) is not int or not 1 <= n <= MAX_BRICK_ELEMENTS for n in value)):
        raise _error(file, f"{prefix}.element_bricks",
                     f"expected [bx, by, bz], three integers in [1, {MAX_BRICK_ELEMENTS}] (elements), got {value!r}")
    return (value[0], value[1], value[2])


def _flux_tiles(table: Mapping[str, Any], kernels: tuple[KernelConfig, ...], volume: str, traces: str,
                prefix: str, file: str) -> int:
    """The table's ``flux_tiles`` (0 when absent): fewer resident flux tiles than some kernel's
    directions, in box kernels whose face fluxes gather their traces from global memory (a q tile
    or a cluster's peers would read the restaged tile)."""
    if "flux_tiles" not in table:
        return 0
    value = table["flux_tiles"]
    key = f"{prefix}.flux_tiles"
    widest = max(len(k.dirs) for k in kernels)
    if type(value) is not int or not 2 <= value < widest:
        raise _error(file, key, f"expected an integer in [2, {widest - 1}] (fewer tiles than the widest kernel's "
                                f"{widest} directions; the first direction's tile is the accumulator), got {value!r}"
                     if widest > 2 else f"needs a kernel carrying three directions, got {value!r}")
    if volume != "box":
        raise _error(file, key, "applies to the box kernel (the streamed kernel carries one direction)")
    if traces == "tiles":
        raise _error(file, key, 'needs traces = "global" or "xfaces": the interior traces would be read from a '
                                'restaged tile')
    if any(k.cluster > 1 for k in kernels):
        raise _error(file, key, "cannot be combined with a kernel's cluster (peers read every flux tile)")
    return value


def one_element_form(config: FusedConfig) -> FusedConfig:
    """``config`` with one element per block where it pairs x neighbours (``x_pairs``: two elements of
    half its threads each) or chains them (``x_chain``: the block walks its elements); the same kernels
    otherwise. The base of the candidate families that change
    the traces or the elements a block holds (which the pair's shared face cannot follow), and what a
    fused path runs on a mesh whose elements do not pair up (an odd x extent)."""
    if config.x_chain:  # the same block per element, walking one element instead of a chain
        return dataclasses.replace(config, x_chain=False, x_prefetch=False, elements_per_block=1)
    if not config.x_pairs:
        return config
    # a register cap of N paired blocks per SM is one of 2N single-element blocks (the same warps)
    return dataclasses.replace(config, x_pairs=False, min_blocks=2 * config.min_blocks, kernels=tuple(
        dataclasses.replace(k, threads=k.threads // 2) for k in config.kernels))


def x_pairs_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``x_pairs`` (None if nothing): two whole x-neighbour elements per
    block of box kernels that form their x faces from the staged nodes, with D read through the cache."""
    if not config.x_pairs:
        return None
    if config.volume != "box" or config.traces != "xfaces":
        return 'needs the box kernel with traces = "xfaces"'
    if any(k.box != (config.nq,) * 3 or k.cluster > 1 for k in config.kernels):
        return f"needs every box to be the whole element [{config.nq}, {config.nq}, {config.nq}]"
    if any(0 not in k.dirs for k in config.kernels):
        return "needs every kernel to carry x (the pairs share an x face)"
    if config.elements_per_block != 1 or config.trace_cluster != 1:
        return "pairs elements itself: drop elements_per_block and trace_cluster"
    if config.d_stage != "global":
        return 'needs d_stage = "global"'
    if any(k.threads % 64 for k in config.kernels):
        return "needs an even number of warps per block (half per element)"
    return None


def x_chain_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``x_chain`` (None if nothing): one whole-element box kernel carrying
    x, y and z that forms its x faces from the staged nodes and walks ``elements_per_block`` >= 2
    elements (the chain's length). One kernel: the element's high-face nodes are stored one element
    late, as their final value (a kernel after it would subtract from a value not yet there)."""
    if not config.x_chain:
        return None
    if config.volume != "box" or config.traces != "xfaces":
        return 'needs the box kernel with traces = "xfaces"'
    if len(config.kernels) != 1 or sorted(config.kernels[0].dirs) != [0, 1, 2]:
        return "needs one volume kernel carrying x, y and z"
    if config.elements_per_block < 2:
        return "needs elements_per_block >= 2 (the chain's length)"
    if any(k.box != (config.nq,) * 3 or k.cluster > 1 for k in config.kernels):
        return f"needs the whole element as the box [{config.nq}, {config.nq}, {config.nq}], no cluster"
    if config.d_stage != "global":
        return 'needs d_stage = "global" (the element loop re-stages nothing but the element)'
    if config.x_pairs or config.trace_cluster != 1:
        return "chains elements itself: drop x_pairs and trace_cluster"
    return None


def x_prefetch_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``x_prefetch`` (None if nothing): a chain (``x_chain``) whose staging
    loop reads plain loads (the copies replace them; ``l2_keep``'s hinted loads have no copy form)."""
    if not config.x_prefetch:
        return None
    if not config.x_chain:
        return "copies the chain's next element: needs x_chain"
    if config.l2_keep:
        return "replaces the staging loads with copies: drop l2_keep"
    return None


def tile_swizzle_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``tile_swizzle`` (None if nothing): box kernels on the tensor
    cores whose box rows (the i extent) hold whole 16-double bank rows, which the XOR permutes."""
    if not config.tile_swizzle:
        return None
    if config.volume != "box":
        return "applies to the box kernel (the streamed kernel pads its panels)"
    if config.engine != "mma":
        return ("keeps the tensor-core fragment loads conflict-free; the CUDA-core lanes walk strided lines, "
                "which need the padded (odd) stride")
    narrow = [list(k.box) for k in config.kernels if k.box[2] % 16]
    if narrow:
        return f"needs every box's i extent to be a multiple of 16 (whole bank rows), got boxes {narrow}"
    return None


def chunk_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``chunk_elements`` (None if nothing): box kernels, at least two of
    them (one kernel has no later kernel to reuse its bytes), one element per block and no cluster
    (a chunk is a range of whole elements, each kernel's blocks a box of one of them)."""
    if not config.chunk_elements:
        return None
    if config.volume != "box":
        return "applies to the box kernels (a streamed kernel's element is larger than the L2)"
    if len(config.kernels) < 2:
        return "needs two or more volume kernels (a later kernel reads what an earlier one touched)"
    if config.elements_per_block != 1 or config.trace_cluster != 1 or config.x_pairs:
        return "chunks whole elements, one per block: drop elements_per_block, trace_cluster and x_pairs"
    if any(k.cluster > 1 for k in config.kernels):
        return "cannot be combined with a kernel's cluster (its blocks span one element's boxes)"
    return None


def descending_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``descending`` kernels (None if nothing): the launches whose blocks
    are not independent single units of work in one grid keep the ascending numbering: a cluster's
    ranks are consecutive blocks that share an element or a neighbour, a persistent block walks
    tiles b, b + gridDim.x, ..., and chunked launches hand their elements on chunk by chunk."""
    down = [k for k in config.kernels if k.descending]
    if not down:
        return None
    if any(k.cluster > 1 for k in down) or config.trace_cluster > 1:
        return "cannot be combined with clusters (a cluster's blocks are consecutive in the ascending numbering)"
    if any(k.persistent for k in down):
        return "cannot be combined with persistent blocks (each walks its tiles upwards from its block number)"
    if config.chunk_elements:
        return "cannot be combined with chunk_elements (the chunks hand their elements on in ascending order)"
    return None


def side_queues_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``side_queues`` (None if nothing): box kernels whose blocks are
    independent units of work in one grid (the queues hand out the work numbers the blocks would have
    taken from blockIdx.x); clusters and trace clusters need consecutive blocks side by side, chunks
    hand their elements on in order, and a descending kernel already fixes its order."""
    if not config.side_queues:
        return None
    if config.volume != "box":
        return "applies to the box kernels (a streamed kernel's blocks walk their tiles in a fixed order)"
    if any(k.cluster > 1 for k in config.kernels) or config.trace_cluster > 1:
        return "cannot be combined with clusters (a cluster's blocks are consecutive in the launch)"
    if config.chunk_elements:
        return "cannot be combined with chunk_elements (the chunks hand their elements on in ascending order)"
    if any(k.descending for k in config.kernels):
        return "cannot be combined with descending kernels (the queues set the order)"
    return None


def parity_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``parity`` (None if nothing): tensor-core kernels (FUSED_DFMA runs
    them with DFMA) at an odd order. Box kernels contract whole axes whose half-axis their warp tiles and
    k-steps divide, with D read through the cache or staged whole (the parity rows: half of D); streamed
    kernels: :func:`_stream_parity_problem`."""
    if not config.parity:
        return None
    if config.mma is None:
        return "needs the tensor-core engine (an MMA shape; FUSED_DFMA takes FUSED_TC's)"
    if config.nq % 2:
        return f"needs an odd order p (an even number of nodes); got p = {config.order}"
    if config.volume == "stream":
        return _stream_parity_problem(config)
    if config.d_panel not in (0, config.nq):
        return "stages all of D's parity rows (half of D): drop d_panel"
    if config.x_chain:
        return "cannot be combined with x_chain"
    shape, half = config.mma_shape, config.nq // 2
    for k in config.kernels:
        if k.cluster > 1:
            return "cannot be combined with a kernel's cluster (the split direction holds part of each line)"
        if half % shape.k or half % (8 * k.tile[1]):
            return (f"the half axis ({half} positions) must hold whole k-steps of {shape.k} and warp tiles of "
                    f"{8 * k.tile[1]} positions")
    return None


def _stream_parity_problem(config: FusedConfig) -> str | None:
    """The streamed kernels' side of :func:`parity_problem`: each forms the even and odd parts while it
    stages its panels (the product operand), and its box's positions, panels, pipeline and prefetch fit
    the half axis."""
    half = config.nq // 2
    if half % config.k_panel:
        return f"the half axis ({half} values) must hold whole panels of k_panel = {config.k_panel}"
    for k in config.kernels:
        d, name = k.dirs[0], k.dir_names
        if (k.a_operand or config.a_operand) != "product":
            return f'kernel {name}: forms the even and odd parts while staging: a_operand = "product"'
        if half % k.box[2 - d]:
            return (f"kernel {name}: its box's {k.box[2 - d]} positions along {DIR_NAMES[d]} must tile the half "
                    f"axis ({half}; the block writes their mirrors too)")
        if config.fragments == "paired" and k.tile[0] * config.mma_shape.m // 8 % 2:
            return (f'kernel {name}: fragments = "paired" pairs a thread\'s A rows (every parity panel is [m][line]): '
                    f"a {k.tile[0]}x{k.tile[1]} tile of {config.mma} has {k.tile[0] * config.mma_shape.m // 8} rows of "
                    "8 lines (needs an even count)")
        if (k.stages or config.stages) > half // config.k_panel or (k.prefetch or 0) > half // config.k_panel:
            return (f"kernel {name}: stages and prefetch count panels of the half axis: at most "
                    f"{half // config.k_panel} of k_panel = {config.k_panel}")
    return None


def element_bricks_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``element_bricks`` (None if nothing): box kernels whose blocks each
    take one element (or one box of it), or one x pair (``x_pairs``, bricks of whole pairs), from the
    permutation; the tables whose blocks walk or cluster consecutive elements (chains, walks, trace
    clusters, chunks) rely on the default numbering."""
    if config.element_bricks is None:
        return None
    if config.volume != "box":
        return "applies to the box kernels (a streamed kernel's blocks are tiles of every element)"
    if config.x_chain or config.elements_per_block != 1 or config.trace_cluster != 1 or config.chunk_elements:
        return ("orders single elements or x pairs: drop x_chain, elements_per_block, trace_cluster and "
                "chunk_elements (their blocks hold consecutive elements)")
    if config.x_pairs and config.element_bricks[0] % 2:
        return (f"orders x pairs in bricks of whole pairs: bx must be even, got {list(config.element_bricks)} "
                "(composer.fused.order.launch_order)")
    return None


def interior_maps_key_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``interior_maps = false`` (None if nothing): box kernels forming
    their face fluxes inline from gathered traces (``"global"``) or, on the x faces, from their staged
    pairs (``"xfaces"``); ``"tiles"`` and trace clusters read the interior from the staged tiles through
    vmapM's offsets."""
    if config.interior_maps:
        return None
    if config.volume != "box" or config.flux != "inline":
        return 'applies to the box kernels with flux = "inline" (the face kernel of "array" reads the maps)'
    if config.traces not in ("global", "xfaces"):
        return f'needs traces = "global" or "xfaces", got "{config.traces}"'
    return None


def exterior_maps_key_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``exterior_maps = false`` (None if nothing): the box kernels whose face
    fluxes read no vmapM (``interior_maps = false``), so that they read no index map at all; the other
    face loops ("tiles", trace clusters, the face kernel) read vmapM beside vmapP."""
    if config.exterior_maps:
        return None
    if config.interior_maps:
        return "needs interior_maps = false (the face fluxes then read no index map at all)"
    return None


def trace_cluster_problem(config: FusedConfig) -> str | None:
    """What is wrong with a table's ``trace_cluster`` (None if nothing): the cluster's blocks are
    consecutive elements, one each (whole-element boxes, one element per block), whose staged
    tiles hold the traces as they are (traces = "tiles", fluxes inline), in box kernels."""
    n = config.trace_cluster
    if n == 1:
        return None
    if config.volume != "box" or config.traces != "tiles" or config.flux != "inline":
        return 'needs the box kernel with traces = "tiles" (and flux = "inline")'
    if any(k.box != (config.nq,) * 3 for k in config.kernels) or config.elements_per_block != 1:
        return f"needs every box to be the whole element [{config.nq}, {config.nq}, {config.nq}], one per block"
    if any(k.cluster > 1 for k in config.kernels):
        return "cannot be combined with a kernel's cluster (a split axis)"
    return None


def _stream_choice(table: Mapping[str, Any], key: str, choices: tuple[str, ...], prefix: str, file: str,
                   stream: bool) -> str:
    """A streamed-kernel-only switch: one of ``choices`` (the first is the default)."""
    value = table.get(key, choices[0])
    if value not in choices:
        raise _error(file, f"{prefix}.{key}", f"expected one of {choices}, got {value!r}")
    if key in table and not stream:
        raise _error(file, f"{prefix}.{key}", 'needs volume = "stream"')
    return str(value)


def box_lines(box: tuple[int, int, int], d: int) -> int:
    """Lines of direction d in a (k, j, i) box (= the box's nodes on one face of that direction)."""
    bk, bj, bi = box
    return (bk * bj, bk * bi, bj * bi)[d]


def _check_stream_tiling(k: KernelConfig, mma: str, file: str, key: str, paired: bool = False) -> None:
    """The streamed template's static_asserts as clear errors: warp tiles (WM x WN MMAs of MM
    lines x 8 positions) divide the block's lines x positions evenly over its warps, y/z
    panels, copied in pairs of lines along i, have an even i extent, and paired y/z fragment
    loads find an even number of 8-row groups per warp tile (their rows pair up)."""
    d = k.dirs[0]
    mm = int(mma.split("x")[0])
    wm, wn = k.tile
    lines, positions = box_lines(k.box, d), k.box[2 - d]
    if lines % (mm * wm) or positions % (8 * wn):
        raise _error(file, key, f"a {wm}x{wn} warp tile of {mma} covers {mm * wm} lines x {8 * wn} positions, "
                                f"which does not divide the block's {lines} x {positions}")
    tiles = lines // (mm * wm) * (positions // (8 * wn))
    if tiles % (k.threads // 32):
        raise _error(file, key, f"{tiles} warp tiles do not split evenly over {k.threads // 32} warps")
    if d != 0 and k.box[2] % 2:
        raise _error(file, f"{key}.box", f"a streamed {DIR_NAMES[d]} kernel copies pairs of lines along i: "
                                         f"the i extent {k.box[2]} must be even")
    if paired and d != 0 and wm * mm // 8 % 2:
        raise _error(file, f"{key}.tile", f'fragments = "paired" pairs a thread\'s A rows: a {wm}x{wn} tile of '
                                          f"{mma} has {wm * mm // 8} rows of 8 lines (needs an even count)")


def _stream_keys(table: Mapping[str, Any], prefix: str, file: str, nq: int, mma: str | None,
                 stream: bool) -> tuple[int, int]:
    """(k_panel, stages) of a streamed table (defaults 16 and 3); (0, 0) otherwise."""
    if not stream:
        for key in ("k_panel", "stages"):
            if key in table:
                raise _error(file, f"{prefix}.{key}", 'needs volume = "stream"')
        return 0, 0
    mk = mma_shape(str(mma)).k if mma else 4
    k_panel = table.get("k_panel", 16)
    if (not isinstance(k_panel, int) or isinstance(k_panel, bool) or k_panel <= 0 or k_panel % max(mk, 4)
            or nq % k_panel):
        raise _error(file, f"{prefix}.k_panel", f"expected a multiple of {max(mk, 4)} that divides Nq = {nq}, "
                                                f"got {k_panel!r}")
    stages = table.get("stages", 3)
    if not isinstance(stages, int) or isinstance(stages, bool) or not 2 <= stages <= 8 or stages > nq // k_panel:
        raise _error(file, f"{prefix}.stages", f"expected an integer in [2, min(8, Nq / k_panel)], got {stages!r}")
    return k_panel, stages


def fused_config(variant: str, order: int, paths: Mapping[str, Mapping[str, Any]] | None = None,
                 file: str | None = None) -> FusedConfig:
    """The configuration of ``variant`` at ``order`` from the order's schedule (or ``paths``).

    FUSED_DFMA must declare ``schedule_of = "FUSED_TC"`` (or be absent): it always takes
    FUSED_TC's table, with the DMMA replaced by DFMA.
    """
    variant = check_variant(variant)
    check_order(variant, order)
    if paths is None:
        from composer.config.schedules import load_schedule

        schedule = load_schedule(order)
        paths, file = schedule.paths, schedule.file
    file = file or f"p{order:04d}.toml"
    if variant == "FUSED_DFMA":
        own = paths.get("FUSED_DFMA", {"schedule_of": "FUSED_TC"})
        if dict(own) != {"schedule_of": "FUSED_TC"}:
            raise _error(file, "paths.FUSED_DFMA", "must be exactly { schedule_of = \"FUSED_TC\" }: the "
                                                   "ablation shares FUSED_TC's schedule by construction")
    source = table_variant(variant)
    if source not in paths:
        raise _error(file, f"paths.{source}", f"missing: no {source} schedule for order {order}")
    config = parse_table(source, order, paths[source], file, dfma=variant == "FUSED_DFMA")
    if variant == "FUSED_DFMA":
        config = dataclasses.replace(config, variant="FUSED_DFMA", dfma=True)
    return config
