"""Schedule candidates of the fused paths: variations of a ``[paths.FUSED*]`` table.

Why: a candidate varies only what the schedule tables hold (threads, warp/thread tile, the box a
block owns, the MMA shape of FUSED_TC16, D staging, occupancy, trace source, elements per block),
never the template, so a measured winner is copied into ``schedules/pNNNN.toml`` as it is
(``to_table``). ``label`` names a candidate in sweep plans and logs. The families:
``candidates`` (all, the schedule's own first), ``staged_candidates``, ``trace_candidates``,
``wide_candidates``, ``strip_candidates``, ``stream_candidates`` (the streamed volume kernel),
``cluster_candidates`` (x and y over whole k-planes held by a thread-block cluster),
``flux_tile_candidates`` (two resident flux tiles in a three-direction kernel: two blocks per SM),
``pair_io_candidates`` (16-byte pairs for the dqdt store and the x weights),
``l2_keep_candidates`` (q held in L2 for a flux_tiles restage),
``shape_twin_candidates`` (FUSED_TC's table on FUSED_TC16's shapes: the model's shape-transfer targets),
``box_shape_candidates`` (FUSED_TC16's box table on its other MMA shape),
``trace_cluster_candidates`` (exterior face traces from the neighbours' tiles in element clusters),
``tile_swizzle_candidates`` (unpadded, XOR-swizzled flux tiles: three resident where padding held two),
``x_chain_candidates`` (a block walks a chain of x neighbours, the shared faces' traces carried on chip),
``element_order_candidates`` (the blocks take the elements brick by brick, neighbours' face layers found in L2),
``local_interior_candidates`` (the face fluxes' interior traces addressed from the layout, no vmapM),
``face_links_candidates`` (those tables with their exterior nodes from one link per element face, no vmapP),
``carveout_candidates`` (the box schedule at smaller preferred shared-memory carveouts: fewer blocks, more L1),
``brick_refine_candidates`` (more brick shapes for the mapless one-element tables),
``descending_candidates`` (kernels taking their blocks downwards: each starts where the one before it ended, in L2);
``candidate_list`` selects one family by name.
"""

from __future__ import annotations

import dataclasses
import re

from composer.arch.limits import DEFAULT_ARCH, arch_limits, resident_blocks
from composer.errors import ComposerError
from composer.fused.builder import StreamPlan, kernel_plans, late_weights
from composer.fused.config import (ALLOWED_MMA, D_LAYOUTS, L2_FETCH, STREAM_SWITCHES, SUPPORTED_ORDERS, FusedConfig, KernelConfig,
                                   box_lines, descending_problem, element_bricks_problem, fused_config,
                                   interior_maps_key_problem, one_element_form, parity_problem, parse_table,
                                   side_queues_problem)
from composer.fused.order import l2_handoffs
from composer.arch.mma import mma_shape

#: The variants a sweep varies (FUSED_DFMA always runs FUSED_TC's table).
SWEPT = ("FUSED", "FUSED_TC", "FUSED_TC16")
#: Orders the streamed family is generated for: those whose schedules already split the directions
#: over three kernels with a face array (p >= 127; below, a third kernel would re-read q and dqdt
#: once more).
STREAM_FROM = 127
#: Block output tiles of the streamed kernel per MMA height: (lines, positions, threads, warp tile
#: WM x WN, how many of STREAM_PIPELINES to try), 2-8x the lines per block of the box kernel at
#: p >= 255, most promising first (the first tiles get every pipeline, the rest the default one).
STREAM_TILES: dict[int, tuple[tuple[int, int, int, tuple[int, int], int], ...]] = {
    16: ((64, 128, 256, (2, 4), 3), (128, 128, 256, (4, 4), 3), (128, 128, 512, (2, 4), 3),
         (64, 128, 128, (2, 8), 1), (128, 64, 256, (2, 4), 1), (64, 64, 128, (2, 4), 1)),
    8: ((64, 128, 256, (4, 4), 2), (128, 128, 512, (4, 4), 2), (64, 64, 128, (4, 4), 1),
        (128, 64, 256, (4, 4), 1)),
}
#: Tiles tried with the m16n8k8 shape (the first ones of the m16 list, default pipeline).
STREAM_TILES_K8 = 2
#: (k_panel, stages): the default first, then narrower and wider panels with ~2-4 in flight.
STREAM_PIPELINES = ((16, 3), (8, 4), (32, 2))
#: Pipelines tried around a streamed schedule (the first sweep's winners all ran kp8 s4: narrow
#: panels, more in flight).
STREAM_REFINE_PIPELINES = ((8, 6), (4, 8), (8, 3), (16, 4))
# stream_lines: pipeline depths tried for each panel width (those whose shared memory fits)
STREAM_LINES_STAGES = (2, 3, 4)


