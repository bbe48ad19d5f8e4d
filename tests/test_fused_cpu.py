"""CPU tests of composer.fused: schedules parse, every kernel compiles through NVRTC (sm_80, sm_90,
sm_100 where the shape exists), the SASS holds the promised instructions, FUSED_DFMA is FUSED_TC
with one switch, the clear errors, and a NumPy emulation of the kernels' index math matches the
reference. Compiled CUBINs are cached by the runtime's NVRTC cache ($COMPOSER_CACHE_DIR)."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from composer import dg
from composer.arch.limits import arch_limits
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.config import SUPPORTED_ORDERS, VARIANTS, UnsupportedOrderError, fused_config
from composer.fused.emulate import emulate

CASES = [(v, o) for v in VARIANTS for o in sorted(SUPPORTED_ORDERS[v])]
REPORT = Path(os.environ.get("COMPOSER_FUSED_REPORT", "/tmp/composer_fused_sass.json"))
_report: dict[str, dict] = {}


def _has_nvrtc() -> bool:
    try:
        from composer.runtime.nvrtc import nvrtc_version

        nvrtc_version()
        return True
    except ImportError:  # cuda-bindings not installed; a broken NVRTC fails loudly instead
        return False


needs_nvrtc = pytest.mark.skipif(not _has_nvrtc(), reason="NVRTC (cuda-bindings) not available")


def _sass(built):
    """The kernel's SASS summary; skips only when there is no cuobjdump (a failing one fails the test)."""
    from composer.arch.sass import InspectError, find_cuobjdump, inspect_cubin

    try:
        find_cuobjdump()
    except InspectError as exc:
        pytest.skip(f"no cuobjdump: {exc}")
    return inspect_cubin(built.compiled.cubin)[built.compiled.symbol(built.name)]


@pytest.mark.parametrize("variant,order", CASES)
def test_schedule_tables_parse(variant: str, order: int) -> None:
    config = fused_config(variant, order)
    assert sorted(d for k in config.kernels for d in k.dirs) == [0, 1, 2]
    # S14.2: one kernel per element at p = 7, 15, one block or one thread-block cluster (xyz_cluster) each;
    # tiled and split from p = 31
    plans = kernel_plans(config)
    if order <= 15:
        assert len(plans) == 1 and plans[0].blocks_per_element == max(1, plans[0].kernel.cluster)
    else:
        assert len(plans) >= 2 and all(p.blocks_per_element > 1 for p in plans)
    if order <= 31:  # S14.2: inline fluxes up to p = 31; from p = 63 the measured schedules choose either
        assert config.flux == "inline"
    if config.flux == "array":
        assert any(not b.blocks_per_element for b in build(config, "sm_90").kernels)  # the face kernel


@needs_nvrtc
@pytest.mark.parametrize("variant,order", CASES)
def test_compiles_sm90_and_sass(variant: str, order: int) -> None:
    result = build(fused_config(variant, order), "sm_90")
    for built in result.kernels:
        sass = _sass(built)
        _report[f"{built.name}@sm_90"] = {"regs": sass.registers, "spill_bytes": sass.spill_bytes,
                                          "dmma": sass.dmma, "dfma": sass.dfma, "smem": built.smem_bytes}
        print(f"{built.name}: {sass.registers} regs, {sass.spill_bytes} B local, DMMA {sass.dmma}, "
              f"DFMA {sass.dfma}, {built.smem_bytes} B dynamic smem")
        if built.blocks_per_element == 0:  # face kernel: no contraction
            assert sass.dmma_total == 0
            continue
        if variant == "FUSED_TC":
            assert set(sass.dmma) == {"8x8x4"} and sass.dfma == 0  # --fmad=false: no DFMA anywhere
        elif variant == "FUSED_TC16":  # m16n8k4 or m16n8k8, as the order's schedule picks
            assert set(sass.dmma) == {result.config.mma} and sass.dfma == 0
        else:  # FUSED, FUSED_DFMA
            assert sass.dmma_total == 0 and sass.dfma > 0
    REPORT.write_text(json.dumps(_report, indent=1, sort_keys=True))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_100"])
@pytest.mark.parametrize("variant,order", CASES)
def test_compiles_other_archs(variant: str, order: int, arch: str) -> None:
    config = fused_config(variant, order)
    if variant == "FUSED_TC16" and arch == "sm_80":
        with pytest.raises(ComposerError, match="needs sm_90"):
            build(config, arch)
        return
    if arch_limits(arch).max_cluster_blocks <= 1 and any(k.cluster > 1 for k in config.kernels):
        with pytest.raises(ComposerError, match=f"thread-block clusters of .*; {arch} has none"):
            build(config, arch)  # a clustered table (xyz_cluster) is sm_90's and later
        return
    try:
        kernel_plans(config, arch)
    except ComposerError:  # a schedule whose blocks hold more shared memory than the arch has (p = 15 on sm_80)
        with pytest.raises(ComposerError, match=f"shared memory per block; {arch} has "
                                                f"{arch_limits(arch).smem_per_block_optin} B"):
            build(config, arch)
        return
    result = build(config, arch)
    if variant in ("FUSED_TC", "FUSED_TC16"):
        for built in result.kernels[-1:]:
            assert set(_sass(built).dmma) == {"8x8x4"}  # sm_80 DMMA.884; sm_100 expands m16 shapes


