"""``element_bricks``: the fused box kernels' blocks take their elements brick by brick (issue 16, p = 7
and 15, whose one-kernel tables read about 111 MB above their DRAM floor on an H100: the z
neighbours' face layers, gathered one wave before their own block stages them, read twice).

CPU: the permutation (every element once, on divisible and ragged grids), the re-read estimate
(the default order re-reads every z layer at p = 7; the bricks the family keeps do not), the key's
errors, the emulated kernels with the permutation against the reference, a permutation that drops
an element shows in the emulation, the rendered kernel reads ``order[b]``, and it compiles with the
unordered kernel's registers. GPU (marked): the family's tables against the reference on small
non-cubic grids and the Table S29 grid."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import ORDERED_VOLUME_SIGNATURE, build, kernel_plans, kernel_sources, render_volume
from composer.fused.candidates import element_order_candidates, label, to_table
from composer.fused.config import fused_config, one_element_form, parse_table
from composer.fused.emulate import emulate
from composer.fused.order import brick_order, face_layer_bytes, positions, ranked_bricks, reread_bytes

from tests.test_fused_cpu import _sass, needs_nvrtc

XYZ7 = {"flux": "inline", "mma": "8x8x4", "traces": "xfaces", "element_bricks": [4, 2, 2],
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


@pytest.mark.parametrize("grid,bricks", [((32, 32, 32), (32, 8, 32)), ((5, 3, 7), (2, 2, 3)), ((4, 4, 4), (1, 1, 1)),
                                         ((6, 1, 2), (6, 4, 4))])
def test_brick_order_is_a_permutation_in_brick_then_kji_order(grid: tuple, bricks: tuple) -> None:
    order = brick_order(grid, bricks)
    assert order.dtype == np.int32 and np.array_equal(np.sort(order), np.arange(np.prod(grid)))
    nex, ney, _ = grid
    ex, ey, ez = order % nex, order // nex % ney, order // (nex * ney)
    brick = [(z // bricks[2], y // bricks[1], x // bricks[0]) for x, y, z in zip(ex, ey, ez)]
    assert brick == sorted(brick)  # the bricks in kji order, each brick's elements together
    first = [n for n, b in enumerate(brick) if b == brick[0]]
    inner = [(ez[n], ey[n], ex[n]) for n in first]
    assert inner == sorted(inner)  # inside a brick, kji
    assert np.array_equal(order[positions(order)], np.arange(np.prod(grid)))


def test_default_order_rereads_every_z_layer_and_the_bricks_do_not() -> None:
    """At p = 7 on the 32^3 grid a z neighbour is 1024 blocks away: beyond a window of 900 every z
    face's two layers count (2 x 2 KB per element, the periodic x and y wraps too), inside bricks of
    32 x 8 x 32 only the bricks' y boundaries and the z wrap do."""
    grid, nq = (32, 32, 32), 8
    x, y, z = face_layer_bytes(nq)
    assert (x, y, z) == (8192, 2048, 2048)
    default = reread_bytes(grid, np.arange(32**3, dtype=np.int32), nq, 900)
    assert default == 2 * z * 32**3 + 2 * y * 32 * 32  # every z face; the y wrap, 31 x 32 = 992 blocks apart
    bricked = reread_bytes(grid, brick_order(grid, (32, 8, 32)), nq, 900)
    assert bricked < default / 5
    assert ranked_bricks(grid, nq, 50 << 20, 3)[0] == (32, 8, 32)
    # no candidate takes the elements in the default order (any 32 x 32 x bz brick does), none repeats another's
    for g, n in ((grid, nq), ((8, 8, 8), 32), ((4, 4, 4), 64)):
        orders = [brick_order(g, b).tobytes() for b in ranked_bricks(g, n, 50 << 20, 40)]
        assert np.arange(np.prod(g), dtype=np.int32).tobytes() not in orders and len(set(orders)) == len(orders)


def test_element_bricks_key_errors_name_the_key() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    assert config.element_bricks == (4, 2, 2)
    for bad in ([4, 2], [4, 2, 0], [4, 2, "2"], "4x2x2", [4, 2, True]):
        with pytest.raises(ConfigError, match=r"element_bricks.*three integers"):
            parse_table("FUSED_TC", 7, dict(XYZ7, element_bricks=bad))
    with pytest.raises(ConfigError, match="element_bricks.*orders single elements"):
        parse_table("FUSED_TC", 7, dict(XYZ7, x_pairs=True, kernels=[dict(XYZ7["kernels"][0], threads=512)]))
    with pytest.raises(ConfigError, match="element_bricks.*orders single elements"):
        parse_table("FUSED_TC", 7, dict(XYZ7, elements_per_block=2))
    assert parse_table("FUSED_TC", 7, _toml(to_table(config))) == config
    assert "eb4x2x2" in label(config)


def test_builder_refuses_bricks_on_a_table_it_cannot_order() -> None:
    paired = fused_config("FUSED_TC16", 7)
    assert paired.x_pairs
    with pytest.raises(ComposerError, match="element_bricks orders single elements"):
        kernel_plans(dataclasses.replace(paired, element_bricks=(32, 8, 32)))


@pytest.mark.parametrize("variant,order,grid,bricks", [("FUSED_TC", 7, (4, 3, 2), (2, 2, 1)), ("FUSED", 7, (3, 2, 3), (3, 1, 2)),
                                                       ("FUSED_TC16", 15, (2, 2, 2), (2, 1, 2)),
                                                       ("FUSED_TC", 31, (2, 1, 3), (1, 1, 2))])
