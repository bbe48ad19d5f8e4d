"""CPU tests of the streamed volume kernel (``volume = "stream"``, ``fused_stream.cu.j2``).

The emulator executes the kernel's panel copies (every 16-byte pair to its own slots) and its MMA
fragments lane by lane, so a wrong index shows up here as a wrong number instead of on the GPU;
the compile tests check the instructions each variant promises (DMMA shape, no DFMA in FUSED_TC*,
no DMMA in FUSED_DFMA), without spills, and the parser's clear errors.
"""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from composer import dg
from composer.arch.limits import DEFAULT_ARCH, arch_limits
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import StreamPlan, build, kernel_plans
from composer.fused.candidates import (
    _fits,
    candidates,
    stream_box,
    stream_candidates,
    stream_refine_candidates,
    to_table,
)
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import emulate, stage_stream_panel
from tests.test_fused_cpu import _sass, needs_nvrtc


def _stream_table(mma: str, lines: int, positions: int, threads: int, tile: list[int], k_panel: int = 8,
                  stages: int = 2, a_operand: str = "factors", **keys: str) -> dict:
    return {"flux": "array", "mma": mma, "volume": "stream", "k_panel": k_panel, "stages": stages,
            **({"a_operand": a_operand} if a_operand != "factors" else {}), **keys,
            "kernels": [{"dirs": "xyz"[d], "box": list(stream_box(d, lines, positions)), "threads": threads,
                         "tile": tile} for d in (1, 0, 2)]}  # y first: the first kernel writes dqdt


# (variant, mma, lines, positions, threads, warp tile, k_panel, stages, A operand) at p = 31: one
# and several work units per warp, partial and whole axes, several pipelines, every MMA shape,
# both A operands.
SMALL = [
    ("FUSED_TC16", "16x8x4", 32, 16, 64, [1, 2], 8, 2, "factors"),
    ("FUSED_TC16", "16x8x4", 32, 16, 64, [1, 2], 8, 2, "product"),
    ("FUSED_TC16", "16x8x4", 16, 32, 32, [1, 2], 4, 4, "factors"),
    ("FUSED_TC16", "16x8x4", 16, 32, 32, [1, 2], 4, 4, "product"),
    ("FUSED_TC16", "16x8x8", 32, 16, 64, [2, 1], 8, 3, "product"),
    ("FUSED_TC", "8x8x4", 32, 16, 64, [2, 1], 16, 2, "factors"),
    ("FUSED_TC", "8x8x4", 16, 32, 128, [1, 1], 8, 4, "factors"),
    ("FUSED_TC", "8x8x4", 32, 32, 64, [2, 2], 8, 3, "product"),
]
SMALL_ARGS = "variant,mma,lines,positions,threads,tile,k_panel,stages,a_operand"


@pytest.mark.parametrize(SMALL_ARGS, SMALL)
def test_emulated_stream_matches_reference(variant, mma, lines, positions, threads, tile, k_panel, stages,
                                           a_operand) -> None:
    order, grid = 31, (1, 2, 1)
    config = parse_table(variant, order, _stream_table(mma, lines, positions, threads, tile, k_panel, stages,
                                                       a_operand))
    assert all(isinstance(p, StreamPlan) for p in kernel_plans(config)) and _fits(config)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


# The SMALL tables that paired fragment loads take (k-octets; y/z warp tiles of an even number of
# 8-row groups), plus an 8x8x4 table whose y/z rows pair across two warp tiles.
PAIRED = [row for row in SMALL if row[6] % 8 == 0 and row[5][0] * int(row[1].split("x")[0]) // 8 % 2 == 0] + [
    ("FUSED_TC", "8x8x4", 32, 16, 64, [2, 2], 8, 2, "product"),
]


@pytest.mark.parametrize(SMALL_ARGS, PAIRED)
def test_emulated_paired_fragments_match_reference(variant, mma, lines, positions, threads, tile, k_panel, stages,
                                                   a_operand) -> None:
    """fragments = "paired": the 16-byte loads (k-octet columns permuted, y/z rows paired), emulated
    as the template issues them, give the reference tendency; the strides suit the 16-byte loads."""
    from composer.fused.builder import paired_stride

    order, grid = 31, (1, 2, 1)
    config = parse_table(variant, order, _stream_table(mma, lines, positions, threads, tile, k_panel, stages,
                                                       a_operand, fragments="paired"))
    plans = kernel_plans(config)
    assert all(p.paired for p in plans) and _fits(config)
    for p in plans:
        assert p.ds % 16 == 8 and p.fs == paired_stride(p.k_panel if p.dir == 0 else p.lines(p.dir),
                                                        "rows" if p.dir == 0 else "lines")
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


@pytest.mark.parametrize("direction", [0, 1, 2])
def test_paired_fragment_loads_are_conflict_free(direction: int) -> None:
    """Each quarter-warp's 16-byte A and B fragment loads (8 lanes, one pass of 128 bytes) cover
    the 32 banks exactly once, for every k-octet index pattern the template issues."""
    config = parse_table("FUSED_TC16", 63, _stream_table("16x8x4", 32, 32, 64, [2, 2], 16, 2,
                                                         fragments="paired"))
    plan = next(p for p in kernel_plans(config) if p.dir == direction)
    for quarter in range(4):
        lane = np.arange(8 * quarter, 8 * quarter + 8)
        g, t = lane // 4, lane % 4
        for j in range(2 if direction else 1):
            line = 2 * g if direction else g  # rho = 0: lines 2g, 2g + 1 (y, z) or line g (x)
            a_off = line * plan.fs + 2 * t if direction == 0 else (2 * t + j) * plan.fs + line
            b_off = g * plan.ds + 2 * t
            for off in (a_off, b_off):
                assert np.all(off % 2 == 0)
                banks = {(2 * o + w) % 32 for o in off for w in range(4)}  # 16 bytes: 4 banks
                assert len(banks) == 32, (direction, quarter, off)


