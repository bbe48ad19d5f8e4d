"""The streamed kernels' ``parity`` key (composer.parity in ``fused_stream.cu.j2``): a block takes positions
of the axis's first half and writes their mirrors too, from the even and odd parts of its lines, formed
while it stages them (the product operand), contracted with the parity rows over half the axis.

CPU: the staged panels against the split of the flux and the parity rows at the template's index formulas;
the emulated kernels (lane by lane, u and w tiles paired per thread as the epilogue pairs them) against the
reference on point-varying non-cubic grids, with every streamed key that parity takes; the key's errors;
the candidate family at p = 127-767 and its tables; SASS (the table's DMMA shape, none with DFMA, no
spills), and the other kernels' sources unchanged (tests/test_fused_cpu.py pins them). GPU: the small
tables and the family against the reference.
"""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError
from composer.fused.builder import StreamPlan, build, d_panel_layout, kernel_d_operand, kernel_plans
from composer.fused.candidates import _fits, label, parity_candidates, to_table
from composer.fused.config import parity_problem, parse_table
from composer.fused.emulate import emulate, stage_stream_panel
from composer.parity.reference import parity_rows
from composer.validation import relative_max_difference
from tests.test_fused_cpu import _sass, needs_nvrtc
from tests.test_fused_stream import _stream_table

ORDER = 31
H = (ORDER + 1) // 2


def _table(mma: str = "16x8x4", lines: int = 32, positions: int = 16, threads: int = 64, tile=(1, 2),
           k_panel: int = 8, stages: int = 2, **keys) -> dict:
    """A streamed parity table at p = 31: ``positions`` of the half axis per block (and their mirrors)."""
    return dict(_stream_table(mma, lines, positions, threads, list(tile), k_panel, stages, "product", **keys),
                parity=True)


def _config(variant: str = "FUSED_TC16", order: int = ORDER, **table):
    return parse_table(variant, order, _table(**table))


# (variant, table keys): every MMA shape, both fragment loads, D's rows and its panel copy, both block
# numberings, one and several work units per warp, whole and partial half axes, several pipelines.
EMULATED = [
    ("FUSED_TC16", {}),
    ("FUSED_TC16", {"fragments": "paired"}),
    ("FUSED_TC16", {"d_layout": "panels", "block_order": "axis"}),
    ("FUSED_TC16", {"copies": "pointers", "fragments": "paired"}),
    ("FUSED_TC16", {"copies": "pointers", "d_layout": "panels", "mma": "16x8x8", "tile": (1, 1), "positions": 8}),
    ("FUSED_TC16", {"mma": "16x8x8", "tile": (1, 1), "positions": 8, "stages": 2, "fragments": "paired"}),
    ("FUSED_TC16", {"lines": 16, "positions": 8, "threads": 32, "tile": (1, 1), "k_panel": 4, "stages": 4}),
    ("FUSED_TC", {"mma": "8x8x4", "lines": 32, "positions": 16, "threads": 64, "tile": (2, 2), "stages": 2,
                  "copies": "unrolled", "d_layout": "panels"}),
    ("FUSED_TC", {"mma": "8x8x4", "lines": 16, "positions": 16, "threads": 64, "tile": (1, 1),
                  "block_order": "axis"}),
]


@pytest.mark.parametrize(("variant", "keys"), EMULATED)
def test_emulated_stream_parity_matches_the_reference(variant: str, keys: dict) -> None:
    config = _config(variant, **keys)
    plans = kernel_plans(config)
    assert all(isinstance(p, StreamPlan) and p.parity for p in plans) and _fits(config)
    for plan in plans:  # half the panels, the boxes over the half axis, u and w rows of D
        assert plan.panels == H // plan.k_panel and plan.virtual_positions == 2 * plan.positions(plan.dir)
        assert plan.blocks_per_element * plan.kernel.box[0] * plan.kernel.box[1] * plan.kernel.box[2] == 32**3 // 2
    for grid in ((1, 2, 1), (2, 1, 1)):
        fields = dg.make_fields(ORDER, grid, varying=True)
        ref = dg.reference_tendency(fields, ORDER, grid)
        assert relative_max_difference(emulate(config, fields, grid), ref) <= 1e-13


