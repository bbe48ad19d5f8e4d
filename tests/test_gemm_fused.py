"""CPU tests of the GEMM_FUSED path: its settings (schedule table checked at load, options), the
kernels it declares to the scheduler, its memory estimate and what ``composer build`` compiles."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest

from composer import counts
from composer.arch.machines import get_machine
from composer.arch.mma import UnsupportedShapeError
from composer.build import plan
from composer.config.schedules import load_schedule_file
from composer.epilogues.settings import FusedSettingsError, default_fold, fused_settings
from composer.errors import ComposerError, ConfigError
from composer.paths.gemm_fused import settings_for
from composer.paths.program import PROBLEM_INPUTS
from composer.paths.registry import path_class
from composer.sched import build_graph

#: p = 511's schedule without its [paths.GEMM_FUSED] table (the last one; the tests add their own and
#: read the defaults, carrier z, from what is left).
P511 = (Path(__file__).resolve().parents[1] / "schedules" / "p0511.toml").read_text()
MACHINE = get_machine("h200")
GEMM_FUSED = path_class("GEMM_FUSED")


def without_gemm_fused_table(text: str) -> str:
    """A schedule's text without its [paths.GEMM_FUSED] table (the last table of a shipped file)."""
    return re.split(r"\n(?:# GEMM_FUSED:[^\n]*\n(?:#[^\n]*\n)*)?\[paths\.GEMM_FUSED\]", text)[0] + "\n"


@pytest.fixture
def paper_defaults(tmp_path, monkeypatch):
    """User schedules equal to the shipped ones less their [paths.GEMM_FUSED] tables, so that
    GEMM_FUSED runs the paper's defaults (carrier z, the fold from Nq = 64, the flux from arrays)
    that these tests are about, not the settings the carrier sweep shipped."""
    user = tmp_path / "paper_defaults"
    user.mkdir()
    shipped = Path(__file__).resolve().parents[1] / "schedules"
    for f in shipped.glob("p[0-9][0-9][0-9][0-9].toml"):
        (user / f.name).write_text(without_gemm_fused_table(f.read_text()))
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    return user


def schedule_with(tmp_path: Path, table: str):
    path = tmp_path / "p0511.toml"
    path.write_text(without_gemm_fused_table(P511) + "\n[paths.GEMM_FUSED]\n" + table + "\n")
    return path