@needs_nvrtc
@pytest.mark.parametrize("order", [7, 255])
def test_tc16_m16n8k8_compiles(order: int) -> None:
    config = dataclasses.replace(fused_config("FUSED_TC16", order), mma="16x8x8")
    for built in build(config, "sm_90").kernels:
        if built.blocks_per_element:
            assert set(_sass(built).dmma) == {"16x8x8"}


@pytest.mark.parametrize("order", sorted(SUPPORTED_ORDERS["FUSED_TC"]))
def test_dfma_is_tc_with_one_switch(order: int) -> None:
    """The iso-schedule ablation: same kernels, same source but the FUSED_DFMA switch (and name)."""
    tc, dfma = fused_config("FUSED_TC", order), fused_config("FUSED_DFMA", order)
    assert tc.kernels == dfma.kernels and tc.mma == dfma.mma and tc.flux == dfma.flux
    for p_tc, p_dfma in zip(kernel_plans(tc), kernel_plans(dfma)):
        a, b = (_code_lines(render_volume(c, p).replace(p.name, "NAME")) for c, p in ((tc, p_tc), (dfma, p_dfma)))
        diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0)
                if d[:1] in "+-" and d[:3] not in ("+++", "---")]
        assert diff == ["-#define FUSED_DFMA 0", "+#define FUSED_DFMA 1"]


def _code_lines(source: str) -> list[str]:
    """Source lines without comment-only lines (the header names the variant)."""
    return [line for line in source.splitlines() if not line.lstrip().startswith("//")]


def test_dfma_schedule_cannot_diverge() -> None:
    paths = {"FUSED_TC": _table(7, "FUSED_TC"),
             "FUSED_DFMA": {"flux": "inline", "mma": "8x8x4", "kernels": []}}
    with pytest.raises(ConfigError, match="schedule_of"):
        fused_config("FUSED_DFMA", 7, paths)


def _table(order: int, name: str) -> dict:
    from composer.config.schedules import load_schedule

    return load_schedule(order).paths[name]


def test_unsupported_order_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedOrderError, match="FUSED does not implement order 511"):
        fused_config("FUSED", 511)
    with pytest.raises(UnsupportedOrderError, match="supports"):
        fused_config("FUSED_TC", 575)


def test_wide_shape_on_sm80_is_a_clear_error() -> None:
    with pytest.raises(ComposerError, match="FUSED_TC16 at order 7.*needs sm_90"):
        build(fused_config("FUSED_TC16", 7), "sm_80")


#: The p = 15 FUSED_TC table of 2026-11: one 16^3 box per block, 174 KiB of shared memory (fits the
#: 227 KiB of sm_90, not the 163 KiB of sm_80).
BOX_P15_174K = {"flux": "inline", "mma": "8x8x4", "traces": "tiles",
                "kernels": [{"dirs": "xyz", "box": [16, 16, 16], "threads": 512, "tile": [2, 2]}]}
#: A p = 127 FUSED_TC table staging D without a fixed panel: the builder picks the widest that fits.
BOX_P127_AUTO_PANEL = {"flux": "inline", "mma": "8x8x4", "d_stage": "smem", "kernels": [
    {"dirs": "x", "box": [2, 16, 128], "threads": 512, "tile": [2, 2]},
    {"dirs": "y", "box": [2, 128, 16], "threads": 512, "tile": [2, 2]},
    {"dirs": "z", "box": [128, 2, 16], "threads": 512, "tile": [2, 2]}]}


def test_shared_memory_limit_is_the_target_archs() -> None:
    """A block over sm_80's 163 KiB builds for sm_90 and is refused for sm_80, before compiling."""
    from composer.fused.candidates import _fits

    config = fused_config("FUSED_TC", 15, {"FUSED_TC": BOX_P15_174K})
    (plan,) = kernel_plans(config, "sm_90")
    assert arch_limits("sm_80").smem_per_block_optin < plan.smem_bytes <= arch_limits("sm_90").smem_per_block_optin
    with pytest.raises(ComposerError, match=f"needs {plan.smem_bytes} B of shared memory per block; sm_80 has "
                                            f"{arch_limits('sm_80').smem_per_block_optin} B"):
        build(config, "sm_80")
    assert _fits(config, "sm_90") and not _fits(config, "sm_80")


