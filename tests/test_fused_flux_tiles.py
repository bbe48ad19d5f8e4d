"""``flux_tiles``: a three-direction box kernel that holds two flux tiles and stages z's fluxes into
y's tile once y is contracted (composer/fused/templates/fused_volume.cu.j2), so that p = 15's xyz
kernel (four 41-KB tiles, one block per SM) fits two blocks per SM.

CPU: the table key's errors, the smaller shared memory and the blocks it allows, the emulated kernels
bit for bit equal to the same tables without the key and within 1e-13 of the reference, the rendered
source stages z once after y's contraction, and every candidate compiles for sm_90 with its register
cap. The GPU run of these tables is the sweep's validation (``composer sweep-fused run``)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from composer import dg
from composer.arch.limits import arch_limits
from composer.errors import ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.candidates import candidate_list, flux_tile_candidates, to_table
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import emulate

from tests.test_fused_cpu import _sass, needs_nvrtc

XYZ15 = {"flux": "inline", "mma": "8x8x4",
         "kernels": [{"dirs": "xyz", "box": [16, 16, 16], "threads": 512, "tile": [2, 2]}]}


def test_flux_tiles_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="flux_tiles.*integer in \\[2, 2\\]"):
        parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=3))
    with pytest.raises(ConfigError, match="flux_tiles.*integer"):
        parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=1))
    with pytest.raises(ConfigError, match="flux_tiles.*integer"):
        parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=True))
    with pytest.raises(ConfigError, match='flux_tiles.*traces = "global"'):
        parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=2, traces="tiles"))
    split = {"flux": "inline", "mma": "8x8x4",
             "kernels": [{"dirs": "xy", "box": [2, 32, 32], "threads": 256, "tile": [2, 2]},
                         {"dirs": "z", "box": [32, 2, 32], "threads": 256, "tile": [2, 2]}]}
    with pytest.raises(ConfigError, match="flux_tiles.*three directions"):
        parse_table("FUSED_TC", 31, dict(split, flux_tiles=2))


def test_two_tiles_fit_two_blocks_per_sm() -> None:
    limits = arch_limits("sm_90")
    full = kernel_plans(parse_table("FUSED_TC", 15, XYZ15))[0]
    two = kernel_plans(parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=2)))[0]
    assert (full.ntiles, two.ntiles) == (3, 2)
    assert [two.tile_slot(n) for n in range(3)] == [0, 1, 1]
    assert [two.restaged(n) for n in range(3)] == [False, False, True]
    assert full.smem_bytes - two.smem_bytes == 8 * full.tile_doubles
    assert full.smem_bytes > limits.smem_per_block(2) >= two.smem_bytes


def test_rendered_kernel_stages_z_after_y() -> None:
    config = parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=2))
    source = render_volume(config, kernel_plans(config)[0])
    # the first staging pass forms x's and y's fluxes only; z's goes into tile 1 after y's contraction
    first, rest = source.split("// 2. fstar", 1)
    assert "vel[0]" in first and "vel[1]" in first and "vel[2]" not in first
    restage = rest.index("vel[2] + g")
    assert rest.index("Contract<1>") < restage < rest.index("Contract<2>")
    assert re.search(r"smem\[1 \* TILE \+ tile_off\(p\)\] = qv\.x \* vv\.x", rest)
    assert "smem + 2 * TILE" not in source and source.count("smem + 1 * TILE") == 2


@pytest.mark.parametrize("variant,order,grid", [("FUSED", 15, (1, 1, 1)), ("FUSED_TC", 15, (1, 1, 1)),
                                                ("FUSED_TC16", 15, (1, 1, 1)), ("FUSED_TC16", 7, (2, 1, 2))])
def test_emulated_flux_tiles_match_the_three_tile_kernel(variant: str, order: int, grid: tuple) -> None:
    found = flux_tile_candidates(variant, order)
    assert found, f"{variant} p={order}: no flux_tiles candidate"
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    for name, config in found[:2]:
        plain = emulate(dataclasses.replace(config, flux_tiles=0), fields, grid)
        out = emulate(config, fields, grid)
        assert np.array_equal(out, plain), name
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13, name


def test_candidates_only_where_shared_memory_bounds_the_blocks() -> None:
    # p = 7 FUSED_TC: 256 threads of 22 KB, eight blocks per SM already; p = 31: no xyz kernel
    assert flux_tile_candidates("FUSED_TC", 7) == [] and flux_tile_candidates("FUSED_TC", 31) == []
    names = [n for n, _ in flux_tile_candidates("FUSED_TC", 15)]
    assert names and all(n.endswith(" ft2") for n in names) and len(set(names)) == len(names)
    assert [n for n, _ in candidate_list("FUSED_TC", 15, "flux_tiles")][1:] == names


def test_candidate_tables_parse_back() -> None:
    import tomllib

    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for _, config in flux_tile_candidates(variant, 15):
            table = tomllib.loads(to_table(config))["paths"][variant]
            assert fused_config(variant, 15, {variant: table}) == config


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_flux_tile_candidates_compile_with_their_register_cap(variant: str) -> None:
    for name, config in flux_tile_candidates(variant, 15):
        for built in build(config, "sm_90").kernels:
            sass = _sass(built)
            print(f"{name}: {sass.registers} regs, {sass.spill_bytes} B local, {built.smem_bytes} B smem")
            if config.min_blocks:
                assert sass.registers * built.threads * config.min_blocks <= 65536, name
            assert (sass.dfma == 0) == (config.mma is not None), name