@pytest.mark.parametrize("row", [0, 2, 5])
def test_d_panel_copy_reads_d_with_the_kernels_index(row: int) -> None:
    """d_layout = "panels": the regrouped copy holds D[a][p * KP + m] at ((p * NQ + a) * KP + m),
    the index stage_d() uses, and the emulated kernels reading it match the reference."""
    from composer.fused.builder import d_panel_layout

    dmat = dg.diff_matrix(31)
    flat = d_panel_layout(dmat, 8).reshape(-1)
    p, m = np.meshgrid(np.arange(4), np.arange(8), indexing="ij")
    assert np.array_equal(flat[(p * 32 + row) * 8 + m], dmat[row, p * 8 + m])
    assert sorted(flat) == sorted(dmat.reshape(-1))
    order, grid = 31, (1, 2, 1)
    table = dict(_stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2), d_layout="panels", copies="unrolled")
    config = parse_table("FUSED_TC16", order, table)
    assert all(p.d_panels and p.unrolled for p in kernel_plans(config))
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


@pytest.mark.parametrize("direction", [0, 1, 2])
def test_stream_panels_fill_and_fragments_conflict_free(direction: int) -> None:
    """Every panel slot a fragment reads is written by exactly one copy, and the A (q*vel) and B (D)
    fragment loads of each half-warp hit 16 distinct 8-byte banks."""
    config = parse_table("FUSED_TC16", 63, _stream_table("16x8x4", 32, 32, 128, [1, 2], 8, 2))
    plan = next(p for p in kernel_plans(config) if p.dir == direction)
    nq = plan.nq
    rng = np.random.default_rng(0)
    qe, ve, dmat = rng.random(nq**3), rng.random(nq**3), rng.random((nq, nq))
    buf = stage_stream_panel(plan, qe, ve, dmat, 1, 0, 0, 0, 0)
    nl, na, fs, ds, fp = plan.lines(direction), plan.positions(direction), plan.fs, plan.ds, plan.f_panel
    m, l = np.meshgrid(np.arange(plan.k_panel), np.arange(nl), indexing="ij")
    f_off = l * fs + m if direction == 0 else m * fs + l
    assert not np.isnan(buf[f_off]).any() and not np.isnan(buf[fp + f_off]).any()
    a, m = np.meshgrid(np.arange(na), np.arange(plan.k_panel), indexing="ij")
    assert np.array_equal(buf[2 * fp + a * ds + m], dmat[a, plan.k_panel + m])
    lane = np.arange(16)
    g, t = lane // 4, lane % 4
    a_banks = (g * fs + t if direction == 0 else t * fs + g) % 16
    b_banks = (g * ds + t) % 16
    assert len(set(a_banks)) == 16 and len(set(b_banks)) == 16


@pytest.mark.parametrize("order", [255, 511, 767])
@pytest.mark.parametrize("variant", ["FUSED_TC", "FUSED_TC16"])
def test_stream_candidates_are_schedule_tables(variant: str, order: int) -> None:
    """Every streamed candidate of every streamed family fits (shared memory, warp tiling, paired
    row groups) and round-trips through TOML."""
    from composer.fused.candidates import FAMILIES

    found = stream_candidates(variant, order) + stream_refine_candidates(variant, order)
    assert found
    for family in ("stream_lines", "stream_paired", "stream_order", "stream_transfer", "stream_axis", "stream_yz", "stream_depth", "stream_x",
                   "stream_prefetch", "stream_operand", "stream_copies", "stream_shape"):
        found += FAMILIES[family](variant, order)
    for _, cfg in found:
        assert _fits(cfg) and cfg.volume == "stream"
        assert parse_table(variant, order, tomllib.loads(to_table(cfg))["paths"][variant]) == cfg
        assert max(p.smem_bytes for p in kernel_plans(cfg)) <= arch_limits(DEFAULT_ARCH).smem_per_block_optin


@pytest.mark.parametrize("variant", ["FUSED_TC", "FUSED_TC16"])
def test_candidates_on_a_streamed_schedule(variant: str) -> None:
    """A streamed schedule (p = 511 ships one) gets the streamed families only, base first."""
    base = fused_config(variant, 511)
    assert base.volume == "stream"
    found = candidates(variant, 511)
    assert found[0] == ("base", base) and len(found) > 1
    assert all(cfg.volume == "stream" for _, cfg in found)
    assert len({name for name, _ in found}) == len(found)


