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
import re
import tomllib

import numpy as np
import pytest

from composer import dg
from composer.errors import ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.candidates import budget_candidates, candidate_list, to_table, xface_candidates
from composer.fused.config import fused_config, one_element_form, parse_table
from composer.fused.emulate import emulate, x_face_interior

from tests.test_fused_cpu import _sass, needs_nvrtc

# the p = 7 and 15 tables these families start from (tests/conftest.py, xfaces_tables)
pytestmark = pytest.mark.usefixtures("xfaces_tables")

XYZ7 = {"flux": "inline", "mma": "8x8x4",
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


def _single(variant: str, order: int):
    """The shipped table in its one-element form (p = 7's FUSED_TC16 pairs x neighbours since session 26)."""
    return one_element_form(fused_config(variant, order))


def _xfaces(variant: str, order: int):
    return dataclasses.replace(_single(variant, order), traces="xfaces")


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
    plain = emulate(dataclasses.replace(_single(variant, order), traces="global"), fields, grid)
    out = emulate(_xfaces(variant, order), fields, grid)
    assert np.array_equal(out, plain)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_rendered_kernel_forms_the_x_faces_in_the_staging_loop() -> None:
    config = parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces"))
    source = render_volume(config, kernel_plans(config)[0])
    staging, rest = source.split("// 2. fstar", 1)
    # the pair's own q and velocities (the first point on the low face, the second on the high one),
    # only the exterior trace gathered, no vmapM read
    branch = staging.split("if (p.i == 0 || p.i == BI - 2) {", 1)[1]
    assert "const int side = p.i != 0;" in branch and "const int pg = __ldg(vmapP + idx);" in branch
    assert re.search(r"upwind_flux\(\s*side \? qv\.y : qv\.x, side \? vv\[0\]\.y : vv\[0\]\.x, "
                     r"side \? vv\[1\]\.y : vv\[1\]\.x, side \? vv\[2\]\.y : vv\[2\]\.x,", branch)
    assert "smem[FACE0 + side * Dir<0>::NL + l]" in branch and "vmapM +" not in branch
    assert "numerical_flux(idx" not in staging
    # the y and z faces as before; no x face after the staging loop
    assert rest.split("__syncthreads();", 1)[0].count("numerical_flux(idx") == 2
    assert "Dir<0>::NL; n += THREADS" not in rest


def test_x_writes_its_own_face_region_when_it_is_not_the_first_direction() -> None:
    table = {"flux": "inline", "mma": "8x8x4", "traces": "xfaces",
             "kernels": [{"dirs": "yxz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}
    config = parse_table("FUSED_TC", 7, table)
    source = render_volume(config, kernel_plans(config)[0])
    assert "smem[FACE1 + side * Dir<0>::NL + l]" in source and "FACE0 + side * Dir<0>::NL" not in source
    fields = dg.make_fields(7, (2, 1, 2), varying=True)
    ref = dg.reference_tendency(fields, 7, (2, 1, 2))
    out = emulate(config, fields, (2, 1, 2))
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_meshes_whose_x_face_maps_name_other_nodes_are_refused() -> None:
    from composer.fused.traces import x_face_maps_problem

    for order, grid in ((7, (2, 3, 1)), (31, (1, 2, 1))):
        mesh = dg.Mesh(order, grid)
        assert x_face_maps_problem(mesh.face_maps[0], mesh.nq) is None
    mesh = dg.Mesh(7, (2, 1, 1))
    swapped = mesh.face_maps[0].copy()
    swapped[1, 0, 2, 3], swapped[1, 0, 3, 2] = swapped[1, 0, 3, 2], swapped[1, 0, 2, 3]  # a face numbered otherwise
    problem = x_face_maps_problem(swapped, mesh.nq)
    assert problem and "element 1, x face 0, node (3, 2)" in problem and "\n" not in problem


def test_xface_family_skips_schedules_it_cannot_change() -> None:
    assert xface_candidates("FUSED_TC16", 255) == []  # streamed kernels read the face array
    assert xface_candidates("FUSED_TC", 7) == []  # its table forms the x faces already (session 26)
    names = [n for n, _ in xface_candidates("FUSED_TC", 31)]
    assert names == [n for n, _ in candidate_list("FUSED_TC", 31, "xfaces")][1:] and "Mxfaces" in names[0]


def test_budget_family_has_the_authors_p7_form_and_round_trips() -> None:
    found = budget_candidates("FUSED_TC", 7)
    names = [n for n, _ in found]
    assert len(set(names)) == len(names)
    # 128 threads with two MMA tiles per warp under the budget of six blocks per SM (80 registers), on the
    # table's own traces (xfaces since session 26); at p = 31 both trace forms
    assert any("t128 tile[2, 1] mb6 Mxfaces pio" in n for n in names) and any("t128 tile[2, 1] mb5 Mxfaces" in n for n in names)
    at31 = [n for n, _ in budget_candidates("FUSED_TC", 31)]
    assert any("mb3 pio" in n for n in at31) and any("mb3 Mxfaces pio" in n for n in at31)
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
    # the budget family's last two tables (the tightest caps of its last shape)
    for v in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for name, config in budget_candidates(v, order)[-2:]:
            extra[f"{v}@{name}"] = lambda o, c=config: c
    assert extra
    device = default_device()
    for grid in (SMALL_GRIDS[order], bench_grid(order)):
        # a paired table (x_pairs, p = 7's since session 26) given explicitly is refused where the x extent is
        # odd: there its one-element form runs (the schedule's paired table itself falls back to it)
        tables = extra if grid[0] % 2 == 0 else {
            name: (lambda o, f=f: one_element_form(f(o))) for name, f in extra.items()}
        for rec in run_case(order, grid, [], device, extra=tables):
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


# x_pairs: two x-neighbour elements per block, the face they share exchanged in shared memory

def test_x_pairs_key_errors_name_the_key() -> None:
    paired = dict(XYZ7, traces="xfaces", x_pairs=True, kernels=[dict(XYZ7["kernels"][0], threads=512)])
    config = parse_table("FUSED_TC", 7, paired)
    assert config.x_pairs and kernel_plans(config)[0].element_threads == 256
    with pytest.raises(ConfigError, match='x_pairs.*traces = "xfaces"'):
        parse_table("FUSED_TC", 7, dict(paired, traces="global"))
    with pytest.raises(ConfigError, match="x_pairs.*whole element"):
        parse_table("FUSED_TC", 31, {"flux": "inline", "mma": "8x8x4", "traces": "xfaces", "x_pairs": True,
                                     "kernels": [{"dirs": "xy", "box": [2, 32, 32], "threads": 256, "tile": [2, 2]},
                                                 {"dirs": "z", "box": [32, 2, 32], "threads": 256, "tile": [2, 2]}]})
    with pytest.raises(ConfigError, match="x_pairs.*even number of warps"):
        parse_table("FUSED_TC", 7, dict(paired, kernels=[dict(XYZ7["kernels"][0], threads=96)]))
    with pytest.raises(ConfigError, match="x_pairs.*true or false"):
        parse_table("FUSED_TC", 7, dict(paired, x_pairs="yes"))
    with pytest.raises(ConfigError, match="x_pairs.*every kernel to carry x"):
        parse_table("FUSED", 7, {"flux": "inline", "traces": "xfaces", "x_pairs": True,
                                 "kernels": [{"dirs": "xy", "box": [8, 8, 8], "threads": 256, "tile": [1, 4]},
                                             {"dirs": "z", "box": [8, 8, 8], "threads": 256, "tile": [1, 4]}]})


def test_x_pairs_doubles_the_block_and_adds_the_shared_face() -> None:
    single = parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces"))
    paired = parse_table("FUSED_TC", 7, dict(XYZ7, traces="xfaces", x_pairs=True,
                                             kernels=[dict(XYZ7["kernels"][0], threads=512)]))
    one, two = kernel_plans(single)[0], kernel_plans(paired)[0]
    assert two.smem_doubles == 2 * one.smem_doubles + 8 * 64 and two.element_doubles == one.smem_doubles
    source = render_volume(paired, two)
    assert "__launch_bounds__(2 * THREADS)" in source and "constexpr int THREADS = 256;" in source
    assert "const i64 e = (i64)blockIdx.x * 2 + half;" in source and "threadIdx.x % THREADS / 32" in source
    staging, rest = source.split("// 2. fstar", 1)
    assert "if (side != half) {" in staging and "xpair[(half * 4 + 0) * Dir<0>::NL + l] = side ? qv.y : qv.x;" in staging
    shared = rest.split("// 2b. the shared face", 1)[1].split("// 3. Contractions", 1)[0]
    assert "for (int l = tid; l < Dir<0>::NL; l += THREADS) {" in shared
    assert "const int side = 1 - half, other = 1 - half;" in shared and "vmapP" not in shared
    # this element's own face region, its own node as the interior trace, the other's as the exterior one
    assert re.search(r"smem\[FACE0 \+ side \* Dir<0>::NL \+ l\] = upwind_flux\(\s*"
                     r"xpair\[\(half \* 4 \+ 0\) \* Dir<0>::NL \+ l\], xpair\[\(half \* 4 \+ 1\) \* Dir<0>::NL \+ l\],\s*"
                     r"xpair\[\(half \* 4 \+ 2\) \* Dir<0>::NL \+ l\], xpair\[\(half \* 4 \+ 3\) \* Dir<0>::NL \+ l\],\s*"
                     r"xpair\[\(other \* 4 \+ 0\) \* Dir<0>::NL \+ l\], xpair\[\(other \* 4 \+ 1\) \* Dir<0>::NL \+ l\],\s*"
                     r"xpair\[\(other \* 4 \+ 2\) \* Dir<0>::NL \+ l\], xpair\[\(other \* 4 \+ 3\) \* Dir<0>::NL \+ l\],\s*"
                     r"__ldg\(nx \+ idx\), __ldg\(ny \+ idx\), __ldg\(nz \+ idx\), __ldg\(F \+ idx\)\);", shared)
    for c, value in enumerate(("qv", "vv[0]", "vv[1]", "vv[2]")):  # the staging side: own node into own half
        assert f"xpair[(half * 4 + {c}) * Dir<0>::NL + l] = side ? {value}.y : {value}.x;" in staging
    from composer.paths.fused import launch_grid
    from composer.fused.builder import kernel_sources

    assert launch_grid(kernel_sources(paired)[0], paired, 32768, 8, 132) == 16384
    with pytest.raises(ValueError, match="x_pairs needs an even number of elements, got 7"):
        launch_grid(kernel_sources(paired)[0], paired, 7, 8, 132)


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 7, (4, 1, 2)), ("FUSED", 7, (2, 3, 1)),
                                                ("FUSED_TC16", 15, (2, 1, 1))])
def test_pair_buffer_holds_both_traces_of_the_shared_face(variant: str, order: int, grid: tuple) -> None:
    from composer.fused.candidates import x_pair_candidates
    from composer.fused.emulate import x_pair_traces

    config = x_pair_candidates(variant, order)[0][1]
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    plan = kernel_plans(config)[0]
    inner, outer, written = x_pair_traces(plan, fields, mesh)
    assert np.all(written == 1)  # the staging pairs of each half write each line of its shared face once
    _, formed = x_face_interior(plan, fields, mesh)  # the outer faces once, the shared ones never there
    even = np.arange(mesh.num_elements) % 2 == 0
    assert np.all(formed[even, 0] == 1) and np.all(formed[~even, 1] == 1)
    assert np.all(formed[even, 1] == 0) and np.all(formed[~even, 0] == 0)
    vmap_m, vmap_p = (m.reshape(mesh.num_elements, 6, -1) for m in mesh.face_maps)
    for name in inner:
        flat = fields[name].reshape(-1)
        for side, rows in ((1, even), (0, ~even)):
            assert np.array_equal(inner[name][rows], flat[vmap_m[rows, side]]), name
            assert np.array_equal(outer[name][rows], flat[vmap_p[rows, side]]), name
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_meshes_that_do_not_pair_up_are_refused() -> None:
    from composer.fused.traces import x_pairs_maps_problem

    assert x_pairs_maps_problem(dg.Mesh(7, (2, 3, 1)).face_maps[1], 8) is None
    odd = x_pairs_maps_problem(dg.Mesh(7, (3, 2, 1)).face_maps[1], 8)
    assert odd and "x_pairs needs elements 2b and 2b + 1 to be x neighbours" in odd and "\n" not in odd
    assert x_pairs_maps_problem(dg.Mesh(7, (1, 1, 3)).face_maps[1], 8) == "x_pairs needs an even number of elements, got 3"


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_x_pair_candidates_compile(variant: str) -> None:
    from composer.fused.candidates import x_pair_candidates

    found = x_pair_candidates(variant, 7)
    assert found
    for name, config in found:
        built = build(config, "sm_90").kernels[0]
        sass = _sass(built)
        print(f"{name}: {sass.registers} regs, {sass.spill_bytes} B local, {built.smem_bytes} B smem, {built.threads} threads")
        assert built.threads == 2 * _single(variant, 7).kernels[0].threads  # twice one element's threads
        if config.min_blocks:
            assert sass.registers * built.threads * config.min_blocks <= 65536, name


@pytest.mark.gpu
@pytest.mark.parametrize("order,small", [(7, (4, 1, 2)), (15, (2, 2, 1))])
def test_x_pairs_match_reference_on_the_gpu_and_refuse_odd_grids(order: int, small: tuple) -> None:
    """Every x_pairs candidate against the reference (NaN-filled dqdt) on a small non-cubic grid of even
    x extent and on the Table S29 grid; an odd x extent is refused in one line before any launch."""
    from composer.fused.candidates import x_pair_candidates
    from composer.fused.trial import TOLERANCE, run_case
    from composer.paths.problem import DeviceProblem
    from composer.paths.registry import path_class
    from composer.runtime import default_device

    from tests.test_fused_gpu import bench_grid

    extra = {f"{v}@{name}": (lambda o, c=config: c) for v in ("FUSED", "FUSED_TC", "FUSED_TC16")
             for name, config in x_pair_candidates(v, order)}
    assert extra
    device = default_device()
    for grid in (small, bench_grid(order)):
        for rec in run_case(order, grid, [], device, extra=extra):
            print(rec)
            assert "error" not in rec, rec
            assert rec["rel_err"] <= TOLERANCE, rec
    odd = (3, 2, 1)
    problem = DeviceProblem.upload(dg.make_fields(order, odd, varying=True), order, odd, device)
    try:
        variant, config = next((k.split("@")[0], f(order)) for k, f in extra.items())
        with pytest.raises(ConfigError, match="x_pairs needs elements 2b and 2b \\+ 1 to be x neighbours"):
            path_class(variant)(problem, config=config)
    finally:
        problem.close()


@pytest.mark.gpu
def test_a_paired_schedule_runs_one_element_per_block_on_an_odd_grid(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped FUSED_TC16 table at p = 7 pairs x neighbours; on a mesh of odd x extent the path runs its
    kernels one element per block (a note on stderr) and computes the reference."""
    from composer.fused.trial import TOLERANCE
    from composer.runtime import default_device

    import composer.paths.fused
    from tests.test_fused_gpu import run_schedule_table

    monkeypatch.setattr(composer.paths.fused, "_ONE_ELEMENT_NOTED", set())  # the note is once per process
    assert fused_config("FUSED_TC16", 7).x_pairs
    ran, err = run_schedule_table("FUSED_TC16", 7, (3, 2, 2), default_device())
    assert not ran.x_pairs and ran.kernels[0].threads * 2 == fused_config("FUSED_TC16", 7).kernels[0].threads
    assert err <= TOLERANCE
    assert "pairs x neighbours (x_pairs) but" in capsys.readouterr().err


def test_one_element_form_of_a_paired_table_keeps_its_warps_and_register_cap() -> None:
    """x_pairs blocks hold two elements of half their threads: the one-element form the families start
    from has half the threads and twice the blocks per SM under a cap (the same registers per thread)."""

    paired = fused_config("FUSED_TC16", 7)
    assert paired.x_pairs  # session 26's table
    single = one_element_form(paired)
    assert not single.x_pairs and single.kernels[0].threads * 2 == paired.kernels[0].threads
    assert single.min_blocks == 0 == paired.min_blocks
    capped = one_element_form(dataclasses.replace(paired, min_blocks=3))
    assert capped.min_blocks == 6
    assert one_element_form(single) is single  # an unpaired table is its own one-element form
