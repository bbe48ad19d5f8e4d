"""``flux_tiles`` and ``pair_io``. flux_tiles: a three-direction box kernel that holds two flux tiles and stages z's fluxes into
y's tile once y is contracted (composer/fused/templates/fused_volume.cu.j2), so that p = 15's xyz
kernel (four 41-KB tiles, one block per SM) fits two blocks per SM.

CPU: the table key's errors, the smaller shared memory and the blocks it allows, the emulated kernels
bit for bit equal to the same tables without the key and within 1e-13 of the reference, the rendered
source stages z once after y's contraction, and every candidate compiles for sm_90 with its register
cap. The GPU run of these tables is the sweep's validation (``composer sweep-fused run``)."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from composer import dg
from composer.arch.limits import arch_limits
from composer.errors import ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.candidates import (candidate_list, flux_tile_candidates, l2_keep_candidates, label,
                                       pair_io_candidates, to_table)
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import emulate

from tests.test_fused_cpu import _sass, needs_nvrtc

# the p = 7 and 15 tables these families start from (tests/conftest.py, xfaces_tables)
pytestmark = pytest.mark.usefixtures("xfaces_tables")

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
    assert names and all(" ft2" in n for n in names) and len(set(names)) == len(names)
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
    assert_compiled_within_cap(flux_tile_candidates(variant, 15))


def assert_compiled_within_cap(found) -> None:
    """Each (name, config) compiles for sm_90 within its ``min_blocks`` register cap, with DFMA only on
    the CUDA cores (no DFMA in a tensor-core build)."""
    for name, config in found:
        for built in build(config, "sm_90").kernels:
            sass = _sass(built)
            print(f"{name}: {sass.registers} regs, {sass.spill_bytes} B local, {built.smem_bytes} B smem")
            if config.min_blocks:
                assert sass.registers * built.threads * config.min_blocks <= 65536, name
            assert (sass.dfma == 0) == (config.mma is not None), name


# pair_io: the same box kernels with two doubles 16 bytes apart moved as one 16-byte access


def test_pair_io_key_errors_and_table_round_trip() -> None:
    import tomllib

    with pytest.raises(ConfigError, match="pair_io.*true or false"):
        parse_table("FUSED_TC", 15, dict(XYZ15, pair_io=1))
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for order in (7, 15, 31, 63):
            shipped = fused_config(variant, order)
            # a family member only where the shipped table has no pairs yet
            assert len(pair_io_candidates(variant, order)) == (0 if shipped.pair_io else 1)
            config = dataclasses.replace(shipped, pair_io=True)
            assert " pio" in label(config)
            table = tomllib.loads(to_table(config))["paths"][variant]
            assert fused_config(variant, order, {variant: table}) == config


@pytest.mark.parametrize("variant,order", [("FUSED_TC", 15), ("FUSED_TC16", 63), ("FUSED", 7)])
def test_pair_io_renders_paired_accesses_only(variant: str, order: int) -> None:
    base = dataclasses.replace(fused_config(variant, order), pair_io=False)
    paired = dataclasses.replace(base, pair_io=True)
    for plain_plan, plan in zip(kernel_plans(base), kernel_plans(paired)):
        plain, source = render_volume(base, plain_plan), render_volume(paired, plan)
        if plan.first:
            assert "store_pair(dqdt + g, -val[0], -val[1]);" in source and "make_double2(-val[0]" not in source
        else:
            assert "store_pair" not in source.split("__global__")[1]
        # the x weights as pairs on the tensor cores only, in the kernel that contracts x first
        assert ("load_metric_pairs<C>" in source) == (base.mma is not None and plan.kernel.dirs[0] == 0)
        assert plain.count("__ldg(") <= source.count("__ldg(") + 2


def test_emulated_pair_io_is_the_same_kernel() -> None:
    # pair_io changes how bytes move, not the arithmetic: the emulation (and the GPU result) is unchanged
    fields = dg.make_fields(15, (1, 1, 1), varying=True)
    base = dataclasses.replace(fused_config("FUSED_TC", 15), pair_io=False)
    assert np.array_equal(emulate(dataclasses.replace(base, pair_io=True), fields, (1, 1, 1)),
                          emulate(base, fields, (1, 1, 1)))


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 15), ("FUSED_TC", 31), ("FUSED_TC16", 63)])
def test_pair_io_sass_has_vector_store_and_fewer_weight_loads(variant: str, order: int) -> None:
    from composer.arch.sass import disassemble

    def counts(config):
        out = {}
        for built in build(config, "sm_90").kernels:
            if built.blocks_per_element:
                path = Path(tempfile.mkdtemp()) / f"{built.name}.cubin"
                path.write_bytes(built.compiled.cubin)
                text = disassemble(path)
                out[built.name] = {op: len(re.findall(rf"\b{re.escape(op)}\b", text))
                                   for op in ("STG.E.64", "STG.E.128", "LDG.E.64.CONSTANT", "LDG.E.128.CONSTANT")}
        return out

    base = dataclasses.replace(fused_config(variant, order), pair_io=False)
    plain, paired = counts(base), counts(dataclasses.replace(base, pair_io=True))
    first = kernel_plans(base)[0].name
    assert plain[first]["STG.E.64"] == 2 and paired[first] == dict(paired[first], **{"STG.E.64": 0, "STG.E.128": 1})
    assert paired[first]["LDG.E.64.CONSTANT"] < plain[first]["LDG.E.64.CONSTANT"]
    assert paired[first]["LDG.E.128.CONSTANT"] > plain[first]["LDG.E.128.CONSTANT"]


# l2_keep: q's staging loads evict_last in L2, the restage's loads evict_first


def test_l2_keep_needs_flux_tiles_and_round_trips() -> None:
    import tomllib

    with pytest.raises(ConfigError, match="l2_keep.*needs flux_tiles"):
        parse_table("FUSED_TC", 15, dict(XYZ15, l2_keep=True))
    with pytest.raises(ConfigError, match="l2_keep.*true or false"):
        parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=2, l2_keep="yes"))
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        found = l2_keep_candidates(variant, 15)
        base = fused_config(variant, 15)
        assert len(found) == (1 if base.flux_tiles else 0)
        for name, config in found:
            assert name.endswith(" keep")
            table = tomllib.loads(to_table(config))["paths"][variant]
            assert fused_config(variant, 15, {variant: table}) == config


@needs_nvrtc
def test_l2_keep_loads_carry_policies() -> None:
    from composer.arch.sass import disassemble

    def descriptors(config) -> set[str]:
        built = build(config, "sm_90").kernels[0]
        path = Path(tempfile.mkdtemp()) / f"{built.name}.cubin"
        path.write_bytes(built.compiled.cubin)
        return set(re.findall(r"LDG\.E\.128\S*\s+R\d+,\s*(desc\[UR\d+\])", disassemble(path)))

    config = parse_table("FUSED_TC", 15, dict(XYZ15, flux_tiles=2))
    source = render_volume(dataclasses.replace(config, l2_keep=True), kernel_plans(config)[0])
    assert source.count("ldg_hint(q + g, keep_policy)") == 1 and source.count("ldg_hint(q + g, drop_policy)") == 1
    # one memory descriptor for every 16-byte load without policies; the evict_last / evict_first loads
    # carry their own (the createpolicy values)
    assert len(descriptors(config)) == 1
    assert len(descriptors(dataclasses.replace(config, l2_keep=True))) >= 3


def test_flux_tile_candidates_keep_the_tables_xfaces() -> None:
    """p = 15's shipped tables form their x faces in the staging loop (session 26): the family keeps
    that (the x faces need no tile), and a table on global traces stays on them."""
    for variant in ("FUSED_TC", "FUSED_TC16"):
        assert fused_config(variant, 15).traces == "xfaces"
        found = flux_tile_candidates(variant, 15)
        assert found and {c.traces for _, c in found} == {"xfaces"}
    assert {c.traces for _, c in flux_tile_candidates("FUSED", 15)} == {fused_config("FUSED", 15).traces}