def test_stream_bad_tables_are_clear_errors() -> None:
    good = _stream_table("16x8x4", 64, 128, 256, [2, 4])
    parse_table("FUSED_TC16", 511, good)
    box_table = {"flux": "array", "mma": "16x8x4", "kernels": [
        {"dirs": "xyz"[d], "box": list(stream_box(d, 16, 512)), "threads": 512, "tile": [1, 2]} for d in range(3)]}
    parse_table("FUSED_TC16", 511, box_table)
    cases = [
        (dict(good, flux="inline"), 'flux = "array"'),
        (dict(good, k_panel=6), "k_panel"),
        (dict(good, k_panel=24), "k_panel"),  # does not divide Nq = 512
        (dict(good, stages=1), "stages"),
        (dict(good, d_stage="smem"), "stages D itself"),
        (dict(good, volume="pipelined"), "volume"),
        (dict(good, kernels=[dict(good["kernels"][0], dirs="xy"), good["kernels"][2]]), "one direction"),
        ({k: v for k, v in good.items() if k != "volume"}, "spans 128 of the Nq = 512"),  # a box kernel
        (dict(box_table, k_panel=8), 'needs volume = "stream"'),
    ]
    for table, match in cases:
        with pytest.raises(ConfigError, match=match):
            parse_table("FUSED_TC16", 511, table)
    with pytest.raises(ConfigError, match="a_operand"):
        parse_table("FUSED_TC16", 511, dict(good, a_operand="sum"))
    with pytest.raises(ConfigError, match="not a multiple of 256 threads"):  # 64 lines x 4 / 2 = 128 pairs
        parse_table("FUSED_TC16", 511, dict(good, a_operand="product", k_panel=4, stages=4))
    with pytest.raises(ConfigError, match='needs volume = "stream"'):
        parse_table("FUSED_TC16", 511, dict(box_table, a_operand="product"))
    with pytest.raises(ConfigError, match="does not divide the block"):
        parse_table("FUSED_TC16", 511, dict(good, kernels=[dict(k, tile=[3, 4]) for k in good["kernels"]]))
    with pytest.raises(ConfigError, match="split evenly over 16 warps"):  # 2 x 4 tiles for 16 warps
        parse_table("FUSED_TC16", 511, dict(good, kernels=[dict(k, threads=512, tile=[2, 4])
                                                           for k in good["kernels"]]))
    with pytest.raises(ConfigError, match="must be even"):
        odd = _stream_table("8x8x4", 64, 128, 256, [1, 1])
        odd["kernels"][0] = dict(odd["kernels"][0], box=[8, 128, 3])  # y: 24 lines, 3 along i
        parse_table("FUSED_TC", 767, odd)
    with pytest.raises(ConfigError, match="k_panel"):  # m16n8k8: panels of whole k-steps of 8
        parse_table("FUSED_TC16", 511, dict(good, mma="16x8x8", k_panel=4))
    assert parse_table("FUSED_TC16", 511, dict(good, copies="unrolled")).copies == "unrolled"
    with pytest.raises(ConfigError, match="copies"):
        parse_table("FUSED_TC16", 511, dict(good, copies="vectorized"))
    with pytest.raises(ConfigError, match='copies.*needs volume = "stream"'):
        parse_table("FUSED_TC16", 511, dict(box_table, copies="unrolled"))
    assert parse_table("FUSED_TC16", 511, dict(good, d_layout="panels")).d_layout == "panels"
    assert parse_table("FUSED_TC16", 511, dict(good, fragments="paired")).fragments == "paired"
    with pytest.raises(ConfigError, match="fragments"):
        parse_table("FUSED_TC16", 511, dict(good, fragments="quad"))
    assert parse_table("FUSED_TC16", 511, dict(good, block_order="axis")).block_order == "axis"
    with pytest.raises(ConfigError, match="block_order"):
        parse_table("FUSED_TC16", 511, dict(good, block_order="ijk"))
    with pytest.raises(ConfigError, match='block_order.*needs volume = "stream"'):
        parse_table("FUSED_TC16", 511, dict(box_table, block_order="axis"))
    with pytest.raises(ConfigError, match='fragments.*needs volume = "stream"'):
        parse_table("FUSED_TC16", 511, dict(box_table, fragments="paired"))
    with pytest.raises(ConfigError, match="k_panel 4 is not a multiple of 8"):
        parse_table("FUSED_TC16", 31, _stream_table("16x8x4", 16, 32, 32, [1, 2], 4, 4, fragments="paired"))
    with pytest.raises(ConfigError, match="even count"):  # one m8n8k4 row group per warp tile: no y/z pairs
        parse_table("FUSED_TC", 31, _stream_table("8x8x4", 16, 32, 128, [1, 1], 8, 4, fragments="paired"))
    with pytest.raises(ConfigError, match="d_layout"):
        parse_table("FUSED_TC16", 511, dict(good, d_layout="columns"))
    with pytest.raises(ConfigError, match='d_layout.*needs volume = "stream"'):
        parse_table("FUSED_TC16", 511, dict(box_table, d_layout="panels"))


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED_TC", "FUSED_TC16", "FUSED_DFMA"])
def test_shipped_stream_schedule_compiles_with_its_instructions(variant: str) -> None:
    config = fused_config(variant, 511)
    assert config.volume == "stream"
    for built in build(config, "sm_90").kernels:
        if not built.blocks_per_element:
            continue  # the face kernel
        sass = _sass(built)
        assert sass.spill_bytes == 0
        if variant == "FUSED_DFMA":
            assert sass.dmma_total == 0 and sass.dfma > 0
        else:
            assert set(sass.dmma) == {config.mma} and sass.dfma == 0