def test_dfma_builds_emulate_as_the_tables_they_share() -> None:
    config = _config("FUSED_TC", mma="8x8x4", tile=(1, 2))
    dfma = dataclasses.replace(config, variant="FUSED_DFMA", dfma=True)
    grid = (1, 1, 2)
    fields = dg.make_fields(ORDER, grid, varying=True)
    assert relative_max_difference(emulate(dfma, fields, grid), dg.reference_tendency(fields, ORDER, grid)) <= 1e-13


@pytest.mark.parametrize("direction", [0, 1, 2])
@pytest.mark.parametrize(("d_layout", "copies"), [("rows", "strided"), ("panels", "unrolled"), ("rows", "pointers"),
                                                  ("panels", "pointers")])
def test_staged_parts_and_parity_rows_at_the_template_index(direction: int, d_layout: str, copies: str) -> None:
    """A stage holds e = f_m + f_{p-m} and o = f_m - f_{p-m} of q*vel for every (panel column, line),
    and D's virtual rows: A's rows a_org + a, then B's, from the parity rows (or their k-panel copy, which
    is what the path uploads: kernel_d_operand), whether the copies follow the index formulas or the
    pointer program (its mirrored pairs' panels going down the axis)."""
    config = _config(d_layout=d_layout, positions=8, tile=(1, 1), copies=copies)
    plan = next(p for p in kernel_plans(config) if p.dir == direction)
    nq, kp, na = plan.nq, plan.k_panel, plan.positions(direction)
    assert plan.f_lines
    rng = np.random.default_rng(direction)
    qe, ve = rng.random(nq**3), rng.random(nq**3)
    rows = parity_rows(dg.diff_matrix(ORDER))
    a_org = H - na  # the half axis's second box
    k0, j0, i0 = {0: (5, 0, a_org), 1: (5, a_org, 0), 2: (a_org, 5, 0)}[direction]
    for p in range(plan.panels):
        buf = stage_stream_panel(plan, qe, ve, rows, p, a_org, k0, j0, i0)
        f = (qe * ve).reshape(nq, nq, nq)
        m, l = np.meshgrid(np.arange(kp), np.arange(plan.lines(direction)), indexing="ij")
        l2 = plan.kernel.box[1] if direction == 0 else plan.kernel.box[2]
        slow, fast = (k0, j0) if direction == 0 else (k0, i0) if direction == 1 else (j0, i0)
        s, t = slow + l // l2, fast + l % l2
        pos = p * kp + m

        def at(position):
            return (f[s, t, position] if direction == 0 else f[s, position, t] if direction == 1
                    else f[position, s, t])

        off = m * plan.fs + l  # every parity panel is [m][line] (plan.f_lines), x's too
        np.testing.assert_array_equal(buf[off], at(pos) + at(nq - 1 - pos))
        np.testing.assert_array_equal(buf[plan.f_panel + off], at(pos) - at(nq - 1 - pos))
        a, m = np.meshgrid(np.arange(2 * na), np.arange(kp), indexing="ij")
        expected = np.where(a < na, rows[a_org + a % na, p * kp + m], rows[a_org + a % na, H + p * kp + m])
        np.testing.assert_array_equal(buf[2 * plan.f_panel + a * plan.ds + m], expected)
    name, operand = kernel_d_operand(config, ORDER)
    if d_layout == "panels":
        assert name == "parity_rows_panels"
        np.testing.assert_array_equal(operand, d_panel_layout(rows, kp))
        pp, a, m = np.meshgrid(np.arange(nq // kp), np.arange(H), np.arange(kp), indexing="ij")
        np.testing.assert_array_equal(operand.reshape(-1)[(pp * H + a) * kp + m], rows[a, pp * kp + m])
    else:
        assert name == "parity_rows"
        np.testing.assert_array_equal(operand, rows)


def test_the_staging_shares_the_template_shape() -> None:
    """Two F panels (e, o) and twice the positions' D rows per stage, half the blocks."""
    plain = parse_table("FUSED_TC16", ORDER, _stream_table("16x8x4", 32, 16, 64, [1, 2], 8, 2, "product"))
    for a, b in zip(kernel_plans(plain), kernel_plans(_config())):
        assert b.smem_doubles == b.stages * (2 * b.f_panel + 2 * a.positions(a.dir) * a.ds)
        assert b.f_panel == a.f_panel or a.dir == 0  # x's parity panels are [m][line]: their padding differs
        assert 2 * b.blocks_per_element == a.blocks_per_element


@pytest.mark.parametrize(("change", "match"), [
    ({"a_operand": "factors"}, "a_operand"),
    ({"positions": 32, "tile": (1, 4)}, "half axis"),
    ({"k_panel": 16, "stages": 2}, "at most 1"),
])
def test_bad_stream_parity_tables_are_one_clear_error(change: dict, match: str) -> None:
    table = _table(**{k: v for k, v in change.items() if k in ("positions", "tile", "k_panel", "stages")})
    table.update({k: v for k, v in change.items() if k in ("copies", "a_operand")})
    with pytest.raises(ComposerError, match=match):
        parse_table("FUSED_TC16", ORDER, table)


def test_even_orders_and_deep_pipelines_are_refused() -> None:
    config = _config()
    assert "odd order" in parity_problem(dataclasses.replace(config, order=30))
    deep = dataclasses.replace(config, kernels=tuple(dataclasses.replace(k, stages=3) for k in config.kernels))
    assert "at most 2" in parity_problem(deep)  # 16 values of the half axis hold 2 panels of 8


def test_the_key_round_trips() -> None:
    config = _config(fragments="paired", d_layout="panels")
    table = tomllib.loads(to_table(config))["paths"]["FUSED_TC16"]
    assert table["parity"] is True and parse_table("FUSED_TC16", ORDER, table) == config


@pytest.mark.parametrize("order", [127, 255, 511, 767])
@pytest.mark.parametrize("variant", ["FUSED_TC", "FUSED_TC16"])
def test_the_family_keeps_each_kernels_outputs_per_block(variant: str, order: int) -> None:
    """Every streamed candidate: parity on the product operand with the table's copies, each kernel's
    block at half its positions (the same outputs with their mirrors) and a warp tile that pairs u and w
    per thread; labelled apart, and its table parses back."""
    from composer.fused.config import fused_config

    base = fused_config(variant, order)
    found = parity_candidates(variant, order)
    if base.volume != "stream":
        pytest.skip(f"{variant} at p = {order} ships box kernels (tests/test_fused_parity.py)")
    assert found and len({name for name, _ in found}) == len(found)
    for name, config in found:
        assert config.parity and "parity" in name and name == label(config)
        assert config.copies == base.copies or (base.copies, config.copies) == ("pointers", "unrolled")
        for k, b in zip(config.kernels, base.kernels):
            d = k.dirs[0]
            assert (k.a_operand or config.a_operand) == "product"
            assert 2 * k.box[2 - d] == b.box[2 - d] and k.box[:2 - d] + k.box[3 - d:] == b.box[:2 - d] + b.box[3 - d:]
        assert parse_table(variant, order, tomllib.loads(to_table(config))["paths"][variant]) == config


@needs_nvrtc
@pytest.mark.parametrize(("variant", "keys"), [
    ("FUSED_TC16", {"fragments": "paired"}),
    ("FUSED_TC16", {"fragments": "paired", "copies": "pointers", "d_layout": "panels"}),
    ("FUSED_TC16", {"mma": "16x8x8", "tile": (1, 1), "positions": 8, "d_layout": "panels", "copy_issue": "mma",
                    "l2_fetch": "128B"}),
    ("FUSED_DFMA", {"mma": "8x8x4", "tile": (1, 2), "copies": "unrolled"}),
])
def test_sass_shapes_and_no_spills(variant: str, keys: dict) -> None:
    source = "FUSED_TC" if variant == "FUSED_DFMA" else variant
    config = _config(source, **keys)
    if variant == "FUSED_DFMA":
        config = dataclasses.replace(config, variant="FUSED_DFMA", dfma=True)
    for kernel in build(config, "sm_90").kernels:
        if "face" in kernel.name:
            continue
        sass = _sass(kernel)
        assert sass.spill_bytes == 0, kernel.name
        if variant == "FUSED_DFMA":
            assert sass.dmma_total == 0 and sass.dfma > 0
        else:
            assert set(sass.dmma) == {config.mma} and sass.dfma == 0


@needs_nvrtc
def test_prefetch_and_persistent_kernels_compile() -> None:
    """The epilogue prefetch covers both position runs; persistent blocks walk the half-axis tiles."""
    config = _config()
    own = tuple(dataclasses.replace(k, prefetch=1, persistent=k.dirs == (2,)) for k in config.kernels)
    config = dataclasses.replace(config, kernels=own)
    assert parity_problem(config) is None
    from composer.fused.builder import render_volume

    for plan in kernel_plans(config):
        assert render_volume(config, plan).count("prefetch_epilogue(me, dqdt + eb") == 2
    for kernel in build(config, "sm_90").kernels:
        assert _sass(kernel).spill_bytes == 0, kernel.name


@needs_nvrtc
def test_a_shipped_order_candidate_compiles_without_spills() -> None:
    """p = 255 FUSED_TC16's first candidate (its tile at half the positions): the DMMA shape, no spills."""
    name, config = parity_candidates("FUSED_TC16", 255)[0]
    for kernel in build(config, "sm_90").kernels:
        sass = _sass(kernel)
        assert sass.spill_bytes == 0, (name, kernel.name)
        if "face" not in kernel.name:
            assert set(sass.dmma) == {config.mma}


@pytest.mark.gpu
@pytest.mark.parametrize(("variant", "keys"), EMULATED)
def test_stream_parity_tables_match_reference_on_gpu(variant: str, keys: dict) -> None:
    """The emulated tables above compiled and run on the GPU (FUSED_TC's also as FUSED_DFMA)."""
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime.device import ensure_context

    config = _config(variant, **keys)
    extra = {f"{variant}@parity": lambda o: config}
    if variant == "FUSED_TC":
        extra["FUSED_DFMA@parity"] = lambda o: dataclasses.replace(config, variant="FUSED_DFMA", dfma=True)
    for rec in run_case(ORDER, (2, 1, 2), [], ensure_context(None), extra=extra):
        assert rec.get("passed"), rec
        assert rec["rel_err"] <= TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(127, (1, 2, 1)), (255, (1, 1, 2)), (255, "s29")])
def test_stream_parity_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(order, grid, parity_candidates)


def test_the_memory_estimate_counts_the_d_operand_the_kernels_read() -> None:
    """p = 255 FUSED_TC16 reads D's k-panel copy (d_layout = "panels"): one more Nq x Nq array beside D."""
    from composer.counts import device_memory_estimate

    items = {item.name: item for item in device_memory_estimate(255, (2, 2, 2), "FUSED_TC16").items}
    assert items["D operand (d_panels)"].bytes == 256 * 256 * 8
    config = dataclasses.replace(parity_candidates("FUSED_TC16", 255)[0][1])
    name, matrix = kernel_d_operand(config, 255)
    assert name == "parity_rows_panels" and matrix.nbytes == 128 * 256 * 8  # h rows of [A | B]
