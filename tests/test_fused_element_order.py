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
    paired = dict(XYZ7, x_pairs=True, kernels=[dict(XYZ7["kernels"][0], threads=512)])
    assert parse_table("FUSED_TC", 7, paired).element_bricks == (4, 2, 2)  # bricks of whole pairs
    with pytest.raises(ConfigError, match=r"element_bricks.*whole pairs: bx must be even, got \[3, 2, 2\]"):
        parse_table("FUSED_TC", 7, dict(paired, element_bricks=[3, 2, 2]))
    with pytest.raises(ConfigError, match="element_bricks.*orders single elements or x pairs"):
        parse_table("FUSED_TC", 7, dict(XYZ7, elements_per_block=2))
    assert parse_table("FUSED_TC", 7, _toml(to_table(config))) == config
    assert "eb4x2x2" in label(config)


def test_builder_refuses_bricks_on_a_table_it_cannot_order() -> None:
    paired = dataclasses.replace(fused_config("FUSED_TC16", 7), element_bricks=None)
    assert paired.x_pairs
    assert kernel_plans(dataclasses.replace(paired, element_bricks=(32, 8, 32)))  # bricks of 16 x 8 x 32 pairs
    with pytest.raises(ComposerError, match="element_bricks orders x pairs in bricks of whole pairs"):
        kernel_plans(dataclasses.replace(paired, element_bricks=(1, 8, 32)))
    chained = dataclasses.replace(one_element_form(paired), x_chain=True, elements_per_block=2, element_bricks=(2, 1, 1))
    with pytest.raises(ComposerError, match="element_bricks orders single elements or x pairs"):
        kernel_plans(chained)