@needs_nvrtc
def test_stream_wide_shape_on_sm80_is_a_clear_error_and_sm100_expands() -> None:
    config = fused_config("FUSED_TC16", 511)
    with pytest.raises(ComposerError, match="needs sm_90"):
        build(config, "sm_80")
    kernel = build(config, "sm_100").kernels[-1]
    assert set(_sass(kernel).dmma) == {"8x8x4"}


@pytest.mark.gpu
@pytest.mark.parametrize(SMALL_ARGS, SMALL)
def test_stream_small_tables_match_reference_on_gpu(variant, mma, lines, positions, threads, tile, k_panel,
                                                    stages, a_operand) -> None:
    """The emulated tables above, compiled and run on the GPU with both copy loops, with D read
    from its k-panel copy, with paired fragment loads, with the blocks numbered along the carried
    axis, with the z kernel's own numbering and depth and the y and z epilogues prefetched (and
    FUSED_DFMA builds)."""
    import dataclasses

    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime.device import ensure_context

    config = parse_table(variant, 31, _stream_table(mma, lines, positions, threads, tile, k_panel, stages,
                                                     a_operand))
    unrolled = dataclasses.replace(config, copies="unrolled")
    panels = dataclasses.replace(unrolled, d_layout="panels")
    extra = {f"{variant}@small": lambda o: config, f"{variant}@small-unrolled": lambda o: unrolled,
             f"{variant}@small-unrolled-dpanels": lambda o: panels}
    if variant == "FUSED_TC":
        extra["FUSED_DFMA@small"] = lambda o: dataclasses.replace(config, variant="FUSED_DFMA", dfma=True)
    extra[f"{variant}@small-unrolled-axis"] = lambda o: dataclasses.replace(unrolled, block_order="axis")
    # the per-kernel keys of session 14: z numbered along its axis, one panel deeper, its epilogue
    # prefetched one panel before the end (y two), y i first
    n_panels = 32 // k_panel
    deeper = stages + 1 if stages < n_panels else stages - 1 if stages > 2 else None  # None: Nq holds 2 panels
    own = tuple(dataclasses.replace(k, block_order="axis", stages=deeper, prefetch=1)
                if k.dirs == (2,) else dataclasses.replace(k, prefetch=2) if k.dirs == (1,) else k
                for k in unrolled.kernels)
    mixed = dataclasses.replace(unrolled, kernels=own)
    if _fits(mixed):
        extra[f"{variant}@small-unrolled-own-keys"] = lambda o: mixed
    other = "factors" if a_operand == "product" else "product"
    own_operand = dataclasses.replace(unrolled, kernels=tuple(
        dataclasses.replace(k, a_operand=other) if k.dirs == (2,) else k for k in unrolled.kernels))
    if _fits(own_operand):  # z alone on the other A operand
        extra[f"{variant}@small-unrolled-own-operand"] = lambda o: own_operand
    paired = dataclasses.replace(unrolled, fragments="paired")
    if _fits(paired):  # k-octets and y/z row pairs (the PAIRED tables)
        extra[f"{variant}@small-unrolled-paired"] = lambda o: paired
        extra["FUSED_DFMA@small-paired"] = lambda o: dataclasses.replace(paired, variant="FUSED_DFMA", dfma=True)
    for rec in run_case(31, (2, 1, 2), [], ensure_context(None), extra=extra):
        assert rec.get("passed"), rec
        assert rec["rel_err"] <= TOLERANCE


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED_TC16", "FUSED_DFMA"])
def test_product_operand_halves_the_a_loads(variant: str) -> None:
    """a_operand = "product": the same DMMA/DFMA count per panel with fewer shared-memory loads in
    the hot loop (one per A value instead of two), no spills, less shared memory."""
    import dataclasses

    from composer.arch.hotloop import kernel_hot_loop

    # the session-4 p = 511 pipeline (8-value panels, 4 stages, scalar fragment loads)
    factors = dataclasses.replace(fused_config(variant, 511), k_panel=8, stages=4, fragments="scalar",
                                  mma="8x8x4" if variant == "FUSED_DFMA" else "16x8x4", copies="unrolled")
    product = dataclasses.replace(factors, a_operand="product")
    assert _fits(product)
    loops = []
    for cfg in (factors, product):
        kernel = build(cfg, "sm_90").kernels[1]
        assert _sass(kernel).spill_bytes == 0
        loops.append(kernel_hot_loop(kernel.compiled.cubin).counts)
        assert kernel.smem_bytes == kernel_plans(cfg)[0].smem_bytes
    math = "DMMA" if variant == "FUSED_TC16" else "DFMA"
    assert loops[0][math] == loops[1][math]
    assert loops[1]["LDS"] < loops[0]["LDS"]
    assert kernel_plans(product)[0].smem_bytes < kernel_plans(factors)[0].smem_bytes


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED_TC16", "FUSED_DFMA"])
def test_unrolled_copies_leave_only_the_contraction_in_the_panel_loop(variant: str) -> None:
    """copies = "unrolled": the panel copies need no loop of their own (no nested backward branch
    in the hot loop), the same copies and MMAs per panel, and far fewer instructions: the strided
    loops' index arithmetic, remainder handling and hazard padding were most of the hot loop."""
    import dataclasses

    from composer.arch.hotloop import kernel_hot_loop

    # on the session-4 pipeline (k_panel 8, 4 stages), where the copies are a large share of the loop
    strided = dataclasses.replace(fused_config(variant, 511), copies="strided", k_panel=8, stages=4)
    loops = []
    for cfg in (strided, dataclasses.replace(strided, copies="unrolled")):
        kernel = build(cfg, "sm_90").kernels[1]
        assert _sass(kernel).spill_bytes == 0
        loops.append(kernel_hot_loop(kernel.compiled.cubin))
    old, new = loops
    math = "DMMA" if variant == "FUSED_TC16" else "DFMA"
    assert old.inner_loops > 0 and new.inner_loops == 0
    assert new.counts[math] == old.counts[math] and new.counts["BAR"] == old.counts["BAR"] == 1
    assert new.instructions < 0.6 * old.instructions, (old.instructions, new.instructions)
    panels = dataclasses.replace(strided, copies="unrolled", d_layout="panels")
    kernel = build(panels, "sm_90").kernels[1]
    assert _sass(kernel).spill_bytes == 0
    loop = kernel_hot_loop(kernel.compiled.cubin)
    assert loop.counts[math] == new.counts[math] and loop.counts["LDGSTS"] == new.counts["LDGSTS"]


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED_TC16", "FUSED_TC", "FUSED_DFMA"])
def test_paired_fragments_halve_the_shared_loads(variant: str) -> None:
    """fragments = "paired" against "scalar" on the shipped p = 511 pipeline: the same DMMA (DFMA) count per panel,
    without spills, and the tensor-core builds' fragment loads as LDS.128 (half the LDS count
    of the scalar build); the DFMA build keeps its scalar loads (the ablation changes the
    instruction only) and compiles from the same plans. (A few LDS outside the fragments remain.)"""
    import dataclasses

    from composer.arch.hotloop import kernel_hot_loop

    # nvrtc=None: compiled by the NVRTC loaded here; the table's own (13.0) would take a CUBIN another
    # compiler left in the NVRTC cache (sweep-fused check --pin-nvrtc), whose unrolling differs
    scalar = dataclasses.replace(fused_config(variant, 511), fragments="scalar", nvrtc=None)
    paired = dataclasses.replace(scalar, fragments="paired")
    assert _fits(paired)
    loops = []
    for cfg in (scalar, paired):
        kernel = build(cfg, "sm_90").kernels[1]
        assert _sass(kernel).spill_bytes == 0
        loops.append(kernel_hot_loop(kernel.compiled.cubin).counts)
    math = "DFMA" if variant == "FUSED_DFMA" else "DMMA"
    assert loops[0][math] == loops[1][math] > 0
    if variant != "FUSED_DFMA":
        assert loops[1]["LDS"] < 0.6 * loops[0]["LDS"], (loops[0]["LDS"], loops[1]["LDS"])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_axis_block_order_numbers_each_line_set_consecutively(axis: int) -> None:
    """block_order = "axis": every box of the element exactly once, and the blocks that share a
    line set (same origin off the carried axis) have consecutive numbers."""
    from composer.fused.emulate import _box_origin

    nq, extents = 64, (16, 8, 32)
    count = (nq // 16) * (nq // 8) * (nq // 32)
    origins = [_box_origin(b, extents, nq, axis) for b in range(count)]
    assert len(set(origins)) == count
    chunks = nq // extents[2 - axis]
    for first in range(0, count, chunks):
        group = origins[first:first + chunks]
        off_axis = {tuple(o for n, o in enumerate(origin) if n != 2 - axis) for origin in group}
        assert len(off_axis) == 1 and sorted(o[2 - axis] for o in group) == list(range(0, nq, extents[2 - axis]))


@pytest.mark.parametrize("axis_table", [SMALL[0], SMALL[5]])
def test_emulated_axis_block_order_matches_reference(axis_table) -> None:
    """The streamed kernels with block_order = "axis" (boxes that split the carried axis) give the
    reference tendency."""
    variant, mma, lines, positions, threads, tile, k_panel, stages, a_operand = axis_table
    order, grid = 31, (1, 2, 1)
    config = parse_table(variant, order, _stream_table(mma, lines, positions, threads, tile, k_panel, stages,
                                                       a_operand, block_order="axis"))
    assert all(p.axis_order for p in kernel_plans(config))
    assert any(p.positions(p.dir) < p.nq for p in kernel_plans(config))  # the axis is split
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_transfer_candidates_are_other_orders_tables() -> None:
    """stream_transfer: each candidate is a streamed table another order ships for the variant,
    with the order replaced; never the order's own table."""
    import dataclasses

    from composer.fused.candidates import stream_transfer_candidates
    from composer.fused.config import SUPPORTED_ORDERS

    found = stream_transfer_candidates("FUSED_TC16", 255)
    assert found
    donors = [fused_config("FUSED_TC16", o) for o in sorted(SUPPORTED_ORDERS["FUSED_TC16"] - {255})]
    transplanted = [dataclasses.replace(d, order=255) for d in donors if d.volume == "stream"]
    own = fused_config("FUSED_TC16", 255)
    for _, cfg in found:
        assert cfg in transplanted and cfg != own


@pytest.mark.parametrize("order", [255, 511, 767])
def test_axis_candidates_retile_one_direction(order: int) -> None:
    """stream_axis: each candidate differs from the shipped table in one y or z kernel's tile (and
    possibly the block numbering), every label names its kernels' tiles, and none repeats."""
    from composer.fused.candidates import stream_axis_candidates

    base = fused_config("FUSED_TC16", order)
    found = stream_axis_candidates("FUSED_TC16", order)
    assert found and len({name for name, _ in found}) == len(found)
    for name, cfg in found:
        changed = [n for n, (k, b) in enumerate(zip(cfg.kernels, base.kernels)) if k != b]
        assert len(changed) == 1 and cfg.kernels[changed[0]].dirs[0] in (1, 2), name
        assert dataclasses.replace(cfg, kernels=base.kernels) == base
        assert " | " in name and "z[" in name and "y[" in name


def test_emulated_mixed_direction_tiles_match_reference() -> None:
    """A streamed table whose z kernel runs its own output tile (more k positions, fewer lines than
    x and y) and whose boxes are numbered along the carried axis gives the reference tendency."""
    order, grid = 31, (1, 2, 1)
    table = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2, block_order="axis")
    table["kernels"][2] = {"dirs": "z", "box": list(stream_box(2, 16, 32)), "threads": 32, "tile": [1, 2]}
    config = parse_table("FUSED_TC16", order, table)
    assert len({(p.lines(p.dir), p.positions(p.dir)) for p in kernel_plans(config)}) == 2
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_yz_candidates_number_each_kernel_on_its_own() -> None:
    """stream_yz: y and z on one tile, every pair of their own numberings; the table round-trips
    through TOML with the per-kernel key, and the builder gives each kernel its own numbering."""
    from composer.fused.candidates import stream_yz_candidates

    found = stream_yz_candidates("FUSED_TC16", 511)
    assert found and len({name for name, _ in found}) == len(found)
    mixed = [cfg for _, cfg in found
             if {k.block_order or cfg.block_order for k in cfg.kernels if k.dirs[0]} == {"kji", "axis"}]
    assert mixed
    for cfg in mixed[:2]:
        again = parse_table("FUSED_TC16", 511, tomllib.loads(to_table(cfg))["paths"]["FUSED_TC16"])
        assert again == cfg
        assert [p.axis_order for p in kernel_plans(cfg)] == [
            (k.block_order or cfg.block_order) == "axis" for k in cfg.kernels]