def test_staged_d_panel_fits_the_target_arch() -> None:
    config = fused_config("FUSED_TC", 127, {"FUSED_TC": BOX_P127_AUTO_PANEL})
    assert [p.d_panel for p in kernel_plans(config, "sm_90")] == [config.nq] * 3  # all of D fits 227 KiB
    sm80 = kernel_plans(config, "sm_80")
    assert all(p.smem_bytes <= arch_limits("sm_80").smem_per_block_optin for p in sm80)
    assert min(p.d_panel for p in sm80) < config.nq  # narrower panels where all of D does not fit


def test_bad_schedule_tables_are_clear_errors() -> None:
    good = _table(31, "FUSED_TC")
    bad_box = dict(good, kernels=[dict(good["kernels"][0], box=[2, 16, 32]), good["kernels"][1]])
    with pytest.raises(ConfigError, match="carries y but spans 16"):
        fused_config("FUSED_TC", 31, {"FUSED_TC": bad_box})
    missing_z = dict(good, kernels=good["kernels"][:1])
    with pytest.raises(ConfigError, match="exactly once"):
        fused_config("FUSED_TC", 31, {"FUSED_TC": missing_z})
    with pytest.raises(ConfigError, match="16x8x4"):
        fused_config("FUSED_TC16", 31, {"FUSED_TC16": dict(good)})


