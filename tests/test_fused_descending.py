"""``descending`` (issue 16, the block order extended across kernels): a volume kernel's blocks take its
work from the grid's end down, so that it starts on the elements the kernel before it in the RK stage
(the RK update, the face kernel or the previous volume kernel) touched last, still in L2.

CPU: the key's parsing and errors (clusters, trace clusters, persistent blocks, chunks), the table round
trip, the stage's handoff count, the family's contents, the rendered kernels (every use of the block
number reversed, the other tables unchanged), the launch's block -> work map a bijection for every grid
kind the path launches, and the compiled kernels' registers. GPU (marked): the family's tables against
the reference on small non-cubic grids and the Table S29 grids, and the sweep's stage timing (the RK
update between calls) leaving the input as it found it."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from composer.errors import ComposerError, ConfigError
from composer.fused.builder import build, kernel_plans, kernel_sources, render_volume
from composer.fused.candidates import descending_candidates, descending_tables, label, to_table
from composer.fused.config import fused_config, parse_table
from composer.fused.order import l2_handoffs, launch_order
from composer.paths.fused import launch_grid

from tests.test_fused_cpu import _sass, needs_nvrtc

REVERSED = "(gridDim.x - 1 - blockIdx.x)"
XY_Z31 = {"flux": "inline", "mma": "8x8x4",
          "kernels": [{"dirs": "xy", "box": [2, 32, 32], "threads": 256, "tile": [2, 2]},
                      {"dirs": "z", "box": [32, 2, 32], "threads": 256, "tile": [2, 2], "descending": True}]}


def _down(config, *kernels: int):
    """``config`` with the kernels at the given indices descending."""
    return dataclasses.replace(config, kernels=tuple(dataclasses.replace(k, descending=n in kernels)
                                                     for n, k in enumerate(config.kernels)))


def test_the_key_parses_per_kernel_and_round_trips() -> None:
    config = parse_table("FUSED_TC", 31, XY_Z31)
    assert [k.descending for k in config.kernels] == [False, True]
    again = parse_table("FUSED_TC", 31, tomllib.loads(to_table(config))["paths"]["FUSED_TC"])
    assert again == config
    assert "down:z" in label(config)


@pytest.mark.parametrize("table,match", [
    ({**XY_Z31, "kernels": [{**XY_Z31["kernels"][0], "descending": 1}, XY_Z31["kernels"][1]]}, "true or false"),
    ({**XY_Z31, "chunk_elements": 64}, "chunk_elements"),
])
def test_bad_values_are_one_clear_error(table: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        parse_table("FUSED_TC", 31, table)
    assert "\n" not in str(err.value)


def test_clustered_and_persistent_kernels_keep_the_ascending_order() -> None:
    """A cluster's ranks are consecutive blocks, a persistent block walks b, b + gridDim.x, ...: the
    builder refuses a descending one built in code, as the loader refuses the table."""
    clustered = fused_config("FUSED_TC16", 15)  # the xyz kernel over a cluster of two (session 36)
    assert any(k.cluster > 1 for k in clustered.kernels)
    with pytest.raises(ComposerError, match="descending cannot be combined with clusters"):
        kernel_plans(_down(clustered, 0))
    stream = fused_config("FUSED_TC16", 127)
    persistent = dataclasses.replace(stream, kernels=tuple(dataclasses.replace(k, persistent=True, descending=True)
                                                           for k in stream.kernels))
    with pytest.raises(ComposerError, match="persistent"):
        kernel_plans(persistent)
    assert descending_candidates("FUSED_TC16", 15) == []


@pytest.mark.parametrize("flux,downs,expected", [
    ("inline", [False], (0, 2)),         # RK up, xyz up: no kernel starts where the one before ended
    ("inline", [True], (2, 2)),          # RK -> xyz down -> RK: both boundaries
    ("inline", [True, False], (2, 3)),   # RK -> xy down -> z up -> RK (the odd cycle misses one)
    ("inline", [False, True], (2, 3)),
    ("inline", [True, True], (2, 3)),
    ("inline", [True, False, True], (4, 4)),  # x|y|z alternating: every boundary
    ("array", [True, False, True], (4, 5)),   # the face kernel (upwards) after the RK update misses
    ("array", [False, True, False], (2, 5)),
])
def test_handoffs_count_the_boundaries_a_kernel_starts_where_the_last_ended(flux: str, downs: list, expected: tuple) -> None:
    base = fused_config("FUSED", 127) if len(downs) == 3 else fused_config("FUSED_TC", 31 if len(downs) == 2 else 7)
    config = dataclasses.replace(_down(base, *[n for n, d in enumerate(downs) if d]), flux=flux)
    assert len(config.kernels) == len(downs)
    assert l2_handoffs(config) == expected


def test_family_sets_every_kernel_subset_most_handoffs_first() -> None:
    for variant, order, count in (("FUSED_TC", 7, 1), ("FUSED_TC16", 7, 1), ("FUSED_TC", 63, 3), ("FUSED_TC16", 127, 7)):
        found = descending_candidates(variant, order)
        assert len(found) == count, (variant, order)
        base = fused_config(variant, order)
        assert all(c != base and any(k.descending for k in c.kernels) for _, c in found)
        assert len({c for _, c in found}) == count
        handoffs = [l2_handoffs(c)[0] for _, c in found]
        assert handoffs == sorted(handoffs, reverse=True) and handoffs[0] > l2_handoffs(base)[0]
        assert all("down:" in name for name, _ in found)
    # at p = 127 the alternating x and z (the face kernel upwards before them) hand over at 4 of 5 boundaries
    best = descending_tables(fused_config("FUSED_TC16", 127))[0]
    assert [k.descending for k in best.kernels] == [True, False, True]


@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED", 15), ("FUSED_TC", 63),
                                           ("FUSED_TC16", 127), ("FUSED_TC16", 255)])
def test_rendered_kernels_reverse_every_use_of_the_block_number(variant: str, order: int) -> None:
    """Every mapping from the block number to its work (the element order table, the pair, the box,
    the streamed tile) goes through the reversed number; the ascending kernels render as before."""
    base = fused_config(variant, order)
    down = descending_tables(base)[-1]  # every kernel descending
    assert all(k.descending for k in down.kernels)
    for plan, plain in zip(kernel_plans(down), kernel_plans(base)):
        source, before = render_volume(down, plan), render_volume(base, plain)
        assert source.count(REVERSED) >= 1
        assert source.count("blockIdx.x") == source.count(REVERSED), plan.name
        assert source.replace(REVERSED, "blockIdx.x") == before  # nothing else changed


def test_bricked_pairs_descend_through_the_order_table() -> None:
    from composer.fused.candidates import pair_bricks_candidates

    config = pair_bricks_candidates("FUSED_TC16", 7)[0][1]
    source = render_volume(_down(config, 0), kernel_plans(_down(config, 0))[0])
    assert f"__ldg(order + {REVERSED}) + half" in source


def _block_work(grid_blocks: int, blocks_per_element: int, ne: int, down: bool, order: np.ndarray | None = None,
                pairs: bool = False) -> list[tuple[int, int]]:
    """(element, box) of every block that stores, with the template's formulas (fused_volume.cu.j2)."""
    out = []
    for b in range(grid_blocks):
        n = grid_blocks - 1 - b if down else b
        if pairs:
            first = int(order[n]) if order is not None else 2 * n
            out += [(first + half, 0) for half in (0, 1)]
            continue
        e = int(order[n // blocks_per_element]) if order is not None else n // blocks_per_element
        if e < ne:
            out.append((e, n % blocks_per_element))
    return out


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 31, (2, 3, 2)), ("FUSED_TC", 7, (5, 3, 2)),
                                                ("FUSED_TC16", 7, (4, 3, 2)), ("FUSED_TC16", 127, (2, 1, 1))])
