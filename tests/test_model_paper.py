"""The paper's device times (Tables S23-S25) load checked, and compare() sets predictions next to them."""

from __future__ import annotations

import math

import pytest

from composer.errors import ComposerError
from composer.model.paper import compare, load_paper_times, summary


def test_the_shipped_tables_hold_the_ratios_the_paper_quotes():
    paper = load_paper_times()
    assert set(paper) == {"gb200", "h100", "a100"}
    # the paper's text: FUSED_DFMA/FUSED on A100 at p = 7 is 0.9992 (device: 1290 / 1290)
    assert paper["a100"]["FUSED_DFMA"][7] == paper["a100"]["FUSED"][7]
    # GEMM/FUSED_TC and FUSED_DFMA/FUSED_TC at p = 255 (results.md section 9: 1.188/2.272, 1.151/2.016, 1.404/2.554)
    for machine, gemm, dfma in [("gb200", 1.188, 2.272), ("h100", 1.151, 2.016), ("a100", 1.404, 2.554)]:
        t = paper[machine]
        assert t["GEMM"][255] / t["FUSED_TC"][255] == pytest.approx(gemm, abs=1e-3)
        assert t["FUSED_DFMA"][255] / t["FUSED_TC"][255] == pytest.approx(dfma, abs=1e-3)
    assert "FUSED" not in {p for p, t in paper["gb200"].items() if 511 in t}  # the paper ran no FUSED at 511
    assert paper["gb200"]["GEMM_FUSED"][1023] == pytest.approx(0.180)  # GB200 ran p = 1023 (GEMM paths)


@pytest.mark.parametrize("body, message", [
    ('[x]\nsource = "s"\nFUSED_X = { 7 = 1 }\n', "not one of the paper's paths"),
    ('[x]\nsource = "s"\nFUSED = { 8 = 1 }\n', "order '8'"),
    ('[x]\nsource = "s"\nFUSED = { 7 = -1 }\n', "not a positive time"),
    ('[x]\nsource = "s"\nFUSED = { 7 = true }\n', "not a positive time"),
    ('[x]\nFUSED = { 7 = 1 }\n', "needs a source"),
    ('[x\n', "not a readable"),
])
def test_a_bad_paper_file_is_refused_with_one_line(tmp_path, body, message):
    file = tmp_path / "times.toml"
    file.write_text(body)
    with pytest.raises(ComposerError, match=message) as info:
        load_paper_times(file)
    assert "\n" not in str(info.value)


def _document(machine: str, seconds: dict[tuple[str, int], float], sms: int = 132, full: int = 132) -> dict:
    return {"target": {"machine": machine, "label": machine, "sm_count": sms, "full_sm_count": full},
            "paths": [{"path": p, "order": o, "seconds": s} for (p, o), s in seconds.items()]}


def test_compare_puts_both_sides_of_each_ratio_and_the_fastest_of_the_common_paths():
    paper = {"m": {"FUSED": {7: 3.0}, "FUSED_TC": {7: 2.0, 511: 5.0}, "GEMM": {7: 4.0, 511: 4.0}}}
    ours = _document("m", {("FUSED", 7): 1.0, ("FUSED_TC", 7): 2.0, ("GEMM", 7): 3.0, ("FUSED_TC16", 7): 0.1,
                           ("FUSED_TC", 511): 3.0, ("GEMM", 511): 6.0, ("GEMM", 63): 1.0})
    rows = compare([ours], paper)
    assert [(r.machine, r.order) for r in rows] == [("m", 7), ("m", 511)]  # p = 63: the paper has none
    p7, p511 = rows
    assert p7.ratios["GEMM/FUSED_TC"] == (1.5, 2.0) and p7.ratios["FUSED_TC/FUSED"] == (2.0, 2.0 / 3.0)
    assert p7.ratios["GEMM_FUSED/GEMM_CUTE"] == (None, None)
    # FUSED_TC16 is not one of the paper's paths: the fastest is among the common ones
    assert (p7.ours_fastest, p7.paper_fastest) == ("FUSED", "FUSED_TC")
    assert (p511.ours_fastest, p511.paper_fastest) == ("FUSED_TC", "GEMM")
    s = summary(rows)
    assert s["ratios"] == 3 and s["same_side_of_1"] == 1 and s["fastest_agrees"] == 0 and s["orders"] == 2
    assert s["median_abs_log_ratio_pct"] == pytest.approx(100 * abs(math.log(2.0 / 0.8)))  # of 0.29, 0.92, 1.10


def test_restricted_predictions_and_other_machines_are_refused():
    paper = {"m": {"FUSED": {7: 3.0}}}
    with pytest.raises(ComposerError, match="whole machines"):
        compare([_document("m", {("FUSED", 7): 1.0}, sms=66)], paper)
    with pytest.raises(ComposerError, match="no prediction is for a machine"):
        compare([_document("other", {("FUSED", 7): 1.0})], paper)
    with pytest.raises(ComposerError, match="predicted twice"):
        compare([_document("m", {("FUSED", 7): 1.0}), _document("m", {("FUSED", 7): 2.0})], paper)
