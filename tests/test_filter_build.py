"""tools/filter_build.py: a build directory of just the matching kernels (what a device call carries)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("filter_build", ROOT / "tools" / "filter_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(directory: Path, symbols: list[str]) -> None:
    directory.mkdir()
    kernels = []
    for s in symbols:
        (directory / f"{s}.cubin").write_bytes(s.encode())
        kernels.append({"symbol": s, "cubin": f"{s}.cubin", "config": {"kind": "cute_gemm"}})
    (directory / "manifest.json").write_text(json.dumps({"schema": "composer.build", "version": 3, "kernels": kernels}))


def test_keeps_the_matching_entries_and_their_cubins(tmp_path, capsys):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _build(src, ["dgemm_p0511_y_m16_8_8_carry_qs_0", "dgemm_p0511_x_m16_8_8_qs_0", "dgemm_p0007_x_m16_8_4_0",
                 "volume_flux_nq512"])
    assert _tool().main([str(src), str(dst), "p0511_.*_qs_", "nq512$"]) == 0
    manifest = json.loads((dst / "manifest.json").read_text())
    kept = [e["symbol"] for e in manifest["kernels"]]
    assert kept == ["dgemm_p0511_y_m16_8_8_carry_qs_0", "dgemm_p0511_x_m16_8_8_qs_0", "volume_flux_nq512"]
    assert manifest["schema"] == "composer.build" and manifest["version"] == 3
    assert sorted(p.name for p in dst.iterdir()) == sorted(["manifest.json", *(f"{s}.cubin" for s in kept)])
    assert (dst / "volume_flux_nq512.cubin").read_bytes() == b"volume_flux_nq512"
    assert "3 of 4 kernels" in capsys.readouterr().out


def test_refuses_to_overwrite_its_source_and_an_empty_selection(tmp_path, capsys):
    src = tmp_path / "src"
    _build(src, ["dgemm_p0007_x_m16_8_4_0"])
    tool = _tool()
    assert tool.main([str(src), str(src), "p0007"]) == 1
    assert tool.main([str(src), str(tmp_path), "p0007"]) == 1  # above the source: rmtree would take it too
    assert (src / "manifest.json").is_file()
    assert tool.main([str(src), str(tmp_path / "out"), "p0511"]) == 1
    err = capsys.readouterr().err
    assert "lies inside or above it" in err and "no entry of" in err
    assert tool.main([str(tmp_path / "missing"), str(tmp_path / "out"), "x"]) == 1
