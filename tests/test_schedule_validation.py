"""Schedule ``[paths.*]`` tables are checked at load (file and dotted key in every error), the user
schedules directory is read before the packaged one, and the sweep commands write their results
there, never into the packaged schedules.

The packaged directory is injected as this checkout's ``schedules/`` (or a temporary copy of it):
the editable install maps ``composer.schedules`` to another checkout's files.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from composer.cli.main import main
from composer.config import schedule_files
from composer.config.path_tables import PATH_TABLES
from composer.config.schedules import (
    available_orders,
    load_schedule,
    load_schedule_file,
    user_dir,
    writable_schedule_file,
)
from composer.errors import ConfigError

REPO_SCHEDULES = Path(__file__).resolve().parents[1] / "schedules"
P511_SHIPPED = (REPO_SCHEDULES / "p0511.toml").read_text()
#: p0511.toml without its GEMM_FUSED overlap (session 26 applied ``overlap_sms = 44``): the cases below add their own
P511 = re.sub(r"(?m)^overlap_sms = \d+\n", "", P511_SHIPPED)
P15 = (REPO_SCHEDULES / "p0015.toml").read_text()
GEMM_CUTE_LIBRARY = 'library = { x = "cublas", y = "cublas", z = "cublas" }'


def _edited(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


# (schedule text, the exact message after "<file>: ")
BAD_TABLES = {
    "unknown path table": (
        P511 + '\n[paths.FUSED_TC61]\nflux = "array"\n',
        "paths.FUSED_TC61: unknown path (known: " + ", ".join(PATH_TABLES) + ")"),
    "bad bool": (
        _edited(P511, "stages = 3\n", 'stages = 3\nswap = "yes"\n'),
        "paths.GEMM_CUTE.tiles.x.swap: expected a boolean (true or false), got 'yes'"),
    "integer for a bool": (
        _edited(P511, "stages = 3\n", "stages = 3\nswap = 1\n"),
        "paths.GEMM_CUTE.tiles.x.swap: expected a boolean (true or false), got 1"),
    "unknown library": (
        _edited(P511, GEMM_CUTE_LIBRARY, GEMM_CUTE_LIBRARY.replace('x = "cublas"', 'x = "cuet"')),
        "paths.GEMM_CUTE.library.x: expected one of 'cublas', 'cute', got 'cuet'"),
    "unknown role in library": (
        _edited(P511, GEMM_CUTE_LIBRARY, GEMM_CUTE_LIBRARY.replace('x = "cublas"', 'w = "cublas"')),
        "paths.GEMM_CUTE.library.w: unknown key (allowed here: x, y, z)"),
    "unknown GEMM_CUTE key": (
        _edited(P511, GEMM_CUTE_LIBRARY, GEMM_CUTE_LIBRARY + "\ncarrier = 1"),
        "paths.GEMM_CUTE.carrier: unknown key (allowed here: library, mma, overlap_face, overlap_first, overlap_formed, overlap_sms, tiles)"),
    "unknown tile key": (
        _edited(P511, "stages = 3\n", "stages = 3\nbz = 4\n"),
        "paths.GEMM_CUTE.tiles.x.bz: unknown key (allowed here: bk, bm, bn, fragment_pipeline, stages, swap, warps_m, warps_n)"),
    "unknown fused key": (
        _edited(P511, '[paths.FUSED_TC]\n', '[paths.FUSED_TC]\ncarrier = "x"\n'),
        "paths.FUSED_TC.carrier: unknown key (allowed here: a_operand, block_order, carveout, chunk_elements, copies, copy_issue, d_layout, "
        "d_panel, d_stage, element_bricks, elements_per_block, exterior_maps, flux, flux_tiles, fragments, interior_maps, k_panel, kernels, l2_fetch, l2_keep, min_blocks, "
        "mma, nvrtc, pair_io, parity, side_queues, stages, tile_swizzle, trace_cluster, traces, volume, weights, x_chain, x_pairs, x_prefetch)"),
    "unknown key of a fused kernel": (
        _edited(P511, '{ dirs = "x", box = [1, 64, 128], threads = 256, tile = [4, 4] }',
                '{ dirs = "x", box = [1, 64, 128], threads = 256, tile = [4, 4], warps = 2 }'),
        "paths.FUSED_TC.kernels[0].warps: unknown key (allowed here: a_operand, block_order, box, cluster, descending, dirs, "
        "persistent, prefetch, stages, threads, tile, unroll)"),
    "unknown shape (GEMM_CUTE)": (
        _edited(P511, 'mma = "16x8x4"\nlibrary', 'mma = "16x8x2"\nlibrary'),
        "paths.GEMM_CUTE.mma: expected one of '16x8x16', '16x8x4', '16x8x8', '8x8x4', got '16x8x2'"),
    "shape spelled as PTX (GEMM_CUTE)": (
        _edited(P511, 'mma = "16x8x4"\nlibrary', 'mma = "m16n8k4"\nlibrary'),
        "paths.GEMM_CUTE.mma: expected one of '16x8x16', '16x8x4', '16x8x8', '8x8x4', got 'm16n8k4'"),
    "unknown shape (fused)": (
        _edited(P511, 'mma = "8x8x4"', 'mma = "8x8x8"'),
        "paths.FUSED_TC.mma: unknown FP64 MMA shape '8x8x8'; expected one of 8x8x4, 16x8x4, 16x8x8, 16x8x16"),
    "unknown tiles key": (
        _edited(P511, "[paths.GEMM_CUTE.tiles.x]", "[paths.GEMM_CUTE.tiles.w]"),
        "paths.GEMM_CUTE.tiles.w: expected a role (x, y, z) or an MMA shape (8x8x4, 16x8x4, 16x8x8, 16x8x16)"),
    "tile the kernel configuration rejects": (
        _edited(P511, "bm = 128\nbn = 128", "bm = 96\nbn = 128"),
        "paths.GEMM_CUTE.tiles.x: with mma 16x8x4: GEMM config m16_8_4_t96x128x32_w2x4_s3_kkm_v2_store: "
        "bm=96 must be a power of two"),
    "per-shape tile the kernel configuration rejects": (
        _edited(_edited(P511, "[paths.GEMM_CUTE.tiles.x]", "[paths.GEMM_CUTE.tiles.8x8x4.x]"),
                "warps_n = 4", "warps_n = 32"),
        "paths.GEMM_CUTE.tiles.8x8x4.x: with mma 8x8x4: GEMM config m8_8_4_t128x128x32_w2x32_s3_kkm_v2_store: "
        "warp tile 64x4 (bm/warps_m x bn/warps_n) is not a multiple of the mma 8x8; 2048 threads per block "
        "exceed 1024 (sm_90)"),
    "settings for a path that takes none": (
        P511 + "\n[paths.GEMM]\ntiles = [64, 64]\n",
        "paths.GEMM.tiles: unknown key (allowed here: none)"),
    "fused kernels that miss a direction": (
        _edited(P511, '  { dirs = "z", box = [128, 1, 64], threads = 256, tile = [4, 4] },\n', ""),
        "paths.FUSED_TC.kernels: the kernels must carry x, y and z exactly once, got ['x', 'y']"),
    "FUSED_DFMA with its own schedule": (
        _edited(P511, 'schedule_of = "FUSED_TC"', 'schedule_of = "FUSED_TC16"'),
        'paths.FUSED_DFMA: must be exactly { schedule_of = "FUSED_TC" }: the ablation shares FUSED_TC\'s '
        "schedule by construction"),
    "fused table at an order the variant does not implement": (
        P511 + '\n[paths.FUSED]\nflux = "array"\n',
        "paths.FUSED: path FUSED does not implement order 511; it supports [7, 15, 31, 63, 127, 255]"),
    "an overlap partition that is not a number of SMs": (
        _edited(P511, 'carrier = "y"\nfold = false', 'carrier = "y"\noverlap_sms = -4\nfold = false'),
        "paths.GEMM_FUSED.overlap_sms: expected a non-negative integer, got -4"),
    "the face flux moved without a partition": (
        _edited(P511, GEMM_CUTE_LIBRARY, GEMM_CUTE_LIBRARY + '\noverlap_face = true'),
        "paths.GEMM_CUTE.overlap_face: needs overlap_sms (the partition's SMs)"),
    "the overlap's first product without a partition": (
        _edited(P511, GEMM_CUTE_LIBRARY, GEMM_CUTE_LIBRARY + '\noverlap_first = "z"'),
        "paths.GEMM_CUTE.overlap_first: needs overlap_sms (the partition's SMs)"),
    "the carrier's product first": (
        _edited(P511, 'carrier = "y"\nfold = false', 'carrier = "y"\noverlap_sms = 32\noverlap_first = "y"\nfold = false'),
        "paths.GEMM_FUSED.overlap_first: y's GEMM cannot run first here (y carries: it runs last)"),
    "the overlap with the flux formed in the GEMMs": (
        _edited(P511, 'flux = "array"\nmma = "16x8x8"\ncarrier_tile', 'flux = "mainloop"\noverlap_sms = 32\nmma = "16x8x8"\ncarrier_tile'),
        "paths.GEMM_FUSED.overlap_sms: needs flux = array (flux = mainloop forms the products in the GEMMs)"),
    "a path that is not a table": (
        P511.replace("[paths.FUSED_DFMA]\nschedule_of", "[paths]\nEINSUM = 3\n[paths.FUSED_DFMA]\nschedule_of"),
        "paths.EINSUM: expected a table, got 3"),
}


def test_the_schedules_overlap_is_the_paths_default_and_an_option_turns_it_off(tmp_path: Path, monkeypatch) -> None:
    from composer.arch.machines import load_machines
    from composer.paths.registry import path_class

    (tmp_path / "p0511.toml").write_text(_edited(P511, 'carrier = "y"\nfold = false',
                                                 'carrier = "y"\noverlap_sms = 32\nfold = false'))
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    load_schedule.cache_clear() if hasattr(load_schedule, "cache_clear") else None
    cls, h200 = path_class("GEMM_FUSED"), load_machines()["h200"]
    on = cls.launch_plan(511, 1, h200, **cls.parse_options({}))
    assert on.node("volume_flux_xy").sm_limit == 32 and cls.plan_settings(511).endswith("overlap=32:z")
    off = cls.launch_plan(511, 1, h200, **cls.parse_options({"overlap_sms": 0}))
    assert "volume_flux" in off.issue_order and "overlap" not in cls.plan_settings(511, overlap_sms=0)
    wider = cls.launch_plan(511, 1, h200, **cls.parse_options({"overlap_sms": 44}))
    assert wider.node("volume_flux_xy").sm_limit == 44
    gemm = path_class("GEMM")  # GEMM's table takes no settings: the paper's single volume flux
    assert "volume_flux" in gemm.launch_plan(511, 1, h200, **gemm.parse_options({})).issue_order


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_bad_path_table_is_a_config_error_naming_file_and_key(tmp_path: Path, case: str) -> None:
    text, message = BAD_TABLES[case]
    path = tmp_path / "p0511.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_schedule_file(path)
    assert str(info.value) == f"{path}: {message}"


def test_packaged_file_errors_name_the_file(tmp_path: Path) -> None:
    """The issue's example, read from a packaged directory: the error names the file as shipped."""
    packaged = tmp_path / "packaged"
    packaged.mkdir()
    text, _ = BAD_TABLES["unknown library"]
    (packaged / "p0511.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_schedule(511, packaged=packaged)
    assert str(info.value) == "p0511.toml: paths.GEMM_CUTE.library.x: expected one of 'cublas', 'cute', got 'cuet'"


def test_every_shipped_schedule_loads_and_validates() -> None:
    orders = available_orders(REPO_SCHEDULES)
    assert orders == sorted(int(p.stem[1:]) for p in REPO_SCHEDULES.glob("p*.toml"))
    for order in orders:
        path = REPO_SCHEDULES / f"p{order:04d}.toml"
        text = path.read_text()
        s = load_schedule(order, packaged=REPO_SCHEDULES)
        assert (s.origin, s.file) == ("packaged", path.name)
        assert s.sha256 == hashlib.sha256(text.encode()).hexdigest()
        assert s.provenance() == {"order": order, "origin": "packaged", "file": path.name, "sha256": s.sha256}
        assert set(s.paths) <= set(PATH_TABLES)
        assert "none are set yet" not in text and "checked when the file is loaded" in text


def test_fused_variants_are_checked_by_the_fused_parser() -> None:
    """Every fused variant is a schedule path name, with the fused check (a schema, not a name list)."""
    from composer.fused.config import VARIANTS

    assert {PATH_TABLES[v] for v in VARIANTS} == {PATH_TABLES["FUSED"]}
    assert PATH_TABLES["GEMM_CUTE"] is not PATH_TABLES["FUSED"]


def test_good_tables_pass_through_verbatim(tmp_path: Path) -> None:
    text = P511 + "\n[paths.GEMM]\n\n[paths.GEMM_CUTE.tiles.16x8x4.y]\nstages = 2\nswap = false\n"
    path = tmp_path / "p0511.toml"
    path.write_text(text)
    s = load_schedule_file(path)
    assert s.origin == "file" and s.file == str(path)
    assert s.paths["GEMM"] == {}
    assert s.paths["GEMM_CUTE"]["tiles"]["16x8x4"] == {"y": {"stages": 2, "swap": False}}
    assert s.paths["FUSED_DFMA"] == {"schedule_of": "FUSED_TC"}
    assert s.paths["FUSED_TC16"]["kernels"][0] == {"dirs": "x", "box": [1, 64, 128], "threads": 128, "tile": [2, 8]}


# --- the user schedules directory -------------------------------------------------------------


def _user_p15(directory: Path) -> Path:
    """A user p0015.toml that differs from the packaged one by its step count."""
    directory.mkdir(parents=True, exist_ok=True)
    text = _edited(_edited(P15, "nstep = 20\n", "nstep = 21\n"), "timed_stages = 57", "timed_stages = 60")
    path = directory / "p0015.toml"
    path.write_text(text)
    return path


def test_loader_prefers_the_user_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user"
    path = _user_p15(user)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    assert user_dir() == user
    s = load_schedule(15, packaged=REPO_SCHEDULES)
    assert s.benchmark.nstep == 21 and (s.origin, s.file) == ("user", str(path))
    assert s.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    other = load_schedule(7, packaged=REPO_SCHEDULES)
    assert (other.origin, other.file) == ("packaged", "p0007.toml")


def test_default_user_directory_is_under_xdg_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPOSER_SCHEDULES", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert user_dir() == tmp_path / "composer" / "schedules"
    assert load_schedule(15, packaged=REPO_SCHEDULES).origin == "packaged"  # absent: not an error
    _user_p15(tmp_path / "composer" / "schedules")
    assert load_schedule(15, packaged=REPO_SCHEDULES).benchmark.nstep == 21
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_dir() == tmp_path / "home" / ".config" / "composer" / "schedules"


def test_user_files_are_validated_and_a_file_for_the_directory_is_an_error(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "p0511.toml").write_text(BAD_TABLES["bad bool"][0])
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    with pytest.raises(ConfigError, match=f"^{user / 'p0511.toml'}: paths.GEMM_CUTE.tiles.x.swap: "):
        load_schedule(511, packaged=REPO_SCHEDULES)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "not_yet"))  # none written yet: packaged
    assert load_schedule(511, packaged=REPO_SCHEDULES).origin == "packaged"
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "a_file"))
    with pytest.raises(ConfigError, match="a_file: the user schedules directory .* is not a directory"):
        load_schedule(7, packaged=REPO_SCHEDULES)


