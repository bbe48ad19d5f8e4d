"""The path registry: every path listed once with its capabilities, options and memory estimate;
options checked against what each path reads; the build plan, counts and CLI reading the registry."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path as FsPath
from types import SimpleNamespace

import pytest

import composer.paths
from composer import counts, dg
from composer.errors import ComposerError, ConfigError
from composer.paths.base import BUILD_KINDS, CAPABILITIES, FAMILIES, Path, PathOption
from composer.paths.registry import (PATHS, UnknownPathError, path_class, path_names, paths_with,
                                     requested_path_options, validate_options)

ROOT = FsPath(__file__).resolve().parents[1]


def test_every_path_class_is_registered_once_and_resolves() -> None:
    defined = set()
    for info in pkgutil.iter_modules(composer.paths.__path__):
        module = importlib.import_module(f"composer.paths.{info.name}")
        defined |= {obj for _, obj in inspect.getmembers(module, inspect.isclass)
                    if issubclass(obj, Path) and not inspect.isabstract(obj) and "name" in vars(obj)}
    assert defined == set(PATHS)
    names = path_names()
    assert names == [cls.name for cls in PATHS] and len(set(names)) == len(names) == 8
    for cls in PATHS:
        assert path_class(cls.name) is cls and path_class(cls.name.lower()) is cls


def test_unknown_path_names_the_known_ones() -> None:
    with pytest.raises(UnknownPathError, match="unknown path 'CUBLAS'; available paths: GEMM, GEMM_CUTE, GEMM_FUSED, EINSUM"):
        path_class("CUBLAS")
    assert issubclass(UnknownPathError, ComposerError) and issubclass(UnknownPathError, ValueError)


def test_fused_family_matches_the_fused_variants() -> None:
    from composer.fused.config import SUPPORTED_ORDERS, VARIANTS

    fused = paths_with(family="fused")
    assert [cls.name for cls in fused] == list(VARIANTS)
    assert all(cls.orders == SUPPORTED_ORDERS[cls.name] for cls in fused)
    assert [cls.name for cls in fused if cls.min_sm == 90] == ["FUSED_TC16"]
    assert path_class("FUSED").min_sm is None


def test_every_path_declares_capabilities_options_and_memory() -> None:
    grid = (2, 3, 4)
    base = counts.problem_memory_items(7, grid)
    for cls in PATHS:
        for capability in CAPABILITIES:
            assert hasattr(cls, capability), (cls.name, capability)
        assert cls.family in FAMILIES and cls.build_kinds <= set(BUILD_KINDS)
        assert all(isinstance(o, PathOption) and o.doc for o in cls.options.values()), cls.name
        estimate = cls.memory_estimate(7, grid)
        assert estimate.path == cls.name and estimate.grid == grid
        assert estimate.items[:len(base)] == base and len(estimate.items) > len(base)
        assert cls.device_bytes(7, grid) == estimate.total_bytes
        assert estimate == counts.device_memory_estimate(7, grid, cls.name)
    vol = counts.volume_array_bytes(7, grid)
    assert path_class("EINSUM").device_bytes(7, grid) - path_class("GEMM").device_bytes(7, grid) == 2 * vol
    assert path_class("GEMM_CUTE").memory_estimate(7, grid).items == path_class("GEMM").memory_estimate(7, grid).items


def test_capability_selection() -> None:
    assert [cls.name for cls in paths_with(needs_build=True)] == ["GEMM_CUTE", "GEMM_FUSED"]
    assert [cls.name for cls in paths_with(reads_mma=True)] == ["GEMM_CUTE", "GEMM_FUSED"]
    assert [cls.name for cls in paths_with(supports_graph=False)] == ["EINSUM"]
    assert [cls.name for cls in paths_with(family="library")] == ["GEMM", "GEMM_CUTE", "GEMM_FUSED"]
    with pytest.raises(ValueError, match="no capability"):
        paths_with(fast=True)


def test_unknown_option_key_is_refused_naming_the_known_keys() -> None:
    known = "its options: build_dir, library, max_streams, mma, node_us, overlap_face, overlap_first, overlap_formed, overlap_sms"
    with pytest.raises(ComposerError, match=f"path GEMM_CUTE has no option 'mmma'; {known}") as err:
        validate_options("GEMM_CUTE", {"mmma": "8x8x4"})
    assert "\n" not in str(err.value)
    with pytest.raises(ComposerError, match="path GEMM has no option 'mma'; its options: max_streams, node_us, overlap_face, overlap_first, overlap_formed, overlap_sms, parity$"):
        validate_options("gemm", {"mma": "8x8x4"})
    with pytest.raises(ComposerError, match="its options: build_dir, cache_dir, carveout, config, max_streams"):
        validate_options("FUSED_TC16", {"tile": "2"})


def test_option_values_are_parsed_by_their_declarations() -> None:
    parsed = validate_options("GEMM_CUTE", {"mma": "m16n8k4", "library": "x=cute,z=cublas", "build_dir": "b/sm_90"})
    assert parsed == {"mma": "16x8x4", "library": {"x": "cute", "z": "cublas"}, "build_dir": FsPath("b/sm_90")}
    assert validate_options("GEMM_CUTE", {"mma": None}) == {"mma": None}  # None: not given
    with pytest.raises(ComposerError, match="option mma='8x8': unknown FP64 MMA shape"):
        validate_options("GEMM_CUTE", {"mma": "8x8"})
    with pytest.raises(ComposerError, match="option config='tiles': expected a FusedConfig"):
        validate_options("FUSED", {"config": "tiles"})


def test_paths_refuse_unknown_options_when_constructed() -> None:
    problem = SimpleNamespace(order=7)  # the options are checked before anything touches the device
    for name in ("GEMM", "GEMM_CUTE", "FUSED_TC"):
        with pytest.raises(ComposerError, match="has no option 'bogus'"):
            path_class(name)(problem, bogus=1)  # type: ignore[arg-type]


def test_tendency_refuses_unknown_options_before_the_device() -> None:
    from composer.api import tendency

    fields = dg.make_fields(7, 1)
    with pytest.raises(ComposerError, match="path FUSED has no option 'mma'"):
        tendency(fields, 7, 1, path="FUSED", mma="8x8x4")


def test_options_for_a_path_not_requested_are_refused() -> None:
    with pytest.raises(ComposerError, match=r"not requested: \['GEMM_CUTE'\] \(requested: GEMM, FUSED\)"):
        requested_path_options({"GEMM_CUTE": {"mma": "8x8x4"}}, ["GEMM", "fused"])
    assert requested_path_options({"gemm_cute": {"mma": "8x8x4"}}, ["GEMM_CUTE"]) == {"GEMM_CUTE": {"mma": "8x8x4"}}
    assert requested_path_options({}, ["GEMM"]) == {}
    with pytest.raises(ComposerError, match="has no option 'mmma'"):
        requested_path_options({"GEMM_CUTE": {"mmma": "8x8x4"}}, ["GEMM_CUTE"])
    with pytest.raises(UnknownPathError):
        requested_path_options({}, ["NOPE"])


def test_bench_cli_refuses_a_mistyped_option_before_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from composer.cli.main import main

    assert main(["bench", "--paths", "GEMM_CUTE", "--orders", "7", "--option", "GEMM_CUTE.mmma=8x8x4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: path GEMM_CUTE has no option 'mmma'") and "build_dir, library, max_streams, mma" in err


def test_bench_and_build_defaults_come_from_capabilities() -> None:
    from composer.build.plan import BUILDABLE_PATHS
    from composer.build.plan import DEFAULT_PATHS as BUILD_DEFAULT
    from composer.cli.bench import DEFAULT_PATHS as BENCH_DEFAULT

    assert BENCH_DEFAULT == ("GEMM", "FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16")
    assert BUILD_DEFAULT == ("GEMM_CUTE", "GEMM_FUSED")
    assert BUILDABLE_PATHS == ("GEMM", "GEMM_CUTE", "GEMM_FUSED", "FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16")


def test_build_checks_the_mma_shape_only_for_paths_that_read_it() -> None:
    from composer.arch.mma import UnsupportedShapeError
    from composer.build.plan import plan

    jobs = plan("sm_80", "16x8x4", [7], ["FUSED"])  # FUSED never reads --mma
    assert jobs and {j.kind for j in jobs} == {"fused"}
    assert {j.kind for j in plan("sm_80", "16x8x4", [7], ["GEMM"])} == {"nvrtc"}
    with pytest.raises(UnsupportedShapeError, match="use --mma 8x8x4"):
        plan("sm_80", "16x8x4", [7], ["FUSED", "GEMM_CUTE"])
    with pytest.raises(ComposerError, match="path FUSED_TC16 needs sm_90 or newer"):
        plan("sm_80", "8x8x4", [7], ["FUSED_TC16"])


def _schedules_with(tmp_path: FsPath, order: int, pattern: str, replacement: str) -> FsPath:
    """A schedules directory whose ``order`` file has its first match of ``pattern`` replaced."""
    from composer.config.schedules import packaged_dir, schedule_file_name

    name = schedule_file_name(order)
    text = (packaged_dir() / name).read_text()
    edited = re.sub(pattern, replacement, text, count=1, flags=re.S | re.M)
    assert edited != text
    (tmp_path / name).write_text(edited)
    return tmp_path


def test_counts_raise_for_a_malformed_fused_table(tmp_path: FsPath, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _schedules_with(tmp_path, 31, r'(\[paths\.FUSED_TC\]\n(?:#[^\n]*\n)*flux = )"inline"', r'\1"sideways"')
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(broken))
    with pytest.raises(ConfigError, match=r"p0031\.toml.*FUSED_TC"):
        counts.device_memory_estimate(31, 8, "FUSED_TC")
    with pytest.raises(ConfigError):  # FUSED_DFMA runs FUSED_TC's table
        counts.device_memory_estimate(31, 8, "FUSED_DFMA")
    with pytest.raises(ConfigError, match=r"p0031\.toml: paths\.FUSED_TC\.flux"):  # the file is checked whole at load
        counts.device_memory_estimate(31, 8, "FUSED")


def test_counts_without_a_fused_table_follow_the_paper_rule(tmp_path: FsPath, monkeypatch: pytest.MonkeyPatch) -> None:
    def has_face_array(path: str, order: int) -> bool:
        return "face flux" in {i.name for i in counts.device_memory_estimate(order, 1, path).items}

    assert has_face_array("FUSED", 511)  # an order FUSED does not implement: the rule (p >= 63)
    assert not has_face_array("FUSED_TC", 8)  # no schedule for p = 8: the rule
    assert not has_face_array("FUSED", 63)  # the p = 63 table: inline, against the rule
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(_schedules_with(tmp_path, 63, r"^\[paths\.FUSED\]\n.*?\n(?=\[)", "")))
    assert has_face_array("FUSED", 63)  # table removed: the rule
    assert not has_face_array("FUSED_TC", 63)


def test_importing_the_registry_leaves_optional_dependencies_unimported() -> None:
    code = ("import sys, composer.paths.registry, composer.counts, composer.build.plan; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'cupy', 'cupyx', 'nvmath', 'cutlass'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_schedule_tables_and_the_registry_name_the_same_paths() -> None:
    """composer.config cannot import the paths (they read schedules), so the schedule schema keeps
    its own table per path name: a path added to one list and not the other fails here."""
    from composer.config.path_tables import PATH_TABLES

    assert sorted(PATH_TABLES) == sorted(path_names())
