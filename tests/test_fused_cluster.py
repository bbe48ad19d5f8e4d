"""Thread-block clusters in the fused box kernel (issue 16's xy|z design): a kernel's box splits one
carried axis over the blocks of a cluster, whose contraction reads the peers' flux tiles through
distributed shared memory. The schedule keys, their errors, the emulated index math against the
reference, the SASS, and the candidate family."""

from __future__ import annotations

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError, ConfigError
from composer.fused.builder import kernel_plans, kernel_sources
from composer.fused.candidates import candidate_list, cluster_candidates, label, to_table
from composer.fused.config import parse_table
from composer.fused.emulate import emulate

from tests.test_fused_cpu import needs_nvrtc

# the p = 7 and 15 tables these families start from (tests/conftest.py, xfaces_tables)
pytestmark = pytest.mark.usefixtures("xfaces_tables")


def _sass(cubin: bytes) -> str:
    """cuobjdump's SASS text of one CUBIN."""
    import tempfile
    from pathlib import Path

    from composer.arch.sass import disassemble

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return disassemble(path)


def _table(kernels: list[dict], **keys) -> dict:
    return {"flux": "array", "mma": "8x8x4", "d_stage": "smem", "d_panel": 8, "kernels": kernels, **keys}


XY_Z = [{"dirs": "xy", "box": [1, 8, 16], "threads": 64, "tile": [1, 1], "cluster": 2},
        {"dirs": "z", "box": [16, 1, 16], "threads": 64, "tile": [1, 1]}]
#: one clustered table per split axis the template allows (y split in "xy" and "zy", z split in "xz")
SPLITS = {
    "xy|z, y split": XY_Z,
    "x|zy, y split": [{"dirs": "x", "box": [2, 16, 16], "threads": 64, "tile": [1, 1]},
                      {"dirs": "zy", "box": [16, 8, 16], "threads": 128, "tile": [1, 1], "cluster": 2}],
    "y|xz, z split": [{"dirs": "y", "box": [2, 16, 16], "threads": 64, "tile": [1, 1]},
                      {"dirs": "xz", "box": [8, 16, 16], "threads": 128, "tile": [1, 1], "cluster": 2}],
    "z|yx, x split": [{"dirs": "z", "box": [16, 2, 16], "threads": 64, "tile": [1, 1]},
                      {"dirs": "yx", "box": [2, 16, 8], "threads": 64, "tile": [1, 1], "cluster": 2}],
}
#: p = 31: a cluster of 4 (8 rows of the plane per block)
XY_Z_4 = [{"dirs": "xy", "box": [1, 8, 32], "threads": 64, "tile": [1, 1], "cluster": 4},
          {"dirs": "z", "box": [32, 1, 32], "threads": 64, "tile": [1, 1]}]


def test_a_clustered_table_parses_with_its_split_and_positions() -> None:
    config = parse_table("FUSED_TC", 15, _table(XY_Z))
    xy = config.kernels[0]
    assert xy.cluster == 2 and xy.split == 1 and config.kernels[1].split is None
    assert xy.positions(0, 16) == 16 and xy.positions(1, 16) == 8
    plans = kernel_plans(config, "sm_90")
    assert plans[0].blocks_per_element == 32 and plans[0].positions(1) == 8
    # the table round-trips through to_table, and the label names the cluster
    assert "cluster = 2" in to_table(config) and "c2" in label(config)


