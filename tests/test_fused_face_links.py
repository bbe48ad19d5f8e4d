"""``exterior_maps = false``: the fused box kernels' face fluxes take each exterior node from one link per
element face (base, stride_a, stride_b: composer.fused.links) and read no vmapP (issue 16: vmapP is 50 MB
of the p = 7 kernel's 1442 MB of DRAM reads on an H100, whose time follows its bytes).

CPU: the links of every face in every orientation (the 6 x 8 maps of a conforming hexahedral mesh)
name exactly the nodes of an exterior map written node by node; the benchmark meshes' links; a map
that is not face to face is refused in one line; the template's ``linked_node``, compiled as host code
by nvcc, equals ``linked_nodes`` on links of every face and orientation; the key's errors; the face
loops read no index map and the kernel takes the links last; the emulated kernels against the
reference; the traffic model; the family; the kernels compile without spills. GPU (marked): the
family's tables against the reference on small non-cubic grids and the Table S29 grids."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import numpy as np
import pytest

from composer import counts, dg
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import TEMPLATE_DIR, build, kernel_plans, render_volume, volume_signature
from composer.fused.candidates import face_links_candidates, label, to_table
from composer.fused.config import parse_table
from composer.fused.emulate import emulate
from composer.fused.links import (MAX_STRIDE, ORIENTATIONS, face_links, face_links_problem, face_positions,
                                  linked_nodes, linked_offsets, links_of, pack, unpack)
from composer.fused.traffic import LINK, MAP, schedule_traffic
from composer.kernels.render import render

from tests.test_fused_cpu import _sass, needs_nvrtc

XYZ7 = {"flux": "inline", "mma": "8x8x4", "traces": "xfaces", "interior_maps": False, "exterior_maps": False,
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


def _node_by_node_map(neighbour: np.ndarray, face: np.ndarray, orientation: np.ndarray, nq: int) -> np.ndarray:
    """An exterior map (Ne, 6, Nq, Nq) written node by node from the orientation's definition, not through
    a link: neighbour * Nq^3 + the offset of the neighbour face's node each (a, b) meets."""
    a, b = face_positions(nq)
    return neighbour[..., None, None] * nq**3 + linked_offsets(face[..., None, None], orientation[..., None, None], a, b, nq)


