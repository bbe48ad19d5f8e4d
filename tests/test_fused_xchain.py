"""``x_chain``: a block walks a chain of x-neighbour elements and carries the faces they share on chip
(issue 16, p = 7 and 15, whose kernels the L2 partition link binds).

With ``traces = "xfaces"`` the x-face gathers left are the exterior ones, 8 bytes per 32-byte sector. A
chain of L elements per block (``elements_per_block = L``, ``x_chain = true``) keeps each element's
high-face q, u, v, w in shared memory; the next element forms both fluxes of the face they share from
them and its own low-face nodes, and stores the previous element's high-face point pairs, held back
for that face's lift. CPU: the key's errors, the shared memory, every shared slot formed once from the
right nodes (the template's formulas against vmapM / vmapP), the deferred store's indices, the
emulated kernels against the reference, the mesh check, the family compiles. GPU (marked): every
candidate against the reference on small non-cubic grids and the Table S29 grid, and a chained
schedule on a mesh that does not chain runs one element per block."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import build, kernel_plans, render_volume
from composer.fused.candidates import label, to_table, x_chain_candidates
from composer.fused.config import fused_config, one_element_form, parse_table
from composer.fused.emulate import emulate, x_chain_deferred_store, x_chain_traces
from composer.fused.traces import x_chain_maps_problem

from tests.test_fused_cpu import _sass, needs_nvrtc

# the p = 7 and 15 tables these families start from (tests/conftest.py, xfaces_tables)
pytestmark = pytest.mark.usefixtures("xfaces_tables")

XYZ7 = {"flux": "inline", "mma": "8x8x4", "traces": "xfaces", "elements_per_block": 4, "x_chain": True,
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


def _chain(variant: str, order: int, length: int):
    """The shipped table as a chain of ``length`` (its one-element form on the x faces)."""
    base = dataclasses.replace(one_element_form(fused_config(variant, order)), traces="xfaces")
    return dataclasses.replace(base, x_chain=True, elements_per_block=length)


def test_x_chain_key_errors_name_the_key() -> None:
    config = parse_table("FUSED_TC", 7, XYZ7)
    assert config.x_chain and config.elements_per_block == 4
    with pytest.raises(ConfigError, match='x_chain.*traces = "xfaces"'):
        parse_table("FUSED_TC", 7, {k: v for k, v in XYZ7.items() if k != "traces"})
    with pytest.raises(ConfigError, match=r"x_chain.*elements_per_block >= 2"):
        parse_table("FUSED_TC", 7, {k: v for k, v in XYZ7.items() if k != "elements_per_block"})
    with pytest.raises(ConfigError, match="x_chain.*one volume kernel carrying x, y and z"):
        parse_table("FUSED_TC", 7, dict(XYZ7, kernels=[{"dirs": "xy", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]},
                                                      {"dirs": "z", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]))
    with pytest.raises(ConfigError, match="x_chain.*true or false"):
        parse_table("FUSED_TC", 7, dict(XYZ7, x_chain="yes"))
    with pytest.raises(ConfigError, match="x_pairs.*drop elements_per_block"):  # a pair and a chain at once
        parse_table("FUSED_TC", 7, dict(XYZ7, x_pairs=True, elements_per_block=2,
                                        kernels=[dict(XYZ7["kernels"][0], threads=512)]))


def test_x_prefetch_needs_a_chain_and_adds_the_next_element() -> None:
    with pytest.raises(ConfigError, match="x_prefetch.*needs x_chain"):
        parse_table("FUSED_TC", 7, {k: v for k, v in dict(XYZ7, x_prefetch=True).items() if k != "x_chain"})
    chain = parse_table("FUSED_TC", 7, XYZ7)
    ahead = parse_table("FUSED_TC", 7, dict(XYZ7, x_prefetch=True))
    plan, plain = kernel_plans(ahead)[0], kernel_plans(chain)[0]
    assert plan.raw_offset % 2 == 0 and plan.raw_offset >= plain.smem_doubles
    assert plan.smem_doubles == plan.raw_offset + 4 * 512  # q, u, v, w of one element
    source = render_volume(ahead, plan)
    assert "prefetch_element(smem + RAW, q, u, v, w, base + NQ3, tid)" in source and "cp.async.wait_group 0" in source
    assert "__ldg(reinterpret_cast<const double2*>(q + g))" not in source.split("2. fstar")[0].split("for (int sub")[1]
    assert "prefetch_element" not in render_volume(chain, plain)
    assert parse_table("FUSED_TC", 7, _toml(to_table(ahead))) == ahead and "xpf" in label(ahead)
    assert one_element_form(ahead).x_prefetch is False
    # p = 15's element does not fit twice beside its tiles: the family leaves it out there
    assert not [name for name, _ in x_chain_candidates("FUSED_TC16", 15) if "xpf" in name]
    assert [name for name, _ in x_chain_candidates("FUSED_TC", 7) if "xpf" in name]


def test_chain_adds_the_carried_nodes_and_the_held_pairs_to_shared_memory() -> None:
    single = parse_table("FUSED_TC", 7, {k: v for k, v in XYZ7.items() if k not in ("x_chain", "elements_per_block")})
    chain = parse_table("FUSED_TC", 7, XYZ7)
    one, walk = kernel_plans(single)[0], kernel_plans(chain)[0]
    assert walk.x_chain == 4 and one.x_chain == 0
    assert walk.smem_doubles == one.smem_doubles + 10 * 64  # carry[2][4][NL] + pend[NL][2], NL = 64 lines
    source = render_volume(chain, walk)
    assert "constexpr int CHAIN = 4;" in source and "thread_now()" in source
    assert "CHAIN" not in render_volume(single, one) and "thread_now" not in render_volume(single, one)
    # the table round-trips through the schedule writer
    assert parse_table("FUSED_TC", 7, _toml(to_table(chain))) == chain
    assert "xchain" in label(chain) and "epb4" in label(chain)


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)["paths"]["FUSED_TC"]


@pytest.mark.parametrize("variant,order,grid,length", [("FUSED_TC", 7, (4, 2, 3), 2), ("FUSED_TC", 7, (4, 1, 2), 4),
                                                       ("FUSED_TC16", 7, (8, 1, 1), 8), ("FUSED", 7, (2, 3, 1), 2),
                                                       ("FUSED_TC16", 15, (4, 1, 1), 4)])
def test_every_shared_face_slot_is_formed_once_from_both_neighbours(variant: str, order: int, grid: tuple,
                                                                    length: int) -> None:
    """Inside each chain every face two elements share is formed exactly once on each side, with the
    interior trace vmapM names and the exterior trace vmapP names, by x_chain_traces (the emulation's copy
    of the template's carry buffers and face-slot formulas, reading no map); the chain's outer faces are
    left to the gathers."""
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    ne, nl = mesh.num_elements, mesh.nq**2
    vmap_m, vmap_p = (m.reshape(ne, 6, nl)[:, :2] for m in mesh.face_maps)
    plan = kernel_plans(_chain(variant, order, length))[0]
    inner, outer, formed = x_chain_traces(plan, fields, mesh)
    position = np.arange(ne) % length
    expected = np.zeros((ne, 2), dtype=int)
    expected[position > 0, 0] = 1
    expected[position < length - 1, 1] = 1
    assert np.array_equal(formed, np.broadcast_to(expected[:, :, None], formed.shape))
    shared = formed == 1
    for name in ("q", "u", "v", "w"):
        flat = fields[name].reshape(-1)
        assert np.array_equal(inner[name][shared], flat[vmap_m][shared]), name
        assert np.array_equal(outer[name][shared], flat[vmap_p][shared]), name
        assert np.all(np.isnan(inner[name][~shared]))


@pytest.mark.parametrize("order,length", [(7, 2), (7, 8), (15, 4)])
def test_the_held_pair_is_stored_at_the_previous_elements_high_face(order: int, length: int) -> None:
    """The store the next element issues lands on the previous element's points (k, j, Nq - 2) and
    (k, j, Nq - 1) of the line, and reads the pend slots the previous element's store loop filled for
    that line (its pair p0 = (k, j, Nq - 2): PEND + 2 * Dir<0>::line(p0))."""
    plan = kernel_plans(_chain("FUSED_TC", order, length))[0]
    nq = plan.nq
    for e in (1, length - 1, length + 1):
        for line in range(nq * nq):
            k, j = line // nq, line % nq
            store, slot = x_chain_deferred_store(plan, line, e)
            assert store == (e - 1) * nq**3 + k * nq * nq + j * nq + nq - 2
            assert slot == 2 * (k * plan.kernel.box[1] + j)


@pytest.mark.parametrize("variant,order,grid,length", [("FUSED_TC", 7, (4, 1, 3), 2), ("FUSED_TC", 7, (4, 2, 1), 4),
                                                       ("FUSED_TC16", 7, (8, 1, 1), 8), ("FUSED", 7, (2, 2, 2), 2),
                                                       ("FUSED_TC", 15, (2, 1, 2), 2), ("FUSED_TC16", 15, (4, 1, 1), 4)])
def test_emulated_chains_equal_the_single_element_kernels_and_the_reference(variant: str, order: int, grid: tuple,
                                                                            length: int) -> None:
    """The emulation replays the chain's stores as the template orders them: an element before the chain's
    last leaves out its high x face's lift and holds its (Nq - 2, Nq - 1) pairs back; the next element stores
    them with that face's flux, at the template's index (x_chain_deferred_store). A point no store reaches
    stays NaN."""
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    chain = _chain(variant, order, length)
    single = dataclasses.replace(chain, x_chain=False, elements_per_block=1)
    out = emulate(chain, fields, grid)
    assert not np.any(np.isnan(out))
    assert np.max(np.abs(out - emulate(single, fields, grid))) <= 1e-15 * np.max(np.abs(ref))
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_a_wrong_deferred_store_shows_in_the_emulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulated kernel goes through the deferred store's index: a store one line off, or one reading the
    wrong held slot, leaves points unstored (NaN) or wrong, so the reference check above can fail."""
    import composer.fused.emulate as emulate_module

    grid, order = (4, 1, 1), 7
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    chain = _chain("FUSED_TC", order, 4)
    right = emulate_module.x_chain_deferred_store
    for wrong in (lambda plan, line, e: (right(plan, line, e)[0] + plan.nq, right(plan, line, e)[1]),
                  lambda plan, line, e: (right(plan, line, e)[0], (right(plan, line, e)[1] + 2) % (2 * plan.nq**2))):
        monkeypatch.setattr(emulate_module, "x_chain_deferred_store", wrong)
        out = emulate(chain, fields, grid)
        assert np.any(np.isnan(out)) or np.max(np.abs(out - ref)) / np.max(np.abs(ref)) > 1e-6


def test_meshes_that_do_not_chain_are_refused_in_one_line() -> None:
    assert x_chain_maps_problem(dg.Mesh(7, (4, 2, 1)).face_maps[1], 8, 4) is None
    assert x_chain_maps_problem(dg.Mesh(7, (8, 1, 1)).face_maps[1], 8, 4) is None
    short = x_chain_maps_problem(dg.Mesh(7, (3, 1, 1)).face_maps[1], 8, 2)
    assert short == "x_chain needs a multiple of elements_per_block = 2 elements, got 3"
    across = x_chain_maps_problem(dg.Mesh(7, (2, 2, 1)).face_maps[1], 8, 4)  # a chain of 4 across two x rows
    assert across and "x_chain needs elements 4b ... 4b + 3 to be consecutive x neighbours" in across
    assert "not a multiple of 4" in across and "\n" not in across
    # the pair check is the chain of two, with its own words
    from composer.fused.traces import x_pairs_maps_problem

    assert x_pairs_maps_problem(dg.Mesh(7, (3, 2, 1)).face_maps[1], 8).startswith("x_pairs needs elements 2b and 2b + 1")


def test_one_element_form_of_a_chain_walks_one_element() -> None:
    chain = parse_table("FUSED_TC", 7, XYZ7)
    single = one_element_form(chain)
    assert not single.x_chain and single.elements_per_block == 1 and single.kernels == chain.kernels


def test_family_chains_the_whole_element_tables_only() -> None:
    assert x_chain_candidates("FUSED_TC", 31) == []  # xy | z: no single xyz kernel
    found = x_chain_candidates("FUSED_TC", 7)
    lengths = {c.elements_per_block for _, c in found}
    assert lengths == {2, 4, 8} and all(c.x_chain and c.traces == "xfaces" for _, c in found)
    assert len({name for name, _ in found}) == len(found)
    # the register caps keep the table's weights rule (a cap alone would switch the weights late)
    assert all(c.weights == "early" for _, c in found if c.min_blocks)


@needs_nvrtc
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 7), ("FUSED_TC16", 15)])
def test_chain_compiles_and_the_element_loop_keeps_the_registers_of_one_element(variant: str, order: int) -> None:
    """The element loop reads the thread index afresh (thread_now): without it the compiler hoisted the
    staging and fragment offsets out of the loop (p = 15: 116-126 registers against 62-64, one block per
    SM instead of two). The uncapped chain stays within 1.5x the single element's registers."""
    single = build(dataclasses.replace(_chain(variant, order, 2), x_chain=False, elements_per_block=1), "sm_90").kernels[0]
    configs = [_chain(variant, order, length) for length in (2, 8)]
    if order == 7:
        configs.append(dataclasses.replace(configs[-1], x_prefetch=True))
    for config in configs:
        length = config.elements_per_block
        built = build(config, "sm_90").kernels[0]
        sass, one = _sass(built), _sass(single)
        print(f"{variant} p={order} L={length}{' prefetch' if config.x_prefetch else ''}: {sass.registers} regs "
              f"({one.registers} single), {sass.spill_bytes} B local")
        assert sass.registers <= 1.5 * one.registers and sass.spill_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid", [(7, (4, 1, 2)), (15, (4, 2, 1)), (7, "s29"), (15, "s29")])