@pytest.mark.parametrize("kernels,message", [
    ([{**XY_Z[0], "cluster": 3}, XY_Z[1]], r"expected one of \(1, 2, 4, 8\)"),
    ([{**XY_Z[0], "cluster": 2.0}, XY_Z[1]], r"expected one of \(1, 2, 4, 8\), got 2.0"),
    ([{**XY_Z[0], "cluster": 1}, XY_Z[1]], "carries y but spans 8"),
    ([{**XY_Z[0], "cluster": 4}, XY_Z[1]], "extent is Nq / 4 = 4"),
    ([{**XY_Z[0], "dirs": "yx"}, XY_Z[1]], "must not be the kernel's first direction"),
    ([{**XY_Z[0], "box": [1, 8, 8]}, XY_Z[1]], "exactly one carried axis"),
    ([{"dirs": "x", "box": [2, 16, 16], "threads": 64, "tile": [1, 1]},
      {"dirs": "yz", "box": [8, 8, 16], "threads": 64, "tile": [1, 1], "cluster": 2}], "exactly one carried axis"),
    ([{"dirs": "y", "box": [2, 16, 16], "threads": 64, "tile": [1, 1]},
      {"dirs": "xz", "box": [8, 16, 8], "threads": 64, "tile": [1, 1], "cluster": 2}], "exactly one carried axis"),
])
def test_bad_cluster_keys_are_one_clear_error(kernels, message) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_table("FUSED_TC", 15, _table(kernels))


def test_a_cluster_needs_the_tensor_core_engine_staged_d_and_global_traces() -> None:
    with pytest.raises(ConfigError, match='needs d_stage = "smem"'):
        parse_table("FUSED_TC", 15, {"flux": "array", "mma": "8x8x4", "kernels": XY_Z})
    with pytest.raises(ConfigError, match="d_panel 16 must divide the chunk of 8"):
        parse_table("FUSED_TC", 31, _table(XY_Z_4, d_panel=16))
    with pytest.raises(ConfigError, match="traces from global memory"):
        parse_table("FUSED_TC", 15, _table(XY_Z, flux="inline", traces="tiles"))
    with pytest.raises(ConfigError, match="tensor-core engine"):
        parse_table("FUSED", 15, {"flux": "array", "kernels": XY_Z})


def test_the_builder_picks_a_d_panel_inside_the_chunk_and_refuses_archs_without_clusters() -> None:
    config = parse_table("FUSED_TC", 15, {k: v for k, v in _table(XY_Z).items() if k != "d_panel"})
    assert [p.d_panel for p in kernel_plans(config, "sm_90")] == [16, 16]  # all of D: no panel to straddle
    assert [s.cluster for s in kernel_sources(config, "sm_90")] == [1, 2, 1]  # face kernel first
    with pytest.raises(ComposerError, match="clusters of 2; sm_80 has none"):
        kernel_plans(config, "sm_80")
    # a table built in code (a candidate) with a panel wider than the chunk: refused by the builder
    import dataclasses

    four = parse_table("FUSED_TC", 31, _table(XY_Z_4))
    with pytest.raises(ComposerError, match="d_panel 16 must divide the chunk of 8 positions"):
        kernel_plans(dataclasses.replace(four, d_panel=16), "sm_90")
    # every other cluster rule as well (a split first direction, unstaged D, a faster axis not whole)
    xy = four.kernels[0]
    for kernels, d_stage, message in (
            ((dataclasses.replace(xy, dirs=(1, 0)), four.kernels[1]), "smem", "must not be the kernel's first"),
            (four.kernels, "global", 'needs d_stage = "smem"'),
            ((dataclasses.replace(xy, dirs=(0, 2), box=(8, 16, 32)), four.kernels[1]), "smem",
             "needs the box whole along x, y")):
        bad = dataclasses.replace(four, kernels=kernels, d_stage=d_stage, d_panel=8 if d_stage == "smem" else 0)
        with pytest.raises(ComposerError, match=message):
            kernel_plans(bad, "sm_90")


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_emulated_clustered_kernels_match_reference(name: str) -> None:
    """Every rank's contraction over the whole axis from its peers' tiles, emulated lane by lane."""
    grid = (2, 1, 2)
    fields = dg.make_fields(15, grid, varying=True)
    ref = dg.reference_tendency(fields, 15, grid)
    for panel in (8, 0):
        table = _table(SPLITS[name]) if panel else {k: v for k, v in _table(SPLITS[name]).items() if k != "d_panel"}
        out = emulate(parse_table("FUSED_TC", 15, table), fields, grid)
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_emulated_cluster_of_8_matches_reference() -> None:
    fields = dg.make_fields(63, (1, 1, 1), varying=True)
    ref = dg.reference_tendency(fields, 63, (1, 1, 1))
    config = parse_table("FUSED_TC", 63, _table([
        {"dirs": "xy", "box": [1, 8, 64], "threads": 64, "tile": [1, 1], "cluster": 8},
        {"dirs": "z", "box": [64, 1, 16], "threads": 64, "tile": [1, 1]}]))
    assert np.max(np.abs(emulate(config, fields, (1, 1, 1)) - ref)) / np.max(np.abs(ref)) <= 1e-13