@pytest.mark.parametrize("order,grid", [(7, (2, 1, 2)), (15, (1, 1, 1)), (31, (1, 1, 1)), (63, (1, 1, 1))])
@pytest.mark.parametrize("variant", VARIANTS)
def test_emulated_index_math_matches_reference(variant: str, order: int, grid: tuple) -> None:
    """The shipped schedule of every variant at every order up to 63 (p = 63: D staged in shared
    memory, min_blocks) against the reference; p >= 127 (15-65 s each here) is left to the GPU test."""
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(fused_config(variant, order), fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_emulated_m16n8k8_matches_reference() -> None:
    fields = dg.make_fields(31, (1, 1, 1), varying=True)
    ref = dg.reference_tendency(fields, 31, (1, 1, 1))
    config = dataclasses.replace(fused_config("FUSED_TC16", 31), mma="16x8x8")
    assert np.max(np.abs(emulate(config, fields, (1, 1, 1)) - ref)) / np.max(np.abs(ref)) <= 1e-13


@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_sweep_candidates_are_schedule_tables(variant: str) -> None:
    """Every sweep candidate renders to a [paths.*] table that parses back to the same config."""
    import tomllib

    from composer.fused.config import parse_table
    from composer.fused.candidates import candidates, to_table

    found = candidates(variant, 31)
    assert found[0] == ("base", fused_config(variant, 31)) and len(found) > 1
    for _, cfg in found:
        assert parse_table(variant, 31, tomllib.loads(to_table(cfg))["paths"][variant]) == cfg


# --- the measured sources: change detectors pinning the kernels the H200 timed ---------------------

# sha256[:16] of every volume kernel source the shipped schedules render, where that source is the one
# the H200 validated and timed (compiled by the NVRTC its table names: the device's 13.0, or 13.5 from
# a `composer build` directory, session 18). A hash of our own output checks nothing
# about the kernel: it makes a change to a measured kernel visible (regenerate an entry only after
# re-measuring that kernel). What checks the kernels: test_emulated_index_math_matches_reference
# (every shipped configuration at p <= 63 emulated against the reference), test_compiles_sm90_and_sass
# (every shipped configuration compiled, its SASS holding the promised instructions) and, on the GPU,
# tests/test_fused_gpu.py (every shipped configuration against the reference).
MEASURED_SOURCES = {
    # Box kernels, p = 7-127: session 4, docs/data/h200_s4/bench_p7_p127 (commit b7779e4; its
    # checkout 4319f6d renders the same bytes), every fused path at every order.
    "fused_dfma_p127_k0_x": "d5d856e4db0fc12f",
    "fused_dfma_p127_k1_y": "b80840d477d10c36",
    "fused_dfma_p127_k2_z": "5431ff116ded3112",
    "fused_dfma_p15_k0_xyz": "7942d7532be795e2",  # session 36 call 1 (docs/data/h200_s36/call1: the H100 overlay's xyz-cluster tables, A B B A)
    "fused_dfma_p31_k0_xy": "b60b10fa2ed05c19",
    "fused_dfma_p31_k1_z": "71810e6e4117fcb7",
    "fused_dfma_p63_k0_xy": "65c357b9a4d96395",
    "fused_dfma_p63_k1_z": "92a6919b1eccafb0",
    "fused_dfma_p7_k0_xyz": "954abb76cd4bd410",  # session 36 call 1 (docs/data/h200_s36/call1: the face-links plan swept and applied, A B B A)
    # FUSED at p = 255: session 18 call 2 (docs/data/h200_s18/call2, NVRTC 13.0 and 13.5 alternating).
    "fused_p255_k0_x": "157802eb64154f3b",
    "fused_p255_k1_y": "6b35c1b4109a9625",
    "fused_p255_k2_z": "c63e45edf0b9621a",
    "fused_p127_k0_x": "17fd14cfdeabb0b4",
    "fused_p127_k1_y": "b4996f2287eabe03",
    "fused_p127_k2_z": "17b52c5c3c846150",
    "fused_p15_k0_xyz": "768d0eb6d14fc0eb",  # session 26 call 1 (docs/data/h200_s26/call1: the sweep of session 21's plan)
    "fused_p31_k0_xy": "d49c6ad5d48f06c2",
    "fused_p31_k1_z": "4c9cd3bf452e2ea2",
    "fused_p63_k0_xy": "98ca7543e861a336",
    "fused_p63_k1_z": "7ca9d64a49b197bf",
    "fused_p7_k0_xyz": "8a824161e5aaaed3",
    "fused_tc16_p15_k0_xyz": "f3c863bea7d8cdc9",  # session 36 call 1 (docs/data/h200_s36/call1: the H100 overlay's xyz-cluster tables, A B B A)
    "fused_tc16_p31_k0_xy": "aab1a019b6e41adc",
    "fused_tc16_p31_k1_z": "5c16b06b4d0f6a90",
    "fused_tc16_p63_k0_xy": "7d09d1e42ab34530",
    "fused_tc16_p63_k1_z": "125374e604ae92aa",
    "fused_tc16_p7_k0_xyz": "90b388f323919789",  # session 36 call 1 (docs/data/h200_s36/call1: the face-links plan swept and applied, A B B A)
    "fused_tc_p127_k0_x": "ddc69531724c8e31",
    "fused_tc_p127_k1_y": "d4152a91377878d7",
    "fused_tc_p127_k2_z": "6c064f1be0afca8a",
    "fused_tc_p15_k0_xyz": "3f8241668f2d1e78",  # session 36 call 1 (docs/data/h200_s36/call1: the H100 overlay's xyz-cluster tables, A B B A)
    "fused_tc_p31_k0_xy": "324e1227698fa74b",
    "fused_tc_p31_k1_z": "a625b2b2866db217",
    "fused_tc_p63_k0_xy": "4c4a15e3cf56a5cc",
    "fused_tc_p63_k1_z": "79eb8869b7f21519",
    "fused_tc_p7_k0_xyz": "97b4e44da530e634",  # session 36 call 1 (docs/data/h200_s36/call1: the face-links plan swept and applied, A B B A)
    # Streamed kernels: session 4 (strided copies in calls 2/3, unrolled copies in call 5) and
    # session 5 (the stream_lines winners at p = 127-511 in call 1, paired fragments for FUSED_TC16 at
    # p = 511 and 767 in calls 2/3, block_order = "axis" at p = 767 in call 5, p = 255 on the p = 767
    # table in call 7), docs/data/h200_s4 and h200_s5.
    "fused_dfma_p255_s0_x": "0df0cc6a275cde10",
    "fused_dfma_p255_s1_y": "ceffc8bc34eb0fae",
    "fused_dfma_p255_s2_z": "ce3db1b166c84429",
    "fused_dfma_p511_s0_x": "0e196ae41f11c564",
    "fused_dfma_p511_s1_y": "b66f1705b9a477b4",
    "fused_dfma_p511_s2_z": "11972a474f644d8c",
    "fused_dfma_p767_s0_x": "d2a0fa9e05ac543d",
    "fused_dfma_p767_s1_y": "88e37ad5cf4b8023",
    "fused_dfma_p767_s2_z": "c79f7b8f6f6801a6",
    "fused_tc16_p127_s0_x": "dd2330c5d7c8f185",
    "fused_tc16_p127_s1_y": "b0bcd3acf865bf7c",
    "fused_tc16_p127_s2_z": "a7b50f00ba508075",
    "fused_tc16_p255_s0_x": "368f8ef14b4bb183",  # session 16 call 2: 16x8x8, pointer copies (call 1: issued after the first k-step)
    "fused_tc16_p255_s1_y": "82b6a73deb3983ae",
    "fused_tc16_p255_s2_z": "096958527c8ea07b",
    "fused_tc16_p511_s0_x": "1ffa6a52c27e2043",  # session 16 call 2: 16x8x8, pointer copies
    "fused_tc16_p511_s1_y": "a38c1759cc64783c",  # (s15 call 1: y on the product operand; s14: tiles, prefetch 2)
    "fused_tc16_p511_s2_z": "be5145d6c3ddc4ab",
    "fused_tc16_p767_s0_x": "c767d26d156cc564",  # session 16 call 2: 16x8x8, pointer copies after the first k-step
    "fused_tc16_p767_s1_y": "a1d2a9ed2e39703c",
    "fused_tc16_p767_s2_z": "bb963e123d37d0e1",
    "fused_tc_p255_s0_x": "a47828156e005bb9",
    "fused_tc_p255_s1_y": "96eed2c38b7cd448",
    "fused_tc_p255_s2_z": "c978e1a3ccdd2ad3",
    "fused_tc_p511_s0_x": "21d4951c3e7d195b",
    "fused_tc_p511_s1_y": "ce5c0733411fb8c0",
    "fused_tc_p511_s2_z": "c49bc4eba7ec9e9e",
    "fused_tc_p767_s0_x": "75fcc0d3dddd2d1e",
    "fused_tc_p767_s1_y": "84713377a4977708",
    "fused_tc_p767_s2_z": "da5ecb8cda35ade8",
}

#: Shipped configurations whose current source the H200 has not timed: no pin (their checks are the
#: emulation, compile and GPU tests named above).
UNMEASURED: dict[tuple[str, int], str] = {}


def source_hashes(configs) -> dict[str, str]:
    """sha256[:16] of every volume kernel source the configurations render, by kernel name."""
    import hashlib

    return {plan.name: hashlib.sha256(render_volume(config, plan).encode()).hexdigest()[:16]
            for config in configs for plan in kernel_plans(config)}


def test_shipped_schedules_render_the_measured_sources() -> None:
    from composer.config.schedules import available_orders, load_schedule

    shipped = {(name, order) for order in available_orders() for name in load_schedule(order).paths
               if name.startswith("FUSED")}
    assert shipped == set(CASES) and set(UNMEASURED) <= shipped  # every [paths.FUSED*] table, no other
    measured = [fused_config(variant, order) for variant, order in CASES if (variant, order) not in UNMEASURED]
    assert source_hashes(measured) == MEASURED_SOURCES


# --- D staged in shared memory (d_stage = "smem") and min_blocks: options that default off -------

def _staged_cases() -> list[tuple[str, int, str]]:
    from composer.fused.candidates import staged_candidates

    return [(v, o, name) for v in ("FUSED_TC", "FUSED_TC16") for o in sorted(SUPPORTED_ORDERS[v])
            for name, _ in staged_candidates(v, o)]


def _staged(variant: str, order: int, name: str):
    from composer.fused.candidates import staged_candidates

    return dict(staged_candidates(variant, order))[name]


@pytest.mark.parametrize("variant,order", [(v, o) for v in ("FUSED_TC", "FUSED_TC16") for o in sorted(SUPPORTED_ORDERS[v])])
def test_staged_candidates_offer_staging_and_two_blocks_on_box_schedules(variant: str, order: int) -> None:
    """From p = 63 a box schedule is offered D staged in shared memory and two blocks per SM (other
    than the schedule itself); a streamed schedule (it stages D by construction) and the small
    orders are offered nothing."""
    from composer.fused.candidates import STAGED_FROM, staged_candidates

    config = fused_config(variant, order)
    found = staged_candidates(variant, order)
    if config.volume == "stream" or order < STAGED_FROM:
        assert found == []
        return
    labels = [name for name, _ in found]
    assert any(" Dsmem" in name for name in labels) and any(" mb2" in name for name in labels), labels
    assert config not in [c for _, c in found]


#: The p = 255 FUSED_TC16 box-kernel table of session 2 (the shipped one now streams): the staging
#: options below are options of the box kernel.
BOX_P255_TC16 = {"flux": "array", "mma": "16x8x8", "d_stage": "smem", "d_panel": 16, "min_blocks": 2, "kernels": [
    {"dirs": "x", "box": [1, 16, 256], "threads": 256, "tile": [1, 4]},
    {"dirs": "y", "box": [1, 256, 16], "threads": 256, "tile": [1, 4]},
    {"dirs": "z", "box": [256, 1, 16], "threads": 256, "tile": [1, 4]}]}


def test_staged_options_parse_and_round_trip() -> None:
    import tomllib

    from composer.fused.config import parse_table
    from composer.fused.candidates import candidates, to_table

    for variant in ("FUSED_TC", "FUSED_TC16"):
        for _, cfg in candidates(variant, 255):
            assert parse_table(variant, 255, tomllib.loads(to_table(cfg))["paths"][variant]) == cfg
    good = BOX_P255_TC16
    with pytest.raises(ConfigError, match="d_stage"):
        fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict(good, d_stage="L2")})
    with pytest.raises(ConfigError, match="multiple of 8"):
        fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict(good, d_stage="smem", d_panel=12)})
    with pytest.raises(ConfigError, match="needs d_stage"):
        fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict({k: v for k, v in good.items() if k != "d_stage"},
                                                            d_panel=16)})
    with pytest.raises(ConfigError, match="traces"):
        fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict(good, traces="smem")})
    with pytest.raises(ConfigError, match='flux = "inline"'):
        fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict(good, flux="array", traces="tiles")})
    tiles = fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict(good, flux="inline", traces="tiles")})
    assert tiles.traces == "tiles" and all(p.q_tile and p.ntiles == 2 for p in kernel_plans(tiles))
    with pytest.raises(ConfigError, match="tensor-core engine"):
        fused_config("FUSED", 255, {"FUSED": dict(_table(255, "FUSED"), d_stage="smem")})
    with pytest.raises(ConfigError, match="min_blocks"):
        fused_config("FUSED_TC16", 255, {"FUSED_TC16": dict(good, min_blocks=0)})
    # FUSED_DFMA takes the staging and occupancy options with FUSED_TC's table
    paths = {"FUSED_TC": dict(BOX_P255_TC16, mma="8x8x4", d_stage="smem", d_panel=16, min_blocks=2)}
    dfma = fused_config("FUSED_DFMA", 255, paths)
    assert (dfma.d_stage, dfma.d_panel, dfma.min_blocks, dfma.dfma) == ("smem", 16, 2, True)