# --- where sweep results are written ----------------------------------------------------------


@pytest.fixture
def packaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the checkout's schedules standing in for the packaged directory everywhere (the
    fused parser, the candidates and the writers load schedules without a packaged argument)."""
    packaged = tmp_path / "packaged"
    shutil.copytree(REPO_SCHEDULES, packaged)
    monkeypatch.setattr(schedule_files, "packaged_dir", lambda: packaged)
    return packaged


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_sweep_fused_apply_writes_into_the_user_directory(tmp_path: Path, packaged_copy: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from composer.fused.candidates import candidate_list, to_table
    from composer.fused.config import parse_table

    user = tmp_path / "user"  # does not exist yet: the writer creates it
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    before = _snapshot(packaged_copy)
    (name, cfg), = candidate_list("FUSED", 15, "strip")[1:2]
    base = candidate_list("FUSED", 15, "strip")[0][1]
    records = [
        {"variant": "FUSED@base", "order": 15, "passed": True, "us_per_call": 600.0, "table": to_table(base)},
        {"variant": f"FUSED@{name}", "order": 15, "passed": True, "us_per_call": 500.0, "table": to_table(cfg)},
    ]
    (tmp_path / "sweep.json").write_text(json.dumps(records))
    assert main(["sweep-fused", "apply", str(tmp_path / "sweep.json"), "--date", "2026-01-02"]) == 0
    assert f"written into {user}" in capsys.readouterr().out
    assert _snapshot(packaged_copy) == before
    assert sorted(p.name for p in user.iterdir()) == ["p0015.toml"]
    text = (user / "p0015.toml").read_text()
    assert text.startswith("# Copy of the packaged schedule p0015.toml")
    assert "H200 2026-01-02, composer.fused.sweep: 500.0 us/call (previous schedule 600.0)" in text
    s = load_schedule(15)
    assert (s.origin, s.file) == ("user", str(user / "p0015.toml"))
    assert parse_table("FUSED", 15, s.paths["FUSED"]) == cfg
    assert s.paths["FUSED_TC"] == load_schedule_file(packaged_copy / "p0015.toml").paths["FUSED_TC"]


def test_sweep_fused_apply_writes_into_the_named_directory(tmp_path: Path, packaged_copy: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from composer.fused.candidates import candidate_list, to_table

    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "user"))
    before = _snapshot(packaged_copy)
    named = tmp_path / "named"
    (name, cfg), = candidate_list("FUSED", 15, "strip")[1:2]
    records = [{"variant": f"FUSED@{name}", "order": 15, "passed": True, "us_per_call": 500.0,
                "table": to_table(cfg)}]
    (tmp_path / "sweep.json").write_text(json.dumps(records))
    assert main(["sweep-fused", "apply", str(tmp_path / "sweep.json"), "--schedules-dir", str(named)]) == 0
    assert (named / "p0015.toml").is_file() and not (tmp_path / "user").exists()
    assert _snapshot(packaged_copy) == before


def test_sweep_library_writes_into_the_user_directory(tmp_path: Path, packaged_copy: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI with the GPU measurement replaced by fixed timings: x and z fastest on CuTe."""
    from composer.cli import sweep_library

    class NoProblem:
        def close(self) -> None:
            pass

    def fake_measure(order, mma, build_dir, calls):
        return (lambda assignment: 1.0 - 0.1 * (dict(assignment)["x"] == "cute")
                - 0.1 * (dict(assignment)["z"] == "cute")), NoProblem()

    monkeypatch.setattr(sweep_library, "measure_on_gpu", fake_measure)
    user = tmp_path / "user"
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    before = _snapshot(packaged_copy)
    assert main(["sweep-library", "--order", "255", "--mma", "16x8x8", "--rounds", "1"]) == 0
    assert f"to {user / 'p0255.toml'}" in capsys.readouterr().out
    assert _snapshot(packaged_copy) == before
    s = load_schedule(255)
    assert s.origin == "user"
    assert s.paths["GEMM_CUTE"]["library"] == {"x": "cute", "y": "cublas", "z": "cute"}
    assert s.paths["GEMM_CUTE"]["mma"] == "16x8x8"


def test_writable_file_is_a_copy_of_the_schedule_in_use(tmp_path: Path, packaged_copy: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user"
    mine = _user_p15(user)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    assert writable_schedule_file(15) == mine  # an existing user file is edited in place
    elsewhere = writable_schedule_file(15, tmp_path / "elsewhere")
    assert elsewhere.read_text().endswith(mine.read_text())  # the user file is the one in use
    assert f"Copy of the user schedule {mine}" in elsewhere.read_text()
    with pytest.raises(ConfigError, match="no schedule for order 9"):
        writable_schedule_file(9)


def test_installed_package_directories_are_never_written(tmp_path: Path, packaged_copy: Path) -> None:
    installed = tmp_path / "lib" / "python3.12" / "site-packages" / "composer" / "schedules"
    with pytest.raises(ConfigError, match="refusing to write schedules into an installed package"):
        writable_schedule_file(15, installed)
    assert not installed.exists()
