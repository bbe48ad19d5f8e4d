"""``interior_maps = false``: the fused box kernels' face fluxes address each interior trace from the
element's layout and read no vmapM (issue 16: the y and z faces' vmapM is 34 MB of the p = 7 kernel's
DRAM bytes, and a dependent load before every interior gather).

CPU: the key's errors; the template's node formula (Dir<d>::at of the face position, plus the box
origin) names, for the slot face_off gives, the node vmapM names, in every block of every table that
drops the maps (the family's and the machine overlays', clusters split along z among them); the
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
from composer.fused.emulate import _box_origin, box_point
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


def _tables_without_maps() -> list:
    """Every table that reads no vmapM: the local_interior family's at p = 7-127 and the machine overlays'
    (the H100's p = 15 tables are xyz kernels over clusters of two, split along z)."""
    from composer.config.machine_schedules import overlay_machines, using_machine
    from composer.config import schedule_files

    found = [c for v in ("FUSED", "FUSED_TC", "FUSED_TC16") for o in (7, 15, 31, 63, 127)
             for _, c in local_interior_candidates(v, o)]
    for machine in overlay_machines(schedule_files.packaged_dir()):
        with using_machine(machine):
            found += [c for v in ("FUSED", "FUSED_TC", "FUSED_TC16") for o in (7, 15, 63)
                      if not (c := fused_config(v, o)).interior_maps]
    assert any(k.cluster > 1 for c in found for k in c.kernels)
    return found


def _face_off(d: int, l: np.ndarray, plan, k0: int, j0: int, i0: int) -> np.ndarray:
    """Dir<d>::face_off(l, k0, j0, i0) of the template: the face slot b * Nq + a of line l."""
    _, bj, bi = plan.kernel.box
    nq = plan.nq
    if d == 0:
        return (k0 + l // bj) * nq + (j0 + l % bj)
    if d == 1:
        return (k0 + l // bi) * nq + (i0 + l % bi)
    return (j0 + l // bi) * nq + (i0 + l % bi)


@pytest.mark.parametrize("index", range(len(_tables_without_maps())))
def test_the_templates_interior_node_is_the_one_vmapm_names(index: int) -> None:
    """For every table without maps, every block's face loop as the template writes it: the slot from
    ``face_off(l)`` (idx), the node from ``Dir<d>::at(side ? extent - 1 : 0, l)`` plus the box origin (m),
    on the sides the block holds (a split axis: the first rank the low face, the last the high one);
    vmapM[idx] must be m, and every face slot of every carried direction must be some block's."""
    config = _tables_without_maps()[index]
    grid = (2, 1, 2)
    mesh = dg.Mesh(config.order, grid)
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
                if config.traces == "xfaces" and d == 0:
                    continue  # formed in the staging loop from the pairs (tests/test_fused_xfaces.py)
                for side in (0, 1):
                    if (origin[d] != 0) if side == 0 else (origin[d] + extent[d] != nq):
                        continue  # the template's `continue` on a split axis
                    l = np.arange(lines[d])
                    ok, oj, oi = (np.broadcast_to(v, l.shape) for v in box_point(d, extent[d] - 1 if side else 0, l, plan))
                    m = (k0 + ok) * nq * nq + (j0 + oj) * nq + i0 + oi
                    slot = _face_off(d, l, plan, k0, j0, i0)
                    for e in range(mesh.num_elements):
                        assert np.array_equal(vmap_m[e, 2 * d + side, slot], e * nq**3 + m), (plan.name, box, d, side)
                        seen[e, 2 * d + side, slot] += 1
    carried = [2 * d + s for k in config.kernels for d in k.dirs for s in (0, 1)
               if not (config.traces == "xfaces" and d == 0)]
    assert (seen[:, carried] == 1).all()  # each slot once


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
    for d, extent in ((1, "BJ"), (2, "BK")):  # the node formula the CPU test above replays
        assert f"const Pt o = Dir<{d}>::at(side ? {extent} - 1 : 0, l);" in faces
    assert faces.count("const i64 m = e * NQ3 + (i64)(k0 + o.k) * NQ2 + (i64)(j0 + o.j) * NQ + (i0 + o.i);") == 2
    mapped = dataclasses.replace(config, interior_maps=True)
    assert "numerical_flux(idx" in render_volume(mapped, kernel_plans(mapped)[0])


def test_family_drops_the_maps_of_the_inline_box_tables() -> None:
    names = [n for n, _ in local_interior_candidates("FUSED_TC", 7)]
    assert names and all("noM" in n for n in names) and any("eb32x8x32" in n for n in names)
    assert local_interior_candidates("FUSED_TC16", 255) == []  # streamed, face array


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 15)])
def test_kernels_without_maps_compile_within_the_registers_of_the_mapped_ones(variant: str, order: int, plain_p7) -> None:
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
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(order, grid, local_interior_candidates)


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)["paths"]["FUSED_TC"]