def test_emulated_bricked_kernels_equal_the_reference(variant: str, order: int, grid: tuple, bricks: tuple) -> None:
    """The shipped table (its one-element form) with its blocks taking bricks, on a non-cubic grid whose
    extents the bricks do not all divide (the last bricks cut), against the reference; the
    permutation changes which block computes an element, never what it computes."""
    config = dataclasses.replace(one_element_form(fused_config(variant, order)), element_bricks=bricks)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_a_permutation_that_misses_an_element_shows_in_the_emulation() -> None:
    """Two blocks on one element leave another element's dqdt at the emulation's NaN."""
    order, grid = 7, (2, 2, 2)
    config = parse_table("FUSED_TC", order, dict(XYZ7, element_bricks=[2, 1, 2]))
    fields = dg.make_fields(order, grid, varying=True)
    wrong = brick_order(grid, config.element_bricks).copy()
    wrong[3] = wrong[2]
    out = emulate(config, fields, grid, element_order=wrong)
    assert np.isnan(out).any()
    assert not np.isnan(emulate(config, fields, grid)).any()


def test_the_kernel_takes_its_element_from_the_permutation() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    source = render_volume(config, kernel_plans(config)[0])
    assert "const i64 e = __ldg(order + blockIdx.x / NBOX);" in source
    assert "const int* __restrict__ order)" in source
    assert kernel_sources(config)[0].signature == ORDERED_VOLUME_SIGNATURE
    plain = dataclasses.replace(config, element_bricks=None)
    assert "order" not in render_volume(plain, kernel_plans(plain)[0]).split("extern \"C\"")[1].split(")")[0]


def test_family_orders_the_one_element_tables(plain_p7) -> None:
    names = [name for name, _ in element_order_candidates("FUSED_TC", 7)]
    assert names and all("eb32x" in n for n in names)
    paired = element_order_candidates("FUSED_TC16", 7)  # the shipped x_pairs table: its one-element form first
    assert not paired[0][1].x_pairs and paired[0][1].element_bricks is None
    assert all(not c.x_pairs for _, c in paired)
    assert element_order_candidates("FUSED_TC16", 511) == []  # a streamed schedule


def test_refine_family_tries_more_bricks_on_the_mapless_one_element_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from composer.fused import candidates

    found = candidates.brick_refine_candidates("FUSED_TC", 7)
    assert len(found) == candidates.BRICK_REFINE_KEEP
    assert all(c.element_bricks and not c.interior_maps and not c.x_pairs for _, c in found)
    assert len({c.element_bricks for _, c in found}) == len(found)
    # a base that takes bricks already (the H100's overlay) is refined from its one-element, unbricked form
    bricked = dataclasses.replace(fused_config("FUSED_TC", 7), element_bricks=(32, 8, 32), interior_maps=False)
    monkeypatch.setattr(candidates, "_family_base", lambda v, o, volume, **kw: bricked)
    assert [c for _, c in candidates.brick_refine_candidates("FUSED_TC", 7)] == [c for _, c in found]


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 15)])
def test_bricked_kernel_compiles_with_the_registers_of_the_plain_one(variant: str, order: int, plain_p7) -> None:
    config = element_order_candidates(variant, order)[-1][1]
    assert config.element_bricks is not None
    plain = dataclasses.replace(config, element_bricks=None)
    sass, one = _sass(build(config, "sm_90").kernels[0]), _sass(build(plain, "sm_90").kernels[0])
    print(f"{variant} p={order} {config.element_bricks}: {sass.registers} regs ({one.registers} plain), {sass.spill_bytes} B local")
    assert sass.registers <= one.registers + 2 and sass.spill_bytes == one.spill_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(7, (4, 3, 2)), (15, (3, 2, 2)), (7, "s29"), (15, "s29")])
def test_element_order_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    """Every element_order candidate of the three variants against the reference (NaN-filled dqdt) on a
    small non-cubic grid (there with bricks that permute it, cut at its ends: the ranked ones cover a small grid
    whole) and on the Table S29 grid with the ranked bricks."""
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(order, grid, element_order_candidates)


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)["paths"]["FUSED_TC"]


def test_info_estimates_the_layers_each_table_reads_twice(capsys: pytest.CaptureFixture[str], plain_p7,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`composer info` per fused table: the re-read estimate in its element order, lower for the H100's
    bricked overlay at p = 7 than for the plain table in the default order; none for a paired table."""
    import json

    from composer.cli.main import main

    rows = {}
    for machine in ("h200", "h100_sxm"):  # the plain p = 7 tables, then the packaged ones with the H100's overlay
        assert main(["info", "--order", "7", "--machine", machine, "--json"]) == 0
        rows[machine] = {r["variant"]: r for r in json.loads(capsys.readouterr().out)["fused"]}
        monkeypatch.delenv("COMPOSER_SCHEDULES", raising=False)
    generic, h100 = rows["h200"]["FUSED_TC"], rows["h100_sxm"]["FUSED_TC"]
    assert generic["element_bricks"] is None and h100["element_bricks"] == [32, 8, 32]
    assert h100["gather_rereads"][1] < generic["gather_rereads"][0] / 4
    assert rows["h200"]["FUSED_TC16"]["gather_rereads"] is None  # x_pairs: two elements per block