def test_emulated_clusters_of_4_match_reference() -> None:
    fields = dg.make_fields(31, (1, 1, 1), varying=True)
    ref = dg.reference_tendency(fields, 31, (1, 1, 1))
    out = emulate(parse_table("FUSED_TC", 31, _table(XY_Z_4)), fields, (1, 1, 1))
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13
    config = parse_table("FUSED_TC16", 31, _table([
        {"dirs": "xy", "box": [2, 8, 32], "threads": 64, "tile": [1, 1], "cluster": 4},
        {"dirs": "z", "box": [32, 1, 32], "threads": 64, "tile": [1, 2]}], mma="16x8x4"))
    assert np.max(np.abs(emulate(config, fields, (1, 1, 1)) - ref)) / np.max(np.abs(ref)) <= 1e-13


@needs_nvrtc
def test_clustered_kernel_sass_has_the_cluster_barriers_remote_loads_and_its_dmma() -> None:
    from composer.fused.builder import build

    config = cluster_candidates("FUSED_TC16", 127)[0][1]
    xy = next(k for k in build(config, "sm_90").kernels if k.cluster == 2)
    sass = _sass(xy.compiled.cubin)
    assert sass.count("UCGABAR_ARV") == 2 and sass.count("UCGABAR_WAIT") == 2  # staged, and at exit
    assert "DMMA.16x8x4" in sass and "DMMA.8x8x4" not in sass
    assert " LD.E.64 " in sass  # the peers' tile through distributed shared memory (generic loads)
    assert "LDS.64" in sass  # the block's own chunk stays in shared-memory loads
    assert "STL" not in sass and "LDL" not in sass  # no spills
    # with the fluxes formed inline the kernel computes its face fluxes itself: it compiles, unspilled
    inline = next(c for _, c in cluster_candidates("FUSED_TC16", 127) if c.flux == "inline")
    from composer.arch.sass import inspect_cubin

    xy = next(k for k in build(inline, "sm_90").kernels if k.cluster == 2)
    assert next(iter(inspect_cubin(xy.compiled.cubin).values())).spill_bytes == 0


def test_the_cluster_family_at_p127_and_255_and_not_below() -> None:
    for variant in ("FUSED_TC", "FUSED_TC16"):
        assert cluster_candidates(variant, 63) == []
        for order in (127, 255):
            found = cluster_candidates(variant, order)
            assert found and all(any(k.cluster > 1 for k in c.kernels) for _, c in found)
            assert len({name for name, _ in found}) == len(found)  # the labels tell them apart
            # every candidate is a schedule table: it parses back to itself
            import tomllib

            for _, config in found[:3]:
                raw = tomllib.loads(to_table(config))["paths"][variant]
                assert parse_table(variant, order, raw) == config
        assert candidate_list(variant, 127, "cluster")[0][0] == "base"


@needs_nvrtc
def test_the_dfma_ablation_of_a_clustered_table_has_no_dmma() -> None:
    """FUSED_DFMA runs FUSED_TC's table with DFMA: a clustered FUSED_TC table keeps the ablation's
    promise (no DMMA in its SASS) and its cluster barriers."""
    import dataclasses

    from composer.fused.builder import build

    config = dataclasses.replace(parse_table("FUSED_TC", 15, _table(XY_Z)), variant="FUSED_DFMA", dfma=True)
    xy = next(k for k in build(config, "sm_90").kernels if k.cluster == 2)
    sass = _sass(xy.compiled.cubin)
    assert "DMMA" not in sass and "DFMA" in sass and "UCGABAR_WAIT" in sass


# --- trace clusters: exterior face traces from the neighbours' tiles (p = 7, 15) ------------------

