"""``traces = "xfaces"`` and the ``budget`` candidate family (issue 16, p = 7 ... 63).

xfaces: the thread that stages a pair of points holding an x-face node forms that node's flux from
the q and velocities it has just loaded (only the exterior trace gathered), instead of a second
8-byte gather 64 bytes apart. CPU: the key's errors, the shared memory unchanged, every x-face slot
formed exactly once and from its interior node (every box of an element, non-cubic grids), the
emulated kernels equal the plain ones bit for bit and the reference within 1e-13, the rendered
source forms the x faces in the staging loop, every candidate compiles without spills. budget: the
authors' output-tile x register-budget axes, labels unique, tables round-trip.
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


def test_shared_memory_is_unchanged_and_only_x_kernels_change() -> None:
    base, xf = fused_config("FUSED_TC", 31), _xfaces("FUSED_TC", 31)  # xy | z
    for plain, plan in zip(kernel_plans(base), kernel_plans(xf)):
        assert plan.x_traces == (0 in plan.kernel.dirs) and plan.smem_bytes == plain.smem_bytes
        changed = render_volume(xf, plan) != render_volume(base, plain)
        assert changed == plan.x_traces, plan.name


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 7, (2, 3, 2)), ("FUSED", 7, (3, 1, 2)),
                                                ("FUSED_TC16", 15, (1, 2, 1)), ("FUSED_TC", 31, (1, 1, 2)),
                                                ("FUSED_TC16", 63, (1, 1, 1))])
def test_every_x_face_slot_is_formed_once_from_its_interior_node(variant: str, order: int, grid: tuple) -> None:
    """The staging pairs cover every x-face slot of every element exactly once, and the pair's own
    point is the slot's interior node (vmapM): what a gather would read (p = 31, 63: many boxes per
    element)."""
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    vmap_m = mesh.face_maps[0].reshape(mesh.num_elements, 6, -1)[:, :2]
    plans = [p for p in kernel_plans(_xfaces(variant, order)) if p.x_traces]
    assert plans
    for plan in plans:
        inner, formed = x_face_interior(plan, fields, mesh)
        assert np.all(formed == 1), plan.name
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


def test_rendered_kernel_forms_the_x_faces_in_the_staging_loop() -> None:
    config = parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces"))
    source = render_volume(config, kernel_plans(config)[0])
    staging, rest = source.split("// 2. fstar", 1)
    # the pair's own q and velocities, only the exterior trace gathered (the fallback for a mesh
    # numbered otherwise gathers both)
    assert "(i64)mg == g + side" in staging and "upwind_flux(side ? qv.y : qv.x" in staging
    assert "smem[FACE0 + side * Dir<0>::NL + l]" in staging and staging.count("numerical_flux(idx") == 1
    # the y and z faces as before; no x face after the staging loop
    assert rest.split("__syncthreads();", 1)[0].count("numerical_flux(idx") == 2
    assert "Dir<0>::NL; n += THREADS" not in rest


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


def test_weights_key_overrides_the_min_blocks_rule() -> None:
    budget = dict(XYZ7, min_blocks=8)
    late = parse_table("FUSED_TC", 7, budget)
    early = parse_table("FUSED_TC", 7, dict(budget, weights="early"))
    assert (late.weights, early.weights) == ("", "early")
    assert "prefetch_metric" in render_volume(late, kernel_plans(late)[0])
    assert "prefetch_metric" not in render_volume(early, kernel_plans(early)[0])
    with pytest.raises(ConfigError, match="weights.*expected one of"):
        parse_table("FUSED_TC", 7, dict(XYZ7, weights="middle"))
    # the budget family keeps the table's weights under every cap it sets
    for name, config in budget_candidates("FUSED_TC", 7):
        if config.min_blocks >= 2:
            assert config.weights == "early" and "Wearly" in name, name