@pytest.mark.parametrize("order", [63, 127, 255, 511, 767])
def test_staged_dfma_is_tc_with_one_switch(order: int) -> None:
    from composer.fused.candidates import staged_candidates

    for _, tc in staged_candidates("FUSED_TC", order):
        dfma = dataclasses.replace(tc, variant="FUSED_DFMA", dfma=True)
        for p_tc, p_dfma in zip(kernel_plans(tc), kernel_plans(dfma)):
            assert p_tc.smem_bytes == p_dfma.smem_bytes and p_tc.d_panel == p_dfma.d_panel
            a, b = (_code_lines(render_volume(c, p).replace(p.name, "NAME"))
                    for c, p in ((tc, p_tc), (dfma, p_dfma)))
            diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0)
                    if d[:1] in "+-" and d[:3] not in ("+++", "---")]
            assert diff == ["-#define FUSED_DFMA 0", "+#define FUSED_DFMA 1"]


@pytest.mark.parametrize("panel", [8, 16, 32, 64, 128, 256, 512, 768])
def test_staged_d_layout_is_conflict_free(panel: int) -> None:
    """d_off: a bijection onto the panel, 16-byte pairs contiguous and aligned (cp.async), and the
    B-fragment loads b_i = D[a0 + g, ml + t + 4*i] of each half-warp hit 16 distinct 8-byte banks."""
    from composer.fused.emulate import d_off

    nq = max(panel, 8)
    a, m = np.meshgrid(np.arange(nq), np.arange(panel), indexing="ij")
    off = d_off(panel, a, m)
    assert sorted(off.ravel()) == list(range(nq * panel))
    assert np.all(off[:, 1::2] == off[:, 0::2] + 1) and np.all(off[:, 0::2] % 2 == 0)
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    for a0 in range(0, nq, 8):
        for ml in range(0, panel, 4):
            banks = d_off(panel, a0 + g, ml + t) % 16
            assert len(set(banks[:16])) == 16 and len(set(banks[16:])) == 16


