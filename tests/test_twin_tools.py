"""tools/merge_builds.py (each fused kernel from its table's NVRTC) and tools/shape_twins.py (a schedules
directory whose FUSED_TC16 tables are FUSED_TC's on 16x8x4): what the session-20 shape-transfer tests ran."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from composer.config.schedules import load_schedule
from composer.fused.candidates import shape_twin
from composer.fused.config import fused_config

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(directory: Path, nvrtc: str, kernels: list[tuple[str, str, int]]) -> None:
    """A build directory of fake fused kernels (symbol, variant, order) compiled by ``nvrtc``."""
    directory.mkdir()
    entries = []
    for symbol, variant, order in kernels:
        (directory / f"{symbol}.cubin").write_bytes(f"{symbol} {nvrtc}".encode())
        entries.append({"symbol": symbol, "cubin": f"{symbol}.cubin", "compiler": {"nvrtc": nvrtc},
                        "config": {"kind": "fused", "variant": variant, "order": order}})
    (directory / "manifest.json").write_text(json.dumps({"schema": "composer.kernel-manifest", "version": 1,
                                                         "kernels": entries}))


def test_merge_takes_each_fused_kernel_from_its_tables_compiler(tmp_path, capsys):
    # the shipped tables: FUSED_TC p = 31 on 13.5, p = 255 on 13.0
    assert fused_config("FUSED_TC", 31).nvrtc == "13.5" and fused_config("FUSED_TC", 255).nvrtc == "13.0"
    kernels = [("fused_tc_p31_k0_xy", "FUSED_TC", 31), ("fused_tc_p255_s0_x", "FUSED_TC", 255)]
    _build(tmp_path / "b130", "13.0", kernels)
    _build(tmp_path / "b135", "13.5", kernels + [("fused_tc_p63_k0_xy", "FUSED_TC", 63)])
    out = tmp_path / "merged"
    assert _tool("merge_builds").main(["--out", str(out), str(tmp_path / "b130"), str(tmp_path / "b135")]) == 0
    merged = {e["symbol"]: e["compiler"]["nvrtc"] for e in json.loads((out / "manifest.json").read_text())["kernels"]}
    assert merged == {"fused_tc_p31_k0_xy": "13.5", "fused_tc_p255_s0_x": "13.0", "fused_tc_p63_k0_xy": "13.5"}
    assert (out / "fused_tc_p255_s0_x.cubin").read_bytes() == b"fused_tc_p255_s0_x 13.0"
    assert (out / "fused_tc_p31_k0_xy.cubin").read_bytes() == b"fused_tc_p31_k0_xy 13.5"


def test_shape_twins_writes_loadable_schedules(tmp_path, monkeypatch, capsys):
    out = tmp_path / "twins"
    assert _tool("shape_twins").main(["--orders", "7,63", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "p = 7: FUSED_TC's table has an odd WM, no 16x8x4 twin" in printed
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(out))
    schedule = load_schedule(63)
    twin = fused_config("FUSED_TC16", 63, schedule.paths, schedule.file)
    assert twin == shape_twin(fused_config("FUSED_TC", 63, schedule.paths, schedule.file))
    # the orders without a twin are the shipped files, and only FUSED_TC16's table changed at 63
    assert (out / "p0007.toml").read_text() == (ROOT / "schedules" / "p0007.toml").read_text()
    shipped = (ROOT / "schedules" / "p0063.toml").read_text()
    written = (out / "p0063.toml").read_text()
    assert written.split("[paths.FUSED_TC16]")[0] == shipped.split("[paths.FUSED_TC16]")[0]
    assert written.split("[paths.GEMM_FUSED]")[1] == shipped.split("[paths.GEMM_FUSED]")[1]


def test_candidate_schedules_runs_one_named_candidate_as_the_schedule(tmp_path, monkeypatch, capsys) -> None:
    """tools/candidate_schedules.py: the one candidate whose label matches becomes the order's table
    (the other tables and orders as shipped); zero or several matches are one line and exit 2."""
    from composer.fused.candidates import candidate_list

    tool = _tool("candidate_schedules")
    out = tmp_path / "sched"
    # p = 31: p = 7's FUSED_TC table forms its x faces already (session 26), the xfaces family has nothing there
    expected = candidate_list("FUSED_TC", 31, "xfaces", "Mxfaces pio$")[1][1]
    shipped = (fused_config("FUSED_TC16", 31), fused_config("FUSED_TC", 15))
    assert tool.main(["--order", "31", "--variant", "FUSED_TC", "--subset", "xfaces", "--only", "Mxfaces pio$",
                      "--out", str(out)]) == 0
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(out))
    assert fused_config("FUSED_TC", 31) == expected and expected.traces == "xfaces"
    assert (fused_config("FUSED_TC16", 31), fused_config("FUSED_TC", 15)) == shipped
    assert sorted(p.name for p in out.glob("p*.toml")) == sorted(p.name for p in (ROOT / "schedules").glob("p*.toml"))
    monkeypatch.delenv("COMPOSER_SCHEDULES")
    capsys.readouterr()
    assert tool.main(["--order", "7", "--variant", "FUSED_TC", "--subset", "budget", "--only", "mb",
                      "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only 'mb' matches ") and err.count("\n") == 1
    assert tool.main(["--order", "7", "--variant", "FUSED_TC", "--subset", "xfaces", "--only", "nothing",
                      "--out", str(tmp_path / "y")]) == 2
    assert "matches 0 candidates" in capsys.readouterr().err
    assert tool.main(["--order", "7", "--variant", "FUSED_TC", "--subset", "nope", "--only", "x",
                      "--out", str(tmp_path / "z")]) == 2
    assert capsys.readouterr().err.startswith("error: unknown subset 'nope'; known: all, ")
    assert tool.main(["--order", "31", "--variant", "FUSED_TC", "--subset", "xfaces", "--only", "Mxfaces pio$",
                      "--out", str(tmp_path / "j"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["label"] == "FUSED_TC@8x8x4 box[2, 32, 32] t256 tile[2, 2] Mxfaces pio"
    assert 'traces = "xfaces"' in printed["table"] and printed["file"].endswith("p0031.toml")