def _every_face_and_orientation(ne: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(neighbour, face, orientation), shape (ne, 6) each, covering all 6 x 8 (face, orientation) pairs."""
    rng = np.random.default_rng(seed)
    pairs = np.arange(ne * 6) % (6 * ORIENTATIONS)
    rng.shuffle(pairs)
    face, orientation = np.divmod(pairs.reshape(ne, 6), ORIENTATIONS)
    return rng.integers(0, ne, (ne, 6)), face, orientation


@pytest.mark.parametrize("nq", [2, 3, 8, 16])
def test_links_name_every_face_in_every_orientation(nq: int) -> None:
    """The 48 maps are distinct, each is affine in (a, b), so three numbers per face reproduce a map written
    node by node; the derived links are the ones ``links_of`` gives for the same faces."""
    neighbour, face, orientation = _every_face_and_orientation()
    vmap_p = _node_by_node_map(neighbour, face, orientation, nq)
    a, b = face_positions(nq)
    maps = {linked_offsets(f, o, a, b, nq).tobytes() for f in range(6) for o in range(ORIENTATIONS)}
    assert len(maps) == 6 * ORIENTATIONS
    links, wrong = face_links(vmap_p, nq)
    assert wrong is None and links.dtype == np.int32 and links.shape == (8, 6, 2)
    assert np.array_equal(linked_nodes(links, nq), vmap_p)
    assert np.array_equal(links, links_of(neighbour, face, orientation, nq))


@pytest.mark.parametrize("order,grid", [(7, (2, 3, 1)), (15, (1, 2, 2)), (3, (1, 1, 1)), (7, (32, 32, 32))])
def test_the_benchmark_meshes_links(order: int, grid: tuple) -> None:
    """On the structured mesh every face meets the opposite face of its neighbour unturned: an x face's a
    runs along j (stride Nq), b along k (Nq^2); a y face's a along i (1), b along k; a z face's a along i,
    b along j; the base is the neighbour's first node on that face (extent-1 axes link to themselves)."""
    mesh = dg.Mesh(order, grid)
    nq = mesh.nq
    links, wrong = face_links(mesh.face_maps[1], nq)
    assert wrong is None
    base, stride_a, stride_b = unpack(links)
    strides = {0: (nq, nq * nq), 1: (1, nq * nq), 2: (1, nq)}
    for f in range(6):
        assert (stride_a[:, f] == strides[f // 2][0]).all() and (stride_b[:, f] == strides[f // 2][1]).all()
    neighbour = base // nq**3
    e = np.arange(mesh.num_elements)
    nex, ney, _ = grid
    assert np.array_equal(neighbour[:, 1], (e % nex + 1) % nex + e // nex * nex)  # +x face: the next in x, wrapped
    assert np.array_equal(links[:, 1, 0] % nq**3, np.zeros(mesh.num_elements))  # meets the neighbour's i = 0 face
    assert np.array_equal(links[:, 0, 0] % nq**3, np.full(mesh.num_elements, nq - 1))  # -x: its i = Nq - 1 face


def test_a_map_that_is_not_face_to_face_is_refused() -> None:
    mesh = dg.Mesh(7, (2, 1, 2))
    nq = mesh.nq
    swapped = mesh.face_maps[1].copy()
    swapped[3, 2, 4, 5], swapped[3, 2, 5, 4] = swapped[3, 2, 5, 4], swapped[3, 2, 4, 5]  # two nodes of one face
    links, wrong = face_links(swapped, nq)
    assert wrong and wrong.startswith("exterior_maps = false needs an exterior map that links whole faces")
    assert "element 3, face 2, node (5, 4)" in wrong  # (a, b): the first of the two in [b, a] order
    split = mesh.face_maps[1].copy()
    split[1, 5, 7] = split[0, 5, 7]  # the last row of a face in another element
    assert "element 1, face 5, node (0, 7)" in face_links(split, nq)[1]
    assert face_links_problem(mesh.face_maps[1], face_links(mesh.face_maps[1], nq)[0], nq) is None


def test_a_face_whose_first_nodes_lie_far_apart_is_refused_in_one_line() -> None:
    """Node (1, 0) of a face pointing into another element gives a stride no 16-bit link holds: refused with the
    face named (no ValueError escapes the path)."""
    mesh = dg.Mesh(7, (8, 8, 8))
    far = mesh.face_maps[1].copy()
    far[5, 3, 0, 1] = far[400, 3, 0, 1]
    links, wrong = face_links(far, mesh.nq)
    assert links is None and wrong.startswith("exterior_maps = false needs an exterior map that links whole faces")
    assert "element 5, face 3" in wrong and "\n" not in wrong


def test_the_strides_pack_into_16_bits_each() -> None:
    base, stride_a, stride_b = np.array([5, 2**31 - 1]), np.array([-1, MAX_STRIDE]), np.array([-MAX_STRIDE, -4096])
    assert all(np.array_equal(x, y) for x, y in zip(unpack(pack(base, stride_a, stride_b)), (base, stride_a, stride_b)))
    with pytest.raises(ValueError, match="strides up to 32767"):
        pack(base, stride_a, stride_b * 2)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
@pytest.mark.parametrize("nq", [8, 16])
def test_the_templates_linked_node_compiled_for_the_host_equals_linked_nodes(nq: int, tmp_path) -> None:
    """``linked_node`` of _face_links.cuh.j2, as the kernels include it, compiled as host code: on links of
    every face and orientation (neighbours up to 2^31 / Nq^3) at every face node, the node the NumPy form names."""
    neighbour, face, orientation = _every_face_and_orientation(ne=16, seed=nq)
    neighbour = neighbour * ((2**31 - 1) // nq**3 // 16)
    links = links_of(neighbour, face, orientation, nq).reshape(-1, 2)
    rows = ",\n".join(f"{{{x}, {y}}}" for x, y in links)
    source = "\n".join([
        "#include <cstdio>", "typedef long long i64;", f"constexpr int NQ = {nq};",
        render("_face_links.cuh.j2", template_dir=TEMPLATE_DIR),
        f"static const int LINKS[{len(links)}][2] = {{\n{rows}\n}};",
        "int main() {",
        f"    for (int s = 0; s < {len(links)}; ++s)",
        "        for (int r = 0; r < NQ * NQ; ++r)",
        "            printf(\"%d\\n\", linked_node(make_int2(LINKS[s][0], LINKS[s][1]), r));",
        "}"])
    (tmp_path / "links.cu").write_text(source)
    subprocess.run(["nvcc", "-o", str(tmp_path / "links"), str(tmp_path / "links.cu")], check=True, capture_output=True,
                   timeout=300)
    out = subprocess.run([str(tmp_path / "links")], check=True, capture_output=True, text=True).stdout.split()
    assert np.array_equal(np.array(out, dtype=np.int64), linked_nodes(links.reshape(16, 6, 2), nq).reshape(-1))


def test_exterior_maps_key_errors_name_the_key() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    assert config.exterior_maps is False and label(config).endswith("noM noP")
    import tomllib

    assert parse_table("FUSED_TC", 7, tomllib.loads(to_table(config))["paths"]["FUSED_TC"]) == config
    with pytest.raises(ConfigError, match="exterior_maps.*true or false"):
        parse_table("FUSED_TC", 7, dict(XYZ7, exterior_maps=0))
    with pytest.raises(ConfigError, match="exterior_maps.*needs interior_maps = false"):
        parse_table("FUSED_TC", 7, dict(XYZ7, interior_maps=True))
    with pytest.raises(ComposerError, match="exterior_maps"):  # a table built in code: the builder checks it
        kernel_plans(dataclasses.replace(config, interior_maps=True))


@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED", 15), ("FUSED_TC16", 63)])
def test_each_exterior_node_takes_the_link_of_its_own_slots_face_and_position(variant: str, order: int) -> None:
    """Every ``exterior_node(links, e, FACE, R)`` the template writes names the face and in-face position of the
    slot ``idx = e * NFACE + FACE * NQ2 + R`` computed just before it (the x faces' staging loop: FACE = side; the y
    and z loops: 2 d + side), in every kernel of the family's tables and the H100 overlay's (split clusters)."""
    import re

    from composer.config.machine_schedules import using_machine
    from composer.fused.config import fused_config

    configs = [c for _, c in face_links_candidates(variant, order) if not c.exterior_maps]
    with using_machine("h100_sxm"):
        if order in (7, 15):
            configs.append(dataclasses.replace(fused_config(variant, order), exterior_maps=False))
    slot = re.compile(r"const i64 idx = e \* NFACE \+ \(?(.+?)\)? \* NQ2 \+ (Dir<\d>::face_off\([^)]*\));")
    link = re.compile(r"exterior_node\(links, e, (.+?), (Dir<\d>::face_off\([^)]*\))\)")
    checked = 0
    for config in configs:
        for plan in kernel_plans(config):
            lines = render_volume(config, plan).split("\n")
            for n, line in enumerate(lines):
                found = link.search(line)
                if not found:
                    continue
                before = next(slot.search(lines[m]) for m in range(n, -1, -1) if slot.search(lines[m]))
                assert found.groups() == before.groups(), (config, line)
                checked += 1
    assert checked >= 2 * len(configs)


def test_the_path_holds_the_links_beside_the_maps(tmp_path, monkeypatch) -> None:
    """``composer info``'s memory estimate (workspace_items) lists the links of a table without vmapP."""
    from composer.config import schedule_files
    from composer.paths.registry import path_class

    # the packaged tables without the map keys (session 34 applied the links to p = 7's FUSED_TC and FUSED_TC16),
    # then FUSED_TC alone linked
    text = re.sub(r"(?m)^(interior|exterior)_maps = false\n", "",
                  (schedule_files.packaged_dir() / "p0007.toml").read_text())
    linked = text.replace("[paths.FUSED_TC]\n", "[paths.FUSED_TC]\ninterior_maps = false\nexterior_maps = false\n", 1)
    assert linked != text
    (tmp_path / "mapped").mkdir()
    (tmp_path / "mapped" / "p0007.toml").write_text(text)
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "p0007.toml").write_text(linked)
    grid = (32, 32, 32)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "mapped"))
    assert not path_class("FUSED_TC").face_links(7)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "linked"))
    items = {item.name: item for item in path_class("FUSED_TC").workspace_items(7, grid)}
    assert items["face links (32-bit pairs)"].bytes == 6 * 8 * 32**3
    assert "face links (32-bit pairs)" not in {item.name for item in path_class("FUSED_TC16").workspace_items(7, grid)}