@pytest.mark.parametrize("order,grid", [(15, (1, 1, 1)), (31, (1, 1, 1))])
@pytest.mark.parametrize("variant,mma", [("FUSED_TC", "8x8x4"), ("FUSED_TC16", "16x8x4"),
                                         ("FUSED_TC16", "16x8x8")])
def test_emulated_staged_d_matches_reference(variant: str, mma: str, order: int, grid: tuple) -> None:
    """Staged D (all of it, and 8/16-k panels) gives bit-for-bit the unstaged kernel's numbers."""
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    base = dataclasses.replace(fused_config(variant, order), mma=mma)
    plain = emulate(base, fields, grid)
    for panel in (0, 8, 16):
        config = dataclasses.replace(base, d_stage="smem", d_panel=panel, min_blocks=2 if panel else 0)
        assert [p.d_panel for p in kernel_plans(config)] == [panel or order + 1] * len(config.kernels)
        out = emulate(config, fields, grid)
        assert np.array_equal(out, plain)
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


@needs_nvrtc
@pytest.mark.parametrize("order", [63, 127])  # box-kernel schedules (p >= 255 stream since session 3)
def test_staged_dfma_compiles(order: int) -> None:
    from composer.fused.candidates import staged_candidates

    tc = next(c for n, c in staged_candidates("FUSED_TC", order) if " Dsmem" in n)
    for built in build(dataclasses.replace(tc, variant="FUSED_DFMA", dfma=True), "sm_90").kernels:
        if built.blocks_per_element:
            sass = _sass(built)
            assert sass.dmma_total == 0 and sass.dfma > 0


