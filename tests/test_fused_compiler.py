"""The compiler as part of a fused table: the ``nvrtc`` key (session 18).

The same kernel source compiled by NVRTC 13.0 (the H200's) and 13.5 (a `composer build` here) ran up
to 15 % apart on the H200, either way round (docs/data/h200_s18/call2): a table is tuned for the
kernels of one compiler. These tests check that every shipped table names it, that the key is
validated and written back by the sweep's ``to_table``, that a build directory's kernels load only
for the table's compiler, and that a run on another compiler's kernels says so once.
"""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from composer.build.builder import build
from composer.build.plan import plan
from composer.config.schedules import available_orders, load_schedule
from composer.errors import ConfigError
from composer.fused.builder import kernel_origin, prebuilt
from composer.fused.candidates import to_table
from composer.fused.config import fused_config, parse_table
from tests.test_fused_cpu import needs_nvrtc


def _shipped() -> list[tuple[str, int]]:
    return [(name, order) for order in available_orders() for name in load_schedule(order).paths
            if name.startswith("FUSED")]


def test_every_shipped_fused_table_names_the_compiler_it_was_measured_with() -> None:
    cases = _shipped()
    assert cases
    for variant, order in cases:
        config = fused_config(variant, order)
        assert config.nvrtc in ("13.0", "13.5"), (variant, order, config.nvrtc)
        if variant == "FUSED_DFMA":  # FUSED_TC's table, compiler included
            assert config.nvrtc == fused_config("FUSED_TC", order).nvrtc
    # session 18 call 2's winners of NVRTC 13.5 (three alternating benches per compiler, each validated)
    assert fused_config("FUSED_TC", 31).nvrtc == "13.5" and fused_config("FUSED_TC16", 255).nvrtc == "13.0"


@pytest.mark.parametrize("value", ["13", "13.0.88", 13.0, "", "latest"])
def test_nvrtc_key_must_be_major_minor(value) -> None:
    table = tomllib.loads(to_table(fused_config("FUSED_TC", 31)))["paths"]["FUSED_TC"]
    table["nvrtc"] = value
    with pytest.raises(ConfigError, match=r"paths\.FUSED_TC\.nvrtc: expected an NVRTC version"):
        parse_table("FUSED_TC", 31, table, "p0031.toml")


def test_to_table_writes_the_compiler_back() -> None:
    for variant, order in [("FUSED", 7), ("FUSED_TC", 31), ("FUSED_TC16", 511)]:
        config = dataclasses.replace(fused_config(variant, order), nvrtc="12.9")
        text = to_table(config)
        assert 'nvrtc = "12.9"' in text
        assert parse_table(variant, order, tomllib.loads(text)["paths"][variant]) == config
    unnamed = dataclasses.replace(fused_config("FUSED", 7), nvrtc=None)
    assert "nvrtc" not in to_table(unnamed)


@needs_nvrtc
def test_build_directory_kernels_load_only_for_the_tables_compiler(tmp_path) -> None:
    from composer.runtime.nvrtc import nvrtc_version

    here = "{}.{}".format(*nvrtc_version())
    build(plan("sm_90", "16x8x4", [7], ["FUSED"]), tmp_path)
    config = fused_config("FUSED", 7)
    assert prebuilt(dataclasses.replace(config, nvrtc=here), "sm_90", tmp_path) is not None
    assert prebuilt(dataclasses.replace(config, nvrtc=None), "sm_90", tmp_path) is not None
    assert prebuilt(dataclasses.replace(config, nvrtc="12.9"), "sm_90", tmp_path) is None
    ready = prebuilt(dataclasses.replace(config, nvrtc=here), "sm_90", tmp_path)
    assert kernel_origin(ready, tmp_path) == f"nvrtc {here} (build {tmp_path})"
    # the compiler is the manifest's, not the loaded NVRTC's: a directory built by another
    import json

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for entry in manifest["kernels"]:
        entry["compiler"] = {"nvrtc": "12.9"}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert prebuilt(dataclasses.replace(config, nvrtc=here), "sm_90", tmp_path) is None
    other = prebuilt(dataclasses.replace(config, nvrtc="12.9"), "sm_90", tmp_path)
    assert other is not None and {k.compiled.nvrtc_version for k in other.kernels} == {(12, 9)}
    assert kernel_origin(other, tmp_path) == f"nvrtc 12.9 (build {tmp_path})"


