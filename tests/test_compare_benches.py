"""tools/compare_benches.py on the session-18 compiler A/B (docs/data/h200_s18/call2/nvrtc)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import compare_benches  # noqa: E402

AB = ROOT / "docs" / "data" / "h200_s18" / "call2" / "nvrtc"


def test_rows_pair_the_groups_cell_by_cell(capsys) -> None:
    a = [str(AB / d) for d in ("small_A0", "small_A3", "small_A4")]
    b = [str(AB / d) for d in ("small_B1", "small_B2", "small_B5")]
    assert compare_benches.main(["--a", *a, "--b", *b, "--json"]) == 0
    rows = {(r["path"], r["order"]): r for r in json.loads(capsys.readouterr().out)}
    assert len(rows) == 5 * 6 and all(r["a_n"] == r["b_n"] == 3 for r in rows.values())
    tc31 = rows[("FUSED_TC", 31)]
    assert tc31["resolved"] and 0.84 < tc31["b_over_a"] < 0.86  # 519.8 against 610.2 µs
    assert tc31["a_origins"] == ["nvrtc 13.0 (compiled here)"] and tc31["b_origins"][0].startswith("nvrtc 13.5 (build ")
    gemm = rows[("GEMM", 31)]
    assert gemm["a_origins"] == gemm["b_origins"] == ["-"] and abs(gemm["b_over_a"] - 1) < 0.002
    # medians and ranges recomputed from the rows' own runs
    assert tc31["a_range"][0] <= tc31["a_us"] <= tc31["a_range"][1]


def test_a_directory_without_runs_is_one_clear_line(tmp_path, capsys) -> None:
    assert compare_benches.main(["--a", str(tmp_path), "--b", str(AB / "small_B1")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no bench results (runs.jsonl) in {tmp_path}"
