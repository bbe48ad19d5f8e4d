"""``tile_swizzle``: unpadded flux tiles with each row's i XOR-swizzled (fused_volume.cu.j2's tile_off),
so that p = 15's three 16^3 flux tiles and faces fit two blocks per SM without ``flux_tiles``'s restage.

CPU: the key's errors; the layout is a bijection onto the unpadded tile; the tensor-core fragment
loads stay conflict-free in every direction, shape and order the family covers (composer.fused.banks,
against the padded layout's counts); three resident tiles fit two blocks per SM at p = 15; the
emulated kernels equal the padded ones bit for bit and the reference within 1e-13; the rendered
source's tile_off; the candidates round-trip through their tables and compile for sm_90 within their
register cap. The GPU run of these tables is the sweep's validation (``composer sweep-fused run``)."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from composer import dg
from composer.arch.limits import arch_limits
from composer.errors import ComposerError, ConfigError
from composer.fused.banks import plan_report, wavefronts
from composer.fused.emulate import tile_offset
from composer.fused.builder import kernel_plans, render_volume
from composer.fused.candidates import candidate_list, label, tile_swizzle_candidates, to_table
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import emulate

from tests.test_fused_cpu import needs_nvrtc

# the p = 7 and 15 tables these families start from (tests/conftest.py, xfaces_tables)
pytestmark = pytest.mark.usefixtures("xfaces_tables")

XYZ15 = {"flux": "inline", "mma": "16x8x4", "traces": "xfaces",
         "kernels": [{"dirs": "xyz", "box": [16, 16, 16], "threads": 512, "tile": [2, 1]}]}


def test_tile_swizzle_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="tile_swizzle.*true or false"):
        parse_table("FUSED_TC16", 15, dict(XYZ15, tile_swizzle=1))
    simt = {"flux": "inline", "kernels": [{"dirs": "xyz", "box": [16, 16, 16], "threads": 256, "tile": [4, 4]}]}
    with pytest.raises(ConfigError, match="tile_swizzle.*CUDA-core lanes"):
        parse_table("FUSED", 15, dict(simt, tile_swizzle=True))
    with pytest.raises(ConfigError, match=r"tile_swizzle.*multiple of 16.*\[8, 8, 8\]"):
        parse_table("FUSED_TC", 7, {"flux": "inline", "mma": "8x8x4", "tile_swizzle": True,
                                    "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 2]}]})
    # a configuration built in code (a candidate) is checked by the builder with the same words
    narrow = dataclasses.replace(fused_config("FUSED_TC", 7), tile_swizzle=True)
    with pytest.raises(ComposerError, match="tile_swizzle needs every box's i extent"):
        kernel_plans(narrow)


@pytest.mark.parametrize("variant,order", [("FUSED_TC", 15), ("FUSED_TC16", 15), ("FUSED_TC16", 31), ("FUSED_TC", 63)])
def test_the_swizzle_permutes_each_row_of_the_unpadded_tile(variant: str, order: int) -> None:
    config = dataclasses.replace(fused_config(variant, order), tile_swizzle=True, x_pairs=False)
    for plan in kernel_plans(config):
        bk, bj, bi = plan.kernel.box
        assert (plan.rs, plan.ps, plan.tile_doubles) == (bi, bj * bi, bk * bj * bi)
        for k in range(bk):
            for j in range(bj):
                row = [tile_offset(plan, k, j, i) for i in range(bi)]
                assert sorted(row) == list(range(k * bj * bi + j * bi, k * bj * bi + (j + 1) * bi))
                # 16-byte pairs (even i) stay contiguous and aligned: the staging's paired stores
                assert all(row[i + 1] == row[i] + 1 and row[i] % 2 == 0 for i in range(0, bi, 2))


def test_wavefront_model() -> None:
    assert wavefronts(list(range(32))) == 2  # two half-warps, every slot once
    assert wavefronts([0] * 32) == 2  # a broadcast
    assert wavefronts([16 * n for n in range(32)]) == 32  # one slot, 16 addresses per half-warp


@pytest.mark.parametrize("variant,order", [("FUSED_TC", 15), ("FUSED_TC16", 15), ("FUSED_TC16", 31),
                                           ("FUSED_TC", 31), ("FUSED_TC16", 63)])
def test_fragment_loads_stay_conflict_free(variant: str, order: int) -> None:
    padded = dataclasses.replace(fused_config(variant, order), x_pairs=False, tile_swizzle=False)
    swizzled = dataclasses.replace(padded, tile_swizzle=True)
    shape = padded.mma_shape
    for plan_p, plan_s in zip(kernel_plans(padded), kernel_plans(swizzled)):
        before, after = plan_report(plan_p, shape.m, shape.k), plan_report(plan_s, shape.m, shape.k)
        assert all(r.a_load == 2 for r in after), (variant, order, after)  # one wavefront per half-warp
        assert [r.c_point for r in after] == [r.c_point for r in before]  # the accumulator as padded


def test_unpadded_tiles_remove_the_restage_at_p15() -> None:
    limits = arch_limits("sm_90")
    found = dict(tile_swizzle_candidates("FUSED_TC16", 15))
    resident = [c for c in found.values() if not c.flux_tiles]
    assert resident, list(found)
    for config in resident:
        plan = kernel_plans(config)[0]
        assert plan.ntiles == 3 and not any(plan.restaged(n) for n in range(3))
        assert plan.smem_bytes <= limits.smem_per_block(2)  # two blocks per SM, no q/w re-read
    padded = kernel_plans(dataclasses.replace(resident[0], tile_swizzle=False))[0]
    assert padded.smem_bytes > limits.smem_per_block(2)  # why flux_tiles restaged


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 15, (1, 1, 1)), ("FUSED_TC16", 15, (1, 2, 1))])
def test_emulated_swizzled_kernels_equal_the_padded_ones(variant: str, order: int, grid: tuple) -> None:
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    for name, config in tile_swizzle_candidates(variant, order):
        out = emulate(config, fields, grid)
        assert np.array_equal(out, emulate(dataclasses.replace(config, tile_swizzle=False), fields, grid)), name
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13, name


def test_rendered_tile_off_and_unchanged_default() -> None:
    config = parse_table("FUSED_TC16", 15, dict(XYZ15, tile_swizzle=True))
    source = render_volume(config, kernel_plans(config)[0])
    assert "constexpr int RS = 16, PS = 256;" in source
    assert "(p.i ^ (((p.j + p.k) & 3) << 2))" in source
    plain = parse_table("FUSED_TC16", 15, XYZ15)
    assert "p.i ^" not in render_volume(plain, kernel_plans(plain)[0])


def test_candidates_label_and_round_trip() -> None:
    assert tile_swizzle_candidates("FUSED", 15) == [] and tile_swizzle_candidates("FUSED_TC", 7) == []
    for variant in ("FUSED_TC", "FUSED_TC16"):
        for order in (15, 31, 63):
            found = tile_swizzle_candidates(variant, order)
            assert found and all(name.endswith(" swz") or " swz" in name for name, _ in found)
            assert [n for n, _ in candidate_list(variant, order, "tile_swizzle")][1:] == [n for n, _ in found]
            for name, config in found:
                assert label(config) == name
                table = tomllib.loads(to_table(config))["paths"][variant]
                assert fused_config(variant, order, {variant: table}) == config


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED_TC", "FUSED_TC16"])
def test_swizzle_candidates_compile_with_their_register_cap(variant: str) -> None:
    from tests.test_fused_flux_tiles import assert_compiled_within_cap

    assert_compiled_within_cap(tile_swizzle_candidates(variant, 15))


def test_every_family_candidate_parses_back_as_a_table() -> None:
    """Session 26's plan held three tables the loader refuses (strip's traces = "tiles" on a flux_tiles
    table) and `sweep-fused run` stopped on the first: no family may emit one."""
    from composer.fused.candidates import FAMILIES

    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for order in (7, 15):
            for family in FAMILIES:
                if family.startswith("stream") or family in ("cluster", "wide", "staged", "budget"):
                    continue  # families of larger orders or slow to enumerate; covered by their own tests
                for name, config in FAMILIES[family](variant, order):
                    table = tomllib.loads(to_table(config))["paths"][variant]
                    assert fused_config(variant, order, {variant: table}) == config, (family, name)


@pytest.fixture(scope="module")
def device():
    from composer.runtime import default_device

    return default_device()


@pytest.mark.gpu
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 15), ("FUSED_TC16", 15), ("FUSED_TC16", 31), ("FUSED_TC", 63)])
@pytest.mark.parametrize("grid_kind", ["small", "benchmark"])
def test_swizzled_tables_match_the_reference_on_the_gpu(device, variant: str, order: int, grid_kind: str) -> None:
    """Every tile_swizzle candidate against the reference on the point-varying input (a small non-cubic
    grid, then the Table S29 one), max|diff|/max|ref| <= 1e-12."""
    from tests.test_fused_gpu import assert_candidates_validate

    assert_candidates_validate(device, order, grid_kind, tile_swizzle_candidates(variant, order))