def test_a_run_on_another_compilers_kernels_says_so_once(capsys) -> None:
    from composer.paths.fused import note_compiler_mismatch

    config = dataclasses.replace(fused_config("FUSED_TC", 31), order=31, nvrtc="13.5")
    note_compiler_mismatch(config, "nvrtc 13.0 (compiled here)")
    note_compiler_mismatch(config, "nvrtc 13.0 (compiled here)")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["note: FUSED_TC p=31: the schedule's table was measured with NVRTC 13.5 kernels; running "
                   "nvrtc 13.0 (compiled here) (a `composer build` of NVRTC 13.5 in $COMPOSER_BUILD_DIR, or its "
                   "CUBINs in $COMPOSER_CACHE_DIR, give the measured ones)"]


def test_report_keeps_another_compilers_runs_apart_from_the_shipped_cell() -> None:
    """A run whose kernels came from another NVRTC than the table names becomes the variant
    ``nvrtc=X.Y`` of its cell in the report (it measured the source, not the tuned kernels);
    matching runs and runs from before origins were recorded stay the cell itself."""
    from composer.bench.records import RunRecord
    from composer.report.sources import compiler_variant

    def run(path: str, order: int, origin: str | None) -> RunRecord:
        return RunRecord(path, order, (1, 1, 1), 0, 1e-3, 1.0, 57, 1.0, 57, 1, 20,
                         options={"graph": False}, kernel_origin=origin)

    other = compiler_variant(run("FUSED_TC16", 255, "nvrtc 13.5 (build .cache/build_n135)"))
    assert other.options == {"graph": False, "nvrtc": "13.5"}
    for kept in (run("FUSED_TC16", 255, "nvrtc 13.0 (compiled here)"), run("FUSED_TC", 31, "nvrtc 13.5 (build b)"),
                 run("FUSED_TC16", 255, None), run("GEMM", 255, None)):
        assert compiler_variant(kept) == kept
    assert compiler_variant(run("FUSED_DFMA", 31, "nvrtc 13.0 (compiled here)")).options["nvrtc"] == "13.0"


