"""The fused kernels' ``parity`` key (composer.parity in the tensor-core engine): each contraction runs
over the even and odd parts of the tile's lines, half the k-steps. CPU: the emulated kernels (lane by
lane, as Contract::parity_step and parity_out do it) against the reference on point-varying non-cubic
grids, D through the cache and staged; the key's errors; the candidate family and its tables; SASS
(DMMA of the table's shape, none with DFMA, no spills). GPU: the family
against the reference."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError
from composer.fused.builder import build, kernel_plans
from composer.fused.candidates import label, parity_candidates, to_table
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import emulate
from composer.validation import relative_max_difference
from tests.test_fused_cpu import _sass, needs_nvrtc


def _parity(variant: str, order: int, tile: tuple[int, int], d_stage: str = "global", mma: str | None = None):
    base = fused_config(variant, order)
    kernels = tuple(dataclasses.replace(k, tile=tile, cluster=1, box=(base.nq,) * 3 if k.cluster > 1 else k.box)
                    for k in base.kernels)
    return dataclasses.replace(base, parity=True, d_stage=d_stage, d_panel=0, kernels=kernels, mma=mma or base.mma)


@pytest.mark.parametrize(("variant", "order", "grid", "tile", "d_stage", "mma"), [
    ("FUSED_TC", 15, (2, 1, 1), (2, 1), "global", None),
    ("FUSED_TC", 31, (1, 2, 1), (2, 1), "global", None),
    ("FUSED_TC", 31, (1, 1, 1), (1, 2), "smem", None),
    ("FUSED_TC16", 31, (1, 1, 1), (1, 1), "global", "16x8x4"),
    ("FUSED_TC16", 31, (1, 1, 1), (1, 1), "smem", "16x8x8"),
    ("FUSED_TC16", 63, (1, 1, 1), (1, 2), "smem", None),
])
def test_emulated_parity_kernels_match_the_reference(variant, order, grid, tile, d_stage, mma) -> None:
    config = _parity(variant, order, tile, d_stage, mma)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    assert relative_max_difference(emulate(config, fields, grid), ref) <= 1e-13
    assert all(plan.parity and plan.d_rows == (order + 1) // 2 for plan in kernel_plans(config))


def test_staged_parity_rows_take_half_of_d() -> None:
    plain = dataclasses.replace(fused_config("FUSED_TC16", 31), d_stage="smem", d_panel=0)
    halved = _parity("FUSED_TC16", 31, (1, 1), "smem")
    for a, b in zip(kernel_plans(plain), kernel_plans(halved)):
        assert a.smem_doubles - b.smem_doubles == 16 * 32  # D's 32 x 32 against the parity rows' 16 x 32


@pytest.mark.parametrize(("change", "match"), [
    ({"order": 30}, "odd order"),
    ({"d_panel": 8, "d_stage": "smem"}, "drop d_panel"),
    ({"mma": None, "variant": "FUSED"}, "tensor-core engine"),
])
def test_bad_parity_tables_are_one_clear_error(change, match) -> None:
    from composer.fused.config import parity_problem

    config = dataclasses.replace(_parity("FUSED_TC", 31, (2, 1)), **change)
    assert match in (parity_problem(config) or "")


def test_the_key_round_trips_and_the_loader_refuses_it_where_it_cannot_run() -> None:
    config = _parity("FUSED_TC", 31, (2, 1))
    table = tomllib.loads(to_table(config))["paths"]["FUSED_TC"]
    assert table["parity"] is True and parse_table("FUSED_TC", 31, table) == config
    clustered = dict(tomllib.loads(to_table(fused_config("FUSED_TC", 15)))["paths"]["FUSED_TC"], parity=True)
    with pytest.raises(ComposerError, match="parity"):
        parse_table("FUSED_TC", 15, clustered)


def test_the_family_gives_whole_work_units_at_every_odd_box_order() -> None:
    for variant in ("FUSED_TC", "FUSED_TC16"):
        for order in (15, 31, 63):
            found = parity_candidates(variant, order)
            assert found, (variant, order)
            for name, config in found:
                assert config.parity and name == label(config) and "parity" in name
                assert all(k.cluster == 1 for k in config.kernels)
    assert parity_candidates("FUSED", 31) == [] and parity_candidates("FUSED", 255) == []  # no tensor cores
    # (the streamed tables at p >= 127 take the family too: tests/test_fused_stream_parity.py)


@needs_nvrtc
@pytest.mark.parametrize(("variant", "order", "tile", "d_stage"), [
    ("FUSED_TC", 31, (2, 1), "global"), ("FUSED_TC16", 31, (1, 1), "smem"), ("FUSED_DFMA", 31, (2, 1), "global"),
    ("FUSED_TC16", 63, (1, 2), "smem")])
def test_sass_shapes_and_no_spills(variant, order, tile, d_stage) -> None:
    """The table's DMMA shape (none with DFMA) and no local memory. The executed MMAs halve (the emulated
    k-loop runs over half the axis); the static instruction count does not show it (partly unrolled loops)."""
    config = _parity(variant, order, tile, d_stage)
    plain = dataclasses.replace(config, parity=False)
    for kernel, full in zip(build(config, "sm_90").kernels, build(plain, "sm_90").kernels):
        sass, reference = _sass(kernel), _sass(full)
        print(f"{kernel.name}: {sass.registers} regs ({reference.registers} full), {sass.dmma_total} DMMA "
              f"({reference.dmma_total}), {sass.dfma} DFMA, {sass.spill_bytes} B local")
        assert sass.spill_bytes == 0
        if variant == "FUSED_DFMA":
            assert sass.dmma_total == 0 and sass.dfma > 0
        else:
            assert set(sass.dmma) == {config.mma} and sass.dmma_total > 0


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(15, (2, 1, 2)), (31, (2, 3, 2)), (31, "s29"), (63, (1, 2, 1)), (63, "s29")])
def test_parity_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(order, grid, parity_candidates)