def test_the_face_loops_read_no_index_map_and_the_kernel_takes_the_links_last() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    source = render_volume(config, kernel_plans(config)[0])
    body = source.split('extern "C"')[1].split("{", 1)[1]
    assert "vmapP +" not in body and "vmapM +" not in body
    assert body.count("exterior_node(links, e, ") == 3  # x faces in the staging loop, then y and z
    assert "const int2* __restrict__ links)" in source
    assert volume_signature(config)[-1].name == "links"
    bricked = dataclasses.replace(config, element_bricks=(4, 2, 2))
    assert [p.name for p in volume_signature(bricked)[-2:]] == ["order", "links"]
    mapped = dataclasses.replace(config, exterior_maps=True)
    assert "__ldg(vmapP + idx)" in render_volume(mapped, kernel_plans(mapped)[0])


@pytest.mark.parametrize("variant,order,grid", [("FUSED_TC", 7, (3, 2, 2)), ("FUSED", 7, (2, 1, 3)),
                                                ("FUSED_TC16", 15, (2, 2, 1)), ("FUSED_TC", 31, (1, 2, 1))])
def test_emulated_kernels_without_maps_equal_the_reference(variant: str, order: int, grid: tuple) -> None:
    """Each family table without vmapP (its exterior nodes from the links, through linked_nodes) on a small
    non-cubic grid against the reference."""
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    for name, config in face_links_candidates(variant, order):
        if config.exterior_maps or (config.x_pairs and grid[0] % 2):
            continue
        config = dataclasses.replace(config, element_bricks=None)  # the order is element_order's to test
        out = emulate(config, fields, grid)
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13, name