def test_kernel_block_order_key_is_checked() -> None:
    table = _stream_table("16x8x4", 64, 128, 256, [2, 4])
    table["kernels"][0]["block_order"] = "zyx"
    with pytest.raises(ConfigError, match="block_order"):
        parse_table("FUSED_TC16", 511, table)
    box = {"flux": "array", "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 128, "tile": [1, 4],
                                         "block_order": "axis"}]}
    with pytest.raises(ConfigError, match="stream"):
        parse_table("FUSED", 7, box)


def test_emulated_per_kernel_block_order_matches_reference() -> None:
    """Kernels of one streamed table numbered differently (z along its axis, the others i first)
    give the reference tendency."""
    order, grid = 31, (1, 2, 1)
    table = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2)
    table["kernels"][2]["block_order"] = "axis"
    config = parse_table("FUSED_TC16", order, table)
    assert [p.axis_order for p in kernel_plans(config)] == [False, False, True]
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_depth_candidates_deepen_y_and_z_only() -> None:
    """stream_depth: each candidate deepens the y kernel, the z kernel or both past the table's
    stages, fits the shared memory, and round-trips through TOML; x keeps the table's depth."""
    from composer.fused.candidates import stream_depth_candidates

    base = fused_config("FUSED_TC16", 511)
    found = stream_depth_candidates("FUSED_TC16", 511)
    assert found and len({name for name, _ in found}) == len(found)
    for name, cfg in found:
        plans = kernel_plans(cfg)
        assert plans[0].stages == base.stages and cfg.kernels[0] == base.kernels[0], name
        assert any(p.stages > base.stages for p in plans[1:])
        assert parse_table("FUSED_TC16", 511, tomllib.loads(to_table(cfg))["paths"]["FUSED_TC16"]) == cfg