#: Candidates with local memory (bytes per thread, by kernel direction), reported here: ptxas keeps
#: one 64-bit value on the stack (8-16 B, outside or once in the hot loop; the sweep's check keeps
#: them), or spills under the register cap of 512 threads (x 2 blocks) (> 16 B; check drops them).
KNOWN_SPILLS = {
    ("FUSED_TC", 127, "FUSED_TC@8x8x4 box[1, 16, 128] t256 tile[2, 2] Dsmem"): "y, z: 8 B",
    ("FUSED_TC16", 63, "FUSED_TC16@16x8x4 box[2, 64, 64] t512 tile[1, 2] Dsmem"): "z: 16 B",
    ("FUSED_TC16", 127, "FUSED_TC16@16x8x4 box[4, 16, 128] t512 tile[2, 2] Dsmem8"): "z: 8 B",
    ("FUSED_TC16", 255, "FUSED_TC16@16x8x8 box[4, 16, 256] t512 tile[2, 4] Dsmem"): "x: 24 B, z: 40 B",
    ("FUSED_TC16", 255, "FUSED_TC16@16x8x8 box[4, 16, 256] t512 tile[2, 4] Dsmem8"): "y, z: 40 B",
    ("FUSED_TC16", 511, "FUSED_TC16@16x8x4 box[1, 16, 512] t512 tile[1, 2] mb2"): "x: 64 B, y, z: 56 B",
}


@needs_nvrtc
@pytest.mark.parametrize("variant,order,name", _staged_cases())
def test_staged_candidates_compile_and_sass(variant: str, order: int, name: str) -> None:
    """Every staging / occupancy candidate compiles for sm_90 with the schedule's DMMA shape; the
    staged ones issue no LDG in the hot loop, and fewer cp.async per DMMA than the same tiles issue
    LDG unstaged; min_blocks caps the registers. Local memory only where KNOWN_SPILLS reports it."""
    from composer.arch.hotloop import kernel_hot_loop

    config = _staged(variant, order, name)
    # the same boxes, threads and tiles with D read through the read-only cache, as before
    unstaged = dataclasses.replace(config, d_stage="global", d_panel=0, min_blocks=0)
    base = {b.name: b for b in build(unstaged, "sm_90").kernels}
    report = {}
    for built in build(config, "sm_90").kernels:
        if not built.blocks_per_element:
            continue
        sass, loop = _sass(built), kernel_hot_loop(built.compiled.cubin)
        ref_loop = kernel_hot_loop(base[built.name].compiled.cubin)
        report[built.name] = {"regs": sass.registers, "spill_bytes": sass.spill_bytes, "smem": built.smem_bytes,
                              "hot_loop": loop.counts, "unstaged_hot_loop": ref_loop.counts}
        print(f"{name} {built.name}: {sass.registers} regs, {sass.spill_bytes} B local, {built.smem_bytes} B smem; "
              f"hot loop {loop.summary()}; unstaged {ref_loop.summary()}")
        assert set(sass.dmma) == {config.mma} and sass.dfma == 0
        if config.min_blocks:
            assert sass.registers * built.threads * config.min_blocks <= 65536
        if (variant, order, name) in KNOWN_SPILLS:
            continue
        assert sass.spill_bytes == 0, KNOWN_SPILLS
        if config.d_stage == "smem":
            assert loop.counts.get("LDG", 0) == 0
            plan = kernel_plans(config)[0]
            if plan.d_panel == order + 1:  # all of D staged once per block, before the contraction
                assert loop.counts.get("LDGSTS", 0) == 0
            else:
                assert 0 < loop.per_mma("LDGSTS") < ref_loop.per_mma("LDG")
    if (variant, order, name) in KNOWN_SPILLS:  # the list stays honest
        assert any(k["spill_bytes"] > 0 for k in report.values())
    _report[f"{variant}@{order} {name}"] = report
    REPORT.write_text(json.dumps(_report, indent=1, sort_keys=True))