def test_the_h100_overlays_tables_without_vmapp_emulate_to_the_reference() -> None:
    """The H100 overlay's mapless tables (p = 15: the xyz kernel over a cluster of two, split along z, whose ranks
    form only their own side's z faces) with exterior_maps = false, emulated on a small grid."""
    from composer.config.machine_schedules import using_machine
    from composer.fused.config import fused_config

    order, grid = 15, (2, 1, 2)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    with using_machine("h100_sxm"):
        config = dataclasses.replace(fused_config("FUSED_TC16", order), exterior_maps=False)
    assert any(k.cluster > 1 for k in config.kernels) and not config.interior_maps
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_the_traffic_model_reads_links_for_vmapp() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    mapped = dataclasses.replace(config, exterior_maps=True)
    grid = (32, 32, 32)
    ne, nq = counts.num_elements(grid), config.nq
    saved = sum(k.total_bytes for k in schedule_traffic(mapped, grid)) - sum(k.total_bytes for k in schedule_traffic(config, grid))
    assert saved == 6 * ne * (nq * nq * MAP - LINK) == 48758784  # 50.3 MB of vmapP for 1.6 MB of links


def test_family_pairs_each_mapless_table_with_its_linked_form(plain_p7) -> None:
    found = face_links_candidates("FUSED_TC", 7)
    assert [c.exterior_maps for _, c in found] == [True, False] * (len(found) // 2) and len(found) >= 4
    assert all(dataclasses.replace(b, exterior_maps=True) == a for (_, a), (_, b) in zip(found[::2], found[1::2]))
    assert face_links_candidates("FUSED_TC16", 255) == []  # streamed, face array


def test_families_still_apply_to_a_bricked_linked_table(tmp_path, monkeypatch, plain_p7) -> None:
    """p = 7's FUSED_TC table with bricks and the face links (the H100 overlay's; the H200's once applied): the
    families that group elements start from its unbricked single-element form instead of finding nothing, and the
    face-links family still pairs each mapless table with vmapP and without."""
    from composer.fused.candidates import strip_candidates, x_pair_candidates
    from composer.fused.config import fused_config

    text = (plain_p7 / "p0007.toml").read_text()
    keys = "element_bricks = [32, 8, 32]\ninterior_maps = false\nexterior_maps = false\n"
    (tmp_path / "p0007.toml").write_text(text.replace("[paths.FUSED_TC]\n", "[paths.FUSED_TC]\n" + keys, 1))
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    assert fused_config("FUSED_TC", 7).element_bricks == (32, 8, 32)
    for family in (strip_candidates, x_pair_candidates):
        found = family("FUSED_TC", 7)
        assert found and all(c.element_bricks is None for _, c in found), family.__name__
    linked = face_links_candidates("FUSED_TC", 7)
    assert [c.exterior_maps for _, c in linked] == [True, False] * (len(linked) // 2) and linked


def _blocks_by_registers(registers: int, threads: int) -> int:
    """Blocks of ``threads`` the 64K-register file of an SM holds at ``registers`` per thread (allocated in 8s)."""
    return 65536 // (-(-registers // 8) * 8 * threads)


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED_TC16", 15), ("FUSED", 7)])
def test_kernels_without_maps_compile_without_spills_and_keep_their_blocks_per_sm(variant: str, order: int) -> None:
    """No spills, and at least as many blocks per SM by registers as with vmapP. Without the compiler barrier
    between the face directions' loops ptxas hoisted the next direction's gathers, which no map load orders any
    more: FUSED_TC p = 7 took 48 registers against 32 (5 blocks of 256 threads per SM instead of 8) and ran x0.998
    of the table with vmapP on an H100 (session 32 call 2) while FUSED_TC16, whose blocks per SM did not change,
    ran x0.968."""
    for name, config in face_links_candidates(variant, order)[1::2]:
        mapped = dataclasses.replace(config, exterior_maps=True)
        sass, one = _sass(build(config, "sm_90").kernels[0]), _sass(build(mapped, "sm_90").kernels[0])
        threads = config.kernels[0].threads * (2 if config.x_pairs else 1)
        print(f"{name}: {sass.registers} regs ({one.registers} with vmapP), {sass.spill_bytes} B local")
        assert sass.spill_bytes == 0
        assert _blocks_by_registers(sass.registers, threads) >= _blocks_by_registers(one.registers, threads)


def test_the_face_loops_are_kept_apart_by_a_compiler_barrier_only_without_vmapp() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    source = render_volume(config, kernel_plans(config)[0])
    faces = source.split("// 2. fstar")[1].split("__syncthreads")[0]
    assert faces.count('asm volatile("" ::: "memory");') == 1  # between the y and z loops (x is in the staging loop)
    mapped = dataclasses.replace(config, exterior_maps=True)
    assert 'asm volatile("" ::: "memory")' not in render_volume(mapped, kernel_plans(mapped)[0])


def test_the_cuda_core_engine_takes_no_compiler_barrier() -> None:
    """FUSED (128 threads, one face node each per direction) with the barrier waited three face-gather latencies
    in a row: x1.29 of its vmapP table on an H100 (session 33 call 1), x1.031 without the barrier (call 2)."""
    for name, config in face_links_candidates("FUSED", 7)[1::2]:
        source = render_volume(config, kernel_plans(config)[0])
        assert "exterior_node(links" in source and 'asm volatile("" ::: "memory")' not in source, name


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(7, (3, 2, 2)), (15, (2, 1, 3)), (31, (1, 2, 1)), (63, (1, 1, 2)), (7, "s29"),
                                        (15, "s29")])
def test_face_links_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    """Every face_links candidate of the three variants (with and without vmapP) against the reference
    (NaN-filled dqdt) on small non-cubic grids (a paired table only where the x extent pairs) and on the
    Table S29 grids."""
    from tests.test_fused_gpu import assert_family_validates

    assert_family_validates(order, grid, face_links_candidates)