def test_every_element_and_box_is_taken_once_in_both_directions(variant: str, order: int, grid: tuple) -> None:
    """The launch the path makes (launch_grid) with the reversed block number covers every (element,
    box) exactly once: ascending and descending, bricked and paired grids included."""
    base = fused_config(variant, order)
    ne = int(np.prod(grid))
    bricks = (2, 2, 2) if base.volume == "box" and len(base.kernels) == 1 else None
    for down in (False, True):
        config = _down(base, *(range(len(base.kernels)) if down else ()))
        if bricks:
            config = dataclasses.replace(config, element_bricks=bricks)
        for source in kernel_sources(config):
            if not source.blocks_per_element:
                continue  # the face kernel
            blocks = launch_grid(source, config, ne, config.nq, sm_count=132)
            order_table = launch_order(grid, bricks, config.x_pairs) if bricks else None
            work = _block_work(blocks, source.blocks_per_element, ne, down, order_table, config.x_pairs)
            expected = [(e, box) for e in range(ne) for box in range(source.blocks_per_element)]
            assert sorted(work) == expected, (source.name, down)


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED_TC16", 63), ("FUSED_TC16", 127)])
def test_descending_kernels_compile_with_the_registers_of_the_ascending_ones(variant: str, order: int) -> None:
    base = fused_config(variant, order)
    down = descending_tables(base)[-1]
    for kernel, plain in zip(build(down, "sm_90").kernels, build(base, "sm_90").kernels):
        sass, one = _sass(kernel), _sass(plain)
        print(f"{kernel.name}: {sass.registers} regs ({one.registers} ascending), {sass.spill_bytes} B local")
        assert sass.registers <= one.registers + 2 and sass.spill_bytes == one.spill_bytes


def test_info_counts_the_handoffs(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from composer.cli.main import main

    assert main(["info", "--order", "127", "--json"]) == 0
    rows = {r["variant"]: r for r in json.loads(capsys.readouterr().out)["fused"]}
    assert rows["FUSED_TC"]["l2_handoffs"] == [0, 4] and rows["FUSED_TC16"]["l2_handoffs"] == [0, 5]


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(7, (4, 3, 2)), (7, "s29"), (31, (2, 3, 2)), (63, (1, 2, 1)), (127, (2, 1, 1)),
                                        (127, "s29")])
def test_descending_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(order, grid, descending_candidates)


@pytest.mark.gpu
def test_stage_timing_runs_the_rk_update_and_restores_the_input() -> None:
    """``run_case(stage_dt=...)``: a time per call from the bench's step loop, and the next table still
    validates (the stages moved q; it is put back)."""
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime import default_device

    base = fused_config("FUSED_TC", 31)
    down = descending_tables(base)[0]
    extra = {"FUSED_TC@base": lambda o: base, "FUSED_TC@down": lambda o: down}
    records = run_case(31, (2, 3, 2), [], default_device(), timing_calls=6, extra=extra, stage_dt=1e-6)
    assert [r["variant"] for r in records] == list(extra)
    for rec in records:
        assert "error" not in rec, rec
        assert rec["rel_err"] <= TOLERANCE and rec["us_per_call"] > 0 and rec["timing"] == "stages"
