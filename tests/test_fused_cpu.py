"""CPU tests of composer.fused: schedules parse, every kernel compiles through NVRTC (sm_80, sm_90,
sm_100 where the shape exists), the SASS holds the promised instructions, FUSED_DFMA is FUSED_TC
with one switch, the clear errors, and a NumPy emulation of the kernels' index math matches the
reference. Compiled CUBINs are cached by the runtime's NVRTC cache ($COMPOSER_CACHE_DIR)."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from composer import dg
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
    except Exception:
        return False


needs_nvrtc = pytest.mark.skipif(not _has_nvrtc(), reason="NVRTC (cuda-bindings) not available")


def _sass(built):
    try:
        from composer.inspect_sass import InspectError, inspect_cubin
    except ImportError:  # pragma: no cover
        pytest.skip("composer.inspect_sass not available")
    try:
        return inspect_cubin(built.compiled.cubin)[built.compiled.symbol(built.name)]
    except InspectError as exc:
        pytest.skip(f"no cuobjdump: {exc}")


@pytest.mark.parametrize("variant,order", CASES)
def test_schedule_tables_parse(variant: str, order: int) -> None:
    config = fused_config(variant, order)
    assert sorted(d for k in config.kernels for d in k.dirs) == [0, 1, 2]
    # S14.2: one block and one kernel per element at p = 7, 15; tiled and split from p = 31
    plans = kernel_plans(config)
    if order <= 15:
        assert len(plans) == 1 and plans[0].blocks_per_element == 1
    else:
        assert len(plans) >= 2 and all(p.blocks_per_element > 1 for p in plans)
    assert config.flux == ("inline" if order <= 31 else "array")


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
    paths = {"FUSED_TC": fused_config("FUSED_TC", 7) and _table(7, "FUSED_TC"),
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


@pytest.mark.parametrize("order,grid", [(7, (2, 1, 2)), (15, (1, 1, 1)), (31, (1, 1, 1))])
@pytest.mark.parametrize("variant", VARIANTS)
def test_emulated_index_math_matches_reference(variant: str, order: int, grid: tuple) -> None:
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(fused_config(variant, order), fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_emulated_m16n8k8_matches_reference() -> None:
    fields = dg.make_fields(31, (1, 1, 1), varying=True)
    ref = dg.reference_tendency(fields, 31, (1, 1, 1))
    config = dataclasses.replace(fused_config("FUSED_TC16", 31), mma="16x8x8")
    assert np.max(np.abs(emulate(config, fields, (1, 1, 1)) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_fast_varying_fields_are_make_fields() -> None:
    from tests.test_fused_gpu import varying_fields

    for order, grid in ((7, (3, 2, 2)), (31, (2, 1, 1))):
        fast, slow = varying_fields(order, grid), dg.make_fields(order, grid, varying=True)
        assert all(np.array_equal(fast[k], slow[k]) for k in dg.FIELD_KEYS)


@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_sweep_candidates_are_schedule_tables(variant: str) -> None:
    """Every sweep candidate renders to a [paths.*] table that parses back to the same config."""
    import tomllib

    from composer.fused.config import parse_table
    from composer.fused.sweep import candidates, to_table

    found = candidates(variant, 31)
    assert found[0] == ("base", fused_config(variant, 31)) and len(found) > 1
    for _, cfg in found:
        assert parse_table(variant, 31, tomllib.loads(to_table(cfg))["paths"][variant]) == cfg
