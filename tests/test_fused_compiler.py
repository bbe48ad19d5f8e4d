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
from composer.fused.builder import prebuilt, prebuilt_origin
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
    assert prebuilt_origin(tmp_path) == f"nvrtc {here} (build {tmp_path})"


def test_a_run_on_another_compilers_kernels_says_so_once(capsys) -> None:
    from composer.paths.fused import note_compiler_mismatch

    config = dataclasses.replace(fused_config("FUSED_TC", 31), order=31, nvrtc="13.5")
    note_compiler_mismatch(config, "nvrtc 13.0 (compiled here)")
    note_compiler_mismatch(config, "nvrtc 13.0 (compiled here)")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["note: FUSED_TC p=31: the schedule's table was measured with NVRTC 13.5 kernels; running "
                   "nvrtc 13.0 (compiled here) (a `composer build` of NVRTC 13.5 in $COMPOSER_BUILD_DIR gives "
                   "the measured ones)"]


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
