"""The streamed kernels' pointer copies (``copies = "pointers"``) and the copies issued after the
first MMA k-step (``copy_issue = "mma"``; composer/fused/copies.py, fused_stream.cu.j2).

The pointer program's constants are what the CUDA is generated from: the CPU tests check them
against the index formulas of the other copy loops (the same (global, shared) pairs at every panel
and origin), emulate whole tendencies through them against the reference, and compile the shipped
p = 767 table with them to check the hot loop the design is for (fewer instructions, the same DMMAs,
no spills); the GPU tests run the small tables both ways against the reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import kernel_plans, kernel_sources
from composer.fused.candidates import _fits
from composer.fused.config import fused_config, parse_table
from composer.fused.copies import d_trips, f_pair_offsets, f_trips
from composer.fused.emulate import emulate, pointer_copies, _stream_node
from tests.test_fused_cpu import _sass, needs_nvrtc
from tests.test_fused_stream import SMALL, SMALL_ARGS, _stream_table


def _reference_pairs(plan, p: int, a_org: int, k0: int, j0: int, i0: int):
    """The (global, shared) offsets of every F and D pair of panel p by the other copy loops' formulas."""
    kp, nl, na = plan.k_panel, plan.lines(plan.dir), plan.positions(plan.dir)
    n = np.arange(nl * kp // 2)
    g0, s = f_pair_offsets(plan, n)
    m = 2 * (n % (kp // 2)) if plan.dir == 0 else n // (nl // 2)
    l = n // (kp // 2) if plan.dir == 0 else 2 * (n % (nl // 2))
    g = _stream_node(plan, p * kp + m, l, k0, j0, i0)
    nd = np.arange(na * kp // 2)
    a, md = nd // (kp // 2), 2 * (nd % (kp // 2))
    dg_ = (p * plan.nq + a_org + a) * kp + md if plan.d_panels else (a_org + a) * plan.nq + p * kp + md
    return (g, s), (dg_, a * plan.ds + md)


def _as_set(g, s):
    return set(zip(np.asarray(g).tolist(), np.asarray(s).tolist()))


@pytest.mark.parametrize("variant,order", [("FUSED_TC16", 767), ("FUSED_TC16", 511), ("FUSED_TC16", 255),
                                           ("FUSED_TC", 767), ("FUSED_TC", 255)])
def test_pointer_program_copies_what_the_loops_copy(variant: str, order: int) -> None:
    """At the shipped tables' sizes: every thread's trips land the same (global, shared) pairs as the
    striding loops, for the first, a middle and the last panel and a box away from the origin, each
    pair exactly once."""
    config = dataclasses.replace(fused_config(variant, order), copies="pointers")
    nq = order + 1
    for plan in kernel_plans(config):
        assert plan.pointers
        bk, bj, bi = plan.kernel.box
        k0, j0, i0 = nq - bk, nq - bj, nq - bi
        a_org = (i0, j0, k0)[plan.dir]
        for p in (0, nq // plan.k_panel // 2, nq // plan.k_panel - 1):
            (fg, fs), (dg_, ds) = pointer_copies(plan, p, a_org, k0, j0, i0)
            (rg, rs), (rdg, rds) = _reference_pairs(plan, p, a_org, k0, j0, i0)
            assert len(fg) == len(rg) and _as_set(fg, fs) == _as_set(rg, rs)
            assert len(dg_) == len(rdg) and _as_set(dg_, ds) == _as_set(rdg, rds)


def test_pointer_trips_are_offsets_from_the_first_copy() -> None:
    """The p = 767 x kernel (128 threads, 64 lines x 8-value panels): two F trips 32 lines apart,
    four D trips 32 rows apart (D's rows; from its k-panel copy, 32 rows of 8 values), every trip issued by
    every thread."""
    plan = kernel_plans(dataclasses.replace(fused_config("FUSED_TC16", 767), copies="pointers", d_layout="rows"))[0]
    assert plan.dir == 0
    f, d = f_trips(plan), d_trips(plan)
    assert [dg for dg, _ in f.deltas] == [0, 32 * 768] and [s for _, s in f.deltas] == [0, 32 * plan.fs]
    assert [dg for dg, _ in d.deltas] == [0, 32 * 768, 64 * 768, 96 * 768]
    assert all(f.guard(t) is None for t in range(2)) and all(d.guard(t) is None for t in range(4))
    panels = kernel_plans(dataclasses.replace(fused_config("FUSED_TC16", 767), copies="pointers", d_layout="panels"))[0]
    assert [dg for dg, _ in d_trips(panels).deltas] == [0, 32 * 8, 64 * 8, 96 * 8]


def test_partial_trips_are_guarded() -> None:
    """A block with more threads than F pairs per panel: the trip is issued by the threads whose pair
    exists, and the template guards exactly that trip."""
    table = _stream_table("16x8x4", 16, 32, 128, [1, 1], 4, 2, copies="pointers")
    config = parse_table("FUSED_TC16", 31, table)
    plan = next(p for p in kernel_plans(config) if p.dir == 1)
    trips = f_trips(plan)
    assert trips.pairs == 32 and trips.guard(0) == 32
    source = next(s.source for s in kernel_sources(config) if s.name == plan.name)
    assert "if (threadIdx.x < 32) { copy16(" in source


def test_copies_that_do_not_tile_by_thread_are_a_clear_error() -> None:
    """A y kernel of 48 lines (24 pairs per panel row) on 32 threads: trip 1's offsets depend on the
    thread, so "pointers" is refused with the kernel named, and "unrolled" still lays it out."""
    base = {"flux": "array", "mma": "16x8x4", "volume": "stream", "k_panel": 8, "stages": 2, "kernels": [
        {"dirs": "y", "box": [3, 128, 16], "threads": 32, "tile": [1, 2]},
        {"dirs": "x", "box": [1, 16, 128], "threads": 128, "tile": [1, 2]},
        {"dirs": "z", "box": [128, 1, 16], "threads": 128, "tile": [1, 2]}]}
    assert kernel_plans(parse_table("FUSED_TC16", 767, dict(base, copies="unrolled")))
    with pytest.raises(ComposerError, match=r"fused_tc16_p767_s0_y: copies = \"pointers\" needs"):
        kernel_sources(parse_table("FUSED_TC16", 767, dict(base, copies="pointers")))


@pytest.mark.parametrize("key,bad,choices,good,plan_holds", [
    ("copy_issue", "late", r"\('barrier', 'mma'\)", {"copies": "pointers", "copy_issue": "mma"},
     lambda p: p.pointers and p.mma_issue),
    ("l2_fetch", "64B", r"\('none', '128B', '256B'\)", {"l2_fetch": "256B"}, lambda p: p.l2_fetch == "256B"),
])
def test_copy_keys_are_checked(key, bad, choices, good, plan_holds) -> None:
    """A streamed-only copy key: a value outside its choices and a box table that sets it are clear
    errors naming the key; a good value reaches every kernel's plan."""
    with pytest.raises(ConfigError, match=rf"{key}: expected one of {choices}"):
        parse_table("FUSED_TC16", 31, _stream_table("16x8x4", 32, 16, 64, [1, 2], **{key: bad}))
    box = {"flux": "array", "mma": "16x8x4", key: good[key], "kernels": [
        {"dirs": "xyz", "box": [32, 32, 32], "threads": 128, "tile": [1, 1]}]}
    with pytest.raises(ConfigError, match=f'{key}: needs volume = "stream"'):
        parse_table("FUSED_TC16", 31, box)
    config = parse_table("FUSED_TC16", 31, _stream_table("16x8x4", 32, 16, 64, [1, 2], **good))
    assert all(plan_holds(p) for p in kernel_plans(config))


# The SMALL tables with pointer copies, scalar and paired fragments, D rows and k-panels.
POINTER_TABLES = [(row, keys) for row in SMALL for keys in (
    {"copies": "pointers"}, {"copies": "pointers", "d_layout": "panels"},
    {"copies": "pointers", "fragments": "paired"})]


@pytest.mark.parametrize("row,keys", POINTER_TABLES)
def test_emulated_pointer_copies_match_reference(row, keys) -> None:
    """The emulated kernels staging every panel through the pointer program give the reference
    tendency (a wrong trip constant lands a value in the wrong slot: a NaN or a wrong number)."""
    variant, mma, lines, positions, threads, tile, k_panel, stages, a_operand = row
    try:
        config = parse_table(variant, 31, _stream_table(mma, lines, positions, threads, tile, k_panel, stages,
                                                         a_operand, **keys))
    except ConfigError:
        pytest.skip("the table does not take these keys (paired: k-octets and y/z row pairs)")
    if not _fits(config):
        pytest.skip("does not fit")
    order, grid = 31, (1, 2, 1)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_default_tables_render_without_the_new_code() -> None:
    """Neither key set: no Copies struct and no issue lambda (the shipped kernels' sources are
    pinned by tests/test_fused_cpu.py); each key adds only its own code."""
    base = dataclasses.replace(fused_config("FUSED_TC16", 767), copies="unrolled", copy_issue="barrier")
    plain = "".join(s.source for s in kernel_sources(base))
    assert "struct Copies" not in plain and "auto issue" not in plain
    ptr = "".join(s.source for s in kernel_sources(dataclasses.replace(base, copies="pointers")))
    assert "struct Copies" in ptr and "auto issue" not in ptr
    mma = "".join(s.source for s in kernel_sources(dataclasses.replace(base, copies="unrolled", copy_issue="mma")))
    assert "struct Copies" not in mma and mma.count("auto issue = [&]") == 3


@needs_nvrtc
def test_pointer_copies_shrink_the_767_hot_loop() -> None:
    """The shipped p = 767 FUSED_TC16 table with pointer copies: the same 32 DMMAs and 8 LDGSTS per
    panel loop, at least 10 fewer instructions per trip in every kernel, no spills; with the copies
    issued after the first k-step as well, still no spills (on the session-15 table: 16x8x4 MMAs, unrolled
    copies after the barrier)."""
    from composer.arch.hotloop import kernel_hot_loop
    from composer.fused.builder import build

    base = dataclasses.replace(fused_config("FUSED_TC16", 767), mma="16x8x4", copies="unrolled", copy_issue="barrier")
    loops = {}
    for name, config in (("unrolled", base), ("pointers", dataclasses.replace(base, copies="pointers")),
                         ("pointers-mma", dataclasses.replace(base, copies="pointers", copy_issue="mma"))):
        built = build(config)
        for k in built.kernels[1:]:
            assert _sass(k).spill_bytes == 0, (name, k.name)
            loops[name, k.name[-1]] = kernel_hot_loop(k.compiled.cubin)
    for d in "xyz":
        old, new = loops["unrolled", d], loops["pointers", d]
        assert new.counts["DMMA"] == old.counts["DMMA"] == 32 and new.counts["LDGSTS"] == old.counts["LDGSTS"] == 8
        assert new.instructions <= old.instructions - 10, (d, old.instructions, new.instructions)


@needs_nvrtc
def test_persistent_kernels_take_both_keys() -> None:
    """Persistent blocks recompute the copy pointers per tile and issue the copies from step(): the
    p = 767 table with all three keys compiles to the same DMMAs without spills."""
    from composer.fused.builder import build

    base = fused_config("FUSED_TC16", 767)
    config = dataclasses.replace(base, copies="pointers", copy_issue="mma",
                                 kernels=tuple(dataclasses.replace(k, persistent=True) for k in base.kernels))
    for k in build(config).kernels[1:]:
        sass = _sass(k)
        assert set(sass.dmma) == {base.mma} and sass.spill_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize(SMALL_ARGS, [SMALL[0], SMALL[3], SMALL[4], SMALL[7]])  # both engines, operands, shapes
def test_copy_keys_small_tables_match_reference_on_gpu(variant, mma, lines, positions, threads, tile, k_panel,
                                                       stages, a_operand) -> None:
    """The small tables with pointer copies, with the copies issued after the first k-step, both, with
    paired fragments and D k-panels, persistent (grid of 3 blocks), and FUSED_DFMA's build."""
    import composer.paths.fused as fused_path
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime.device import ensure_context

    config = parse_table(variant, 31, _stream_table(mma, lines, positions, threads, tile, k_panel, stages,
                                                     a_operand, copies="pointers"))
    variants = {"ptr": config, "mma": dataclasses.replace(config, copies="unrolled", copy_issue="mma"),
                "ptr-mma": dataclasses.replace(config, copy_issue="mma"),
                "ptr-mma-dpanels": dataclasses.replace(config, copy_issue="mma", d_layout="panels"),
                "ptr-mma-paired": dataclasses.replace(config, copy_issue="mma", fragments="paired"),
                "ptr-l2": dataclasses.replace(config, l2_fetch="128B"),
                "strided-dpanels-l2": dataclasses.replace(config, copies="strided", d_layout="panels", l2_fetch="256B")}
    both = variants["ptr-mma"]
    variants["ptr-mma-persistent"] = dataclasses.replace(
        both, kernels=tuple(dataclasses.replace(k, persistent=True) for k in both.kernels))
    extra = {f"{variant}@{key}": (lambda c: lambda o: c)(c) for key, c in variants.items() if _fits(c)}
    if variant == "FUSED_TC":
        extra["FUSED_DFMA@ptr-mma"] = lambda o: dataclasses.replace(both, variant="FUSED_DFMA", dfma=True)
    plain = fused_path.launch_grid

    def capped(kernel, config, num_elements, nq, sm_count, resident=0):
        grid = plain(kernel, config, num_elements, nq, sm_count, resident)
        return min(grid, 3) if kernel.persistent else grid

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fused_path, "launch_grid", capped)
        for rec in run_case(31, (2, 1, 2), [], ensure_context(None), extra=extra):
            assert rec.get("passed"), rec
            assert rec["rel_err"] <= TOLERANCE


def test_copy_and_shape_families() -> None:
    """stream_copies: the table with only its copy program, copy issue and blocks per SM changed, the
    pointer copies after the first k-step among them; stream_shape: FUSED_TC16's table on its other
    MMA shape with each copy program (FUSED_TC has one shape: none); neither repeats the base table."""
    from composer.fused.candidates import stream_copies_candidates, stream_shape_candidates

    for order in (255, 511, 767):
        base = fused_config("FUSED_TC16", order)
        copies = [cfg for _, cfg in stream_copies_candidates("FUSED_TC16", order)]
        assert copies and base not in copies
        assert all(dataclasses.replace(c, copies=base.copies, copy_issue=base.copy_issue, min_blocks=base.min_blocks)
                   == base for c in copies)
        assert (base.copies, base.copy_issue) == ("pointers", "mma") or any(
            (c.copies, c.copy_issue, c.min_blocks) == ("pointers", "mma", base.min_blocks) for c in copies)
        shapes = [cfg for _, cfg in stream_shape_candidates("FUSED_TC16", order)]
        assert shapes and base not in shapes and all(c.mma != base.mma for c in shapes)
        assert all(dataclasses.replace(c, mma=base.mma, copies=base.copies, copy_issue=base.copy_issue) == base
                   for c in shapes)
    assert stream_shape_candidates("FUSED_TC", 767) == []


def test_joined_families_and_label_filter() -> None:
    """`sweep-fused check --subset a,b --only REGEX`: the base first, each table once across the
    families, the others filtered by label; the base survives any filter."""
    from composer.fused.candidates import FAMILIES, candidate_list

    joined = candidate_list("FUSED_TC16", 767, "stream_copies,stream_shape")
    assert joined[0][0] == "base"
    configs = [cfg for _, cfg in joined]
    assert len(configs) == len(set(configs))
    union = {cfg for f in ("stream_copies", "stream_shape") for _, cfg in FAMILIES[f]("FUSED_TC16", 767)}
    assert set(configs[1:]) == union - {configs[0]}
    only = candidate_list("FUSED_TC16", 767, "stream_copies,stream_shape", only=r"mb3")
    assert only[0][0] == "base" and len(only) > 1 and all("mb3" in name for name, _ in only[1:])
    assert candidate_list("FUSED_TC16", 767, "stream_copies", only="no such label") == joined[:1]


@needs_nvrtc
def test_copy_issue_mma_puts_the_copies_behind_the_first_mmas() -> None:
    """In the SASS of each p = 767 kernel's panel loop: after the barrier the default issues the copies
    before any DMMA; copy_issue = "mma" issues the fragment loads and some DMMAs first, and every copy
    still precedes the panel's last DMMA (they are issued inside the panel, not deferred past it)."""
    import tempfile
    from pathlib import Path

    from composer.arch import hotloop
    from composer.arch.sass import disassemble
    from composer.fused.builder import build

    def loop_ops(cubin: bytes) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.cubin"
            path.write_bytes(cubin)
            sass = disassemble(path)
        loop = hotloop.hot_loop(sass)
        return [op for addr, op, _ in hotloop._instructions(sass) if loop.start <= addr <= loop.end]

    base = dataclasses.replace(fused_config("FUSED_TC16", 767), mma="16x8x4", copies="unrolled", copy_issue="barrier")
    for issue in ("barrier", "mma"):
        for k in build(dataclasses.replace(base, copy_issue=issue)).kernels[1:]:
            ops = loop_ops(k.compiled.cubin)
            first_copy, first_mma = ops.index("LDGSTS"), ops.index("DMMA")
            last_copy = len(ops) - 1 - ops[::-1].index("LDGSTS")
            last_mma = len(ops) - 1 - ops[::-1].index("DMMA")
            if issue == "barrier":
                assert first_copy < first_mma, k.name
            else:
                assert first_mma < first_copy and last_copy < last_mma, k.name


@needs_nvrtc
@pytest.mark.parametrize("order,fetch", [(767, "128B"), (511, "256B")])
def test_l2_fetch_hint_reaches_every_panel_load(order: int, fetch: str) -> None:
    """With ``l2_fetch`` every panel copy (LDGSTS) carries the hint, and so do the product operand's
    register loads (the 511 y kernel's 16-byte LDGs); without it none does. The same DMMAs either way."""
    import re
    import tempfile
    from pathlib import Path

    from composer.arch.sass import disassemble
    from composer.fused.builder import build

    def loads(kernels) -> list[tuple[str, set[str]]]:
        out = []
        for k in kernels:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "k.cubin"
                path.write_bytes(k.compiled.cubin)
                text = str(disassemble(path))
            out.append((k.name, set(re.findall(r"\b(LDG(?:STS)?\.\S*)", text))))
        return out

    base = dataclasses.replace(fused_config("FUSED_TC16", order), l2_fetch="none")
    plain_kernels = build(base).kernels[1:]
    hinted_kernels = build(dataclasses.replace(base, l2_fetch=fetch)).kernels[1:]
    hinted = loads(hinted_kernels)
    for (name, plain), (_, hint) in zip(loads(plain_kernels), hinted):
        assert not any("LTC" in op for op in plain), (name, plain)
        copies = {op for op in hint if op.startswith("LDGSTS.")}
        assert copies and all(f"LTC{fetch}" in op for op in copies), (name, copies)
        wide = {op for op in hint if op.startswith("LDG.") and ".128" in op}  # the product's 16-byte loads
        assert all(f"LTC{fetch}" in op for op in wide), (name, wide)
    assert any(".128" in op and op.startswith("LDG.") for _, ops in hinted for op in ops) == (order == 511)
    for a, b in zip(plain_kernels, hinted_kernels):
        assert _sass(a).dmma == _sass(b).dmma and _sass(b).spill_bytes == 0


def test_l2_family_changes_only_the_l2_switches() -> None:
    """stream_l2: the table with D's layout and the copies' L2 hint changed, each alone and both,
    nothing else; five tables at each streamed FUSED_TC16 order (two layouts x three hints, less the base)."""
    from composer.fused.candidates import stream_l2_candidates

    for order in (255, 511, 767):
        base = fused_config("FUSED_TC16", order)
        found = [cfg for _, cfg in stream_l2_candidates("FUSED_TC16", order)]
        assert len(found) == 5 and base not in found
        assert all(dataclasses.replace(c, d_layout=base.d_layout, l2_fetch=base.l2_fetch) == base for c in found)
        assert {(c.d_layout, c.l2_fetch) for c in found} | {(base.d_layout, base.l2_fetch)} == {
            (d, f) for d in ("rows", "panels") for f in ("none", "128B", "256B")}


def test_kpanel_family_keeps_the_copy_program() -> None:
    """stream_kpanel: only the panel width and depth change (the pointer copies, D's layout and the L2
    hint stay, unlike stream_lines, which resets the copies to the unrolled loops); 16-wide panels are
    among them, and every table fits."""
    from composer.fused.candidates import stream_kpanel_candidates

    for order in (255, 767):
        base = fused_config("FUSED_TC16", order)
        found = [cfg for _, cfg in stream_kpanel_candidates("FUSED_TC16", order)]
        assert found and base not in found and all(_fits(c) for c in found)
        assert all(dataclasses.replace(c, k_panel=base.k_panel, stages=base.stages) == base for c in found)
        assert any(c.k_panel == 16 for c in found) and all(c.copies == "pointers" for c in found)