def test_sweep_apply_writes_only_measured_winners(tmp_path) -> None:
    import json
    import shutil

    from composer.config.schedules import load_schedule_file, packaged_dir
    from composer.fused.candidates import staged_candidates, to_table
    from composer.fused.sweep import apply

    src = Path(str(packaged_dir())) / "p0063.toml"
    shutil.copy(src, tmp_path / "p0063.toml")
    before = (tmp_path / "p0063.toml").read_text()
    (name, cfg), = [c for c in staged_candidates("FUSED_TC16", 63) if c[0] != "base"][:1]
    base_tc16 = fused_config("FUSED_TC16", 63)
    records = [
        {"variant": "FUSED_TC16@base", "order": 63, "passed": True, "us_per_call": 700.0, "table": to_table(base_tc16)},
        {"variant": f"FUSED_TC16@{name}", "order": 63, "passed": True, "us_per_call": 600.0, "table": to_table(cfg)},
        {"variant": "FUSED_TC16@faster-but-wrong", "order": 63, "passed": False, "us_per_call": 1.0, "table": "x"},
        {"variant": "FUSED_TC@base", "order": 63, "passed": True, "us_per_call": 650.0,
         "table": to_table(fused_config("FUSED_TC", 63))},
        {"variant": "FUSED_DFMA", "order": 63, "passed": True, "us_per_call": 5.0, "table": None},
    ]
    (tmp_path / "sweep.json").write_text(json.dumps(records))
    changed = apply(str(tmp_path / "sweep.json"), str(tmp_path), "2026-01-01")
    assert changed == ["p63 FUSED_TC16: H200 2026-01-01, composer.fused.sweep: 600.0 us/call (previous schedule 700.0)"]
    after = (tmp_path / "p0063.toml").read_text()
    assert after != before and after.count("[paths.") == before.count("[paths.")
    schedule = load_schedule_file(tmp_path / "p0063.toml")
    assert schedule.paths["FUSED_TC"] == load_schedule_file(src).paths["FUSED_TC"]
    from composer.fused.config import parse_table
    assert parse_table("FUSED_TC16", 63, schedule.paths["FUSED_TC16"]) == cfg
    # the table's measurement history (its opening comment lines) stays, the new note last
    history = re.search(r"^\[paths\.FUSED_TC16\]\n((?:#.*\n)*)", before, re.M).group(1).splitlines()
    kept = re.search(r"^\[paths\.FUSED_TC16\]\n((?:#.*\n)*)", after, re.M).group(1).splitlines()
    assert kept == history + ["# H200 2026-01-01, composer.fused.sweep: 600.0 us/call (previous schedule 700.0)"]


def test_sweep_apply_names_the_gpu_the_rows_were_timed_on(tmp_path) -> None:
    """Rows that name their machine (sweep-fused run records it since session 25) are noted as that
    machine, not as the H200 every table used to be tuned on; an unidentified GPU by its own name; a
    log of rows from several GPUs is refused; rows that name nothing (older logs) keep the default."""
    from composer.errors import ComposerError
    from composer.fused.sweep import sweep_machine_label

    assert sweep_machine_label([{"machine": "h100_sxm", "gpu": "NVIDIA H100 80GB HBM3"}] * 2) == "H100_SXM"
    assert sweep_machine_label([{"machine": None, "gpu": "NVIDIA A40"}]) == "NVIDIA A40"
    assert sweep_machine_label([{"variant": "x"}]) == "H200"
    with pytest.raises(ComposerError, match="several GPUs"):
        sweep_machine_label([{"machine": "h200", "gpu": "NVIDIA H200"},
                             {"machine": "h100_sxm", "gpu": "NVIDIA H100 80GB HBM3"}])


def test_elements_per_block_parse_render_and_compile() -> None:
    import tomllib

    from composer.fused.config import parse_table
    from composer.fused.candidates import strip_candidates, to_table
    from composer.arch.sass import inspect_cubin

    good = _table(7, "FUSED")
    cfg = fused_config("FUSED", 7, {"FUSED": dict(good, elements_per_block=4)})
    assert cfg.elements_per_block == 4
    for bad, match in ((0, r"\[1, 64\]"), (True, r"\[1, 64\]"), (2.5, r"\[1, 64\]")):
        with pytest.raises(ConfigError, match=match):
            fused_config("FUSED", 7, {"FUSED": dict(good, elements_per_block=bad)})
    with pytest.raises(ConfigError, match="whole element"):
        fused_config("FUSED", 31, {"FUSED": dict(_table(31, "FUSED"), elements_per_block=2)})
    with pytest.raises(ConfigError, match='d_stage = "global"'):
        fused_config("FUSED_TC16", 7, {"FUSED_TC16": dict(_table(7, "FUSED_TC16"), d_stage="smem",
                                                          elements_per_block=2)})
    (plan,) = kernel_plans(cfg)
    source = render_volume(cfg, plan)
    assert "for (int sub = 0; sub < 4; ++sub)" in source and "NBOX == 1" in source
    assert "for (int sub" not in render_volume(fused_config("FUSED", 7), plan)  # default: one element
    (built,) = build(cfg, "sm_90").kernels
    sass = next(iter(inspect_cubin(built.compiled.cubin).values()))
    assert sass.spill_bytes == 0
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        found = strip_candidates(variant, 7)
        assert {c.elements_per_block for _, c in found} == {2, 4, 8}
        for _, c in found:
            assert parse_table(variant, 7, tomllib.loads(to_table(c))["paths"][variant]) == c
    assert strip_candidates("FUSED", 31) == []  # tiled elements: not applicable