def test_kernel_stages_key_is_checked() -> None:
    table = _stream_table("16x8x4", 64, 128, 256, [2, 4], k_panel=16)
    table["kernels"][2]["stages"] = 1
    with pytest.raises(ConfigError, match="stages"):
        parse_table("FUSED_TC16", 511, table)
    small = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2)
    small["kernels"][2]["stages"] = 6  # Nq = 32 holds 4 panels of 8
    with pytest.raises(ConfigError, match="Nq / k_panel"):
        parse_table("FUSED_TC16", 31, small)


def test_emulated_per_kernel_stages_match_reference() -> None:
    """A streamed table whose z kernel runs a deeper pipeline than the others: the builder gives that
    kernel its own depth and the emulation still gives the reference (the emulator does not model the
    pipeline, which cannot change the sums; the GPU test of the small tables runs the kernels)."""
    order, grid = 31, (1, 2, 1)
    table = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2)
    table["kernels"][2]["stages"] = 4
    config = parse_table("FUSED_TC16", order, table)
    assert [p.stages for p in kernel_plans(config)] == [2, 2, 4]
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_x_candidates_retile_only_x() -> None:
    """stream_x: x on each tile, y and z as shipped; no candidate repeats the "kji" numbering as
    "axis" (for x they are one numbering)."""
    from composer.fused.candidates import stream_x_candidates

    base = fused_config("FUSED_TC16", 511)
    found = stream_x_candidates("FUSED_TC16", 511)
    assert found and len({name for name, _ in found}) == len(found)
    for name, cfg in found:
        assert cfg.kernels[1:] == base.kernels[1:] and cfg.kernels[0] != base.kernels[0], name
        assert cfg.kernels[0].block_order is None


