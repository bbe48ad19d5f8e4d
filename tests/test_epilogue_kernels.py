"""CPU tests of the epilogue trees emitted into the CuTe DSL GEMM kernel: the carrier and fold
kernels cross-compile for sm_80 (8x8x4), sm_90 (16x8x4) and sm_100 (16x8x4), issue exactly the
plain store kernel's DMMAs (the mainloop is untouched), store exactly what the plain kernel stores
(the carrier writes dqdt only, never its own derivative), and use 16-byte loads and stores where
the layout pairs two nodes of a row. Compiles are cached on disk, so a re-run costs seconds."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")

from composer.arch.mma import expected_sass  # noqa: E402
from composer.arch.sass import inspect_cubin  # noqa: E402
from composer.epilogues.kernels import fused_gemms  # noqa: E402
from composer.epilogues.paper import fused_plan, store  # noqa: E402
from composer.gemm.cute.compile import compile_config  # noqa: E402
from composer.gemm.cute.config import GemmConfigError  # noqa: E402

BUILDS = [("sm_80", "8x8x4"), ("sm_90", "16x8x4"), ("sm_100", "16x8x4")]
#: (nq, carrier, fold, carrier tile): low-order carriers on the transposed problem (16-byte pairs),
#: the fold's three kernels at Nq = 128 (x weighted) and the y kernel of the Nq = 64 form.
PLANS = [
    (16, "x", False, {}),
    (32, "y", False, {"swap": True}),
    (8, "z", False, {}),
    (128, "z", True, {}),
    (64, "z", True, {}),
]


def kernel_pair(gemm, arch, tag):
    """SASS of the fused kernel and of the plain store kernel of the same mainloop configuration."""
    from dataclasses import replace

    fused = compile_config(gemm.config, arch, f"t_{tag}", epilogue=gemm.epilogue())
    plain = compile_config(replace(gemm.config, epilogue="store"), arch, f"t_{tag}_store")
    (k,) = inspect_cubin(fused.cubin).values()
    (base,) = inspect_cubin(plain.cubin).values()
    return k, base


@pytest.mark.parametrize("arch,mma", BUILDS)
@pytest.mark.parametrize("nq,carrier,fold,carrier_tile", PLANS, ids=lambda v: str(v))
def test_fused_kernels_keep_the_mainloop_and_store_only_their_output(arch, mma, nq, carrier, fold, carrier_tile):
    plan = fused_plan(carrier, fold, nq)
    gemms = fused_gemms(plan, mma, carrier_tile=carrier_tile)
    want, factor = expected_sass(mma, arch)
    for role, gemm in gemms.items():
        if gemm.plain:
            continue
        k, base = kernel_pair(gemm, arch, f"{nq}_{carrier}{int(fold)}_{role}")
        assert k.dmma == base.dmma == {want: factor * gemm.config.mma_per_ktile}, (role, k.dmma, base.dmma)
        assert k.global_stores == base.global_stores, (role, k.global_stores, base.global_stores)
        assert base.dfma == 0 and k.registers <= 255  # the fused kernel's DFMAs are its epilogue's arithmetic
        loads = sum(k.global_loads.values())
        assert loads > sum(base.global_loads.values()), "the epilogue reads its aux and face arrays"
        if gemm.index.pairs_share_row:
            assert k.global_loads.get("128", 0) > 0 and k.global_stores.get("128", 0) > 0
        if role == carrier:
            assert gemm.face == "fstar" and plan.outputs[role] == "dqdt"


def test_plain_roles_are_gemm_cutes_kernels():
    from composer.gemm.cute.tiles import role_kernel

    gemms = fused_gemms(fused_plan("z", False, 64), "16x8x4", tiles={"x": {"stages": 2}})
    assert gemms["x"].plain and gemms["x"].config == role_kernel("x", 64, 1, "16x8x4", {"stages": 2}).config
    assert gemms["x"].epilogue() is None and gemms["z"].config.epilogue == "tree"
    assert gemms["z"].tree != store() and gemms["z"].aux_slots == ("Ez", "Ey", "dy", "Ex", "dx")


def test_tree_config_needs_its_tree(tmp_path):
    gemm = fused_gemms(fused_plan("z", False, 8), "8x8x4")["z"]
    with pytest.raises(GemmConfigError, match="specialized per instance"):
        compile_config(gemm.config, "sm_90", "t_missing", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def opcode_counts(cubin: bytes, modifiers: bool = False) -> dict[str, int]:
    """SASS opcodes of a one-kernel CUBIN, without their modifiers (``LDS``) or with them (``LDS.128``)."""
    import re
    import tempfile
    from collections import Counter
    from pathlib import Path

    from composer.arch.sass import disassemble, function_sass

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        (sass,) = function_sass(disassemble(path)).values()
    opcode = r"([A-Z][A-Z0-9_.]*)" if modifiers else r"([A-Z][A-Z0-9_]*)"
    found = (re.match(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?" + opcode, line) for line in sass.splitlines())
    return Counter(m.group(1) for m in found if m)


@pytest.mark.parametrize("arch,mma", BUILDS)
@pytest.mark.parametrize("order,carrier,fold", [(7, "x", False), (127, "z", True)])
def test_flux_in_the_mainloop_keeps_the_mmas_and_stages_both_factors(arch, mma, order, carrier, fold):
    """Each GEMM forming q*vel issues the DMMAs and stores of the kernel reading the flux array,
    twice the cp.async copies for its flux operand and one DMUL per fragment element it reads."""
    from dataclasses import replace

    from composer.epilogues.settings import fused_settings

    formed = fused_settings(order, {}, {"mma": mma, "carrier": carrier, "fold": fold, "flux": "mainloop"}).gemms()
    for role, gemm in formed.items():
        array_cfg = replace(gemm.config, product="")
        assert gemm.forms_flux and gemm.config.smem_bytes > array_cfg.smem_bytes
        k_cubin = compile_config(gemm.config, arch, f"t_qv_{order}_{role}", epilogue=gemm.epilogue()).cubin
        a_cubin = compile_config(array_cfg, arch, f"t_qa_{order}_{role}", epilogue=gemm.epilogue()).cubin
        (k,), (a,) = inspect_cubin(k_cubin).values(), inspect_cubin(a_cubin).values()
        assert k.dmma == a.dmma and k.global_stores == a.global_stores and k.spill_bytes <= a.spill_bytes + 16
        ops, base = opcode_counts(k_cubin), opcode_counts(a_cubin)
        assert ops["LDGSTS"] > base["LDGSTS"] and ops["DMUL"] > base.get("DMUL", 0), (role, ops, base)


@pytest.mark.parametrize("arch,mma", BUILDS)
@pytest.mark.parametrize("order,carrier,fold", [(7, "y", False), (127, "z", True), (511, "y", False)])
def test_flux_staged_forms_each_product_once_in_shared_memory(arch, mma, order, carrier, fold):
    """``flux = "staged"`` (GemmConfig.product_staged): the DMMAs, global stores and barriers of the
    kernel forming its flux at the fragment loads; its fragment loads those of the kernel reading the
    flux array (no factor LDS at the MMAs); per k-tile, for each chunk a thread copies, two 16-byte LDS
    (operand and factor), one 16-byte STS and two DMULs, in the interior and the predicated copy path."""
    from dataclasses import replace

    from composer.epilogues.settings import fused_settings
    from composer.gemm.cute.swizzle import interior_steps

    if arch == "sm_80" and order == 511:
        pytest.skip("p = 511's schedule names 16x8x8, which sm_80 lacks (the 8x8x4 case is p = 7, 127)")
    staged = fused_settings(order, {}, {"mma": mma, "carrier": carrier, "fold": fold, "flux": "staged"}).gemms()
    fragments = fused_settings(order, {}, {"mma": mma, "carrier": carrier, "fold": fold, "flux": "mainloop"}).gemms()
    for role, gemm in staged.items():
        cfg = gemm.config
        # the same kernel but where the staged one gives up stages to keep the array kernel's blocks per SM
        assert cfg.product_staged and cfg.product and replace(cfg, product_staged=False, stages=0, n_fastest=False) \
            == replace(fragments[role].config, stages=0) and cfg.stages <= fragments[role].config.stages
        ops = {}
        for label, c in (("staged", cfg), ("fragments", fragments[role].config), ("array", replace(cfg, product="",
                                                                                                  product_staged=False))):
            cubin = compile_config(c, arch, f"t_{label}_{order}_{role}", epilogue=gemm.epilogue()).cubin
            (info,) = inspect_cubin(cubin).values()
            ops[label] = (info, opcode_counts(cubin, modifiers=True))
        (k, k_ops), (f, f_ops), (a, a_ops) = ops["staged"], ops["fragments"], ops["array"]
        assert k.dmma == f.dmma == a.dmma and k.global_stores == f.global_stores, role
        bars = {o for o in (*k_ops, *a_ops) if o.startswith("BAR")}
        assert {o: k_ops.get(o, 0) for o in bars} == {o: a_ops.get(o, 0) for o in bars}, (role, k_ops)
        rows, mn_major = (cfg.bm, cfg.a_major == "m") if cfg.product == "a" else (cfg.bn, cfg.b_major == "n")
        chunks = rows * cfg.bk // cfg.vec
        # chunks per thread: the predicated path's (every tile shape) and the interior path's, where
        # the copies have constant offsets (interior_steps; not on Nq = 8's short tiles)
        per_thread = -(-chunks // cfg.threads) + (chunks // cfg.threads if interior_steps(
            rows, cfg.bk, cfg.vec, cfg.threads, mn_major) is not None else 0)
        assert k_ops.get("STS.128", 0) == per_thread, (role, k_ops)
        assert k_ops.get("LDS.128", 0) == 2 * per_thread + a_ops.get("LDS.128", 0), (role, k_ops)
        assert k_ops.get("LDS.64", 0) == a_ops.get("LDS.64", 0) < f_ops.get("LDS.64", 0), (role, k_ops, f_ops)
        assert k_ops.get("DMUL", 0) - a_ops.get("DMUL", 0) == cfg.vec * per_thread, (role, k_ops, a_ops)


@pytest.mark.parametrize("arch,mma", [("sm_90", "16x8x4"), ("sm_100", "16x8x4")])
@pytest.mark.parametrize("nq,carrier_tile", [(128, {}), (32, {"swap": True}),
                                             (128, {"epilogue_prefetch_split": True})],
                         ids=("c_m_major", "c_n_contiguous", "split"))
def test_epilogue_prefetch_issues_l2_prefetches_of_every_aux_array_and_keeps_the_rest(arch, mma, nq, carrier_tile):
    """``epilogue_prefetch`` (the carrier's tile key): one predicated prefetch.global.L2
    (CCTL.E.PF2) per aux array, 128-byte chunk and tile run, spread over the block's threads; the
    mainloop's DMMAs and the stores stay those of the kernel without it. With
    ``epilogue_prefetch_split`` each array's prefetches sit in their own k-tile's branch: the same
    instruction count, in five places."""
    from dataclasses import replace

    from composer.gemm.cute.kernel import TensorOpDgemm

    plan = fused_plan("y", False, nq)
    gemm = fused_gemms(plan, mma, carrier_tile={**carrier_tile, "epilogue_prefetch": 2})["y"]
    split = bool(carrier_tile.get("epilogue_prefetch_split"))
    assert gemm.config.epilogue_prefetch == 2 and gemm.config.tag.endswith("_e2s" if split else "_e2")
    assert gemm.config.epilogue_prefetch_split == split
    with_pf = compile_config(gemm.config, arch, f"t_pf_y{nq}{'s' if split else ''}", epilogue=gemm.epilogue())
    without = compile_config(replace(gemm.config, epilogue_prefetch=0, epilogue_prefetch_split=False), arch,
                             f"t_pf_y{nq}_0", epilogue=gemm.epilogue())
    (k,) = inspect_cubin(with_pf.cubin).values()
    (base,) = inspect_cubin(without.cubin).values()
    epilogue = gemm.epilogue()
    cfg = gemm.config
    runs, span = (cfg.bn, cfg.bm) if cfg.c_major == "m" else (cfg.bm, cfg.bn)
    per_array = -(-runs * (-(-span // 16) + 1) // cfg.threads)
    assert len(epilogue.prefetch_slots) == 5  # the carrier without the fold: dx, dz, Ex, Ey, Ez
    assert (cfg.c_major == "m") == ("swap" not in carrier_tile)
    assert k.l2_prefetches == len(epilogue.prefetch_slots) * per_array and base.l2_prefetches == 0
    assert k.dmma == base.dmma and k.global_stores == base.global_stores
    assert TensorOpDgemm(cfg, arch, "t", epilogue).prefetch_at == 2
    # the plain store kernel reads no array: nothing to prefetch, the option is inert
    assert TensorOpDgemm(replace(cfg, epilogue="store"), arch, "t").prefetch_at == 0


def test_the_split_prefetch_issues_each_array_once_in_order_inside_the_mainloop():
    """config.split_prefetch_k_tiles (the kernel's rule): every array once, at increasing k-tiles
    inside [0, k_tiles), K / 5 apart over the window, from the first k-tile when K is longer."""
    from composer.gemm.cute.config import split_prefetch_k_tiles

    assert split_prefetch_k_tiles(32, 16, 5) == [16, 19, 22, 25, 28]
    assert split_prefetch_k_tiles(32, 64, 5) == [0, 6, 12, 18, 24]
    assert split_prefetch_k_tiles(4, 16, 5) == [0, 1, 2, 3, 3]  # p = 63's carrier: 4 k-tiles
    for k_tiles in range(1, 80):
        for window in range(1, 65):
            at = split_prefetch_k_tiles(k_tiles, window, 5)
            assert at == sorted(at) and 0 <= at[0] and at[-1] < k_tiles
            assert at[0] == k_tiles - min(window, k_tiles)


def test_the_split_prefetch_kernel_differs_from_the_all_at_once_one():
    """Same prefetch count, other code: the split kernel places the arrays' prefetches in their own
    k-tile branches (K = 8 of Nq = 128's 8 k-tiles: one array per k-tile)."""
    from dataclasses import replace

    plan = fused_plan("y", False, 128)
    gemm = fused_gemms(plan, "16x8x4", carrier_tile={"epilogue_prefetch": 8, "epilogue_prefetch_split": True})["y"]
    split = compile_config(gemm.config, "sm_90", "t_pf8s", epilogue=gemm.epilogue())
    burst = compile_config(replace(gemm.config, epilogue_prefetch_split=False), "sm_90", "t_pf8", epilogue=gemm.epilogue())
    (k_split,) = inspect_cubin(split.cubin).values()
    (k_burst,) = inspect_cubin(burst.cubin).values()
    assert split.cubin != burst.cubin
    assert k_split.l2_prefetches == k_burst.l2_prefetches > 0 and k_split.dmma == k_burst.dmma


def test_epilogue_prefetch_is_checked_and_named():
    from composer.epilogues.carrier_tiles import PREFETCH_DISTANCES, PREFETCH_SPLIT_WINDOWS, tile_tag, tile_variants

    plan = fused_plan("y", False, 512)
    with pytest.raises(GemmConfigError, match=r"epilogue_prefetch=17 outside \[0, 16\]"):
        fused_gemms(plan, "16x8x8", carrier_tile={"epilogue_prefetch": 17})
    tile = {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3, "swap": False}
    assert tile_tag({**tile, "epilogue_prefetch": 4}) == "t128x64x16w2x2s3e4" and tile_tag(tile) == "t128x64x16w2x2s3"
    variants = tile_variants(tile, "sm_90", "16x8x8")
    def geometry(t):
        return {k: v for k, v in t.items() if k not in ("epilogue_prefetch", "epilogue_prefetch_split")}

    assert [(t["epilogue_prefetch"], t.get("epilogue_prefetch_split", False)) for m, t in variants
            if "epilogue_prefetch" in t and geometry(t) == tile] == [(d, False) for d in PREFETCH_DISTANCES] + [
                (d, True) for d in PREFETCH_SPLIT_WINDOWS]
    # the other library tiles (two blocks per SM) with the whole-mainloop split, the schedule's shape only
    assert sorted((t["bm"], t["bn"], t["stages"], m) for m, t in variants if "epilogue_prefetch" in t
                  and geometry(t) != tile) == [(64, 64, 4, "16x8x8"), (64, 128, 3, "16x8x8")]
    assert all(t["epilogue_prefetch"] == max(PREFETCH_SPLIT_WINDOWS) and t["epilogue_prefetch_split"]
               for m, t in variants if "epilogue_prefetch" in t and geometry(t) != tile)
    assert tile_tag({**tile, "epilogue_prefetch": 16, "epilogue_prefetch_split": True}) == "t128x64x16w2x2s3e16s"
    # p = 63's carrier has 4 k-tiles of 16: windows 16 and 64 are both the whole mainloop, one is tried
    short = tile_variants(tile, "sm_90", "16x8x8", k_extent=64)
    assert [t["epilogue_prefetch"] for m, t in short if t.get("epilogue_prefetch_split") and geometry(t) == tile] == [16]
    long = tile_variants(tile, "sm_90", "16x8x8", k_extent=512)  # 32 k-tiles: 16 is half, 64 all
    assert [t["epilogue_prefetch"] for m, t in long if t.get("epilogue_prefetch_split") and geometry(t) == tile] == [16, 64]
    with pytest.raises(GemmConfigError, match="epilogue_prefetch_split needs epilogue_prefetch > 0"):
        fused_gemms(plan, "16x8x8", carrier_tile={"epilogue_prefetch_split": True})
    with pytest.raises(GemmConfigError, match=r"epilogue_prefetch=65 outside \[0, 64\]"):
        fused_gemms(plan, "16x8x8", carrier_tile={"epilogue_prefetch": 65, "epilogue_prefetch_split": True})
    assert fused_gemms(plan, "16x8x8", carrier_tile={"epilogue_prefetch": 32, "epilogue_prefetch_split": True}
                       )["y"].config.epilogue_prefetch == 32
    shipped_pf = tile_variants({**tile, "epilogue_prefetch": 2}, "sm_90", "16x8x8")
    assert [t["epilogue_prefetch"] for m, t in shipped_pf if "epilogue_prefetch" in t and m == "16x8x8"
            and {k: v for k, v in t.items() if k != "epilogue_prefetch"} == tile] == [0, 4]
    assert ("16x8x8", {**tile, "epilogue_prefetch": 0}) not in variants  # the shipped tile itself


def _loads_before_first_store(cubin: bytes, tmp_path, name: str) -> int:
    """Global loads between the mainloop's last DMMA and the epilogue's first global store."""
    import re

    from composer.arch.sass import disassemble

    path = tmp_path / f"{name}.cubin"
    path.write_bytes(cubin)
    lines = [ln for ln in disassemble(path).splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", ln)]
    last_mma = max(i for i, ln in enumerate(lines) if "DMMA" in ln)
    loads = 0
    for ln in lines[last_mma:]:
        if re.search(r"\bSTG\b|\bSTG\.", ln):
            break
        loads += bool(re.search(r"\bLDG\.", ln))
    return loads


def test_the_carriers_own_store_group_puts_more_loads_in_flight_before_its_first_store(tmp_path):
    """``carrier_tile.store_group`` (over the table's ``store_group``, the carrier's only): the same
    mainloop, the carrier's group of sites' five array loads issued before the group's stores, so
    the epilogue of a 32-site thread waits for 32 / group DRAM round trips instead of 8."""
    from composer.epilogues.carrier_tiles import STORE_GROUPS, tile_tag, tile_variants

    plan = fused_plan("y", False, 512)
    tile = {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3, "swap": False}
    base = fused_gemms(plan, "16x8x8", carrier_tile=tile)
    wide = fused_gemms(plan, "16x8x8", carrier_tile={**tile, "store_group": 16}, store_group=4)
    assert base["y"].store_group == 4 and wide["y"].store_group == 16
    assert wide["y"].config == base["y"].config and wide["y"].describe()["store_group"] == 16
    assert all(wide[r] == base[r] for r in ("x", "z"))  # only the carrier's group changes
    few = _loads_before_first_store(compile_config(base["y"].config, "sm_90", "t_g4", epilogue=base["y"].epilogue()).cubin,
                                    tmp_path, "g4")
    many = _loads_before_first_store(compile_config(wide["y"].config, "sm_90", "t_g16", epilogue=wide["y"].epilogue()).cubin,
                                     tmp_path, "g16")
    assert many >= 3 * few > 0
    assert tile_tag({**tile, "store_group": 8}) == "t128x64x16w2x2s3g8"
    groups = [t["store_group"] for m, t in tile_variants(tile, "sm_90", "16x8x8") if t.get("store_group")]
    assert groups == list(STORE_GROUPS)


@pytest.mark.parametrize("mma,tile", [("16x8x8", {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3}),
                                      ("16x8x4", {"bm": 128, "bn": 128, "bk": 32, "warps_m": 2, "warps_n": 4, "stages": 3})])
def test_the_fragment_pipeline_keeps_every_mma_and_moves_a_k_tiles_loads_across_its_barrier(mma, tile, tmp_path):
    """``fragment_pipeline``: the same DMMAs and stores as the plain kernel; in the mainloop the
    next k-tile's first fragments are loaded between the barrier and the last k-step's MMAs (the
    plain loop has no DMMA after its barrier before that k-tile's loads), and one more barrier
    before the loop (tile 0's fragments)."""
    import re
    from dataclasses import replace

    from composer.arch.sass import disassemble
    from composer.gemm.cute.tiles import role_kernel

    cfg = role_kernel("x", 512, 1, mma, tile).config
    piped_cfg = replace(cfg, fragment_pipeline=True)
    assert piped_cfg.tag == cfg.tag + "_fp" and piped_cfg.validate("sm_90") is piped_cfg
    kernels = {}
    for name, c in (("plain", cfg), ("piped", piped_cfg)):
        built = compile_config(c, "sm_90", f"t_fp_{name}")
        (k,) = inspect_cubin(built.cubin).values()
        path = tmp_path / f"{name}.cubin"
        path.write_bytes(built.cubin)
        kernels[name] = (k, [ln for ln in disassemble(path).splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", ln)])
    (plain, plain_sass), (piped, piped_sass) = kernels["plain"], kernels["piped"]
    assert piped.dmma == plain.dmma and piped.global_stores == plain.global_stores

    def dmma_after_barrier_before_lds(lines):
        """A DMMA between a BAR.SYNC and the next LDS: MMAs of the current tile run across the barrier."""
        seen_bar = False
        for ln in lines:
            if "BAR.SYNC" in ln:
                seen_bar = True
            elif seen_bar and re.search(r"\bLDS", ln):
                seen_bar = False
            elif seen_bar and "DMMA" in ln:
                return True
        return False

    assert dmma_after_barrier_before_lds(piped_sass) and not dmma_after_barrier_before_lds(plain_sass)
    bars = [sum("BAR.SYNC" in ln for ln in sass) for sass in (plain_sass, piped_sass)]
    assert bars[1] == bars[0] + 1


def test_the_async_epilogue_carrier_hands_each_tile_over_through_named_barriers(tmp_path):
    """``async_epilogue_tiles = T``: twice the threads (MMA warps + epilogue warps), two accumulator
    buffers in shared memory, a grid of cdiv(tiles, T) blocks; in SASS the MMA warps' own barrier
    (id 1, the MMA threads) and the full/empty hand-over barriers of both groups (BAR.ARV and
    BAR.SYNC on 2 x threads), the same DMMAs, loads and stores as the plain carrier, and no spill
    beyond its; bad combinations are clear errors. (Its output against the plain twin, bit for
    bit: tests/test_gemm_fused_gpu.py, on the GPU.)"""
    import re
    from dataclasses import replace

    from composer.arch.sass import disassemble
    from composer.epilogues.carrier_tiles import ASYNC_EPILOGUE_TILES, tile_tag, tile_variants

    plan = fused_plan("y", False, 512)
    tile = {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3}
    plain = fused_gemms(plan, "16x8x8", carrier_tile=tile)["y"]
    asyn = fused_gemms(plan, "16x8x8", carrier_tile={**tile, "async_epilogue_tiles": 4})["y"]
    cfg = asyn.config
    assert cfg.tag == plain.config.tag + "_ae4" and cfg.block_threads == 2 * cfg.threads == 256
    assert cfg.smem_bytes == plain.config.smem_bytes + 2 * 128 * 64 * 8
    assert cfg.grid(512, 512 * 512, 1) == (-(-(4 * 4096) // 4), 1, 1)
    assert cfg.grid_rule() == "cdiv(cdiv(m, 128) * cdiv(n, 64) * batch, 4)"
    sass = {}
    for name, gemm in (("plain", plain), ("async", asyn)):
        built = compile_config(gemm.config, "sm_90", f"t_ae_{name}", epilogue=gemm.epilogue())
        path = tmp_path / f"{name}.cubin"
        path.write_bytes(built.cubin)
        (k,) = inspect_cubin(built.cubin).values()
        sass[name] = (k, disassemble(path))
    (k_plain, _), (k_async, text) = sass["plain"], sass["async"]
    assert k_async.dmma == k_plain.dmma and k_async.global_loads == k_plain.global_loads
    assert k_async.global_stores == k_plain.global_stores and k_async.spill_bytes <= k_plain.spill_bytes
    bars = {(op, operands.strip()) for op, operands in re.findall(r"\b(BAR\.(?:SYNC|ARV))\S*\s+([^;]*);", text)}
    assert ("BAR.SYNC", "0x1, 0x80") in bars  # the MMA warps' own barrier, 128 threads
    assert {op for op, operands in bars if operands.endswith("0x100")} == {"BAR.SYNC", "BAR.ARV"}
    assert tile_tag({**tile, "async_epilogue_tiles": 8}) == "t128x64x16w2x2s3ae8"
    shipped = {**tile, "swap": False}
    assert not [t for m, t in tile_variants(shipped, "sm_90", "16x8x8") if t.get("async_epilogue_tiles")]
    opted = [t["async_epilogue_tiles"] for m, t in tile_variants(shipped, "sm_90", "16x8x8", async_epilogue=True)
             if t.get("async_epilogue_tiles")]
    assert sorted(set(opted)) == sorted(ASYNC_EPILOGUE_TILES)
    for bad, message in (({"async_epilogue_tiles": 1}, r"async_epilogue_tiles=1 outside \[2, 64\]"),
                         ({"async_epilogue_tiles": 4, "fragment_pipeline": True}, "runs without epilogue_prefetch")):
        with pytest.raises(GemmConfigError, match=message):
            replace(plain.config, **bad).validate("sm_90")


def test_carriers_for_more_blocks_per_sm_cap_their_registers_and_say_what_does_not_fit(tmp_path):
    """``min_blocks = N`` compiles the carrier for N blocks per SM (ptxas caps the registers: 168 for
    three 128-thread blocks, 128 for two 256-thread asynchronous ones) and ``async_buffers = 1`` keeps
    one hand-over buffer (96 KB on the 64x64x16 4-stage tile: two blocks fit); both are in the names,
    the sweep's tile variants (the asynchronous one on request) and the configuration's checks."""
    from dataclasses import replace

    from composer.epilogues.carrier_tiles import THREE_BLOCK_TILES, TWO_BLOCK_ASYNC, tile_tag, tile_variants

    plan = fused_plan("y", False, 512)
    tile = {"bm": 64, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 4}
    three = fused_gemms(plan, "16x8x8", carrier_tile={**tile, "min_blocks": 3})["y"]
    two = fused_gemms(plan, "16x8x8", carrier_tile={**tile, "async_epilogue_tiles": 8, **TWO_BLOCK_ASYNC})["y"]
    assert three.config.tag.endswith("_mb3") and two.config.tag.endswith("_ae8b1_mb2")
    assert two.config.smem_bytes == 8 * 4 * (64 + 64) * 16 + 64 * 64 * 8 == 98304
    assert (three.config.registers_cap("sm_90"), two.config.registers_cap("sm_90")) == (168, 128)
    # a request: sm_80's 164 KB hold two of the three 65 KB blocks, so it compiles for two there
    assert (three.config.resident_blocks("sm_90"), three.config.resident_blocks("sm_80")) == (3, 2)
    assert three.config.registers_cap("sm_80") == 255 and three.config.registers_cap() == 168
    for gemm in (three, two):
        built = compile_config(gemm.config, "sm_90", "t_mb", epilogue=gemm.epilogue())
        (k,) = inspect_cubin(built.cubin).values()
        assert k.registers <= gemm.config.registers_cap("sm_90") and k.dmma == {"16x8x8": 16}
    assert tile_tag({**tile, "async_epilogue_tiles": 4, **TWO_BLOCK_ASYNC}) == "t64x64x16w2x2s4ae4b1mb2"
    shipped = {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3, "swap": False}
    plain_variants = [tile_tag(t) for _, t in tile_variants(shipped, "sm_90", "16x8x8", k_extent=512)]
    assert [tile_tag(t) for t in THREE_BLOCK_TILES] == ["t64x64x16w2x2s4mb3", "t64x64x16w2x2s3mb3"]
    assert set(plain_variants) >= {"t64x64x16w2x2s4mb3", "t64x64x16w2x2s3mb3"}
    assert not [t for t in plain_variants if "b1" in t]
    opted = [tile_tag(t) for _, t in tile_variants(shipped, "sm_90", "16x8x8", k_extent=512, async_epilogue=True)]
    assert {"t64x64x16w2x2s4ae4b1mb2", "t64x64x16w2x2s4ae8b1mb2"} <= set(opted)
    # every capped or asynchronous carrier the sweep builds has its plain twin beside it (or is the shipped
    # tile's variant): tests/test_gemm_fused_gpu.py compares them bit for bit
    def plain_twin(tag: str) -> str:
        return re.sub(r"(ae\d+)?(b1)?(mb\d)?$", "", tag)
    capped = [t for t in opted if re.search(r"(ae\d+(b1)?(mb\d)?|mb\d)$", t)]
    assert capped and all(plain_twin(t) in set(opted) | {tile_tag(shipped)} for t in capped), capped
    cfg = three.config
    for bad, message in (({"async_buffers": 1}, "async_buffers applies to async_epilogue_tiles only"),
                         ({"async_buffers": 3, "async_epilogue_tiles": 4}, "async_buffers=3 must be 1 or 2"),
                         ({"min_blocks": 5}, r"min_blocks=5 outside \[0, 4\]"),
                         ({"min_blocks": 4, "stages": 2, "bm": 128, "bn": 128, "warps_m": 2, "warps_n": 4},
                          r"min_blocks=4 \(3 resident on sm_90\) caps registers at 80 per thread, too few for 64")):
        with pytest.raises(GemmConfigError, match=message):
            replace(cfg, **bad).validate("sm_90")
    # shared memory and threads lower the request instead of refusing it
    assert replace(cfg, min_blocks=4).resident_blocks("sm_90") == 3  # 4 x 65 KB do not fit 228 KB
    wide = replace(cfg, min_blocks=3, warps_m=8, warps_n=4, bm=128, bn=256, stages=2)
    assert wide.resident_blocks("sm_90") == 2 and wide.registers_cap("sm_90") == 32  # 2048 threads hold two


def test_stagger_waits_on_the_global_timer_before_the_mainloop_and_keeps_the_kernel():
    """``stagger_us`` (the carrier's tile key): the first wave's blocks wait on %globaltimer in
    nanosleep rounds, the wait scaled by the period in nanoseconds over %nsmid x the blocks per SM
    (the p = 511 128x64x16 3-stage carrier: two by its register cap); the DMMAs, stores and
    registers stay those of the kernel without it, and the key is checked and named."""
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from composer.arch.sass import disassemble, function_sass
    from composer.epilogues.carrier_tiles import STAGGER_PERIODS, tile_tag, tile_variants
    from composer.gemm.cute.kernel import TensorOpDgemm

    tile = {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3, "swap": False}
    gemm = fused_gemms(fused_plan("y", False, 512), "16x8x8", carrier_tile={**tile, "stagger_us": 40})["y"]
    assert gemm.config.stagger_us == 40 and gemm.config.tag.endswith("_st40")
    staggered = compile_config(gemm.config, "sm_90", "t_st40", epilogue=gemm.epilogue())
    plain = compile_config(replace(gemm.config, stagger_us=0), "sm_90", "t_st0", epilogue=gemm.epilogue())
    (k,) = inspect_cubin(staggered.cubin).values()
    (base,) = inspect_cubin(plain.cubin).values()
    assert k.dmma == base.dmma and k.global_stores == base.global_stores and k.global_loads == base.global_loads
    assert k.registers == base.registers
    with tempfile.TemporaryDirectory() as tmp:
        listings = {}
        for name, build in (("st", staggered), ("plain", plain)):
            path = Path(tmp) / f"{name}.cubin"
            path.write_bytes(build.cubin)
            (listings[name],) = function_sass(disassemble(path)).values()
    assert "NANOSLEEP" in listings["st"] and "SR_GLOBALTIMER" in listings["st"]
    assert "NANOSLEEP" not in listings["plain"] and "SR_GLOBALTIMER" not in listings["plain"]
    assert "0x9c40" in listings["st"]  # 40 us = 40000 ns, the period the block's share is taken of
    assert TensorOpDgemm(gemm.config, "sm_90", "t", gemm.epilogue()).stagger_slots == 2
    with pytest.raises(GemmConfigError, match=r"stagger_us=1001 outside \[0, 1000\]"):
        fused_gemms(fused_plan("y", False, 512), "16x8x8", carrier_tile={**tile, "stagger_us": 1001})
    with pytest.raises(GemmConfigError, match="stagger_us applies to one tile per block"):
        fused_gemms(fused_plan("y", False, 512), "16x8x8",
                    carrier_tile={**tile, "stagger_us": 50, "async_epilogue_tiles": 4})
    assert tile_tag({**tile, "stagger_us": 50}) == "t128x64x16w2x2s3st50"
    swept = [t.get("stagger_us") for _, t in tile_variants(tile, "sm_90", "16x8x8") if t.get("stagger_us")]
    assert swept == list(STAGGER_PERIODS)
