"""``traces = "xfaces"`` and the ``budget`` candidate family (issue 16, p = 7 ... 63).

xfaces: the box kernel's staging loop writes q, u, v, w of the box's x-face nodes into a small shared
buffer; the x-face fluxes read their interior traces there (after the staging barrier) instead of
gathering 8-byte values 64 bytes apart. CPU: the key's errors, the buffer's shared memory, the
emulated buffer equals the gathered interior traces exactly (every box of an element, non-cubic
grids), the emulated kernels equal the plain ones bit for bit and the reference within 1e-13, the
rendered source reads no interior x trace from global memory, every candidate compiles without
spills. budget: the authors' output-tile x register-budget axes, labels unique, tables round-trip.
The GPU run of these tables is the sweep's validation (``composer sweep-fused run``)."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from composer import dg
from composer.errors import ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.candidates import budget_candidates, candidate_list, to_table, xface_candidates
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import emulate, x_face_interior

from tests.test_fused_cpu import _sass, needs_nvrtc

XYZ7 = {"flux": "inline", "mma": "8x8x4",
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


def _xfaces(variant: str, order: int):
    return dataclasses.replace(fused_config(variant, order), traces="xfaces")


def test_xfaces_key_errors_name_the_key() -> None:
    assert parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces")).traces == "xfaces"
    with pytest.raises(ConfigError, match='traces.*"xfaces".*flux = "inline"'):
        parse_table("FUSED_TC", 7, dict(XYZ7, flux="array", traces="xfaces"))
    with pytest.raises(ConfigError, match="traces.*expected one of"):
        parse_table("FUSED_TC", 7, dict(XYZ7, traces="faces"))
    with pytest.raises(ConfigError, match="trace_cluster"):
        parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces", trace_cluster=2))


def test_buffer_is_eight_doubles_per_x_line_only_where_x_is_carried() -> None:
    base, xf = fused_config("FUSED_TC", 31), _xfaces("FUSED_TC", 31)  # xy | z
    for plain, plan in zip(kernel_plans(base), kernel_plans(xf)):
        carries_x = 0 in plan.kernel.dirs
        assert plan.x_traces == carries_x
        assert plan.smem_bytes - plain.smem_bytes == (8 * 8 * plan.lines(0) if carries_x else 0)


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 7, (2, 3, 2)), ("FUSED", 7, (3, 1, 2)),
                                                ("FUSED_TC16", 15, (1, 2, 1)), ("FUSED_TC", 31, (1, 1, 2)),
                                                ("FUSED_TC16", 63, (1, 1, 1))])
def test_buffer_holds_the_interior_traces(variant: str, order: int, grid: tuple) -> None:
    """Every x-face node's slot, found through vmapM as the face loop finds it, holds what the staging
    loop wrote for that node: the interior trace a gather would read (p = 31, 63: many boxes per element)."""
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    vmap_m = mesh.face_maps[0].reshape(mesh.num_elements, 6, -1)[:, :2]
    plans = [p for p in kernel_plans(_xfaces(variant, order)) if p.x_traces]
    assert plans
    for plan in plans:
        inner = x_face_interior(plan, fields, mesh)
        for name, values in inner.items():
            assert np.array_equal(values, fields[name].reshape(-1)[vmap_m]), (plan.name, name)


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 7, (2, 1, 3)), ("FUSED", 7, (1, 2, 2)),
                                                ("FUSED_TC16", 7, (2, 2, 1)), ("FUSED_TC", 15, (1, 1, 2)),
                                                ("FUSED_TC16", 31, (1, 2, 1))])
def test_emulated_xfaces_kernels_equal_the_plain_ones_and_the_reference(variant: str, order: int,
                                                                         grid: tuple) -> None:
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    plain = emulate(dataclasses.replace(fused_config(variant, order), traces="global"), fields, grid)
    out = emulate(_xfaces(variant, order), fields, grid)
    assert np.array_equal(out, plain)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_rendered_kernel_reads_no_interior_x_trace_from_global_memory() -> None:
    config = parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces"))
    source = render_volume(config, kernel_plans(config)[0])
    staging, rest = source.split("// 2. fstar", 1)
    assert "XTRACE + xs] = high ? qv.y : qv.x" in staging
    # y and z faces gather both traces; the x faces run after the staging barrier, from the buffer
    assert rest.count("numerical_flux(idx") == 2
    faces, contraction = rest.split("// 2b. fstar of the x faces", 1)
    assert "__syncthreads();" in faces and "Contract<0>" in contraction
    x_loop = contraction.split("// 3. Contractions", 1)[0]
    assert "__ldg(q + pg)" in x_loop and "__ldg(q + m" not in x_loop and "smem[XTRACE + xs]" in x_loop


def test_xface_family_skips_schedules_it_cannot_change() -> None:
    assert xface_candidates("FUSED_TC16", 255) == []  # streamed kernels read the face array
    names = [n for n, _ in xface_candidates("FUSED_TC", 7)]
    assert names == [n for n, _ in candidate_list("FUSED_TC", 7, "xfaces")][1:] and "Mxfaces" in names[0]


def test_budget_family_has_the_authors_p7_form_and_round_trips() -> None:
    found = budget_candidates("FUSED_TC", 7)
    names = [n for n, _ in found]
    assert len(set(names)) == len(names)
    # 128 threads with two MMA tiles per warp under the budget of six blocks per SM (80 registers)
    assert any("t128 tile[2, 1] mb6 pio" in n for n in names) and any("t128 tile[2, 1] mb5 Mxfaces" in n for n in names)
    for _, config in found:
        table = tomllib.loads(to_table(config))["paths"]["FUSED_TC"]
        assert fused_config("FUSED_TC", 7, {"FUSED_TC": table}) == config
    assert budget_candidates("FUSED_TC16", 255) == []


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED", 7), ("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED_TC", 15),
                                           ("FUSED_TC", 31), ("FUSED_TC16", 63)])
def test_xface_candidates_compile_without_spills(variant: str, order: int) -> None:
    for name, config in xface_candidates(variant, order):
        for built in build(config, "sm_90").kernels:
            sass = _sass(built)
            print(f"{name} {built.name}: {sass.registers} regs, {sass.spill_bytes} B local, {built.smem_bytes} B smem")
            assert sass.spill_bytes == 0, name
            assert (sass.dfma == 0) == (config.mma is not None), name


@pytest.mark.gpu
@pytest.mark.parametrize("order", [7, 15, 31, 63])
def test_xfaces_kernels_match_reference_on_the_gpu(order: int) -> None:
    """Every variant's schedule with ``traces = "xfaces"`` and the budget family's tables against the
    reference on the point-varying input (NaN-filled dqdt), on a small non-cubic grid and on the
    Table S29 grid of the order."""
    from composer.fused.config import SUPPORTED_ORDERS, VARIANTS
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime import default_device

    from tests.test_fused_gpu import SMALL_GRIDS, bench_grid

    extra = {f"{v}@xfaces": (lambda o, v=v: _xfaces(v, o)) for v in VARIANTS
             if v != "FUSED_DFMA" and order in SUPPORTED_ORDERS[v] and xface_candidates(v, order)}
    # the budget family's tables at the largest register cap and at 128 threads (p = 7)
    for v in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for name, config in budget_candidates(v, order)[-2:]:
            extra[f"{v}@{name}"] = lambda o, c=config: c
    assert extra
    device = default_device()
    for grid in (SMALL_GRIDS[order], bench_grid(order)):
        for rec in run_case(order, grid, [], device, extra=extra):
            print(rec)
            assert "error" not in rec, rec
            assert rec["rel_err"] <= TOLERANCE, rec
