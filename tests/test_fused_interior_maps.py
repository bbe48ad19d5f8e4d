"""``interior_maps = false``: the fused box kernels' face fluxes address each interior trace from the
element's layout and read no vmapM (issue 16: the y and z faces' vmapM is 34 MB of the p = 7 kernel's
DRAM bytes, and a dependent load before every interior gather).

CPU: the key's errors; the template's node formula (Dir<d>::at of the face position, plus the box
origin) names, for every face slot of every kernel of the shipped tables, the node vmapM names; the
mesh check refuses a map numbered otherwise; the face loop reads vmapP only; the kernels compile
without more registers. GPU (marked): the family's tables against the reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.candidates import label, local_interior_candidates, to_table
from composer.fused.config import fused_config, parse_table
from composer.fused.emulate import _box_origin, box_point, emulate
from composer.fused.traces import interior_maps_problem, own_face_nodes

from tests.test_fused_cpu import _sass, needs_nvrtc

XYZ7 = {"flux": "inline", "mma": "8x8x4", "traces": "xfaces", "interior_maps": False,
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


def test_interior_maps_key_errors_name_the_key() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    assert config.interior_maps is False and "noM" in label(config)
    assert parse_table("FUSED_TC", 7, _toml(to_table(config))) == config
    with pytest.raises(ConfigError, match="interior_maps.*true or false"):
        parse_table("FUSED_TC", 7, dict(XYZ7, interior_maps="no"))
    with pytest.raises(ConfigError, match='interior_maps.*traces = "global" or "xfaces", got "tiles"'):
        parse_table("FUSED_TC", 7, dict(XYZ7, traces="tiles"))
    with pytest.raises(ConfigError, match='interior_maps.*flux = "inline"'):
        parse_table("FUSED_TC", 7, dict(XYZ7, flux="array", traces="global"))
    with pytest.raises(ComposerError, match="interior_maps"):  # a table built in code: the builder checks it
        kernel_plans(dataclasses.replace(fused_config("FUSED_TC16", 255), interior_maps=False))


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 7, (2, 3, 1)), ("FUSED_TC16", 15, (1, 2, 1)),
                                                ("FUSED", 31, (1, 1, 2)), ("FUSED_TC16", 63, (1, 1, 1))])
def test_the_templates_interior_node_is_the_one_vmapm_names(variant: str, order: int, grid: tuple) -> None:
    """The face loop's ``o = Dir<d>::at(side ? extent - 1 : 0, l)`` plus the box origin, for every face
    slot every block of the shipped table's kernels fills, against the mesh's vmapM."""
    config = fused_config(variant, order)
    mesh = dg.Mesh(order, grid)
    nq = mesh.nq
    vmap_m = mesh.face_maps[0].reshape(mesh.num_elements, 6, nq * nq)
    seen = np.zeros(vmap_m.shape, dtype=int)
    for plan in kernel_plans(config):
        bk, bj, bi = plan.kernel.box
        extent = (bi, bj, bk)
        lines = {0: bk * bj, 1: bk * bi, 2: bj * bi}
        for box in range(plan.blocks_per_element):
            k0, j0, i0 = _box_origin(box, plan.kernel.box, nq)
            origin = (i0, j0, k0)
            for d in plan.kernel.dirs:
                for side in (0, 1):
                    if origin[d] + (extent[d] if side else 0) not in ((0 if not side else nq),):
                        continue  # this box does not touch that face (a split axis's inner chunk)
                    l = np.arange(lines[d])
                    ok, oj, oi = box_point(d, extent[d] - 1 if side else 0, l, plan)
                    ok, oj, oi = (np.broadcast_to(v, l.shape) for v in (ok, oj, oi))
                    m = (k0 + ok) * nq * nq + (j0 + oj) * nq + i0 + oi
                    # the face slot (b, a) of line l: face_off in the template
                    b, a = {0: (k0 + ok, j0 + oj), 1: (k0 + ok, i0 + oi), 2: (j0 + oj, i0 + oi)}[d]
                    for e in range(mesh.num_elements):
                        slot = b * nq + a
                        assert np.array_equal(vmap_m[e, 2 * d + side, slot], e * nq**3 + m)
                        seen[e, 2 * d + side, slot] += 1
    assert (seen >= 1).all()  # every face slot is some kernel's


def test_own_face_nodes_and_the_mesh_check() -> None:
    for order, grid in ((7, (2, 3, 1)), (15, (1, 2, 2))):
        mesh = dg.Mesh(order, grid)
        maps = mesh.face_maps[0].reshape(mesh.num_elements, 6, mesh.nq, mesh.nq)
        for face in range(6):
            assert np.array_equal(maps[0, face], own_face_nodes(mesh.nq, face))
        assert interior_maps_problem(mesh.face_maps[0], mesh.nq) is None
    mesh = dg.Mesh(7, (2, 1, 1))
    swapped = mesh.face_maps[0].copy()
    swapped[1, 4, 2, 3], swapped[1, 4, 3, 2] = swapped[1, 4, 3, 2], swapped[1, 4, 2, 3]  # a z face numbered otherwise
    problem = interior_maps_problem(swapped, mesh.nq)
    assert problem and problem.startswith("interior_maps = false needs") and "element 1, z face 0, node (3, 2)" in problem


def test_the_face_loop_reads_no_vmapm() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    source = render_volume(config, kernel_plans(config)[0])
    faces = source.split("// 2. fstar")[1].split("__syncthreads")[0]
    assert "vmapM +" not in faces and "numerical_flux(" not in faces and "__ldg(vmapP + idx)" in faces
    assert "vmapM +" not in source.split("extern \"C\"")[1].split("{", 1)[1]  # read nowhere in the kernel
    mapped = dataclasses.replace(config, interior_maps=True)
    assert "numerical_flux(idx" in render_volume(mapped, kernel_plans(mapped)[0])


def test_emulation_with_local_interior_traces_equals_the_reference() -> None:
    grid = (2, 3, 2)
    config = dataclasses.replace(fused_config("FUSED_TC", 7), interior_maps=False, element_bricks=(2, 2, 1))
    fields = dg.make_fields(7, grid, varying=True)
    ref = dg.reference_tendency(fields, 7, grid)
    assert np.max(np.abs(emulate(config, fields, grid) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_family_drops_the_maps_of_the_inline_box_tables() -> None:
    names = [n for n, _ in local_interior_candidates("FUSED_TC", 7)]
    assert names and all("noM" in n for n in names) and any("eb32x8x32" in n for n in names)
    assert local_interior_candidates("FUSED_TC16", 255) == []  # streamed, face array


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 15)])
def test_kernels_without_maps_compile_within_the_registers_of_the_mapped_ones(variant: str, order: int) -> None:
    config = local_interior_candidates(variant, order)[0][1]
    mapped = dataclasses.replace(config, interior_maps=True)
    sass, one = _sass(build(config, "sm_90").kernels[0]), _sass(build(mapped, "sm_90").kernels[0])
    print(f"{variant} p={order}: {sass.registers} regs ({one.registers} mapped), {sass.spill_bytes} B local")
    assert sass.registers <= one.registers + 2 and sass.spill_bytes == one.spill_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(7, (3, 2, 2)), (15, (2, 1, 3)), (31, (1, 2, 1)), (7, "s29"), (15, "s29")])
def test_local_interior_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    """Every local_interior candidate of the three variants against the reference (NaN-filled dqdt) on small
    non-cubic grids (a paired table only where the x extent pairs) and on the Table S29 grids."""
    from composer.runtime import default_device

    from tests.test_fused_gpu import assert_candidates_validate

    found = [(name, config) for variant in ("FUSED", "FUSED_TC", "FUSED_TC16")
             for name, config in local_interior_candidates(variant, order)
             if not config.x_pairs or grid == "s29" or grid[0] % 2 == 0]
    assert_candidates_validate(default_device(), order, "s29" if grid == "s29" else grid, found)


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)["paths"]["FUSED_TC"]