@needs_nvrtc
def test_epilogue_prefetch_adds_only_l2_prefetches() -> None:
    """prefetch = N on the z kernel: its SASS gains the L2 prefetches (CCTL.E.PF2) of the metric and
    dqdt lines and keeps the DMMAs, registers bound and spills of the kernel without it; the other
    kernels render byte for byte as before."""
    import dataclasses

    from composer.fused.builder import render_volume

    shipped = fused_config("FUSED_TC16", 511)  # its y and z prefetch two panels ahead (session 14)
    shipped = dataclasses.replace(shipped, mma="16x8x4", copies="unrolled")  # the session-15 table
    base = dataclasses.replace(shipped, kernels=tuple(dataclasses.replace(k, prefetch=None) for k in shipped.kernels))
    ahead = dataclasses.replace(base, kernels=tuple(dataclasses.replace(k, prefetch=4) if k.dirs == (2,) else k
                                                    for k in base.kernels))
    plans, plans_ahead = kernel_plans(base), kernel_plans(ahead)
    for p0, p1 in zip(plans[:2], plans_ahead[:2]):
        assert render_volume(base, p0) == render_volume(ahead, p1)
    assert "prefetch.global.L2" in render_volume(ahead, plans_ahead[2])
    plain, fetched = (_sass(next(k for k in build(cfg, "sm_90").kernels if k.name.endswith("_z")))
                      for cfg in (base, ahead))
    assert plain.l2_prefetches == 0 and fetched.l2_prefetches > 0
    assert fetched.dmma == plain.dmma and fetched.spill_bytes == plain.spill_bytes == 0


def test_prefetch_candidates_and_key() -> None:
    from composer.fused.candidates import stream_prefetch_candidates

    found = stream_prefetch_candidates("FUSED_TC16", 511)
    assert found and len({name for name, _ in found}) == len(found)
    for name, cfg in found:
        fetching = tuple(k.dirs[0] for k in cfg.kernels if k.prefetch)
        assert fetching in ((2,), (1, 2), (0, 1, 2)), name
        assert len({k.prefetch for k in cfg.kernels if k.prefetch}) == 1
        assert parse_table("FUSED_TC16", 511, tomllib.loads(to_table(cfg))["paths"]["FUSED_TC16"]) == cfg
    table = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2)
    table["kernels"][2]["prefetch"] = 0
    with pytest.raises(ConfigError, match="prefetch"):
        parse_table("FUSED_TC16", 31, table)
    table["kernels"][2]["prefetch"] = 5  # Nq = 32 holds 4 panels of 8
    with pytest.raises(ConfigError, match="contraction has 4"):
        parse_table("FUSED_TC16", 31, table)


@pytest.mark.parametrize("order", [127, 255, 511, 767])
@pytest.mark.parametrize("variant", ["FUSED_TC", "FUSED_TC16"])
def test_per_kernel_families_label_every_candidate_apart(variant: str, order: int) -> None:
    """The sweep keys its plan by label: every candidate of the per-kernel families has its own, also
    where all kernels share one tile and only a per-kernel key differs."""
    from composer.fused.candidates import FAMILIES

    for family in ("stream_axis", "stream_yz", "stream_depth", "stream_x", "stream_prefetch", "stream_operand",
                   "stream_persistent", "stream_copies", "stream_shape"):
        found = FAMILIES[family](variant, order)
        assert len({name for name, _ in found}) == len(found), family


def test_kernel_a_operand_key_and_emulation() -> None:
    """A z kernel on its own A operand: a bad value is a clear error, the builder gives only that
    kernel the product panel, and the emulated tendency is the reference's."""
    order, grid = 31, (1, 2, 1)
    table = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2)
    table["kernels"][2]["a_operand"] = "sum"
    with pytest.raises(ConfigError, match="a_operand"):
        parse_table("FUSED_TC16", order, table)
    table["kernels"][2]["a_operand"] = "product"
    config = parse_table("FUSED_TC16", order, table)
    assert [p.product for p in kernel_plans(config)] == [False, False, True]
    assert parse_table("FUSED_TC16", order, tomllib.loads(to_table(config))["paths"]["FUSED_TC16"]) == config
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


@needs_nvrtc
def test_kernel_product_operand_halves_only_its_own_a_loads() -> None:
    """The shipped p = 511 FUSED_TC16 table with the z kernel on the product operand: z's panel loop
    issues fewer shared loads for the same DMMAs, and the x and y sources are unchanged."""
    import dataclasses

    from composer.arch.hotloop import kernel_hot_loop
    from composer.fused.builder import render_volume

    base = fused_config("FUSED_TC16", 511)
    own = dataclasses.replace(base, kernels=tuple(dataclasses.replace(k, a_operand="product") if k.dirs == (2,) else k
                                                  for k in base.kernels))
    for p0, p1 in zip(kernel_plans(base)[:2], kernel_plans(own)[:2]):
        assert render_volume(base, p0) == render_volume(own, p1)
    loops = []
    for cfg in (base, own):
        z = next(k for k in build(cfg, "sm_90").kernels if k.name.endswith("_z"))
        assert _sass(z).spill_bytes == 0
        loops.append(kernel_hot_loop(z.compiled.cubin))
    assert loops[1].counts["DMMA"] == loops[0].counts["DMMA"] > 0
    assert loops[1].counts["LDS"] < loops[0].counts["LDS"], (loops[0].counts, loops[1].counts)