def _fits(config: FusedConfig, arch: str = DEFAULT_ARCH) -> bool:
    """The template's static_asserts and the limits of ``arch`` (shared memory and threads for
    ``min_blocks`` blocks per SM), evaluated in Python. Candidates are generated for the
    architecture the sweep builds for, DEFAULT_ARCH."""
    nq = config.nq
    limits = arch_limits(arch)
    if _table_problem(config):
        return False  # a key combination the schedule file would refuse (the sweep writes tables back)
    if config.volume == "stream" and any((k.stages or 0) > nq // config.k_panel or (k.prefetch or 0) > nq // config.k_panel
                                         for k in config.kernels):
        return False  # a kernel's own depth or prefetch distance past the contraction's panels (parse_table's rule)
    try:
        plans = kernel_plans(config, arch)
    except ComposerError:  # no room for a staged D panel, or a kernel that cannot launch
        return False
    for plan in plans:
        k = plan.kernel
        static = 16 if config.side_queues else 0  # the queue's work_slot (static shared memory, padded)
        if plan.smem_bytes + static > limits.smem_per_block(config.min_blocks) or k.threads % limits.warp_size:
            return False
        if config.min_blocks and k.threads * config.min_blocks > limits.max_threads_per_sm:
            return False
        if isinstance(plan, StreamPlan) and plan.product and (plan.lines(k.dirs[0]) * config.k_panel // 2) % k.threads:
            return False  # the F pairs of a panel split evenly over the threads (registers)
        threads = getattr(plan, "element_threads", k.threads)  # x_pairs: half the block per element
        for d in k.dirs:
            nl, nq = plan.lines(d), plan.positions(d)
            if config.parity and not isinstance(plan, StreamPlan):
                nq //= 2  # a box kernel's work unit covers positions a < h and their mirrors (Contract's TILES_A)
            # (a streamed parity kernel's warp tiles cover u and w of its positions, twice the tiles: whole
            # tiles per warp for its positions give each thread u and w of the same nodes)
            if config.engine == "simt":
                tl, ta = k.tile
                if nl % tl or nq % ta or (nl // tl * (nq // ta)) % threads:
                    return False
            else:
                mm, mk = config.mma_shape.m, config.mma_shape.k
                wm, wn = k.tile
                if nl % (mm * wm) or nq % (8 * wn) or nq % mk:
                    return False
                if (nl // (mm * wm) * (nq // (8 * wn))) % (threads // 32):
                    return False
                if config.fragments == "paired" and (config.k_panel % 8 or (getattr(plan, "f_lines", d != 0) and wm * mm // 8 % 2)):
                    return False  # paired loads: whole k-octets, and y/z rows that pair up
    return True


def _table_problem(config: FusedConfig) -> str | None:
    """Why ``config``'s table would be refused by the schedule loader (None: it parses). Why: a family
    builds candidates with ``dataclasses.replace``, which skips parse_table's cross-key rules; session 26's
    plan held three such tables (strip's ``traces = "tiles"`` on a ``flux_tiles`` table), and `sweep-fused
    run` stopped on the first one."""
    import tomllib

    try:
        table = tomllib.loads(to_table(config))["paths"][config.variant]
        parse_table(config.variant, config.order, table)
    except ComposerError as exc:
        return str(exc)
    return None


def _scaled_box(k: KernelConfig, nq: int, factor: int) -> tuple[int, int, int] | None:
    """The box with its first partial axis (k, then j) multiplied by ``factor`` (None: not possible)."""
    box = list(k.box)
    for axis in range(3):
        if box[axis] != nq:
            if nq % (box[axis] * factor):
                return None
            box[axis] *= factor
            return tuple(box)  # type: ignore[return-value]
    return tuple(box) if factor == 1 else None  # type: ignore[return-value]


def _family_base(variant: str, order: int, volume: str | None, from_order: int = 0,
                 tensor_core: bool = False) -> FusedConfig | None:
    """The order's schedule when a candidate family applies to it, else None: the variant
    implements the order (from ``from_order`` on), its schedule runs the kernel family the
    candidates vary (``volume``: "box", "stream", None for either) and, for ``tensor_core``, an MMA
    engine."""
    if order < from_order or order not in SUPPORTED_ORDERS[variant]:
        return None
    base = fused_config(variant, order)
    if (volume is not None and base.volume != volume) or (tensor_core and base.engine != "mma"):
        return None
    return base


def _grouping_base(config: FusedConfig) -> FusedConfig:
    """The single-element form of ``config`` without ``element_bricks``: the base of the families that put
    several elements in a block (pairs, chains, strips, chunks, trace clusters). Bricks order single
    elements (``element_bricks_problem``), so a bricked table (the H100 overlay's p = 7 FUSED_TC) would
    otherwise give those families no candidate at all."""
    return dataclasses.replace(one_element_form(config), element_bricks=None)


def candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """(label, config) of the schedule-table variations of ``variant`` at ``order`` (base first)."""
    base = fused_config(variant, order)
    if base.volume == "stream":
        # the box families vary keys a streamed table does not have: only the streamed ones apply
        found = [("base", base)]
        for name, cfg in stream_refine_candidates(variant, order) + stream_candidates(variant, order):
            if all(cfg != c for _, c in found):
                found.append((name, cfg))
        return found
    nq = base.nq
    tiles = ([(1, 4), (2, 4), (4, 4), (2, 8), (4, 2)] if base.engine == "simt"
             else [(1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (2, 4)])
    shapes = [base.mma] if variant != "FUSED_TC16" else ["16x8x4", "16x8x8"]
    out: list[tuple[str, FusedConfig]] = [("base", base)]
    seen = {base}
    for shape in shapes:
        for factor in (1, 2, 4):
            for threads in (256, 512) if order > 15 else (64, 128, 256, 512, 1024):
                for tile in tiles:
                    kernels = []
                    for k in base.kernels:
                        box = _scaled_box(k, nq, factor)
                        if box is None:
                            break
                        kernels.append(dataclasses.replace(k, box=box, threads=threads, tile=tile))
                    else:
                        cfg = dataclasses.replace(base, kernels=tuple(kernels), mma=shape)
                        if cfg not in seen and _fits(cfg):
                            seen.add(cfg)
                            out.append((label(cfg), cfg))
    # larger register tiles first (more operand reuse per shared-memory load), then fewer threads
    out[1:] = sorted(out[1:], key=lambda c: (-c[1].kernels[0].tile[0] * c[1].kernels[0].tile[1],
                                             c[1].kernels[0].threads))
    extra = []
    for name, cfg in (trace_candidates(variant, order) + staged_candidates(variant, order)
                      + wide_candidates(variant, order) + strip_candidates(variant, order)
                      + flux_tile_candidates(variant, order) + pair_io_candidates(variant, order)
                      + l2_keep_candidates(variant, order) + stream_candidates(variant, order) + stream_refine_candidates(variant, order)):
        if cfg not in seen:
            seen.add(cfg)
            extra.append((name, cfg))
    return out[:1] + extra + out[1:]


def trace_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Where the face fluxes take their traces: on an inline schedule, the interior traces from the
    staged tiles (``traces = "tiles"``); on an array schedule (p >= 63), inline fluxes instead of
    the face kernel and the fstar round trip through global memory, with the interior traces from
    global memory or from the tiles."""
    base = _family_base(variant, order, "box")
    if base is None:
        return []
    options = ([{"traces": "tiles"}] if base.flux == "inline"
               else [{"flux": "inline"}, {"flux": "inline", "traces": "tiles"}])
    out = []
    for opt in options:
        cfg = dataclasses.replace(base, **opt)
        if _fits(cfg):
            out.append((label(cfg), cfg))
    return out





def flux_tile_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Two resident flux tiles (``flux_tiles = 2``) in a three-direction box kernel whose shared
    memory holds one block per SM where its threads would allow more (p = 15's xyz kernel: four
    41-KB tiles, 16 warps per SM, latency bound): z's fluxes are staged into y's tile once y is
    contracted, so two blocks fit. Traces from global memory (the restaged tile cannot serve them), or
    the x faces formed in the staging loop where the table has ``traces = "xfaces"`` (they need no
    tile); the schedule's threads and tile and 256- and 512-thread tiles, with ``min_blocks = 2`` (the
    registers two blocks need) and without."""
    base = _family_base(variant, order, "box")
    if base is None or not any(len(k.dirs) == 3 for k in base.kernels) or base.trace_cluster > 1:
        return []
    base = one_element_form(base)
    limits = arch_limits(DEFAULT_ARCH)
    plans = kernel_plans(base)
    if not any(len(p.kernel.dirs) == 3 and limits.smem_per_sm // (p.smem_bytes + limits.smem_reserved_per_block)
               < limits.max_threads_per_sm // p.kernel.threads for p in plans):
        return []  # shared memory does not bound the blocks per SM: fewer tiles change nothing
    tiles = [(4, 4), (2, 4), (4, 2)] if base.engine == "simt" else [(1, 2), (2, 2), (1, 4), (2, 1)]
    shapes = [(k.threads, k.tile) for k in base.kernels if len(k.dirs) == 3][:1]
    shapes += [(threads, tile) for threads in (512, 256) for tile in tiles]
    out, seen = [], {base}
    for threads, tile in shapes:
        kernels = tuple(dataclasses.replace(k, threads=threads, tile=tile) if len(k.dirs) == 3 else k
                        for k in base.kernels)
        for min_blocks in (2, 0):
            cfg = dataclasses.replace(base, kernels=kernels, flux_tiles=2, min_blocks=min_blocks,
                                      traces="xfaces" if base.traces == "xfaces" else "global")
            if cfg not in seen and _fits(cfg):
                seen.add(cfg)
                out.append((label(cfg), cfg))
    return out


def pair_io_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule with ``pair_io`` (16-byte dqdt stores in the first kernel and, on the tensor
    cores, 16-byte x-weight loads): the same table, fewer L2 requests (the p = 7 and 15 kernels ran
    with the L2 at 92-96 % of its throughput)."""
    base = _family_base(variant, order, "box")
    if base is None or base.pair_io:
        return []
    cfg = dataclasses.replace(base, pair_io=True)
    return [(label(cfg), cfg)] if _fits(cfg) else []


def l2_keep_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """A ``flux_tiles`` box schedule with ``l2_keep`` (q held in L2 until its restage)."""
    base = _family_base(variant, order, "box")
    if base is None or not base.flux_tiles or base.l2_keep:
        return []
    cfg = dataclasses.replace(base, l2_keep=True)
    return [(label(cfg), cfg)] if _fits(cfg) else []


def _xfaces_ok(config: FusedConfig) -> bool:
    """Whether ``traces = "xfaces"`` applies: an inline box schedule of plain launches (no cluster,
    no trace cluster) with a kernel that carries x."""
    return (config.volume == "box" and config.flux == "inline" and config.trace_cluster == 1
            and all(k.cluster == 1 for k in config.kernels) and any(0 in k.dirs for k in config.kernels))


def xface_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The inline box schedule with ``traces = "xfaces"``: each x-face node's flux formed by the thread
    that staged it, from its registers (instead of an 8-byte gather 64 bytes apart, a sector each; the
    eight x-face gathers were 30 % of the p = 7 kernel's L2 sector requests, session 19 ncu)."""
    base = _family_base(variant, order, "box")
    if base is None or base.traces == "xfaces" or not _xfaces_ok(base):
        return []
    cfg = dataclasses.replace(base, traces="xfaces")
    return [(label(cfg), cfg)] if _fits(cfg) else []


def x_pair_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """A whole-element inline box schedule on ``traces = "xfaces"`` with ``x_pairs``: two x-neighbour
    elements per block (twice the threads), the face they share exchanged in shared memory, at no cap
    and at the caps of 2-4 blocks per SM (early weights): the pair doubles the registers a block needs
    for the same warps per SM (FUSED_TC at p = 7: 54 registers uncapped, 32 with 8 B of spill at four)."""
    base = _family_base(variant, order, "box")
    if base is None or not _xfaces_ok(base) or base.elements_per_block > 1 or base.d_stage != "global":
        return []
    if any(k.box != (base.nq,) * 3 for k in base.kernels):
        return []
    base = _grouping_base(base)  # a paired table: its single-element form, paired again below
    kernels = tuple(dataclasses.replace(k, threads=2 * k.threads) for k in base.kernels)
    out = []
    for blocks in (0, 2, 3, 4):
        cfg = dataclasses.replace(base, traces="xfaces", x_pairs=True, kernels=kernels,
                                  min_blocks=blocks or base.min_blocks,
                                  weights="early" if blocks and blocks != base.min_blocks else base.weights)
        if all(k.threads <= arch_limits(DEFAULT_ARCH).max_threads_per_block for k in kernels) and _fits(cfg):
            out.append((label(cfg), cfg))
    return out


def x_chain_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The whole-element xyz schedule on ``traces = "xfaces"`` with ``x_chain``: the block walks chains
    of 2, 4 and 8 x-neighbour elements and carries the shared faces' traces in shared memory (the
    x-face exterior gathers, 8 bytes per 32-byte sector, fall to 1 / L; every warp stays on one element).
    Longer chains: fewer gathers, fewer blocks (the last wave's tail grows)."""
    base = _family_base(variant, order, "box")
    if base is None or not _xfaces_ok(base) or base.d_stage != "global":
        return []
    base = dataclasses.replace(_grouping_base(base), traces="xfaces")
    if len(base.kernels) != 1 or base.kernels[0].box != (base.nq,) * 3 or sorted(base.kernels[0].dirs) != [0, 1, 2]:
        return []
    threads = base.kernels[0].threads
    limits = arch_limits(DEFAULT_ARCH)
    # the element loop lets the compiler hoist the staging addresses: p = 7's FUSED_TC grows from 32 to 48
    # registers, p = 15's 512-thread kernels from 64 to 116-126 (one block per SM instead of two); so each
    # chain also at the register caps of 32, 40 and 64 (their blocks per SM; the weights loaded as the
    # table loads them: late_weights' rule, which a cap alone would switch)
    caps = sorted({blocks for regs in (32, 40, 64)
                   if 1 <= (blocks := limits.registers_per_sm // (regs * threads)) and blocks * threads <= limits.max_threads_per_sm
                   and blocks != base.min_blocks})
    out = []
    for length in (2, 4, 8):
        for blocks in (0, *caps):
            for prefetch in (False, True):  # x_prefetch: where the element fits twice (p = 7)
                cfg = dataclasses.replace(base, x_chain=True, elements_per_block=length, x_prefetch=prefetch)
                if blocks:
                    cfg = dataclasses.replace(cfg, min_blocks=blocks, weights=base.weights or ("late" if base.min_blocks >= 2 else "early"))
                if _fits(cfg):
                    out.append((label(cfg), cfg))
    return out


def tile_swizzle_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule on unpadded, XOR-swizzled flux tiles (``tile_swizzle``): as it is, and, where it
    holds fewer flux tiles than directions (``flux_tiles``), with every tile resident (no restage, so q
    and w are read once) at the schedule's register cap and at that of two blocks per SM. Why: p = 15's
    restage re-reads q and w from DRAM (246 MB of 1643, s19 c6 ncu); unpadded, three 16^3 tiles and the
    faces fit two blocks per SM (108 KB each)."""
    base = _family_base(variant, order, "box", tensor_core=True)
    if base is None or base.tile_swizzle or any(k.box[2] % 16 for k in base.kernels):
        return []
    base = one_element_form(base)
    out, seen = [], {base}
    variants = [dataclasses.replace(base, tile_swizzle=True)]
    if base.flux_tiles:
        for min_blocks in dict.fromkeys((base.min_blocks, 2)):
            variants.append(dataclasses.replace(base, tile_swizzle=True, flux_tiles=0, l2_keep=False,
                                                min_blocks=min_blocks))
    for cfg in variants:
        if cfg not in seen and _fits(cfg):
            seen.add(cfg)
            out.append((label(cfg), cfg))
    return out


#: Bytes of one volume array a chunk of the ``chunks`` family spans (``chunk_elements`` = these over an
#: element's 8 Nq^3 bytes, at least one element): a later kernel finds a chunk's q and dqdt in the 50-MB
#: L2 only while the traffic of about one chunk of every array (11-12 of them) has passed since.
CHUNK_ARRAY_BYTES = (2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20)


def chunk_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule of two or more kernels launched chunk by chunk (``chunk_elements``): each
    chunk spanning CHUNK_ARRAY_BYTES of an array, on the schedule's benchmark grid's elements. Why: at
    p = 31 and 63 the z kernel re-reads q and reads back the dqdt xy wrote; one launch per kernel
    streams 134-MB arrays through the L2 before z returns to them, a chunked pipeline returns while
    they are still there, and runs the shared-pipe-bound xy beside the DRAM-bound z."""
    base = _family_base(variant, order, "box")
    if base is None or len(base.kernels) < 2 or base.chunk_elements:
        return []
    base = _grouping_base(base)
    if base.elements_per_block != 1 or base.trace_cluster != 1 or any(k.cluster > 1 for k in base.kernels):
        return []
    element = 8 * base.nq**3
    ne = _benchmark_elements(order)
    out, seen = [], {base}
    for nbytes in CHUNK_ARRAY_BYTES:
        count = max(1, round(nbytes / element))
        cfg = dataclasses.replace(base, chunk_elements=count)
        if count < ne and cfg not in seen and _fits(cfg):
            seen.add(cfg)
            out.append((label(cfg), cfg))
    return out


#: Bricks the ``element_order`` family tries (``composer.fused.order.ranked_bricks``: the fewest
#: estimated face-layer re-reads on the benchmark grid first).
ELEMENT_ORDER_KEEP = 3


def _bricked(single: FusedConfig, keep: int) -> list[tuple[str, FusedConfig]]:
    """``single`` (a table whose blocks take one element or one x pair each) on the ``keep`` bricks
    ``ranked_bricks`` ranks best on its order's benchmark grid with the default machine's L2 (whole x
    rows, so whole pairs), each that fits; none where its blocks cannot take bricks (chains, walks,
    trace clusters, chunks, streamed kernels)."""
    from composer.arch.machines import DEFAULT_MACHINE, get_machine
    from composer.config.schedules import load_schedule
    from composer.fused.order import ranked_bricks

    if element_bricks_problem(dataclasses.replace(single, element_bricks=(2 if single.x_pairs else 1, 1, 1))):
        return []
    grid = load_schedule(single.order).benchmark.grid
    l2_bytes = get_machine(DEFAULT_MACHINE).l2_bytes or 50 << 20
    found = [dataclasses.replace(single, element_bricks=b) for b in ranked_bricks(grid, single.nq, l2_bytes, keep)]
    return [(label(cfg), cfg) for cfg in found if _fits(cfg)]


def _mapless(config: FusedConfig) -> FusedConfig | None:
    """``config`` with ``interior_maps = false``, None where the key does not apply (interior_maps_key_problem)."""
    cfg = dataclasses.replace(config, interior_maps=False)
    return None if interior_maps_key_problem(cfg) else cfg


def element_order_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule with its blocks taking the elements brick by brick (``element_bricks``), the
    ELEMENT_ORDER_KEEP bricks of ``ranked_bricks`` on the order's benchmark grid and the default
    machine's L2; a table that pairs or chains elements also as its one-element form in the default
    order, the comparison its bricked forms need. Why: in the default order a block's z neighbours run
    NeX * NeY blocks away, about a wave, and their face layers are read from DRAM twice (p = 7: 112 MB
    above the kernel's floor on an H100, ncu session 31)."""
    base = _family_base(variant, order, "box")
    if base is None:
        return []
    single = one_element_form(base)
    if single.element_bricks is not None:
        return []
    bricked = _bricked(single, ELEMENT_ORDER_KEEP)
    return bricked if single == base or not bricked else [(label(single), single), *bricked]


#: Bricks the ``brick_refine`` family tries (the best-ranked first).
BRICK_REFINE_KEEP = 8


def brick_refine_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The ``element_order`` family's one-element table without vmapM (``interior_maps = false``) on the
    BRICK_REFINE_KEEP best-ranked bricks: the brick shape refined once the first three and the mapless
    faces have measured faster (session 31, p = 7 on an H100: x0.949 with 32 x 8 x 32). A base that
    takes bricks already is refined from its unbricked one-element form."""
    base = _family_base(variant, order, "box")
    single = None if base is None else _mapless(_grouping_base(base))
    return [] if single is None else _bricked(single, BRICK_REFINE_KEEP)


def pair_bricks_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The x-pair tables (``x_pairs``: the schedule's own where it pairs, else the ``x_pairs`` family's)
    with their blocks taking the pairs brick by brick (``element_bricks`` over the grid of pairs,
    ``composer.fused.order.launch_order``): on the schedule's own brick where it has one, else on the
    ELEMENT_ORDER_KEEP best-ranked bricks. Why: the pairs halve the x-face exterior gathers (the 8-byte
    reads 64 bytes apart that load the L2 and its partition link at p = 7) and the bricks keep the z
    neighbours' face layers in L2 (DRAM 1538 → 1477 MB on an H100); until session 37 a table had one
    or the other (FUSED_TC16 at p = 7 the pairs, FUSED_TC the bricks)."""
    base = _family_base(variant, order, "box")
    if base is None:
        return []
    paired = [dataclasses.replace(base, element_bricks=None)] if base.x_pairs else [
        cfg for _, cfg in x_pair_candidates(variant, order)]
    if base.element_bricks is None:
        found = [c for cfg in paired for c in _bricked(cfg, ELEMENT_ORDER_KEEP)]
    else:
        found = [(label(c), c) for c in (dataclasses.replace(cfg, element_bricks=base.element_bricks) for cfg in paired)
                 if element_bricks_problem(c) is None and _fits(c)]
    return [(name, cfg) for name, cfg in found if cfg != base]


def descending_tables(config: FusedConfig) -> list[FusedConfig]:
    """``config`` with every non-empty set of its volume kernels taking their blocks downwards
    (``descending``), the ones the schedule file would take and that fit, the most L2 handoffs first
    (``composer.fused.order.l2_handoffs``)."""
    found = []
    for mask in range(1, 2 ** len(config.kernels)):
        kernels = tuple(dataclasses.replace(k, descending=bool(mask >> n & 1)) for n, k in enumerate(config.kernels))
        option = dataclasses.replace(config, kernels=kernels)
        if descending_problem(option) is None and _fits(option):
            found.append(option)
    return sorted(found, key=lambda c: -l2_handoffs(c)[0])


def descending_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The schedule's table with its kernels' blocks taken downwards (``descending``), every set of
    its kernels. Why: between two tendency calls the RK update streams its arrays upwards and leaves
    the highest elements' lines in L2 (q of the next call among them), and each volume kernel does the
    same for the next; in the shipped tables every kernel starts at element 0, where nothing of the
    kernel before it is left. A kernel that starts where the previous one ended reads that part of its
    first wave from L2: at most the L2's 50 MB per boundary, against 0.4-2 GB per kernel at the Table
    S29 sizes, so worth a few per cent where the kernels are DRAM-bound (p = 7 at 75 % of DRAM behind the
    L2 link, the p = 31 and 63 z kernels at 66-78 %, the p = 127 y and z at 71-72 %). Issue 16's
    "block_order idea extended to cross-kernel reuse"."""
    base = fused_config(variant, order)
    return [] if base is None else [(label(c), c) for c in descending_tables(base) if c != base]


def side_queue_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The schedule's table with its blocks taking their work from their L2 side's queue (``side_queues``),
    where the table allows it (box kernels without clusters or chunks). Why: at p = 7 and 15 the kernels
    are bound by the link between the L2 partitions; with the queues a block's neighbours run on its own side.
    Measured on H100s in session 40 (x1.02-1.12, results.md section 7): kept as a family for other GPUs."""
    base = fused_config(variant, order)
    if base is None or base.side_queues:
        return []
    option = dataclasses.replace(base, side_queues=True)
    return [(label(option), option)] if side_queues_problem(option) is None and _fits(option) else []


#: Warp tiles (WM, WN) the parity family tries: the contraction's work units halve with the positions,
#: so the shipped tile may no longer give every warp whole units.
PARITY_TILES = ((1, 1), (2, 1), (1, 2), (2, 2), (4, 1))


def parity_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The schedule's box table contracting through even and odd parts (``parity``, composer.parity):
    every warp tile of PARITY_TILES that divides the halved work, with D through the cache and staged
    whole (the parity rows are half of D). Why: the xy kernels at p = 31 and 63 are bound by L1/shared
    (76 %) or by latency at 128 registers (session 19 ncu): parity halves their MMAs, their tile and D
    loads and their k-loop; a clustered table is taken without its cluster (its split axis holds part
    of each line)."""
    base = fused_config(variant, order)
    if base is None or base.mma is None or base.nq % 2:
        return []
    if base.volume == "stream":
        return _stream_parity_candidates(base)
    if base.volume != "box":
        return []
    base = dataclasses.replace(base, kernels=tuple(dataclasses.replace(k, cluster=1, box=(base.nq,) * 3)
                                                   if k.cluster > 1 else k for k in base.kernels))
    found = []
    for stage in ("global", "smem"):
        for tile in PARITY_TILES:
            option = dataclasses.replace(base, parity=True, d_stage=stage, d_panel=0, x_chain=False,
                                         kernels=tuple(dataclasses.replace(k, tile=tile) for k in base.kernels))
            if parity_problem(option) is None and _fits(option) and option not in found:
                found.append(option)
    return [(label(c), c) for c in found]


#: How the streamed parity family keeps a kernel's accumulators: its block takes half the base's positions
#: (with their mirrors, the same outputs), and the u and w tiles of each position double the warp tiles,
#: so the warp tile halves its positions ("wn") or its lines ("wm"), or the block keeps the tile with half
#: the warps (twice the accumulators per thread: "warps", kept only within STREAM_PARITY_MAX_ACC).
STREAM_PARITY_SPLITS = ("wn", "wm", "warps")
#: Accumulator doubles per thread the family allows: the shipped streamed tables' largest (16x8x8 [2, 8]);
#: the p = 255 candidates with twice that spilled 624-632 B (ptxas, sm_90). The DFMA builds hold their A and
#: B values beside them: at 64 they spilled 216-272 B (p = 255 and 511, 8x8x4 [4, 4] on 128 threads), so half.
STREAM_PARITY_MAX_ACC = 64
#: F pairs per thread a parity kernel stages in registers (q, vel and their mirrors, 8 doubles a pair): the
#: p = 511 FUSED_TC16 candidates with 4 (k_panel 16) spilled 8-24 B, with 2 none.
STREAM_PARITY_MAX_F_TRIPS = 2


def _stream_parity_kernel(k: KernelConfig, split: str) -> KernelConfig | None:
    """``k`` with half its positions (the block writes their mirrors too) and ``split`` applied."""
    d, (wm, wn) = k.dirs[0], k.tile
    box = list(k.box)
    if box[2 - d] % 2:
        return None
    box[2 - d] //= 2
    if split == "wn":
        tile, threads = (wm, wn // 2), k.threads
    elif split == "wm":
        tile, threads = (wm // 2, wn), k.threads
    else:
        tile, threads = (wm, wn), k.threads // 2
    if 0 in tile or threads < 32:
        return None
    return dataclasses.replace(k, box=tuple(box), tile=tile, threads=threads, a_operand=None, persistent=False)


def _f_trips(config: FusedConfig) -> int:
    """The most F pairs a thread of the table's kernels stages per panel (the template's F_TRIPS)."""
    return max(plan.lines(plan.dir) * plan.k_panel // 2 // plan.kernel.threads for plan in kernel_plans(config))


def _narrower(k: KernelConfig, k_panel: int, half: int) -> KernelConfig:
    """``k`` on panels of ``k_panel`` values, half the table's: its own depth and prefetch distance,
    which count panels, twice as many (within the half axis's panels and 8 stages)."""
    panels = half // k_panel
    return dataclasses.replace(k, stages=min(8, 2 * k.stages, panels) if k.stages else None,
                               prefetch=min(2 * k.prefetch, panels) if k.prefetch else None)


def _accumulators(config: FusedConfig) -> int:
    """The largest accumulator count per thread (doubles) of a streamed table's kernels (the template's
    ITER x WM x WN x C_REGS; a parity kernel's iterations cover u and w)."""
    most = 0
    for plan in kernel_plans(config):
        wm, wn = plan.kernel.tile
        mm = config.mma_shape.m
        tiles = plan.lines(plan.dir) // (mm * wm) * (plan.virtual_positions // (8 * wn))
        most = max(most, tiles // (plan.kernel.threads // 32) * wm * wn * mm // 4)
    return most


def _pointer_program_holds(config: FusedConfig) -> bool:
    """Whether every streamed kernel's copies tile as a pointer program (composer.fused.copies: each
    thread's copies at the same offsets from its first one)."""
    from composer.fused.builder import _copy_program

    try:
        for plan in kernel_plans(config):
            _copy_program(plan)
    except ComposerError:
        return False
    return True


def _stream_parity_candidates(base: FusedConfig) -> list[tuple[str, FusedConfig]]:
    """The streamed schedule contracting through even and odd parts (``parity``): every kernel on the
    product operand (the parts are formed while staging), its copies (pointers where the halved tiles
    still give a pointer program, else unrolled), each split of
    STREAM_PARITY_SPLITS that the kernels take, at the table's panels and at half-width panels twice as
    deep, within STREAM_PARITY_MAX_ACC accumulators and STREAM_PARITY_MAX_F_TRIPS staged pairs per thread
    (a thread holds q and vel of its pairs and their mirrors in registers while a panel contracts); the
    table's other keys stay. Why: at p = 255
    the streamed kernels run at about half the FP64 tensor peak and at p = 511 at 1.7x the compute roof
    (results.md section 4): parity halves their MMAs and D's bytes and leaves F's the same."""
    half = base.nq // 2
    panels = [(base.k_panel, base.stages)]
    narrow = base.k_panel // 2
    if narrow >= max(base.mma_shape.k, 8 if base.fragments == "paired" else 4) and half % narrow == 0:
        panels.append((narrow, min(8, 2 * base.stages, half // narrow)))
    found = []
    most_acc = STREAM_PARITY_MAX_ACC // (2 if base.dfma else 1)
    for k_panel, stages in panels:
        for split in STREAM_PARITY_SPLITS:
            kernels = tuple(_stream_parity_kernel(k, split) for k in base.kernels)
            if None in kernels:
                continue
            if k_panel != base.k_panel:
                kernels = tuple(_narrower(k, k_panel, half) for k in kernels)
            option = dataclasses.replace(base, parity=True, a_operand="product", kernels=kernels,
                                         k_panel=k_panel, stages=stages)
            if option.copies == "pointers" and not _pointer_program_holds(option):
                option = dataclasses.replace(option, copies="unrolled")
            if (parity_problem(option) is None and _fits(option) and option not in found
                    and _accumulators(option) <= most_acc and _f_trips(option) <= STREAM_PARITY_MAX_F_TRIPS):
                found.append(option)
    return [(label(c), c) for c in found]


def local_interior_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule with its face fluxes reading no vmapM (``interior_maps = false``), as it is and,
    where its blocks can take bricks, on the best-ranked brick of ``element_order_candidates``. Why: the
    y and z faces' vmapM is 34 MB of the p = 7 kernel's DRAM bytes and a dependent load before each
    interior gather (the x faces' went with ``traces = "xfaces"``)."""
    base = _family_base(variant, order, "box")
    mapless = None if base is None else _mapless(base)
    if mapless is None:
        return []
    variants = [mapless]
    bricked = [cfg for _, cfg in element_order_candidates(variant, order) if cfg.element_bricks is not None]
    if bricked:
        variants.append(dataclasses.replace(bricked[0], interior_maps=False))
    return [(label(cfg), cfg) for cfg in variants if _fits(cfg)]


def face_links_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The ``local_interior`` family's tables (the box schedule without vmapM, unbricked and on its best
    brick) each also reading no vmapP (``exterior_maps = false``: one link per element face names the
    neighbour's face nodes). Why: vmapP is the last index map such a kernel reads, 50 MB of the p = 7
    kernel's 1442 MB of DRAM reads on an H100, whose time follows its bytes."""
    found = []
    for _, mapless in local_interior_candidates(variant, order):  # on a linked table too (the H100 overlay's p = 7)
        found += [dataclasses.replace(mapless, exterior_maps=exterior) for exterior in (True, False)]  # both forms
    return [(label(cfg), cfg) for cfg in found]


#: Preferred carveouts the carveout family tries (sm_90: 164, 132 and 100 KB of shared memory, 92, 124 and
#: 156 KB of L1 of the 256-KB store; ArchLimits.carveout_capacity).
CARVEOUT_PERCENTS = (71, 57, 43)


def carveout_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule at each preferred carveout of CARVEOUT_PERCENTS whose shared memory still holds a
    block of every volume kernel (by shared memory; the path refuses what registers rule out). Why: the
    p = 7 and 15 kernels are bound by the L2 and its partition link, and the driver's split gives their
    blocks the shared memory, leaving 60 KB of L1 on sm_90 to FUSED_TC p = 7; fewer blocks with more L1 for
    the gathers' reuse is the trade (the kernels' sources are the schedule's: no compile)."""
    base = _family_base(variant, order, "box")
    if base is None:
        return []
    limits = arch_limits(DEFAULT_ARCH)
    try:
        plans = kernel_plans(base, DEFAULT_ARCH)
    except ComposerError:
        return []
    need = max(plan.smem_bytes for plan in plans) + limits.smem_reserved_per_block
    # the split the driver gives the blocks its shared memory and threads hold (registers may hold fewer
    # still): a carveout at or above it leaves no more L1
    natural = max(resident_blocks(limits, plan.kernel.threads, plan.smem_bytes)
                  * (plan.smem_bytes + limits.smem_reserved_per_block) for plan in plans)
    default = next(c for c in limits.smem_carveouts if c >= natural)
    found = [dataclasses.replace(base, carveout=pct) for pct in CARVEOUT_PERCENTS
             if need <= limits.carveout_capacity(pct) < default]
    return [(label(cfg), cfg) for cfg in found]


def _benchmark_elements(order: int) -> int:
    """Elements of the order's benchmark grid (the grid a sweep times on)."""
    from composer.config.schedules import load_schedule

    grid = load_schedule(order).benchmark.grid
    return grid[0] * grid[1] * grid[2]


#: Blocks per SM the budget family asks ptxas for (``min_blocks``; 0: the table's own, none or its own cap).
BUDGET_BLOCKS = (0, 3, 4, 5, 6, 8)
#: Orders the budget family varies (box schedules, whose registers and blocks per SM trade).
BUDGET_UP_TO = 63


def budget_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The box schedule's output tile and register budget together: its kernels at half the threads
    with twice the tile (either axis) and at twice the threads with half of it (one-kernel tables),
    each at every ``min_blocks`` of BUDGET_BLOCKS, with the table's traces and with ``"xfaces"``.

    Why: the authors' p = 7 kernels (reports/p7_gap_study.md §5, tc_paper_survey §23) won 3.4 % (CUDA
    cores) and 7.2 % (tensor cores) on GB200 with four outputs per thread on 128 threads and the
    register budget of five or six blocks per SM, where eight blocks or no cap lost; our sweeps varied
    threads and tiles but never the budget with them."""
    base = _family_base(variant, order, "box")
    if base is None or order > BUDGET_UP_TO or base.elements_per_block > 1 or base.trace_cluster > 1:
        return []
    shapes = [tuple((k.threads, k.tile) for k in base.kernels)]
    if len(base.kernels) == 1:
        (threads, (a, b)), = shapes[0]
        shapes += [((threads // 2, (2 * a, b)),), ((threads // 2, (a, 2 * b)),)]
        shapes += [((threads * 2, (a // 2, b)),)] if a % 2 == 0 else []
        shapes += [((threads * 2, (a, b // 2)),)] if b % 2 == 0 else []
    traces = [base.traces] + (["xfaces"] if base.traces != "xfaces" and _xfaces_ok(base) else [])
    # a cap keeps the weights where the table's kernels have them (the min_blocks rule would move them
    # after the contraction: +24 % at p = 7 on the same registers, session 21 call 1); one table-wide key
    # cannot keep kernels that differ, so such a table gets no new caps
    rule = {late_weights(base, plan) for plan in kernel_plans(base)}
    weights = base.weights or ("" if len(rule) > 1 else "late" if rule.pop() else "early")
    out, seen = [], {base}
    for shape in shapes:
        if any(t < 32 or t > 1024 for t, _ in shape):
            continue
        kernels = tuple(dataclasses.replace(k, threads=t, tile=tile) for k, (t, tile) in zip(base.kernels, shape))
        for blocks in BUDGET_BLOCKS:
            cap = min(arch_limits(DEFAULT_ARCH).registers_per_sm // (t * blocks) for t, _ in shape) if blocks else 255
            if base.mma == "16x8x8" and cap < 64:
                continue  # ptxas: m16n8k8 f64 "cannot be compiled with specified register target constraints"
            capped = blocks and blocks != base.min_blocks
            if capped and not weights:
                continue
            for trace in traces:
                cfg = dataclasses.replace(base, kernels=kernels, min_blocks=blocks or base.min_blocks, traces=trace,
                                          weights=weights if capped else base.weights)
                if cfg not in seen and _fits(cfg):
                    seen.add(cfg)
                    out.append((label(cfg), cfg))
    return out


#: Orders whose tensor-core schedules get the D-staging / occupancy candidates (the re-read of D
#: per DMMA and one block per SM bind from p = 127 on; p = 63 is cheap to include).
STAGED_FROM = 63


def _halved_box(k: KernelConfig, nq: int) -> tuple[int, int, int] | None:
    """The box with its first partial axis (k, then j) halved (None: not possible)."""
    box = list(k.box)
    for axis in range(3):
        if box[axis] != nq:
            if box[axis] % 2:
                return None
            box[axis] //= 2
            return tuple(box)  # type: ignore[return-value]
    return None


def staged_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The D-staging and occupancy options on the order's schedule (and on its box halved, which
    frees the shared memory for a panel and a second block): ``min_blocks = 2`` alone, ``d_stage =
    "smem"`` (all of D, else the widest panel that fits), 16-k panels, and staging with two
    blocks per SM (8- and 16-k panels). Tensor-core variants only; those that do not fit are
    dropped."""
    base = _family_base(variant, order, "box", STAGED_FROM, tensor_core=True)
    if base is None:
        return []
    nq = base.nq
    options = [{"min_blocks": 2}, {"d_stage": "smem"}, {"d_stage": "smem", "d_panel": 16},
               {"d_stage": "smem", "d_panel": 16, "min_blocks": 2}, {"d_stage": "smem", "d_panel": 8, "min_blocks": 2}]
    starts = [(base, options)]
    halved, doubled = [], []
    for k in base.kernels:
        box = _halved_box(k, nq)
        if box is None:
            break
        wm, wn = k.tile
        halved.append(dataclasses.replace(k, box=box, tile=(max(1, wm // 2), wn)))
    else:
        starts.append((dataclasses.replace(base, kernels=tuple(halved)), options))
    # the box doubled with twice the threads: twice the lines per staged D panel, so half the D
    # traffic from L2 per DMMA (D is re-streamed per block), at one block per SM
    for k in base.kernels:
        box = _scaled_box(k, nq, 2)
        if box is None or 2 * k.threads > arch_limits(DEFAULT_ARCH).max_threads_per_block:
            break
        doubled.append(dataclasses.replace(k, box=box, threads=2 * k.threads))
    else:
        starts.append((dataclasses.replace(base, kernels=tuple(doubled)),
                       [{"d_stage": "smem"}, {"d_stage": "smem", "d_panel": 16}, {"d_stage": "smem", "d_panel": 8}]))
    out, seen = [], {base}
    for start, opts in starts:
        for opt in opts:
            if opt.get("d_panel", 8) > nq or nq % opt.get("d_panel", 8):
                continue
            cfg = dataclasses.replace(start, **opt)
            if cfg.d_stage == "smem" and not cfg.d_panel and _fits(cfg):
                # name the panel the builder picks unless it stages all of D (no duplicate kernels)
                panels = {p.d_panel for p in kernel_plans(cfg)}
                if len(panels) == 1 and nq not in panels:
                    cfg = dataclasses.replace(cfg, d_panel=panels.pop())
            if cfg not in seen and _fits(cfg):
                seen.add(cfg)
                out.append((label(cfg), cfg))
    return out


def strip_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Several consecutive elements per block (whole-element schedules, p <= 15): the exterior
    traces on the face an element shares with the previous one come from L1 (at p = 7 the x-face
    gathers are much of the L1 and L2 tag traffic). 2, 4 and 8 elements, with the schedule's
    own trace source and with the other one (a block of several elements replaces ``x_pairs``, the
    two-element block of its own form)."""
    base = _family_base(variant, order, "box")
    if base is None or any(k.box != (base.nq,) * 3 for k in base.kernels) or base.d_stage != "global":
        return []
    base = _grouping_base(base)
    out = []
    for epb in (2, 4, 8):
        for traces in (base.traces, "tiles" if base.traces == "global" else "global"):
            cfg = dataclasses.replace(base, elements_per_block=epb, traces=traces)
            if _fits(cfg):
                out.append((label(cfg), cfg))
    return out


def wide_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Twice the lines per block (the box doubled along its first partial axis) with D staged in
    8- or 16-k panels: the staged D panel is re-read from L2 by every block, so its L2 traffic per
    FLOP falls as 1/lines (the box kernels at p >= 255, 16 lines per block, were L2-bound). One
    block per SM; 256 or 512 threads. Tensor-core variants, p >= 255."""
    base = _family_base(variant, order, "box", 255, tensor_core=True)
    if base is None:
        return []
    shapes = ["16x8x4", "16x8x8"] if variant == "FUSED_TC16" else [base.mma]
    out = []
    for shape in shapes:
        for threads, tiles in ((512, [(2, 2), (1, 4), (2, 4)]), (256, [(2, 4)])):
            for tile in tiles:
                for panel in (8, 16):
                    kernels = []
                    for k in base.kernels:
                        box = _scaled_box(k, base.nq, 2)
                        if box is None:
                            break
                        kernels.append(dataclasses.replace(k, box=box, threads=threads, tile=tile))
                    else:
                        cfg = dataclasses.replace(base, kernels=tuple(kernels), mma=shape, d_stage="smem",
                                                  d_panel=panel, min_blocks=0)
                        if cfg != base and _fits(cfg):
                            out.append((label(cfg), cfg))
    return out


def stream_box(d: int, lines: int, positions: int) -> tuple[int, int, int]:
    """(k, j, i) output tile of a streamed direction-d kernel with ``lines`` x ``positions``: x lines
    run along j (k extent 1), y and z lines along i, the contiguous axis, for coalesced panels."""
    return ((1, lines, positions), (1, positions, lines), (positions, 1, lines))[d]


def stream_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The streamed volume kernel (``volume = "stream"``, one kernel per direction, face array) at
    the block tiles of STREAM_TILES and the pipelines of STREAM_PIPELINES. Tensor-core variants,
    p >= STREAM_FROM."""
    base = _family_base(variant, order, None, STREAM_FROM, tensor_core=True)
    if base is None:
        return []
    shapes = ["16x8x4", "16x8x8"] if variant == "FUSED_TC16" else [base.mma]
    out = []
    for shape in shapes:
        mm, mk = mma_shape(shape).m, mma_shape(shape).k
        tiles = STREAM_TILES[mm] if mk == 4 else tuple(t[:4] + (1,) for t in STREAM_TILES[mm][:STREAM_TILES_K8])
        for lines, positions, threads, tile, pipelines in tiles:
            if base.nq % lines or base.nq % positions:
                continue
            for k_panel, stages in STREAM_PIPELINES[:pipelines]:
                kernels = tuple(KernelConfig((d,), stream_box(d, lines, positions), threads, tile) for d in range(3))
                cfg = dataclasses.replace(base, flux="array", kernels=kernels, mma=shape, d_stage="global",
                                          d_panel=0, min_blocks=0, traces="global", elements_per_block=1,
                                          volume="stream", k_panel=k_panel, stages=stages)
                if k_panel % mk == 0 and _fits(cfg):
                    out.append((label(cfg), cfg))
    return out


def stream_refine_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Variations around a schedule that already runs the streamed kernel: deeper or narrower
    pipelines (STREAM_REFINE_PIPELINES), a wider warp tile (WN doubled: fewer A-fragment loads per
    MMA) on the same block tile with half the threads or on twice the positions, two blocks per SM
    asked of ptxas, and each of these with the other A operand (``a_operand``), and all of them with the other
    panel-copy loop (``copies``)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    mk = base.mma_shape.k
    k0 = base.kernels[0]
    d0 = k0.dirs[0]
    lines, positions = box_lines(k0.box, d0), k0.box[2 - d0]
    wm, wn = k0.tile
    options: list[FusedConfig] = []

    def retile(lines_: int, positions_: int, threads: int, tile: tuple[int, int]) -> tuple[KernelConfig, ...]:
        return tuple(KernelConfig((d,), stream_box(d, lines_, positions_), threads, tile) for d in range(3))

    for k_panel, stages in STREAM_REFINE_PIPELINES:
        if k_panel % mk == 0 and base.nq % k_panel == 0:
            options.append(dataclasses.replace(base, k_panel=k_panel, stages=stages))
    if k0.threads >= 64:
        options.append(dataclasses.replace(base, kernels=retile(lines, positions, k0.threads // 2, (wm, 2 * wn))))
    if base.nq % (2 * positions) == 0:
        options.append(dataclasses.replace(base, kernels=retile(lines, 2 * positions, k0.threads, (wm, 2 * wn))))
    options.append(dataclasses.replace(base, min_blocks=2))
    # the product formed while staging (half the A-operand shared-memory bytes), on the base and
    # on every option above
    other = "product" if base.a_operand == "factors" else "factors"
    options += [dataclasses.replace(c, a_operand=other) for c in [base, *options]]
    # and every one of them with the other panel-copy loop
    loop = "unrolled" if base.copies == "strided" else "strided"
    options += [dataclasses.replace(c, copies=loop) for c in [base, *options]]
    return [(label(c), c) for c in options if c != base and _fits(c)]


def stream_lines_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Fewer L2 requests per byte for a streamed schedule whose kernels wait on L2 tag lookups:
    panels of whole 128-byte lines (k_panel 16 instead of 8, for D and for the
    x-direction F rows) and D read from its k-panel copy (``d_layout = "panels"``), each with the
    unrolled copy loops and as deep a pipeline as fits (STREAM_LINES_STAGES)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    mk = base.mma_shape.k
    options = []
    for k_panel in sorted({base.k_panel, 16}):
        if k_panel % mk or base.nq % k_panel:
            continue
        for stages in STREAM_LINES_STAGES:
            for d_layout in D_LAYOUTS:
                options.append(dataclasses.replace(base, k_panel=k_panel, stages=stages, copies="unrolled",
                                                   d_layout=d_layout))
    return [(label(c), c) for c in options if c != base and _fits(c)]


def stream_paired_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Half the shared-memory load instructions of a streamed schedule: its table with 16-byte
    fragment loads (``fragments = "paired"``), on its own pipeline and on panels of 16 k-values with
    each depth of STREAM_LINES_STAGES, unrolled copies (the hot loop then issues one LDS.128 where
    the scalar build issues two LDS.64)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = [dataclasses.replace(base, fragments="paired")]
    if base.nq % 16 == 0:
        options += [dataclasses.replace(base, fragments="paired", k_panel=16, stages=stages, copies="unrolled")
                    for stages in STREAM_LINES_STAGES]
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_order_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """A streamed schedule with its blocks numbered along the carried axis (``block_order =
    "axis"``): the blocks that re-read a line set's q and vel panels run back to back (under the
    default numbering a z kernel's later blocks find them gone from L2 and read them from DRAM)."""
    base = _family_base(variant, order, "stream")
    if base is None or base.block_order == "axis":
        return []
    option = dataclasses.replace(base, block_order="axis")
    return [(label(option), option)] if _fits(option) else []


#: Output tiles tried for one direction's kernel of a streamed schedule (lines, positions, threads,
#: warp tile): for y and z the lines run along i, so more lines are longer contiguous panel rows
#: (128 lines: 1 KiB rows where the shipped 64 give 512 B, 2 MiB apart in z), and more positions
#: mean fewer blocks re-reading one line set's q and vel (Nq / positions of them; 512: none). The
#: FUSED_TC16 z kernel at p = 511 runs 27 % behind x on the same tile (docs/history.md, session 5).
STREAM_AXIS_TILES: dict[int, tuple[tuple[int, int, int, tuple[int, int]], ...]] = {
    16: ((128, 64, 128, (2, 8)), (128, 128, 256, (2, 8)), (32, 256, 128, (2, 8)), (64, 256, 256, (2, 8)),
         (16, 512, 128, (1, 8)), (32, 512, 256, (2, 8))),
    8: ((128, 64, 128, (4, 8)), (32, 256, 128, (4, 8)), (16, 512, 128, (2, 8))),
}
#: Directions whose kernel the stream_axis family retiles (y and z: their panels are the strided ones).
STREAM_AXIS_DIRS = (2, 1)


def _numbered(k: KernelConfig, numbering: str, table_order: str) -> KernelConfig:
    """``k`` numbered ``numbering``: its own key only where that differs from the table's, so that
    two spellings of one table compare equal."""
    return dataclasses.replace(k, block_order=None if numbering == table_order else numbering)


def _retiles(variant: str, order: int, dirs: tuple[int, ...]) -> list[tuple[str, FusedConfig]]:
    """The streamed schedule with the kernel of one direction of ``dirs`` at a time on each tile of
    STREAM_AXIS_TILES, the other kernels kept, under both block numberings (the numbering matters
    only where positions < Nq, and not for x, whose carried axis "kji" already numbers fastest)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = []
    for d in dirs:
        for lines, positions, threads, tile in STREAM_AXIS_TILES.get(base.mma_shape.m, ()):
            if base.nq % lines or base.nq % positions:
                continue
            # "axis" numbers the carried axis's chunks fastest; for x that is the i chunks, as "kji"
            for numbering in ("kji", "axis") if positions < base.nq and d != 0 else ("kji",):
                kernels = tuple(_numbered(dataclasses.replace(k, box=stream_box(d, lines, positions), threads=threads,
                                                              tile=tile), numbering, base.block_order)
                                if k.dirs == (d,) else k for k in base.kernels)
                options.append(dataclasses.replace(base, kernels=kernels))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_axis_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """One direction's kernel of a streamed schedule on its own output tile, the other kernels kept:
    the families above give all three kernels one (lines, positions) tile, but the z kernel's panel
    rows lie Nq^2 apart and its line sets are re-read by Nq / positions blocks, so its best tile need
    not be x's. Each tile of STREAM_AXIS_TILES for z, then y (:func:`_retiles`)."""
    return _retiles(variant, order, STREAM_AXIS_DIRS)


def stream_x_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The x kernel of a streamed schedule on each tile of STREAM_AXIS_TILES, y and z kept: at
    p = 511 the 64-line x 256-position 256-thread tile won for y and z (session 14, call 2), and x
    was never tried on it."""
    return _retiles(variant, order, (0,))


def stream_yz_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The y and z kernels of a streamed schedule both on one tile of STREAM_AXIS_TILES (x kept),
    each with its own block numbering (every combination of "kji" and "axis"): stream_axis retiles
    one direction at a time, and its winners at p = 511 were one tile for y and z whose best
    numberings differed (session 14, call 1)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = []
    for lines, positions, threads, tile in STREAM_AXIS_TILES.get(base.mma_shape.m, ()):
        if base.nq % lines or base.nq % positions:
            continue
        numberings = ("kji", "axis") if positions < base.nq else ("kji",)
        for y_order in numberings:
            for z_order in numberings:
                own = {1: y_order, 2: z_order}
                kernels = tuple(_numbered(dataclasses.replace(k, box=stream_box(k.dirs[0], lines, positions),
                                                              threads=threads, tile=tile), own[k.dirs[0]],
                                          base.block_order)
                                if k.dirs[0] in own else k for k in base.kernels)
                options.append(dataclasses.replace(base, kernels=kernels))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


#: Pipeline depths tried for one kernel of a streamed schedule on its own (stream_depth).
STREAM_DEPTHS = (3, 4, 6)


def stream_depth_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Deeper pipelines for the y and z kernels of a streamed schedule, each on its own and both
    together (the new per-kernel ``stages`` key; x and the table's depth kept): the shipped p = 511
    table runs y and z as 256-thread kernels alone on their SMs, with the shared memory for a third
    panel in flight that x's two blocks per SM do not have, and ncu calls its z kernel latency bound
    (session 14, call 2)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = []
    for stages in STREAM_DEPTHS:
        if stages <= base.stages or stages > base.nq // base.k_panel:
            continue
        for dirs in ((2,), (1,), (1, 2)):
            kernels = tuple(dataclasses.replace(k, stages=stages) if k.dirs[0] in dirs else k for k in base.kernels)
            options.append(dataclasses.replace(base, kernels=kernels))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


#: Panels before the end of the contraction at which stream_prefetch prefetches the epilogue.
STREAM_PREFETCH = (1, 2, 4, 8)  # session 14 call 6 ran (2, 4, 8); 1 was added for call 7


def stream_prefetch_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The epilogue's metric and dqdt lines prefetched into L2 a few panels before a streamed
    kernel's contraction ends (the per-kernel ``prefetch`` key): for z alone, y and z, and all three
    kernels, at each distance of STREAM_PREFETCH (the kernels outside the set prefetch nothing, even
    where the schedule's table has them prefetch). At p = 511 the z kernel's DMULs and DADDs of the
    epilogue wait on those loads for 23 % of its stall samples against 7 % in y (ncu source
    counters, session 14 call 5)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = []
    for ahead in STREAM_PREFETCH:
        if ahead > base.nq // base.k_panel:
            continue
        for dirs in ((2,), (1, 2), (0, 1, 2)):
            kernels = tuple(dataclasses.replace(k, prefetch=ahead if k.dirs[0] in dirs else None) for k in base.kernels)
            options.append(dataclasses.replace(base, kernels=kernels))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_operand_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The other A operand for the y kernel, the z kernel or both (the per-kernel ``a_operand`` key;
    x and the table kept): "product" forms q*vel once per staged element, where "factors" forms it
    at every fragment load on the FP64 pipe the DMMAs use. At p = 511 those DMULs hold 31-39 % of the
    y and z kernels' stall samples (ncu source counters, session 14 call 5); the table-level switch
    was measured on one tile for all three kernels (stream_refine), never on the y and z tiles alone."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    other = "product" if base.a_operand == "factors" else "factors"
    options = []
    for dirs in ((2,), (1,), (1, 2)):
        kernels = tuple(dataclasses.replace(k, a_operand=other) if k.dirs[0] in dirs else k for k in base.kernels)
        options.append(dataclasses.replace(base, kernels=kernels))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_persistent_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Persistent blocks (the per-kernel ``persistent`` key) for the x, y or z kernel alone and for all
    three: one continuous cp.async pipeline over a block's tiles, the next tile's first panels loading
    during this tile's epilogue. A one-tile block fills STAGES - 1 panels before its first MMA and
    runs its epilogue with nothing in flight; at p = 511 and 767 the FUSED_TC16 kernels keep two
    4-warp blocks per SM and reach 66-74 % of the tensor pipe where cuBLAS's GEMMs reach 94 % (ncu,
    session 9 call 2b; section 4)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = []
    for dirs in ((0,), (1,), (2,), (0, 1, 2)):
        kernels = tuple(dataclasses.replace(k, persistent=True) if k.dirs[0] in dirs else k for k in base.kernels)
        options.append(dataclasses.replace(base, kernels=kernels))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


#: Blocks per SM the stream_copies family asks ptxas to fit (``min_blocks``) on top of the table's.
STREAM_COPIES_BLOCKS = (3,)


def stream_copies_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The copy program and its place in the panel iteration: pointer copies (``copies = "pointers"``)
    with the copies after the barrier or after the first MMA k-step (``copy_issue``), the table's own
    copy loops after the first k-step, and the pointer copies compiled for one more resident block
    per SM (``min_blocks``; with the registers they free, the p = 767 y and z kernels drop from 254
    and 214 to 176 registers). Why: the p = 767 FUSED_TC16 kernels keep the tensor pipe 62-74 % busy
    where cuBLAS's GEMMs of the same tile keep it 93-94 % busy at the same occupancy, issuing 5.0
    instructions per DMMA against cuBLAS's 3.4 (ncu, session 9 call 2b): about 37 of the hot loop's
    155 instructions per 32 DMMAs re-derive the copies' 64-bit addresses, all of them between the
    panel's barrier and its first fragment load (SASS)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = [dataclasses.replace(base, copies="pointers"),
               dataclasses.replace(base, copies="pointers", copy_issue="mma"),
               dataclasses.replace(base, copy_issue="mma")]
    for blocks in STREAM_COPIES_BLOCKS:
        if blocks > (base.min_blocks or 2):
            options += [dataclasses.replace(c, min_blocks=blocks) for c in options[:2]]
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_shape_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The table on the variant's other MMA shapes (FUSED_TC16: 16x8x8 for 16x8x4), with the table's
    copies and with each copy program of the stream_copies family. Why: cuBLAS's DGEMM kernels of the
    p = 767 GEMMs (sm90_xmma_gemm_f64..._tilesize64x128x16_stage3_warpsize2x2x1_tensor16x8x8, the same
    32 x 64 warp tile on 128 threads) issue DMMA.16x8x8, half the MMA instructions and accumulator
    reads and writes per FLOP of the fused kernels' 16x8x4, and keep the tensor pipe 93-94 % busy where
    those reach 66-74 %; the paired fragment loads hold exactly the m16n8k8 A and B fragments (k indices
    t and t + 4 of an octet), and the tuned streamed tables were never run on the wider shape."""
    base = _family_base(variant, order, "stream", tensor_core=True)
    if base is None:
        return []
    options = []
    for shape in ALLOWED_MMA[variant]:
        if shape == base.mma:
            continue
        wide = dataclasses.replace(base, mma=shape)
        options += [wide, dataclasses.replace(wide, copies="pointers", copy_issue="mma"),
                    dataclasses.replace(wide, copies="pointers", copy_issue="barrier"),
                    dataclasses.replace(wide, copy_issue="mma")]
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_l2_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Fewer L2 tag lookups and whole-line DRAM fetches for a streamed table's copies: D from its
    k-panel copy (``d_layout = "panels"``: one contiguous run of whole lines per panel where D's
    rows give 64-byte pieces at k_panel = 8, two tag lookups per line) and the copies' L2 fetch-size
    hint (``l2_fetch``, the LTC128B of cuBLAS's DGEMM copies), each alone and together, the table
    otherwise kept. Why: ncu (session 16 call 3) binds the p = 767 y and z kernels of the 16x8x8
    table by L2 tag lookups (80 %, 74 %), and at k_panel = 8 D's 64-byte row pieces are two thirds
    of a y or z panel's lookups (128 against 64 for q and vel)."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    options = [dataclasses.replace(base, d_layout=d_layout, l2_fetch=fetch)
               for d_layout in D_LAYOUTS for fetch in L2_FETCH]
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


#: stream_kpanel: the panel widths and depths tried (those whose shared memory fits).
STREAM_KPANEL_WIDTHS = (8, 16)


def stream_kpanel_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """A streamed table's panel width and pipeline depth (STREAM_KPANEL_WIDTHS x STREAM_LINES_STAGES)
    with every other key kept, its copy program included (stream_lines and stream_refine reset the
    copies to the unrolled loops, which the pointer-copy tables do not use). Why: at k_panel = 8 an x
    kernel's F rows and every D row are 64-byte pieces, two L2 tag lookups per 128-byte line, and ncu
    binds the p = 255 16x8x8 kernels by L2 tag lookups (63-72 %, session 17 call 1); 16-wide panels
    halve the lookups per byte and the barriers per k-value, at twice the shared memory per stage."""
    base = _family_base(variant, order, "stream")
    if base is None:
        return []
    mk = base.mma_shape.k
    options = [dataclasses.replace(base, k_panel=k_panel, stages=stages)
               for k_panel in STREAM_KPANEL_WIDTHS if k_panel % mk == 0 and base.nq % k_panel == 0
               for stages in STREAM_LINES_STAGES]
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def stream_transfer_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The streamed tables the other orders' schedules ship for ``variant``, transplanted to
    ``order`` (block tile, warp tile, pipeline, every streamed switch), where they fit: a winner
    found at one order is the first thing to try at its neighbours (the sweeps so far varied each
    order's table around itself only)."""
    base = _family_base(variant, order, None, tensor_core=True)
    if base is None:
        return []
    options = []
    for other in sorted(SUPPORTED_ORDERS[variant] - {order}):
        donor = fused_config(variant, other)
        if donor.volume != "stream":
            continue
        if (any(base.nq % extent for k in donor.kernels for extent in k.box) or base.nq % donor.k_panel
                or donor.stages > base.nq // donor.k_panel):
            continue  # its tiles or its pipeline do not divide this order's Nq
        options.append(dataclasses.replace(donor, order=order))
    return [(label(c), c) for c in dict.fromkeys(options) if c != base and _fits(c)]


def shape_twin(source: FusedConfig, mma: str = "16x8x4") -> FusedConfig | None:
    """FUSED_TC's table ``source`` as a FUSED_TC16 table on ``mma``: every warp tile's WM halved (a
    16-row MMA covers the lines of two 8-row ones), the rest of the table, compiler included, kept.
    None when a warp tile has an odd WM (its lines are not a whole number of 16-row MMAs).

    Why: the model's shape transfer (issue 15) predicts a 16-row binary from an 8-row binary's
    counters. The shipped FUSED_TC16 tables were tuned apart from FUSED_TC's (other warp tiles,
    threads, trace sources, compilers), so a transfer onto them carries the schedule difference too;
    the twin differs from its source only in the MMA shape, the paper's preferred-shape transfer."""
    if source.variant != "FUSED_TC" or source.mma != "8x8x4":
        raise ComposerError(f"a shape twin is made from an 8x8x4 FUSED_TC table, not {source.variant} {source.mma}")
    if any(k.tile[0] % 2 for k in source.kernels):
        return None
    kernels = tuple(dataclasses.replace(k, tile=(k.tile[0] // 2, k.tile[1])) for k in source.kernels)
    return dataclasses.replace(source, variant="FUSED_TC16", mma=mma, kernels=kernels)


def shape_twin_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """FUSED_TC16 only: the order's FUSED_TC table on each of FUSED_TC16's shapes (``shape_twin``:
    16x8x4, 16x8x8), where it fits. Session 20 ran them as the model's shape-transfer targets; the
    p = 15 twin on 16x8x8 ran 473.7 us beside FUSED_TC's 476.7 and the shipped FUSED_TC16's 480.4."""
    if variant != "FUSED_TC16" or order not in SUPPORTED_ORDERS["FUSED_TC"]:
        return []
    source, shipped = fused_config("FUSED_TC", order), fused_config(variant, order)
    twins = [shape_twin(source, mma) for mma in ALLOWED_MMA[variant]]
    return [(label(t), t) for t in twins if t is not None and t != shipped and _fits(t)]


def box_shape_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """FUSED_TC16's box-kernel table on its other MMA shapes (16x8x8 for 16x8x4 and back), the rest of
    the table kept: session 20's p = 31 twin ran 3.3 % faster on 16x8x8 than on 16x8x4 (533.6 against
    551.9 us), so the shape is worth a row at the other box orders (the streamed tables have
    ``stream_shape_candidates``)."""
    if variant != "FUSED_TC16" or order not in SUPPORTED_ORDERS[variant]:
        return []
    base = fused_config(variant, order)
    if base.volume != "box":
        return []
    options = [dataclasses.replace(base, mma=mma) for mma in ALLOWED_MMA[variant] if mma != base.mma]
    return [(label(c), c) for c in options if _fits(c)]


#: Orders the cluster family is generated for: those whose whole k-plane of q*u and q*v (2 Nq^2
#: doubles, 256 KiB at p = 127) no longer fits one block, so that x and y in one kernel need a
#: thread-block cluster to hold it (below, the box kernels' "xy" boxes already do it in one block).
CLUSTER_FROM = 127
#: (cluster sizes, D panels) the family tries.
CLUSTER_SIZES_TRIED = (2, 4, 8)
CLUSTER_PANELS = (16, 32)
#: xy tables of the family also tried with the fluxes formed inline.
CLUSTER_INLINE = 4


def _z_box_kernels(variant: str, order: int) -> list[KernelConfig]:
    """Box-kernel z tables to pair with a clustered xy kernel: the z kernel of the order's box
    schedule (the variant's own, else FUSED_TC's) first, then boxes of whole z lines over 1-2 j rows
    and 16-32 i columns with 256 or 512 threads (at p >= 255 every shipped table is streamed)."""
    nq = order + 1
    out = [k for v in dict.fromkeys((variant, "FUSED_TC")) for k in fused_config(v, order).kernels
           if fused_config(v, order).volume == "box" and k.dirs == (2,)]
    for box in ((nq, 2, 16), (nq, 1, 32), (nq, 1, 16)):
        for threads in (256, 512):
            for tile in ((2, 2), (1, 2), (1, 4)):
                out.append(KernelConfig((2,), box, threads, tile))
    return list(dict.fromkeys(out))


def cluster_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """x and y in one box kernel over whole k-planes held by a thread-block cluster (sm_90), then z:
    the xy|z decomposition at the orders where a plane outgrows one block (issue 16: its byte floor,
    382 us at p = 127 with the face array, is under the 450-us target; the shipped x|y|z's is 477).
    Each block holds 1/c of the plane's j rows (box [1, Nq/c, Nq]) and reads the other ranks' rows of
    q*v through distributed shared memory for the y contraction; D staged in panels; the face array,
    and on the first CLUSTER_INLINE xy tables the fluxes formed inline. The xy kernel's
    variations run with the first z kernel that fits, the z kernel's with the first xy kernel (the
    two kernels do not interact; a full product would be several hundred GPU trials)."""
    if order < CLUSTER_FROM or variant not in ("FUSED_TC", "FUSED_TC16") or order not in SUPPORTED_ORDERS[variant]:
        return []
    nq = order + 1
    shape = "8x8x4" if variant == "FUSED_TC" else "16x8x4"

    def config(xy: KernelConfig, z: KernelConfig, panel: int, flux: str = "array") -> FusedConfig:
        return FusedConfig(variant, order, flux, (xy, z), shape, d_stage="smem", d_panel=panel)

    xys = [(KernelConfig((0, 1), (1, nq // cluster, nq), threads, tile, cluster=cluster), panel)
           for cluster in CLUSTER_SIZES_TRIED if nq % cluster == 0
           for threads in (256, 512) for tile in ((1, 2), (2, 2), (2, 4), (4, 2), (4, 4))
           for panel in CLUSTER_PANELS]
    zs = _z_box_kernels(variant, order)
    # the first z kernel that fits beside some xy kernel (the shipped box z where there is one)
    z0 = next((z for z in zs if any(_fits(config(xy, z, panel)) for xy, panel in xys)), None)
    if z0 is None:
        return []
    fitting = [(xy, panel, z0) for xy, panel in xys if _fits(config(xy, z0, panel))]
    xy0, panel0, _ = fitting[0]
    out = [config(xy, z, panel) for xy, panel, z in fitting]
    out += [config(xy0, z, panel0) for z in zs if _fits(config(xy0, z, panel0))]
    # the fluxes formed inline (no face kernel, no face array: the 360-us floor at p = 127 against
    # 382) on the first few xy tables
    out += [config(xy, z, panel, "inline") for xy, panel, z in fitting[:CLUSTER_INLINE]]
    return [(label(c), c) for c in dict.fromkeys(out)]


#: Orders of the ``xyz_cluster`` family and the cluster sizes it splits the element's k axis into: each block
#: holds Nq / c k-planes, at least the MMA's 8 output positions of the z contraction (a cluster of 4 at
#: p = 15 or 8 at p = 31 would leave 4; the split contraction's N dimension is the positions), and the
#: element's three flux tiles fit c blocks (p = 31 on 2 would need 393 KB each).
XYZ_CLUSTER_SIZES = {15: (2,), 31: (4,)}


def xyz_cluster_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """All three directions in one box kernel over a whole element held by a thread-block cluster
    (sm_90): each block stages 1/c of the element's k-planes of q*u, q*v and q*w (box [Nq/c, Nq, Nq]),
    contracts x and y locally and z over the whole k axis, reading the other ranks' q*w planes through
    distributed shared memory. Why: at p = 31 the shipped xy|z split writes dqdt and reads it back and
    reads q twice (byte floor 394 us on the H200); one kernel over the element reads every input once
    (283 us), but the element's three flux tiles (768 KB) need four SMs. At p = 15 the whole element fits
    one block (one or, swizzled, two per SM); a cluster of 2 holds three blocks per SM."""
    sizes = XYZ_CLUSTER_SIZES.get(order)
    if sizes is None or variant not in ("FUSED_TC", "FUSED_TC16") or order not in SUPPORTED_ORDERS[variant]:
        return []
    nq = order + 1
    shapes = ALLOWED_MMA[variant]
    out = []
    for cluster in sizes:
        for mma in shapes:
            # 1024 threads: one block per SM at p = 31 (224 KB) holds 32 warps instead of 16 (session 28 call 4: 512
            # threads ran 843-877 us against 940-970 at 256, the shipped tables 616-637 on an H100)
            for threads in (256, 512, 1024):
                for tile in ((1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (2, 4)):
                    kernel = KernelConfig((0, 1, 2), (nq // cluster, nq, nq), threads, tile, cluster=cluster)
                    for swizzle in (False, True):
                        config = FusedConfig(variant, order, "inline", (kernel,), mma, d_stage="smem",
                                             pair_io=True, tile_swizzle=swizzle)
                        if _fits(config):
                            out.append(config)
    return [(label(c), c) for c in dict.fromkeys(out)]


def xyz_cluster_refine_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Around the xyz_cluster family's p = 15 winners on an H100 (session 28 call 4: clusters of 2, 256
    threads, swizzled tiles, 0.907-0.908 x the shipped tables): their two warp tiles at register caps
    of three and four blocks per SM and with the metric weights early or late, on each MMA shape."""
    if order != 15 or variant not in ("FUSED_TC", "FUSED_TC16") or order not in SUPPORTED_ORDERS[variant]:
        return []
    nq = order + 1
    out = []
    for mma in ALLOWED_MMA[variant]:
        for tile in ((2, 1), (1, 1)):
            kernel = KernelConfig((0, 1, 2), (nq // 2, nq, nq), 256, tile, cluster=2)
            for min_blocks in (0, 3, 4):
                for weights in ("", "early", "late"):
                    config = FusedConfig(variant, order, "inline", (kernel,), mma, d_stage="smem", min_blocks=min_blocks,
                                         pair_io=True, tile_swizzle=True, weights=weights)
                    if _fits(config):
                        out.append(config)
            # the x faces formed from the staging pairs (each block holds whole x lines), no x gathers
            config = FusedConfig(variant, order, "inline", (kernel,), mma, d_stage="smem", pair_io=True,
                                 tile_swizzle=True, traces="xfaces")
            if _fits(config):
                out.append(config)
            # the cluster split along y (z contracted locally, y across the pair) or along x (its box rows of
            # Nq / 2 doubles too narrow for the swizzle): the same tiles, another axis through the peers
            for dirs, box in (((0, 2, 1), (nq, nq // 2, nq)), ((1, 2, 0), (nq, nq, nq // 2))):
                split = KernelConfig(dirs, box, 256, tile, cluster=2)
                for swizzle in (True, False):
                    config = FusedConfig(variant, order, "inline", (split,), mma, d_stage="smem", pair_io=True,
                                         tile_swizzle=swizzle)
                    if _fits(config):
                        out.append(config)
                        break
    return [(label(c), c) for c in dict.fromkeys(out)]


def trace_cluster_form(config: FusedConfig, size: int) -> FusedConfig | None:
    """``config`` as a trace cluster of ``size`` consecutive elements (None where it cannot be one): one
    element per block without bricks (``_grouping_base``), every kernel a whole unclustered element box,
    the face traces from the staged tiles, the index maps read again, no restaged flux tiles (they read the
    interior traces from a tile the cluster's peers also read). Why the maps: a cluster
    takes its neighbours' traces from their tiles through distributed shared memory, and the keys that
    drop vmapM/vmapP (``interior_maps``/``exterior_maps = false``, the shipped p = 7 tables since
    sessions 31-36) need traces read from global memory; a split-axis table (p = 15's clusters of
    ``box = [8, 16, 16]``) is taken as its whole-element form. Streamed and separate-flux tables have no
    such form."""
    if config.volume != "box" or config.flux != "inline" or any(len(k.dirs) != 3 for k in config.kernels):
        return None
    whole = (config.nq,) * 3
    base = _grouping_base(config)
    kernels = tuple(dataclasses.replace(k, box=whole, cluster=1, descending=False) for k in base.kernels)
    # and the keys that order or hand out a block's elements otherwise (chunks, side queues) off
    return dataclasses.replace(base, kernels=kernels, traces="tiles", trace_cluster=size, elements_per_block=1,
                               interior_maps=True, exterior_maps=True, flux_tiles=0, chunk_elements=0,
                               side_queues=False)


def trace_cluster_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The order's whole-element schedule (p = 7, 15) with its exterior face traces taken from the
    neighbours' staged tiles in thread-block clusters of 2, 4 or 8 consecutive elements (issue 16's
    p = 7 direction: the x-face gathers, 8-byte reads 64 bytes apart, bind L1 and L2 there)."""
    if order not in SUPPORTED_ORDERS[variant]:
        return []
    base = fused_config(variant, order)
    found = [trace_cluster_form(base, size) for size in (2, 4, 8)]
    return [(label(c), c) for c in found if c is not None and _fits(c)]


#: The candidate families `composer sweep-fused check --subset` runs (each with the schedule's own
#: table first, as "base"); "all" is :func:`candidates`.
FAMILIES = {"staged": staged_candidates, "traces": trace_candidates, "wide": wide_candidates,
            "strip": strip_candidates, "stream": stream_candidates, "stream_refine": stream_refine_candidates,
            "stream_lines": stream_lines_candidates, "stream_paired": stream_paired_candidates,
            "stream_order": stream_order_candidates, "stream_transfer": stream_transfer_candidates,
            "stream_axis": stream_axis_candidates, "stream_yz": stream_yz_candidates,
            "stream_depth": stream_depth_candidates, "stream_x": stream_x_candidates,
            "stream_prefetch": stream_prefetch_candidates, "stream_operand": stream_operand_candidates,
            "stream_persistent": stream_persistent_candidates, "stream_copies": stream_copies_candidates,
            "stream_shape": stream_shape_candidates, "stream_l2": stream_l2_candidates,
            "stream_kpanel": stream_kpanel_candidates,
            "cluster": cluster_candidates, "trace_cluster": trace_cluster_candidates,
            "flux_tiles": flux_tile_candidates, "pair_io": pair_io_candidates,
            "l2_keep": l2_keep_candidates, "shape_twin": shape_twin_candidates,
            "box_shape": box_shape_candidates, "xfaces": xface_candidates, "budget": budget_candidates,
            "x_pairs": x_pair_candidates, "x_chain": x_chain_candidates, "tile_swizzle": tile_swizzle_candidates, "chunks": chunk_candidates,
            "xyz_cluster": xyz_cluster_candidates, "element_order": element_order_candidates,
            "local_interior": local_interior_candidates, "face_links": face_links_candidates, "carveout": carveout_candidates, "brick_refine": brick_refine_candidates, "pair_bricks": pair_bricks_candidates,
            "descending": descending_candidates, "xyz_cluster_refine": xyz_cluster_refine_candidates,
            "side_queues": side_queue_candidates, "parity": parity_candidates}
SUBSETS = ("all", *FAMILIES)


def candidate_list(variant: str, order: int, subset: str, only: str | None = None) -> list[tuple[str, FusedConfig]]:
    """The schedule's table ("base") and the candidates of ``subset``: "all", one family, or several
    joined by commas (each table once, in the families' order); ``only``: a regular expression the
    other candidates' labels must match (the base is always kept, as the run times against it)."""
    if subset == "all":
        found = candidates(variant, order)
    else:
        base = fused_config(variant, order)
        found = [("base", base)]
        seen = {base}
        for family in subset.split(","):
            for name, cfg in FAMILIES[family](variant, order):
                if cfg not in seen:
                    seen.add(cfg)
                    found.append((name, cfg))
    if only is not None:
        pattern = re.compile(only)
        found = [c for c in found if c[0] == "base" or pattern.search(c[0])]
    return found


def check_subset(subset: str) -> str:
    """``subset`` if every family it names exists (ComposerError naming the first that does not)."""
    for family in subset.split(","):
        if family not in SUBSETS:
            raise ComposerError(f"unknown subset {family!r}; known: {', '.join(SUBSETS)}")
    if "all" in subset.split(",") and subset != "all":
        raise ComposerError('subset "all" cannot be joined with families')
    return subset


def _set_switches(config: FusedConfig) -> list[tuple[str, str]]:
    """(key, value) of the streamed-kernel switches ``config`` sets away from their defaults."""
    return [(key, getattr(config, key)) for key, choices in STREAM_SWITCHES.items()
            if getattr(config, key) != choices[0]]


def _stream_tile(k: KernelConfig) -> tuple:
    """A streamed kernel's (lines, positions, threads, warp tile, own numbering and depth), whichever
    direction it carries."""
    d = k.dirs[0]
    return (box_lines(k.box, d), k.box[2 - d], k.threads, tuple(k.tile), k.block_order, k.stages, k.prefetch,
            k.a_operand, k.persistent)


def label(config: FusedConfig) -> str:
    k = config.kernels[0]
    mma = f"@{config.mma}" if config.mma else ""
    extra = ""
    if config.d_stage != "global":
        extra += f" D{config.d_stage}" + (f"{config.d_panel}" if config.d_panel else "")
    if config.min_blocks:
        extra += f" mb{config.min_blocks}"
    if config.flux == "inline" and config.order >= 63:
        extra += " inline"
    if config.traces != "global":
        extra += f" M{config.traces}"
    if config.elements_per_block > 1:
        extra += f" epb{config.elements_per_block}"
    if config.trace_cluster > 1:
        extra += f" tc{config.trace_cluster}"
    if config.flux_tiles:
        extra += f" ft{config.flux_tiles}"
    if config.pair_io:
        extra += " pio"
    if config.l2_keep:
        extra += " keep"
    if config.weights:
        extra += f" W{config.weights}"
    if config.x_pairs:
        extra += " xpairs"
    if config.x_chain:
        extra += " xchain"
    if config.x_prefetch:
        extra += " xpf"
    if config.tile_swizzle:
        extra += " swz"
    if config.chunk_elements:
        extra += f" chunk{config.chunk_elements}"
    if config.element_bricks:
        extra += " eb" + "x".join(map(str, config.element_bricks))
    if not config.interior_maps:
        extra += " noM"
    if not config.exterior_maps:
        extra += " noP"
    if config.carveout is not None:
        extra += f" cv{config.carveout}"
    if any(k.descending for k in config.kernels):
        extra += " down:" + ",".join(k.dir_names for k in config.kernels if k.descending)
    if config.side_queues:
        extra += " sideq"
    if config.parity:
        extra += " parity"
    if config.volume == "stream":
        extra += f" stream kp{config.k_panel} s{config.stages}"
    for key, value in _set_switches(config):  # tagged by the key's initial: " Aproduct", " Cunrolled", ...
        extra += f" {'I' if key == 'copy_issue' else key[0].upper()}{value}"  # copy_issue: " Imma"
    for n, other in enumerate(config.kernels):
        if other.cluster > 1:  # a clustered kernel names itself: the label must tell the candidates apart
            extra += f" k{n}:{other.dir_names}{list(other.box)}c{other.cluster}t{other.threads}{list(other.tile)}"
    if config.volume == "stream" and (len({_stream_tile(o) for o in config.kernels}) > 1
                                      or any(o.block_order or o.stages or o.prefetch or o.a_operand
                                             or o.persistent for o in config.kernels)):
        extra += " | " + " ".join(f"{o.dir_names}{list(o.box)}t{o.threads}{list(o.tile)}"
                                  + (f"B{o.block_order}" if o.block_order else "")
                                  + (f"/s{o.stages}" if o.stages else "")
                                  + (f"/pf{o.prefetch}" if o.prefetch else "")
                                  + (f"/A{o.a_operand}" if o.a_operand else "")
                                  + ("/P" if o.persistent else "") for o in config.kernels)
    if any(c.cluster > 1 for c in config.kernels) and any(c.cluster == 1 for c in config.kernels):
        extra += " | " + " ".join(f"{o.dir_names}{list(o.box)}t{o.threads}{list(o.tile)}"
                                  for o in config.kernels if o.cluster == 1)
    return f"{config.variant}{mma} box{list(k.box)} t{k.threads} tile{list(k.tile)}{extra}"


def to_table(config: FusedConfig) -> str:
    """The ``[paths.<variant>]`` TOML table of ``config``."""
    lines = [f"[paths.{config.variant}]", f'flux = "{config.flux}"']
    if config.mma:
        lines.append(f'mma = "{config.mma}"')
    if config.d_stage != "global":
        lines.append(f'd_stage = "{config.d_stage}"')
    if config.d_panel:
        lines.append(f"d_panel = {config.d_panel}")
    if config.min_blocks:
        lines.append(f"min_blocks = {config.min_blocks}")
    if config.traces != "global":
        lines.append(f'traces = "{config.traces}"')
    if config.elements_per_block > 1:
        lines.append(f"elements_per_block = {config.elements_per_block}")
    if config.trace_cluster > 1:
        lines.append(f"trace_cluster = {config.trace_cluster}")
    if config.flux_tiles:
        lines.append(f"flux_tiles = {config.flux_tiles}")
    if config.pair_io:
        lines.append("pair_io = true")
    if config.l2_keep:
        lines.append("l2_keep = true")
    if config.weights:
        lines.append(f'weights = "{config.weights}"')
    if config.x_pairs:
        lines.append("x_pairs = true")
    if config.x_chain:
        lines.append("x_chain = true")
    if config.x_prefetch:
        lines.append("x_prefetch = true")
    if config.tile_swizzle:
        lines.append("tile_swizzle = true")
    if config.chunk_elements:
        lines.append(f"chunk_elements = {config.chunk_elements}")
    if config.element_bricks:
        lines.append(f"element_bricks = {list(config.element_bricks)}")
    if not config.interior_maps:
        lines.append("interior_maps = false")
    if not config.exterior_maps:
        lines.append("exterior_maps = false")
    if config.carveout is not None:
        lines.append(f"carveout = {config.carveout}")
    if config.side_queues:
        lines.append("side_queues = true")
    if config.parity:
        lines.append("parity = true")
    if config.nvrtc:
        lines.append(f'nvrtc = "{config.nvrtc}"')
    if config.volume != "box":
        lines += [f'volume = "{config.volume}"', f"k_panel = {config.k_panel}", f"stages = {config.stages}"]
    lines += [f'{key} = "{value}"' for key, value in _set_switches(config)]
    lines.append("kernels = [")
    for k in config.kernels:
        cluster = f", cluster = {k.cluster}" if k.cluster > 1 else ""
        numbering = f', block_order = "{k.block_order}"' if k.block_order else ""
        depth = f", stages = {k.stages}" if k.stages else ""
        ahead = f", prefetch = {k.prefetch}" if k.prefetch else ""
        operand = f', a_operand = "{k.a_operand}"' if k.a_operand else ""
        persistent = ", persistent = true" if k.persistent else ""
        down = ", descending = true" if k.descending else ""
        lines.append(f'  {{ dirs = "{k.dir_names}", box = {list(k.box)}, threads = {k.threads}, '
                     f"tile = {list(k.tile)}{cluster}{numbering}{depth}{ahead}{operand}{persistent}{down} }},")
    lines.append("]")
    return "\n".join(lines)