def _trace_cluster(variant: str, order: int, size: int):
    """The shipped table as a trace cluster of ``size`` (``trace_cluster_form``), required to exist and to
    fit: a shipped table that can no longer form one is a failure here, not a silently skipped case."""
    from composer.fused.candidates import _fits, trace_cluster_form
    from composer.fused.config import fused_config

    config = trace_cluster_form(fused_config(variant, order), size)
    assert config is not None and _fits(config), (variant, order, size, config)
    return config


@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_trace_cluster_form_drops_the_keys_that_hand_out_elements(variant: str) -> None:
    """A table with side queues, chunks or descending kernels still forms a trace cluster that fits: those
    keys decide which elements a block takes, which a cluster of consecutive elements fixes itself
    (session 39's queued p = 7 tables, docs/data/h200_s39/sched_sideq, would otherwise give no candidate)."""
    import dataclasses

    from composer.fused.candidates import _fits, trace_cluster_form
    from composer.fused.config import fused_config

    base = fused_config(variant, 7)
    for change in ({"side_queues": True},
                   {"kernels": tuple(dataclasses.replace(k, descending=True) for k in base.kernels)}):
        config = trace_cluster_form(dataclasses.replace(base, **change), 2)
        assert config is not None and _fits(config) and not config.side_queues
        assert not any(k.descending for k in config.kernels) and config.chunk_elements == 0