def test_sweep_run_compiles_every_table_with_its_own_nvrtc(tmp_path, monkeypatch, capsys) -> None:
    """A device sweep compares candidates with the schedule's own table: all must come from one
    compiler, so `sweep-fused run` drops $COMPOSER_BUILD_DIR (saying so) before anything loads."""
    import os

    from composer.fused import sweep

    monkeypatch.setenv("COMPOSER_BUILD_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError):
        sweep.run(str(tmp_path / "out"), [31], 60.0, str(tmp_path / "no_plan.json"))
    assert "COMPOSER_BUILD_DIR" not in os.environ
    assert "is not used by sweep-fused run" in capsys.readouterr().err


@needs_nvrtc
def test_build_names_the_tables_whose_compiler_differs(tmp_path, capsys) -> None:
    from composer.cli.main import main
    from composer.runtime.nvrtc import nvrtc_version

    here = "{}.{}".format(*nvrtc_version())
    assert main(["build", "--arch", "sm_90", "--paths", "FUSED_TC", "--orders", "31,255", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    other = [f"FUSED_TC p={o} (NVRTC {fused_config('FUSED_TC', o).nvrtc})" for o in (31, 255)
             if fused_config("FUSED_TC", o).nvrtc != here]
    assert other  # the shipped tables name both 13.0 and 13.5: one of them differs from any NVRTC
    assert f"note: {len(other)} fused tables name another NVRTC than this one ({', '.join(other)})" in err


def _carry_as(cache, source: str, name: str, version: tuple[int, int]) -> None:
    """Copy the cache entry this NVRTC wrote for ``source`` under the key of ``version``: what a cache
    filled by another NVRTC elsewhere holds."""
    import json

    from composer.fused.builder import OPTIONS
    from composer.runtime.nvrtc import _validate_options, cache_key, nvrtc_version

    opts = _validate_options(OPTIONS)
    here, other = (cache_key(source, "sm_90", opts, [name], v) for v in (nvrtc_version(), version))
    meta = json.loads((cache / f"{here}.json").read_text())
    (cache / f"{other}.cubin").write_bytes((cache / f"{here}.cubin").read_bytes())
    (cache / f"{other}.json").write_text(json.dumps({**meta, "key": other, "nvrtc": list(version)}))


@needs_nvrtc
def test_the_tables_compiler_comes_from_the_nvrtc_cache_when_carried(tmp_path) -> None:
    """A table naming another NVRTC takes that compiler's CUBINs from $COMPOSER_CACHE_DIR when the
    cache holds them (filled where that NVRTC runs: `sweep-fused check`), else compiles them here;
    the build says which (the bench records it)."""
    from composer.fused.builder import build as build_fused
    from composer.fused.builder import kernel_origin, kernel_sources

    config = dataclasses.replace(fused_config("FUSED", 7), nvrtc="12.9")
    here = build_fused(config, "sm_90", tmp_path)  # a miss: compiled by this NVRTC, cached under its key
    assert kernel_origin(here).endswith("(compiled here)")
    for k in kernel_sources(config, "sm_90"):
        _carry_as(tmp_path, k.source, k.name, (12, 9))
    carried = build_fused(config, "sm_90", tmp_path)
    assert {k.compiled.nvrtc_version for k in carried.kernels} == {(12, 9)}
    assert kernel_origin(carried) == "nvrtc 12.9 (NVRTC cache, compiled elsewhere)"
    assert [k.compiled.cubin for k in carried.kernels] == [k.compiled.cubin for k in here.kernels]
    unnamed = build_fused(dataclasses.replace(config, nvrtc=None), "sm_90", tmp_path)
    assert kernel_origin(unnamed).endswith("(compiled here)")


@needs_nvrtc
def test_pinned_check_names_this_nvrtc_and_keeps_the_shipped_table() -> None:
    """`sweep-fused check --pin-nvrtc`: every row's table names this NVRTC (its CUBINs are in the
    cache the check filled), and the schedule's table as shipped is added as "shipped"."""
    from composer.fused import sweep
    from composer.runtime.nvrtc import nvrtc_version

    here = "{}.{}".format(*nvrtc_version())
    plan = sweep.check([31], workers=1, subset="staged", only="^$", pin_nvrtc=True)
    for variant, rows in plan["31"].items():
        if not rows:
            continue
        labels = [r["label"] for r in rows]
        assert labels == ["base", sweep.SHIPPED], (variant, labels)
        base, shipped = rows
        assert parse_table(variant, 31, tomllib.loads(base["table"])["paths"][variant]).nvrtc == here
        assert shipped["table"] == to_table(fused_config(variant, 31))


def test_apply_needs_a_winner_to_beat_the_shipped_table_too(tmp_path) -> None:
    """With a pinned plan a candidate beats the schedule's table only if faster than it on both
    compilers (the "base" row on the plan's, the "shipped" row on its own); "shipped" never writes."""
    import json
    import shutil

    from composer.config.schedules import packaged_dir
    from composer.fused import sweep

    shutil.copy(packaged_dir() / "p0255.toml", tmp_path / "p0255.toml")
    base = dataclasses.replace(fused_config("FUSED_TC16", 255), nvrtc="13.5")
    faster = dataclasses.replace(base, stages=3)
    rows = lambda cand_us, shipped_us: [  # noqa: E731
        {"variant": "FUSED_TC16@base", "order": 255, "passed": True, "us_per_call": 860.0, "table": to_table(base)},
        {"variant": "FUSED_TC16@shipped", "order": 255, "passed": True, "us_per_call": shipped_us,
         "table": to_table(fused_config("FUSED_TC16", 255))},
        {"variant": "FUSED_TC16@s3", "order": 255, "passed": True, "us_per_call": cand_us, "table": to_table(faster)}]
    log = tmp_path / "sweep.json"
    log.write_text(json.dumps(rows(810.0, 797.0)))  # beats the pinned base, not the shipped table
    assert sweep.apply(str(log), str(tmp_path), "2026-12-03") == []
    log.write_text(json.dumps(rows(900.0, 797.0)))  # the shipped table fastest: nothing to write
    assert sweep.apply(str(log), str(tmp_path), "2026-12-03") == []
    log.write_text(json.dumps(rows(700.0, 797.0)))
    assert sweep.apply(str(log), str(tmp_path), "2026-12-03") == [
        "p255 FUSED_TC16: H200 2026-12-03, composer.fused.sweep: 700.0 us/call (previous schedule 797.0)"]
    assert 'nvrtc = "13.5"' in (tmp_path / "p0255.toml").read_text()