BAD_TABLES = {
    "fold with carrier x": ('carrier = "x"\nfold = true',
                            "paths.GEMM_FUSED.fold: the fold needs the z GEMM to carry (x and y feed it), carrier is x"),
    "cuBLAS carrier": ('library = { z = "cublas" }',
                       "paths.GEMM_FUSED.library.z: z is the carrier of GEMM_FUSED and must be a CuTe GEMM "
                       "(cublas has no epilogue)"),
    "cuBLAS folding GEMM": ('fold = true\nlibrary = { y = "cublas" }',
                            "paths.GEMM_FUSED.library.y: y is a folding GEMM of GEMM_FUSED and must be a CuTe GEMM "
                            "(cublas has no epilogue)"),
    "unknown carrier": ('carrier = "w"', "paths.GEMM_FUSED.carrier: expected one of 'x', 'y', 'z', got 'w'"),
    "fold not a bool": ('fold = "yes"', "paths.GEMM_FUSED.fold: expected a boolean (true or false), got 'yes'"),
    "unknown key": ("tile = 3", "paths.GEMM_FUSED.tile: unknown key (allowed here: carrier, carrier_tile, flux, fold, "
                                "library, mma, overlap_face, overlap_first, overlap_formed, overlap_sms, parity, store_group)"),
    "unknown flux source": ('flux = "shared"', "paths.GEMM_FUSED.flux: expected one of 'array', 'mainloop', 'staged', got 'shared'"),
    "cuBLAS GEMM forming its flux": ('flux = "mainloop"\nfold = false\nlibrary = { x = "cublas" }',
                                     'paths.GEMM_FUSED.library.x: x forms its flux operand in the mainloop '
                                     '(flux = "mainloop"), which cublas cannot'),
    "bad store group": ("store_group = 0", "paths.GEMM_FUSED.store_group: expected a positive integer, got 0"),
    "unknown tile key": ("carrier_tile = { bz = 3 }",
                         "paths.GEMM_FUSED.carrier_tile.bz: unknown key (allowed here: async_buffers, async_epilogue_tiles, bk, bm, bn, epilogue_prefetch, "
                         "epilogue_prefetch_split, fragment_pipeline, min_blocks, stages, stagger_us, store_group, swap, "
                         "warps_m, warps_n)"),
    "bad carrier store group": ("carrier_tile = { store_group = 0 }",
                                "paths.GEMM_FUSED.carrier_tile.store_group: expected a positive integer, got 0"),
    "bad carrier tile": ('mma = "16x8x4"\ncarrier_tile = { bm = 96 }',
                         "paths.GEMM_FUSED.carrier_tile: with mma 16x8x4, carrier z: GEMM config "
                         "m16_8_4_t96x64x16_w4x2_s3_mkm_v2_store: bm=96 must be a power of two"),
    "parity with the fold": ('carrier = "z"\nfold = true\nparity = true',
                             "paths.GEMM_FUSED.parity: parity needs the fold off (the fold's x and y epilogues would "
                             "weight split derivatives, which hold no node's value)"),
    "parity with a formed flux": ('parity = true\nflux = "staged"',
                                  'paths.GEMM_FUSED.parity: parity needs flux = "array" (the volume flux kernel splits '
                                  'the fluxes; a GEMM forming its own product, flux = "staged", would not)'),
    "parity with the overlap": ('carrier = "z"\nparity = true\noverlap_sms = 44',
                                "paths.GEMM_FUSED.overlap_sms: parity and overlap_sms do not combine (the overlap's "
                                "product kernels write the fluxes unsplit)"),
    "parity not a bool": ('parity = 1', "paths.GEMM_FUSED.parity: expected a boolean (true or false), got 1"),
    "unknown shape": ('mma = "16x8x2"',
                      "paths.GEMM_FUSED.mma: expected one of '16x8x16', '16x8x4', '16x8x8', '8x8x4', got '16x8x2'"),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_bad_gemm_fused_table_is_a_config_error(tmp_path, case):
    table, message = BAD_TABLES[case]
    path = schedule_with(tmp_path, table)
    with pytest.raises(ConfigError) as info:
        load_schedule_file(path)
    assert str(info.value) == f"{path}: {message}"


def test_good_table_loads(tmp_path):
    table = 'carrier = "x"\nfold = false\nmma = "16x8x4"\ncarrier_tile = { bm = 64, swap = true }\nstore_group = 2'
    schedule = load_schedule_file(schedule_with(tmp_path, table))
    settings = fused_settings(511, schedule.paths)
    assert (settings.carrier, settings.fold, settings.mma, settings.store_group) == ("x", False, "16x8x4", 2)
    gemms = settings.gemms()
    assert gemms["x"].store_group == 2 and gemms["x"].describe()["store_group"] == 2
    assert gemms["x"].swap and gemms["x"].config.bm == 64 and gemms["x"].config.epilogue == "tree"
    # the shipped p511 runs all three GEMMs on cuBLAS in GEMM_CUTE: the carrier alone becomes CuTe
    assert settings.library == {"x": "cute", "y": "cublas", "z": "cublas"}
    assert gemms["y"].plain and gemms["z"].plain


@pytest.mark.parametrize("order", [7, 31, 63, 127, 511, 767])
def test_defaults_carry_in_z_and_fold_from_nq_64(order):
    settings = fused_settings(order, {})
    assert settings.carrier == "z" and settings.fold == (order + 1 >= 64) == default_fold(order + 1, "z")
    assert settings.library == {"x": "cute", "y": "cute", "z": "cute"}
    assert not default_fold(order + 1, "x")


def test_gemm_cute_library_is_kept_for_plain_gemms():
    paths = {"GEMM_CUTE": {"library": {"x": "cublas", "y": "cublas", "z": "cublas"}, "mma": "8x8x4"}}
    s = fused_settings(7, paths, {"carrier": "y"})
    assert s.library == {"x": "cublas", "y": "cute", "z": "cublas"} and s.mma == "8x8x4"
    s = fused_settings(63, paths)  # the fold at Nq = 64: x stores unweighted, so cuBLAS may run it
    assert s.fold and s.library == {"x": "cublas", "y": "cute", "z": "cute"}
    s = fused_settings(127, paths)  # above: x applies Ex itself
    assert s.library == {"x": "cute", "y": "cute", "z": "cute"}
    assert fused_settings(127, paths, {"mma": "16x8x8"}).mma == "16x8x8"


def test_options_that_cannot_run_name_the_option(paper_defaults):
    with pytest.raises(ComposerError, match=r"path GEMM_FUSED at p=7: option fold: the fold needs the z GEMM"):
        settings_for(7, {"carrier": "x", "fold": True})
    with pytest.raises(ComposerError, match=r"option library: z is the carrier of GEMM_FUSED and must be a CuTe"):
        settings_for(7, {"library": {"z": "cublas"}})
    with pytest.raises(FusedSettingsError) as info:
        fused_settings(7, {}, {"carrier": "x", "fold": True})
    assert info.value.source == "option" and info.value.key == "fold"
    parsed = GEMM_FUSED.parse_options({"carrier": "Y", "fold": "false", "library": "x=cublas"})
    assert parsed == {"carrier": "y", "fold": False, "library": {"x": "cublas"}}
    with pytest.raises(ComposerError, match="option carrier='w'"):
        GEMM_FUSED.parse_options({"carrier": "w"})


def _graph(order, **options):
    return build_graph(GEMM_FUSED.program(order, 4096, MACHINE, **options), PROBLEM_INPUTS)


@pytest.mark.parametrize("order", [63, 127, 767])
def test_the_fold_is_one_chain_beside_the_face_flux(order, paper_defaults):
    g = nx.transitive_reduction(_graph(order))
    assert set(g.edges) == {("volume_flux", "gemm_x"), ("gemm_x", "gemm_y"), ("gemm_y", "gemm_z"),
                            ("surface_flux", "gemm_z")}
    nodes = {n.name: n for n in GEMM_FUSED.program(order, 4096, MACHINE)}
    assert "lift" not in nodes and nodes["gemm_z"].role == "carrier" and nodes["gemm_z"].writes == ("dqdt",)
    assert set(nodes["gemm_z"].reads) == {"D", "flux_z", "Ez", "partial", "fstar"}


@pytest.mark.parametrize("carrier", ["x", "y", "z"])
def test_without_the_fold_the_non_carriers_run_concurrently(carrier):
    others = [f"gemm_{r}" for r in "xyz" if r != carrier]
    g = _graph(255, carrier=carrier, fold=False)
    reduced = nx.transitive_reduction(g)
    assert set(reduced.edges) == ({("volume_flux", o) for o in others} | {(o, f"gemm_{carrier}") for o in others}
                                  | {("surface_flux", f"gemm_{carrier}")})
    launch = GEMM_FUSED.launch_plan(255, 4096, MACHINE, carrier=carrier, fold=False)
    assert len({launch.stream_of[o] for o in others}) == 2 and launch.issue_order[-1] == f"gemm_{carrier}"
    carrier_node = g.nodes[f"gemm_{carrier}"]["node"]
    assert set(carrier_node.reads) == {"D", f"flux_{carrier}", "Ex", "Ey", "Ez", "fstar",
                                       *(f"d{r}" for r in "xyz" if r != carrier)}


@pytest.mark.parametrize("order", [7, 127])
def test_memory_is_one_volume_array_fewer_than_gemm_and_two_with_the_fold(order, paper_defaults):
    grid = (2, 3, 1)
    vol = counts.volume_array_bytes(order, grid)
    fewer = path_class("GEMM").device_bytes(order, grid) - GEMM_FUSED.device_bytes(order, grid)
    assert fewer == (2 if settings_for(order).fold else 1) * vol
    items = {i.name: i for i in GEMM_FUSED.memory_estimate(order, grid).items}
    assert items["GEMM outputs"].count == len(settings_for(order).plan.intermediates)
    assert "lift" not in str(items)


def test_build_plan_adds_the_tree_kernels_and_checks_the_shape(paper_defaults):
    jobs = plan("sm_90", "16x8x4", [7, 127], ["GEMM_FUSED"])
    trees = {j.name: j.spec for j in jobs if "epilogue" in j.spec}
    assert sorted(trees) == ["dgemm_p0007_z_m16_8_4_carry", "dgemm_p0127_x_m16_8_4_fold",
                             "dgemm_p0127_y_m16_8_4_fold", "dgemm_p0127_z_m16_8_4_carry_fold"]
    assert trees["dgemm_p0127_z_m16_8_4_carry_fold"]["epilogue"]["text"] == \
        "store(neg(add(fma(aux(Ez), acc, aux(partial)), face(fstar))))"
    assert trees["dgemm_p0007_z_m16_8_4_carry"]["fused"] == {"carrier": "z", "fold": False, "flux": "array"}
    # the plain GEMMs it runs on CuTe are GEMM_CUTE's jobs (p = 7: x and y; p = 127 folds all three)
    plain = {j.name: j.key for j in jobs if j.kind == "cute" and "epilogue" not in j.spec}
    cute = {j.name: j.key for j in plan("sm_90", "16x8x4", [7, 127], ["GEMM_CUTE"]) if j.kind == "cute"}
    assert plain == {n: k for n, k in cute.items() if n in ("dgemm_p0007_x_m16_8_4", "dgemm_p0007_y_m16_8_4")}
    both = plan("sm_90", "16x8x4", [7], ["GEMM_CUTE", "GEMM_FUSED"])
    assert len(both) == len({j.name for j in both}) == 8
    with pytest.raises(UnsupportedShapeError, match="mma 16x8x4 .* needs sm_90 or newer; sm_80 has only 8x8x4"):
        plan("sm_80", "16x8x4", [7], ["GEMM_FUSED"])
    assert [j.name for j in plan("sm_80", "8x8x4", [7], ["GEMM_FUSED"]) if "epilogue" in j.spec] == \
        ["dgemm_p0007_z_m8_8_4_carry"]


def test_build_can_compile_every_legal_variant():
    jobs = plan("sm_90", "16x8x4", [127], ["GEMM_FUSED"], fused_variants="all")
    trees = {j.name: j.spec["fused"] for j in jobs if "epilogue" in j.spec}
    names = ("x_m16_8_4_carry", "y_m16_8_4_carry", "z_m16_8_4_carry", "x_m16_8_4_fold", "y_m16_8_4_fold",
             "z_m16_8_4_carry_fold")
    # parity (odd orders): each carrier merging the split non-carriers, the flux from arrays
    split = [f"dgemm_p0127_{r}_m16_8_4_carry_split" for r in "xyz"]
    assert sorted(trees) == sorted([f"dgemm_p0127_{n}{formed}" for n in names for formed in ("", "_qv", "_qs")]
                                   + split)
    assert all(trees[name] == {"carrier": name.split("_")[2], "fold": False, "flux": "array", "parity": True}
               for name in split)
    assert trees["dgemm_p0127_x_m16_8_4_carry"] == {"carrier": "x", "fold": False, "flux": "array"}
    assert trees["dgemm_p0127_x_m16_8_4_carry_qv"] == {"carrier": "x", "fold": False, "flux": "mainloop"}
    assert trees["dgemm_p0127_x_m16_8_4_carry_qs"] == {"carrier": "x", "fold": False, "flux": "staged"}
    # the plain GEMMs that form their flux are GEMM_FUSED's own (GEMM_CUTE's read the flux arrays); the
    # staged ones form it in shared memory (product_staged), the others at the fragment loads
    for formed, staged in (("_qv", False), ("_qs", True)):
        kernels = {j.name: (j.spec["config"]["product"], j.spec["config"].get("product_staged", False))
                   for j in jobs if j.name.endswith(formed) and "epilogue" not in j.spec}
        assert kernels == {f"dgemm_p0127_x_m16_8_4{formed}": ("b", staged), f"dgemm_p0127_y_m16_8_4{formed}": ("a", staged),
                           f"dgemm_p0127_z_m16_8_4{formed}": ("a", staged)}
    with pytest.raises(ValueError, match="GEMM_FUSED variants 'some'"):
        plan("sm_90", "16x8x4", [127], ["GEMM_FUSED"], fused_variants="some")


@pytest.mark.parametrize("order", [7, 127])
def test_the_flux_in_the_mainloop_drops_the_volume_flux_kernel_and_arrays(order, paper_defaults):
    nodes = {n.name: n for n in GEMM_FUSED.program(order, 64, MACHINE, flux="mainloop")}
    assert "volume_flux" not in nodes and not any(r.startswith("flux_") for n in nodes.values() for r in n.reads)
    assert {r: nodes[f"gemm_{r}"].reads[:3] for r in "xyz"} == {"x": ("D", "q", "u"), "y": ("D", "q", "v"),
                                                                 "z": ("D", "q", "w")}
    settings = settings_for(order, {"flux": "mainloop"})
    assert settings.library == {"x": "cute", "y": "cute", "z": "cute"}
    assert all(g.forms_flux for g in settings.gemms().values())
    with pytest.raises(ComposerError, match="option library: y forms its flux operand in the mainloop"):
        settings_for(order, {"flux": "mainloop", "fold": False, "library": {"y": "cublas"}})


def test_memory_with_the_flux_in_the_mainloop_is_four_arrays_fewer(tmp_path, monkeypatch):
    """The carrier's derivative and the three fluxes (five with the fold's shared partial sum)."""
    import composer.paths.gemm_fused as gemm_fused

    grid = (2, 1, 1)
    vol = counts.volume_array_bytes(127, grid)
    for fold, fewer in ((False, 4), (True, 5)):
        paths = {"GEMM_FUSED": {"flux": "mainloop", "fold": fold}}
        monkeypatch.setattr(gemm_fused, "schedule_paths", lambda order, paths=paths: paths)
        assert path_class("GEMM").device_bytes(127, grid) - GEMM_FUSED.device_bytes(127, grid) == fewer * vol


def test_the_carrier_tile_is_the_table_carriers():
    paths = {"GEMM_FUSED": {"carrier": "y", "carrier_tile": {"stages": 3}}}
    assert fused_settings(31, paths).carrier_tile == {"stages": 3}
    assert fused_settings(31, paths, {"carrier": "x"}).carrier_tile == {}
    assert fused_settings(31, paths, {"carrier": "x"}).gemms()["x"].config.stages == \
        fused_settings(31, {}, {"carrier": "x"}).gemms()["x"].config.stages


@pytest.mark.parametrize("order,grid", [(7, (2, 1, 3)), (15, (1, 2, 1))])
@pytest.mark.parametrize("carrier,fold", [("x", False), ("y", False), ("z", False), ("z", True)])
def test_the_paths_gemm_chain_computes_the_reference(order, grid, carrier, fold):
    """The kernels GEMM_FUSED launches (settings -> each role's tree, output index, transposition and
    aux slot binding), emulated in NumPy in launch order over the arrays the path allocates, give
    reference_tendency on the point-varying input."""
    import numpy as np

    from composer import dg
    from composer.epilogues.numpy_eval import emulate_epilogue
    from composer.gemm.cute.config import kernel_problem
    from composer.gemm.roles import emulate, gemm_spec

    settings = settings_for(order, {"carrier": carrier, "fold": fold})
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    d = dg.diff_matrix(order)
    flux = {r: fields["q"] * fields[v] for r, v in zip("xyz", "uvw")}
    arrays = {**{k: fields[k] for k in ("Ex", "Ey", "Ez")}, "fstar": dg.numerical_flux(fields, mesh)}
    for role in settings.plan.roles:
        gemm = settings.gemms()[role]
        spec = gemm_spec(role, mesh.nq, mesh.num_elements)
        prob = kernel_problem(spec, gemm.swap)
        bound = {name: arrays[name] for name in (*gemm.aux_slots, *([gemm.face] if gemm.face else []))}
        width = 2 if gemm.index.pairs_share_row and not gemm.plain else 1
        arrays[settings.plan.outputs[role]] = emulate_epilogue(gemm.tree, gemm.index, prob,
                                                               emulate(spec, d, flux[role]), bound, width=width)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(arrays["dqdt"] - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_inspect_flags_a_tree_gemm_that_stores_more_than_its_output():
    from types import SimpleNamespace

    from composer.arch.sass import KernelSass
    from composer.cli.inspect import _extra_stores

    gemm = {"bm": 64, "epilogue": "store"}

    def entry(epilogue, stores, name):
        config = {"kind": "cute_gemm", "order": 7, "role": "z", "mma": "8x8x4",
                  "gemm": {**gemm, "epilogue": "tree" if epilogue != "store" else "store"},
                  "epilogue": epilogue if epilogue == "store" else {"text": epilogue}}
        return (SimpleNamespace(config=config, arch="sm_90"),
                {name: KernelSass(name, "sm_90", {"8x8x4": 4}, 0, 64, 0, 0, global_stores=stores)})

    plain = entry("store", {"64": 16}, "plain")
    carrier = entry("store(neg(acc))", {"64": 16}, "carrier")
    assert _extra_stores([plain, carrier]) == []
    leaky = entry("store(neg(acc))", {"64": 32}, "leaky")
    (problem,) = _extra_stores([plain, leaky])
    assert "leaky (sm_90): global stores {'64': 32}, its mainloop's plain GEMM stores {'64': 16}" in problem
    assert _extra_stores([leaky]) == []  # nothing to compare with


def test_all_variants_leave_out_what_cannot_be_built():
    """p = 511's 16x8x4 x tile (128 x 128 x 32, three stages) has no room for its factor tile on sm_90:
    the x GEMM cannot form its flux, so no variant with the flux in the mainloop that needs an x
    kernel of its own is built, and asking for one is a clear error."""
    from composer.gemm.cute.config import GemmConfigError

    names = [j.name for j in plan("sm_90", "16x8x4", [511], ["GEMM_FUSED"], fused_variants="all")]
    assert not any(n.startswith("dgemm_p0511_x_") and n.endswith("_qv") for n in names)
    assert "dgemm_p0511_z_m16_8_4_carry_qv" not in names  # its x GEMM cannot form the flux either
    with pytest.raises(GemmConfigError, match="shared memory 3 stages x \\(128 \\+ 128 \\+ 128\\) x 32 doubles"):
        settings_for(511, {"flux": "mainloop", "mma": "16x8x4"}).gemms()
    # with the schedule's 16x8x8 GEMMs on their own 128x64x16 tiles (session 10) the factor tile fits
    assert settings_for(511, {"flux": "mainloop"}).gemms()["x"].forms_flux


def test_a_carrier_tile_option_reads_its_booleans_and_integers():
    from composer.paths.gemm_fused import tile_option

    assert tile_option("bm=128,epilogue_prefetch=16,epilogue_prefetch_split=true,swap=no") == {
        "bm": 128, "epilogue_prefetch": 16, "epilogue_prefetch_split": True, "swap": False}
    with pytest.raises(ValueError, match="tile key bm: 'x' is not an integer"):
        tile_option("bm=x")
    with pytest.raises(ValueError, match="tile key epilogue_prefetch_split: 'maybe' is not a boolean"):
        tile_option("epilogue_prefetch_split=maybe")


def test_staged_flux_keeps_the_array_kernels_blocks_per_sm():
    """flux = "staged": the factor tiles add a third operand's stages; where that costs a block per SM
    the kernel gives up stages (down to 2) until it holds the array kernel's blocks (shared memory,
    and the register file at its cap: 255 per thread without min_blocks)."""
    from dataclasses import replace

    from composer.epilogues.kernels import MIN_STAGED_STAGES, staged_product_config
    from composer.gemm.cute.config import GemmConfig

    # p = 511's 128x64x16 3-stage tiles, 128 threads, 255 registers: two blocks by registers
    array = GemmConfig("16x8x8", 128, 64, 16, 2, 2, 3)
    assert (array.smem_blocks(), array.register_blocks()) == (3, 2)
    on_a = staged_product_config(replace(array, product="a", product_staged=True), array, 512 * 512, 512)
    on_b = staged_product_config(replace(array, product="b", product_staged=True), array, 512, 512 * 512)
    assert (on_a.stages, on_a.smem_blocks()) == (2, 2)  # 120 KB at 3 stages: one block
    assert (on_b.stages, on_b.smem_blocks()) == (3, 2)  # 96 KB already holds two
    # a min_blocks carrier (p = 575: three blocks at 168 registers) keeps its three
    three = GemmConfig("16x8x8", 64, 64, 16, 2, 2, 4, min_blocks=3)
    kept = staged_product_config(replace(three, product="a", product_staged=True), three, 576, 576)
    assert (kept.stages, kept.smem_blocks(), three.register_blocks()) == (3, 3, 3)
    # never below the double buffer
    deep = GemmConfig("16x8x8", 128, 128, 16, 2, 2, 2, min_blocks=2)
    assert staged_product_config(replace(deep, product="a", product_staged=True), deep, 128, 128).stages == \
        MIN_STAGED_STAGES
    # blocks along n first where n has fewer tiles (A the large operand), else m first
    assert (on_a.n_fastest, on_b.n_fastest, kept.n_fastest) == (True, False, False)
    # and the path's settings apply it at p = 511 (the schedule's tiles), not to the fragment kernels
    from composer.config.schedules import load_schedule
    from composer.epilogues.settings import fused_settings

    paths = load_schedule(511).paths
    staged = fused_settings(511, paths, {"flux": "staged"}).gemms()
    fragments = fused_settings(511, paths, {"flux": "mainloop"}).gemms()
    assert all(g.config.product_staged and g.config.smem_blocks() >= 2 for g in staged.values())
    assert any(g.config.smem_blocks() < 2 for g in fragments.values())
    # the z GEMM's flux operand is A (m = Nq^2 = 2048 tiles of 128, n = Nq = 8 tiles of 64): its blocks
    # run along n first, so the eight that share a q/w panel run together; x (A = D) and y keep m first
    assert {r: g.config.n_fastest for r, g in staged.items()} == {"x": False, "y": False, "z": True}
    assert not any(g.config.n_fastest for g in fragments.values())