@pytest.mark.parametrize("grid,bricks", [((32, 32, 32), (32, 8, 32)), ((6, 3, 5), (4, 2, 3)), ((4, 2, 2), (2, 1, 1))])
def test_pair_order_keeps_each_pair_in_one_block_and_walks_bricks_of_pairs(grid: tuple, bricks: tuple) -> None:
    """``launch_order`` with pairs: one entry per block, each the first element 2P of an x pair (ex even),
    every element once over the blocks' two elements, the pairs in bricks of bx / 2 pairs (cut at the
    grid's ends); with bricks that span whole x rows it walks the elements as the one-element order does."""
    from composer.fused.order import element_sequence, launch_order

    nex, ney, nez = grid
    first = launch_order(grid, bricks, pairs=True)
    assert first.dtype == np.int32 and len(first) == nex * ney * nez // 2
    assert np.all(first % nex % 2 == 0)  # ex even: the block's two elements are x neighbours in one row
    walked = element_sequence(grid, bricks, pairs=True)
    assert sorted(walked.tolist()) == list(range(nex * ney * nez))
    assert np.array_equal(walked[0::2], first) and np.array_equal(walked[1::2], first + 1)
    # the brick of pairs each block's pair lies in never decreases along the launch
    ex, ey, ez = first % nex // 2, first // nex % ney, first // (nex * ney)
    bx, by, bz = bricks[0] // 2, bricks[1], bricks[2]
    nbx, nby = -(-(nex // 2) // bx), -(-ney // by)
    brick = (ez // bz * nby + ey // by) * nbx + ex // bx
    assert np.all(np.diff(brick) >= 0)
    if bricks[0] == nex:
        assert np.array_equal(walked, brick_order(grid, bricks))
    with pytest.raises(ValueError, match="even brick bx"):
        launch_order(grid, (3, 1, 1), pairs=True)


@pytest.mark.parametrize("variant,order,grid,bricks", [("FUSED_TC16", 7, (4, 3, 2), (2, 2, 1)),
                                                       ("FUSED_TC", 7, (6, 2, 3), (4, 1, 2))])
def test_emulated_bricked_pairs_equal_the_reference(variant: str, order: int, grid: tuple, bricks: tuple) -> None:
    """An x-pair table whose blocks take their pairs brick by brick (bricks cut at the grid's ends) against
    the reference, and a pair order that drops a pair shows."""
    from composer.fused.candidates import x_pair_candidates
    from composer.fused.order import element_sequence

    base = fused_config(variant, order)
    paired = base if base.x_pairs else x_pair_candidates(variant, order)[0][1]
    config = dataclasses.replace(paired, element_bricks=bricks)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13
    wrong = element_sequence(grid, bricks, pairs=True).copy()
    wrong[2:4] = wrong[0:2]
    assert np.isnan(emulate(config, fields, grid, element_order=wrong)).any()


def test_the_paired_kernel_takes_its_pair_from_the_permutation() -> None:
    paired = dataclasses.replace(fused_config("FUSED_TC16", 7), element_bricks=(32, 8, 32))
    source = render_volume(paired, kernel_plans(paired)[0])
    assert "const i64 e = __ldg(order + blockIdx.x) + half;" in source
    assert "(i64)blockIdx.x * 2 + half" not in source
    assert kernel_sources(paired)[0].signature[:len(ORDERED_VOLUME_SIGNATURE)] == ORDERED_VOLUME_SIGNATURE  # then links
    plain = dataclasses.replace(paired, element_bricks=None)
    assert "(i64)blockIdx.x * 2 + half" in render_volume(plain, kernel_plans(plain)[0])


def test_pair_bricks_family_pairs_the_bricked_table_and_bricks_the_paired_one(plain_p7) -> None:
    """FUSED_TC16 at p = 7 (its table pairs): the ranked bricks on it; FUSED_TC (one element, on a brick in
    the shipped table, not in plain_p7): the x_pairs family's tables on the ranked bricks; every candidate
    paired and bricked with an even bx; none at p = 511 (streamed)."""
    from composer.fused.candidates import ELEMENT_ORDER_KEEP, pair_bricks_candidates, x_pair_candidates

    tc16 = pair_bricks_candidates("FUSED_TC16", 7)
    base = fused_config("FUSED_TC16", 7)
    assert len(tc16) == ELEMENT_ORDER_KEEP
    assert all(c == dataclasses.replace(base, element_bricks=c.element_bricks) for _, c in tc16)
    tc = pair_bricks_candidates("FUSED_TC", 7)
    pairs = [c for _, c in x_pair_candidates("FUSED_TC", 7)]
    assert tc and {dataclasses.replace(c, element_bricks=None) for _, c in tc} <= set(pairs)
    for _, c in tc16 + tc:
        assert c.x_pairs and c.element_bricks is not None and c.element_bricks[0] % 2 == 0
    assert pair_bricks_candidates("FUSED_TC16", 511) == []


def test_pair_bricks_family_keeps_the_schedule_brick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bricked one-element table (the shipped FUSED_TC p = 7): its pairs on its own brick only."""
    from composer.fused import candidates

    bricked = dataclasses.replace(one_element_form(fused_config("FUSED_TC16", 7)), element_bricks=(32, 8, 32))
    monkeypatch.setattr(candidates, "_family_base", lambda v, o, volume, **kw: bricked)
    monkeypatch.setattr(candidates, "x_pair_candidates", lambda v, o: [("p", dataclasses.replace(
        fused_config("FUSED_TC16", 7), element_bricks=None))])
    found = candidates.pair_bricks_candidates("FUSED_TC16", 7)
    assert [c.element_bricks for _, c in found] == [(32, 8, 32)] and found[0][1].x_pairs


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


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED_TC16", "FUSED_TC"])
def test_bricked_pairs_compile_with_the_registers_of_the_plain_pairs(variant: str) -> None:
    """The pair order costs the paired kernel one load of ``order[b]``, no register budget (FUSED_TC16 at
    p = 7 holds 62 registers for four 256-thread blocks per SM)."""
    from composer.fused.candidates import pair_bricks_candidates

    config = pair_bricks_candidates(variant, 7)[0][1]
    plain = dataclasses.replace(config, element_bricks=None)
    sass, one = _sass(build(config, "sm_90").kernels[0]), _sass(build(plain, "sm_90").kernels[0])
    print(f"{variant} p=7 pairs {config.element_bricks}: {sass.registers} regs ({one.registers} plain), {sass.spill_bytes} B local")
    assert sass.registers <= one.registers + 2 and sass.spill_bytes == one.spill_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("grid", [(4, 3, 2), (6, 2, 3), "s29"])
def test_pair_bricks_candidates_match_reference_on_the_gpu(grid: tuple | str) -> None:
    """Every pair_bricks candidate at p = 7 against the reference (NaN-filled dqdt) on small non-cubic
    grids with even x extents, whose bricks of pairs the ranked ones cut, and on the Table S29 grid."""
    from composer.fused.candidates import pair_bricks_candidates
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(7, grid, pair_bricks_candidates)


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
    bricked overlay at p = 7 than for the plain table in the default order; a paired table's too."""
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
    # x_pairs: two elements per block, as two consecutive launch positions
    paired = rows["h200"]["FUSED_TC16"]
    assert paired["element_bricks"] is None and paired["gather_rereads"][0] > 0