def test_trace_cluster_keys_and_their_errors() -> None:
    import tomllib

    from composer.fused.config import fused_config

    config = _trace_cluster("FUSED_TC", 7, 8)
    raw = tomllib.loads(to_table(config))["paths"]["FUSED_TC"]
    assert raw["trace_cluster"] == 8 and parse_table("FUSED_TC", 7, raw) == config and "tc8" in label(config)
    good = {"flux": "inline", "mma": "8x8x4", "traces": "tiles",
            "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}
    for change, message in (({"trace_cluster": 3}, r"expected one of \(1, 2, 4, 8\)"),
                            ({"trace_cluster": 2, "traces": "global"}, 'traces = "tiles"'),
                            ({"trace_cluster": 2, "kernels": [{"dirs": "xy", "box": [4, 8, 8], "threads": 256,
                                                               "tile": [1, 1]},
                                                              {"dirs": "z", "box": [8, 4, 8], "threads": 256,
                                                               "tile": [1, 1]}]},
                             "every box to be the whole element")):
        with pytest.raises(ConfigError, match=message):
            parse_table("FUSED_TC", 7, {**good, **change})
    assert fused_config("FUSED_TC", 7).trace_cluster == 1  # off unless a schedule asks
    with pytest.raises(ComposerError, match="thread-block clusters of 8; sm_80 has none"):
        kernel_plans(config, "sm_80")


def test_trace_cluster_launch_pads_the_grid_to_whole_clusters() -> None:
    from composer.paths.fused import launch_grid

    config = _trace_cluster("FUSED_TC", 7, 8)
    (face_free,) = kernel_sources(config, "sm_90")  # inline fluxes: the one volume kernel
    assert face_free.cluster == 8
    assert launch_grid(face_free, config, 12, 8, 132) == 16 and launch_grid(face_free, config, 32768, 8, 132) == 32768


@pytest.mark.parametrize("variant,order,grid,size", [("FUSED_TC", 7, (3, 2, 2), 8), ("FUSED", 7, (3, 2, 2), 2),
                                                     ("FUSED_TC16", 7, (4, 1, 2), 4), ("FUSED_TC16", 15, (2, 1, 1), 2),
                                                     ("FUSED", 7, (3, 1, 1), 2), ("FUSED_TC", 7, (5, 1, 1), 4)])
def test_emulated_trace_clusters_fetch_the_right_traces_and_match_reference(variant, order, grid, size) -> None:
    """Every exterior trace the template's rule fetches (a peer's tile at tile_off, or global memory)
    is exactly the gathered one, some of them come from peers, and the emulated kernel matches the
    reference (grids of 12 elements in clusters of 8, 3 in clusters of 2, 5 in clusters of 4: a padded
    last cluster, whose extra block stages the last element)."""
    from composer.fused.emulate import trace_cluster_exterior

    config = _trace_cluster(variant, order, size)
    fields = dg.make_fields(order, grid, varying=True)
    mesh = dg.Mesh(order, grid)
    exterior, from_peer = trace_cluster_exterior(config, kernel_plans(config)[0], fields, mesh)
    gathered = mesh.face_maps[1].reshape(mesh.num_elements, -1)
    for name in "quvw":
        assert np.array_equal(exterior[name], fields[name].reshape(-1)[gathered])
    assert from_peer.any()  # all of them where the cluster holds every neighbour (a 2-element grid)
    assert from_peer.all() == (mesh.num_elements <= size and grid[1] * grid[2] == 1)
    ref = dg.reference_tendency(fields, order, grid)
    out = emulate(config, fields, grid)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13


@needs_nvrtc
def test_trace_cluster_sass_has_two_cluster_barriers_and_no_spills() -> None:
    from composer.arch.sass import inspect_cubin
    from composer.fused.builder import build

    for variant, order, size in (("FUSED_TC", 7, 8), ("FUSED", 7, 4), ("FUSED_TC16", 15, 2)):
        (kernel,) = build(_trace_cluster(variant, order, size), "sm_90").kernels
        sass = _sass(kernel.compiled.cubin)
        assert sass.count("UCGABAR_ARV") == 2 and sass.count("UCGABAR_WAIT") == 2  # staged; read by all
        assert " LD.E.64 " in sass  # the neighbours' tiles
        assert next(iter(inspect_cubin(kernel.compiled.cubin).values())).spill_bytes == 0


def test_the_trace_cluster_family_at_p7_and_15() -> None:
    from composer.fused.candidates import trace_cluster_candidates

    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        assert [c.trace_cluster for _, c in trace_cluster_candidates(variant, 7)] == [2, 4, 8]
        assert [c.trace_cluster for _, c in trace_cluster_candidates(variant, 15)] == [2, 4, 8]
        assert trace_cluster_candidates(variant, 31) == []  # no whole-element boxes there
        assert candidate_list(variant, 7, "trace_cluster")[0][0] == "base"


@needs_nvrtc
def test_a_clustered_schedule_builds_and_inspects_with_its_cluster(tmp_path, monkeypatch, capsys) -> None:
    """`composer build` of a user schedule whose FUSED_TC16 table is a cluster candidate, and
    `composer inspect` of it: the manifest records the cluster, the table shows it."""
    import json
    from pathlib import Path

    from composer.cli.main import main
    from composer.config.schedules import schedule_files

    text = schedule_files()[127].entry.read_text()
    start = text.index("[paths.FUSED_TC16]")
    end = text.index("\n[", start + 5)
    cluster = cluster_candidates("FUSED_TC16", 127)[0][1]
    (tmp_path / "sched").mkdir()
    (tmp_path / "sched" / "p0127.toml").write_text(text[:start] + to_table(cluster) + "\n" + text[end:])
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "sched"))
    out = tmp_path / "build"
    assert main(["build", "--paths", "FUSED_TC16", "--orders", "127", "--arch", "sm_90", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["kernels"]}
    assert rows["fused_tc16_p127_k0_xy"]["cluster"] == 2 and rows["fused_tc16_p127_k1_z"]["cluster"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    xy = next(e for e in manifest["kernels"] if e["symbol"].endswith("k0_xy") or "k0_xy" in e["cubin"])
    assert xy["config"]["cluster"] == 2


@needs_nvrtc
def test_both_cluster_kinds_cross_compile_for_sm_100() -> None:
    """GB200 (sm_100) has clusters too: the model prices its clustered builds from their SASS."""
    from composer.fused.builder import build

    for config in (cluster_candidates("FUSED_TC16", 127)[0][1], _trace_cluster("FUSED_TC", 7, 8)):
        clustered = [k for k in build(config, "sm_100").kernels if k.cluster > 1]
        assert clustered and all("UCGABAR_WAIT" in _sass(k.compiled.cubin) for k in clustered)