def test_x_chain_candidates_match_reference_on_the_gpu(order: int, grid: tuple | str) -> None:
    """Every x_chain candidate of the three variants against the reference (NaN-filled dqdt) on a small
    non-cubic grid whose x extent chains of 2 and 4 divide, and (all lengths) on the Table S29 grid."""
    from composer.fused.candidates import x_chain_candidates as family
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime import default_device

    from tests.test_fused_gpu import bench_grid

    grid = bench_grid(order) if grid == "s29" else grid
    extra = {f"{v}@{name}": (lambda o, c=config: c) for v in ("FUSED", "FUSED_TC", "FUSED_TC16")
             for name, config in family(v, order) if grid[0] % config.elements_per_block == 0}
    assert extra
    for rec in run_case(order, grid, [], default_device(), extra=extra):
        print(rec)
        assert "error" not in rec, rec
        assert rec["rel_err"] <= TOLERANCE, rec


@pytest.mark.gpu
def test_a_chained_table_runs_one_element_per_block_where_the_mesh_does_not_chain(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A chained table given as the schedule's runs one element per block on a mesh whose x extent the
    chain does not divide (a note on stderr) and computes the reference; given explicitly it is refused."""
    from composer.fused.trial import TOLERANCE
    from composer.runtime import default_device

    import composer.paths.fused
    from tests.test_fused_gpu import run_schedule_table

    monkeypatch.setattr(composer.paths.fused, "_ONE_ELEMENT_NOTED", set())
    chain = _chain("FUSED_TC", 7, 4)
    monkeypatch.setattr(composer.paths.fused, "fused_config", lambda variant, order: chain)
    ran, err = run_schedule_table("FUSED_TC", 7, (3, 2, 2), default_device(), refused=(
        chain, r"x_chain needs elements 4b \.\.\. 4b \+ 3 to be consecutive x neighbours"))
    assert not ran.x_chain and ran.elements_per_block == 1 and err <= TOLERANCE
    assert "chains x neighbours (x_chain) but" in capsys.readouterr().err


def test_builder_refuses_a_chain_it_cannot_build() -> None:
    """Tables built in code (the candidate families) skip parse_table: the plan checks them again."""
    chain = _chain("FUSED_TC", 7, 2)
    with pytest.raises(ComposerError, match='x_chain needs the box kernel with traces = "xfaces"'):
        kernel_plans(dataclasses.replace(chain, traces="global"))
    half = dataclasses.replace(chain.kernels[0], box=(4, 8, 8))
    with pytest.raises(ComposerError, match=r"x_chain needs the whole element as the box \[8, 8, 8\]"):
        kernel_plans(dataclasses.replace(chain, kernels=(half,)))
    with pytest.raises(ComposerError, match='x_chain needs d_stage = "global"'):
        kernel_plans(dataclasses.replace(chain, d_stage="smem"))
    with pytest.raises(ComposerError, match="x_prefetch copies the chain's next element: needs x_chain"):
        kernel_plans(dataclasses.replace(chain, x_chain=False, x_prefetch=True))
    with pytest.raises(ConfigError, match="paths.FUSED_TC.x_prefetch: replaces the staging loads with copies: drop l2_keep"):
        parse_table("FUSED_TC", 7, dict(XYZ7, x_prefetch=True, l2_keep=True, flux_tiles=2))