# --- persistent blocks (the per-kernel persistent key, session 15) ---------------------------------

def test_persistent_key_candidates_and_round_trip() -> None:
    """persistent = true parses per streamed kernel, only as a boolean; the family puts x, y, z alone
    and all three on it, each label its own, each table round-trips through TOML."""
    from composer.fused.candidates import stream_persistent_candidates

    table = _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2)
    table["kernels"][2]["persistent"] = 1
    with pytest.raises(ConfigError, match="persistent"):
        parse_table("FUSED_TC16", 31, table)
    table["kernels"][2]["persistent"] = True
    config = parse_table("FUSED_TC16", 31, table)
    assert [p.persistent for p in kernel_plans(config)] == [False, False, True]
    found = stream_persistent_candidates("FUSED_TC16", 767)
    assert [tuple(k.dirs[0] for k in cfg.kernels if k.persistent) for _, cfg in found] == [(0,), (1,), (2,), (0, 1, 2)]
    assert len({name for name, _ in found}) == len(found)
    for _, cfg in found:
        assert parse_table("FUSED_TC16", 767, tomllib.loads(to_table(cfg))["paths"]["FUSED_TC16"]) == cfg


def test_persistent_kernel_renders_the_other_kernels_unchanged_and_launches_resident_blocks() -> None:
    """Only the persistent kernel's source changes (one pipeline over its tiles); its launch is the
    resident blocks per SM on every SM, or its tile count when that is smaller."""
    from composer.arch.limits import resident_blocks
    from composer.fused.builder import kernel_sources, render_volume
    from composer.paths.fused import launch_grid

    base = fused_config("FUSED_TC16", 767)
    own = dataclasses.replace(base, kernels=tuple(dataclasses.replace(k, persistent=k.dirs == (2,))
                                                  for k in base.kernels))
    plans, plans_own = kernel_plans(base), kernel_plans(own)
    for p0, p1 in zip(plans[:2], plans_own[:2]):
        assert render_volume(base, p0) == render_volume(own, p1)
    source = render_volume(own, plans_own[2])
    assert "tile += gridDim.x" in source and "tile += gridDim.x" not in render_volume(base, plans[2])
    z = kernel_sources(own)[-1]
    assert z.persistent and z.blocks_per_element == 768 ** 3 // (128 * 64)
    sm90 = arch_limits("sm_90")
    # 128 threads x 254 registers and 65 KiB of stages: two blocks per SM (the measured kernels' count)
    assert resident_blocks(sm90, 128, z.smem_bytes, 254) == 2
    assert resident_blocks(sm90, 128, z.smem_bytes) == 3  # shared memory alone would allow three
    assert launch_grid(z, own, 1, 768, 132, resident=2) == 264
    assert launch_grid(z, own, 1, 768, 132, resident=100_000) == z.blocks_per_element
    with pytest.raises(ValueError, match="resident"):
        launch_grid(z, own, 1, 768, 132)


@needs_nvrtc
def test_persistent_kernels_compile_without_spills_at_767() -> None:
    """The p = 767 FUSED_TC16 table with every kernel persistent: the same DMMAs per panel loop, no
    spills, within the two-blocks-per-SM register budget."""
    from composer.arch.hotloop import kernel_hot_loop

    base = fused_config("FUSED_TC16", 767)
    own = dataclasses.replace(base, kernels=tuple(dataclasses.replace(k, persistent=True) for k in base.kernels))
    for k0, k1 in zip(*(build(cfg, "sm_90").kernels[1:] for cfg in (base, own))):
        s0, s1 = _sass(k0), _sass(k1)
        assert s1.spill_bytes == 0 and s1.registers <= 255 and s1.dmma == s0.dmma
        assert kernel_hot_loop(k1.compiled.cubin).counts["DMMA"] == kernel_hot_loop(k0.compiled.cubin).counts["DMMA"]


@pytest.mark.gpu
@pytest.mark.parametrize("grid_cap", [0, 3])
@pytest.mark.parametrize(SMALL_ARGS, [SMALL[0], SMALL[3], SMALL[4], SMALL[7]])
def test_persistent_small_tables_match_reference_on_gpu(monkeypatch, variant, mma, lines, positions, threads, tile,
                                                        k_panel, stages, a_operand, grid_cap) -> None:
    """Every kernel persistent, with its resident-block grid and with a grid of 3 blocks, so that each
    block walks many tiles (and elements) through one pipeline and the last walk is partial."""
    import composer.paths.fused as fused_path
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime.device import ensure_context

    if grid_cap:
        plain = fused_path.launch_grid

        def capped(kernel, config, num_elements, nq, sm_count, resident=0):
            grid = plain(kernel, config, num_elements, nq, sm_count, resident)
            return min(grid, grid_cap) if kernel.persistent else grid

        monkeypatch.setattr(fused_path, "launch_grid", capped)
    config = parse_table(variant, 31, _stream_table(mma, lines, positions, threads, tile, k_panel, stages, a_operand,
                                                     copies="unrolled"))
    config = dataclasses.replace(config, kernels=tuple(dataclasses.replace(k, persistent=True) for k in config.kernels))
    for rec in run_case(31, (2, 1, 2), [], ensure_context(None), extra={f"{variant}@persistent": lambda o: config}):
        assert rec.get("passed"), rec
        assert rec["rel_err"] <= TOLERANCE
