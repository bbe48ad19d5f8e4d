"""``composer report`` on the CPU: rendered from the shipped data in docs/data, every plotted number
against its CSV cell, numbers against the raw runs and against docs/results.md's hand-copied
figures, the sections that appear only with their data, bad input, and the page in headless
Chromium (screenshot, no console errors, every figure decoded)."""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from pathlib import Path

import pytest

from composer.bench.records import RunRecord
from composer.bench.results import ResultStore
from composer.cli.main import main
from composer.report import NoRunsError, build_report
from composer.report.render import FIGURES, HTML_NAME, INDEX_NAME, MARKDOWN_NAME, TABLES

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build_report([DATA], out, command="composer report docs/data"), out


def read_csv(out: Path, name: str) -> list[dict[str, str]]:
    with open(out / TABLES / f"{name}.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def figure_files(out: Path) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted((out / FIGURES).glob("*.json"))]


def test_every_plotted_number_is_its_table_cell(shipped):
    report, out = shipped
    figures = figure_files(out)
    assert {f["name"] for f in figures} >= {"landscape", "ratios", "ablations", "roofline", "overlap"}
    tables = {}
    checked = 0
    for figure in figures:
        assert (out / FIGURES / f"{figure['name']}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        for panel in figure["panels"]:
            assert panel["xlabel"] and panel["ylabel"]  # units on every axis
            for series in panel["series"]:
                if series["derived"]:
                    assert (out / TABLES / f"{series['source']}.csv").is_file()
                    continue
                for point in series["points"]:
                    ref = point["ref"]
                    rows = tables.setdefault(ref["table"], read_csv(out, ref["table"]))
                    row = rows[ref["row"]]
                    assert float(row[ref["y"]]) == point["y"], (figure["name"], series["label"], ref)
                    assert float(row[ref["x"]]) == point["x"], (figure["name"], series["label"], ref)
                    checked += 1
    assert checked > 150


def test_one_colour_per_path_across_figures(shipped):
    _, out = shipped
    colours: dict[str, set[str]] = {}
    for figure in figure_files(out):
        for panel in figure["panels"]:
            for series in panel["series"]:
                if series["path"] and not series["color"]:
                    colours.setdefault(series["path"], set()).add(series["path"])
    from composer.report.palette import path_color

    assert len({path_color(p) for p in colours}) == len(colours)  # distinct paths, distinct colours


def _device_medians_us(run_dir: Path) -> dict[tuple[str, int], float]:
    """Recomputed from runs.jsonl alone: per (path, order) run as scheduled (a fused path on the kernels
    of the NVRTC its table names, where the run recorded their origin), the median over rounds of the
    CUDA-event sum over the calls it covers."""
    import re

    from composer.fused.config import fused_config

    def as_scheduled(rec: dict) -> bool:
        versions = set(re.findall(r"nvrtc (\d+\.\d+)", rec.get("kernel_origin") or ""))
        return not versions or versions == {fused_config(rec["path"], rec["order"]).nvrtc}

    values: dict[tuple[str, int], list[float]] = {}
    for line in (run_dir / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)["record"]
        if rec["error"] is None and rec["options"] == {"graph": False} and as_scheduled(rec):
            values.setdefault((rec["path"], rec["order"]), []).append(rec["device_sum_ms"] * 1e3 / rec["device_intervals"])
    return {k: statistics.median(v) for k, v in values.items()}


def _first_date(run_dir: Path) -> str:
    return json.loads((run_dir / "provenance.json").read_text())["sessions"][0]["date_utc"]


def test_landscape_cells_are_the_newest_runs_medians(shipped):
    report, out = shipped
    labels = {s.label: s.directory for s in report.data.inputs.bench}
    runs = {d: _device_medians_us(d) for d in labels.values()}
    checked = 0
    for row in read_csv(out, "landscape"):
        order = int(row["p"])
        values = {}
        for key, value in row.items():
            if not key.endswith("_source") or not value:
                continue
            path = key[: -len("_source")]
            chosen = labels[value]
            assert float(row[f"{path}_us"]) == pytest.approx(runs[chosen][(path, order)], rel=1e-12)
            newer = [d for d, cells in runs.items() if (path, order) in cells and _first_date(d) > _first_date(chosen)]
            assert newer == [], (path, order, chosen, newer)  # no newer run measured the cell
            values[path] = float(row[f"{path}_us"])
            checked += 1
        assert row["fastest"] == min(values, key=values.get), order
    assert checked > 40


#: The runs docs/results.md section 1 takes its device-time table from (runs a, c-h) and the all-CuTe
#: runs of its section 5: a report of these alone gives the figures results.md copied by hand.
RESULTS_MD_RUNS = ("bench_h200_low", "bench_h200_high", "h200_s3/bench_gemm_cute", "h200_s4/bench_p7_p127",
                   "h200_s4/bench_gemm_cute_shipped", "h200_s5/bench_call5", "h200_s5/bench_p767_call6",
                   "h200_s5/bench_call7", "h200_s4/bench_gemm_cute_allcute_16x8x4",
                   "h200_s4/bench_gemm_cute_allcute_8x8x4")


def test_figures_results_md_copied_by_hand(tmp_path):
    build_report([DATA / d for d in RESULTS_MD_RUNS], tmp_path)
    rows = {int(r["p"]): r for r in read_csv(tmp_path, "landscape")}
    # docs/results.md section 1, "Device µs per tendency call"
    for (path, order), expected in {("FUSED_TC16", 255): 856.32, ("GEMM", 767): 53129, ("GEMM_CUTE", 575): 18150,
                                    ("FUSED", 7): 472.12, ("FUSED_TC16", 127): 638.68, ("EINSUM", 511): 21947.5}.items():
        assert float(rows[order][f"{path}_us"]) == pytest.approx(expected, abs=0.006 if expected < 1e3 else 0.6)
    ratios = {(r["ratio"], int(r["p"])): r for r in read_csv(tmp_path, "ratios")}
    # section 1, "Ratios (device time, within one run)"
    for (name, order), expected in {("FUSED_TC16/GEMM", 255): 0.862, ("FUSED_TC/GEMM", 511): 1.414,
                                    ("FUSED_DFMA/FUSED_TC", 767): 1.980, ("FUSED_TC/FUSED_TC16", 63): 1.084}.items():
        row = ratios[(name, order)]
        assert row["pairing"] == "same run"
        assert float(row["value"]) == pytest.approx(expected, abs=0.0006)
    ablations = {(r["ratio"], int(r["p"])): r for r in read_csv(tmp_path, "ablations")}
    # section 5: all-CuTe 8x8x4 / cuBLAS 1.609 at p = 511, 16x8x4 1.102 (each within its run)
    assert float(ablations[("all-CuTe GEMM_CUTE (8x8x4) / cuBLAS GEMM", 511)]["value"]) == pytest.approx(1.609, abs=6e-4)
    mma = ablations[("CuTe GEMMs 8x8x4 / 16x8x4 (all on CuTe)", 511)]
    assert mma["pairing"] == "via GEMM" and float(mma["value"]) == pytest.approx(1.609 / 1.102, rel=2e-3)


def test_absolute_table_has_stage_and_device_of_one_cell(shipped):
    _, out = shipped
    cells = {(r["path"], int(r["p"])): r for r in read_csv(out, "cells") if not r["variant"]}
    for row in read_csv(out, "absolute"):
        for key, value in row.items():
            if key.endswith("_stage_us") and value:
                order = int(key[1:].split("_")[0])
                cell = cells[(row["path"], order)]
                assert float(value) == float(cell["stage_us"])
                assert float(row[f"p{order}_device_us"]) == float(cell["device_us"])
                assert float(value) > float(row[f"p{order}_device_us"])  # the stage holds the call
    from composer.report.sections.absolute import cell_text

    gemm = cells[("GEMM", 767)]
    text = cell_text(float(gemm["stage_us"]), float(gemm["device_us"]))
    assert text.endswith(" ms") and f"| {text} |" in (out / MARKDOWN_NAME).read_text()  # the paper's "ms / ms" cells


def test_overlap_from_valid_graph_files_only(shipped):
    report, out = shipped
    rows = {(r["path"], int(r["p"])): r for r in read_csv(out, "overlap")}
    # docs/results.md section 8: GEMM p = 31 overlap gained 26.5 µs, 2.80 %
    assert float(rows[("GEMM", 31)]["overlap_us"]) == pytest.approx(26.5, abs=0.06)
    assert float(rows[("GEMM", 31)]["overlap_pct"]) == pytest.approx(2.80, abs=0.006)
    assert all("call2_invalid" not in f.display for f in report.data.inputs.files)
    assert any("call2_invalid" in s for s in report.data.inputs.skipped)


def test_outputs_and_provenance(shipped):
    report, out = shipped
    index = json.loads((out / INDEX_NAME).read_text())
    for section in index["sections"]:
        for name in section["tables"]:
            assert (out / TABLES / f"{name}.csv").is_file()
    assert any("commits are mixed" in w for w in index["warnings"])  # 15 commits in docs/data: labelled
    sources = read_csv(out, "sources")
    assert {r["gpu"] for r in sources if r["kind"] == "bench"} == {"NVIDIA H200"}
    assert any(r["driver"] == "580.159.04" for r in sources)
    clocks = read_csv(out, "clocks")
    assert any(float(r["power_capped_fraction"] or 0) > 0.5 for r in clocks)  # p >= 511 under the power cap
    html = (out / HTML_NAME).read_text()
    assert "http://" not in html and "https://" not in html  # self-contained
    assert html.count("data:image/png;base64,") == len(report.rendered.figures)



#: The prospective balance tests shipped in docs/data: (predictions glob, the runs they were scored
#: against, the score file, how many cells at least the report takes from those runs). Session 6's runs were re-measured at p = 255 by session 8, so its cells
#: are checked where the report still takes session 6's run.
BALANCE_TESTS = (
    ("h200_s6/model/predict_h200_sms", "/h200_s6/call4/bal/", "h200_s6/model/score_balance.json", 9),
    ("h200_s8/model/predict_h200_sms", "/h200_s8/call3/bal/", "h200_s8/model/score_balance.json", 90),
    # its 132-SM cells were re-measured by session 9's test 3 (b63)
    ("h200_s8/model/pro2/predict_h200_sms", "/h200_s8/call6/bal/", "h200_s8/model/pro2/score_balance2.json", 56),
    ("h200_s9/model/pro3/predict_h200_sms", "/h200_s9/call2/bal/", "h200_s9/model/pro3/score_balance3.json", 84),
    ("h200_s9/model/pro3b/predict_h200_sms", "/h200_s9/call4/bal/", "h200_s9/model/pro3b/score_balance3b.json", 84),
    ("h200_s11/model/pro5/predict_h200_sms", "/h200_s11/call1/bal/", "h200_s11/model/pro5/score_balance5.json", 126),
    ("h200_s11/model/pro6/predict_h200_sms", "/h200_s11/call6/bal/", "h200_s11/model/pro6/score_balance6.json", 126),
    ("h200_s12/model/pro7/predict_h200_sms", "/h200_s12/call", "h200_s12/model/pro7/score_balance7.json", 168),
    ("h200_s13/model/pro8/predict_h200_sms", "/h200_s13/call2/bal/", "h200_s13/model/pro8/score_balance8.json", 126),
    ("h200_s13/model/pro9/predict_h200_sms", "/h200_s13/call4/bal/", "h200_s13/model/pro9/score_balance9.json", 126),
    ("h200_s14/model/pro10/predict_h200_sms", "/h200_s14/call3/bal/", "h200_s14/model/pro10/score_balance10.json", 126),
)


@pytest.mark.parametrize("predictions,runs,score_file,least", BALANCE_TESTS)
def test_model_section_agrees_with_composer_model_score(shipped, predictions, runs, score_file, least):
    """The shipped balance-axis predictions matched with the report's own cells give exactly the
    measured values and errors `composer model score` wrote, wherever the report's current cell is
    one of the runs that test scored; elsewhere a later run measured the cell."""
    report, out = shipped
    score = json.loads((DATA / score_file).read_text())
    scored = {(c["target"], c["path"], c["order"]): c for c in score["cells"]}
    files = {f.label for f in report.data.inputs.of_kind("predictions") if predictions in f.display.replace("\\", "/")}
    rows = [r for r in read_csv(out, "predicted") if r["predictions"] in files]
    assert len(rows) >= len(scored) > 0
    benches = {b.label: b for b in report.data.inputs.bench}
    scored_runs = [b for b in benches.values() if runs in b.display.replace("\\", "/")]
    newest = max(b.date for b in scored_runs)
    agreed = 0
    for row in rows:
        if not row["measured_source"]:
            continue  # predicted, never measured (the p = 511 fused paths at 96, 66, 34 SMs in session 8)
        key = (row["target"], row["path"], int(row["p"]))
        source = benches[row["measured_source"]]
        if source in scored_runs:
            cell = scored[key]
            assert float(row["measured_us"]) == pytest.approx(cell["measured_s"] * 1e6, rel=1e-12)
            assert float(row["error_pct"]) == pytest.approx(cell["error_pct"], rel=1e-9)
            agreed += 1
        else:  # a later run re-measured the cell, or the test left it unmeasured and an earlier run has it
            assert source.date > newest or key not in scored, (row, source.display)
    assert agreed >= least
    summary = next(r for r in read_csv(out, "score_summary") if score_file in r["score"])
    assert float(summary["median_abs_pct"]) == score["summary"]["paths"]["median_abs_pct"]


def test_balance_axis_from_the_restricted_runs(shipped):
    _, out = shipped
    ratios = {(r["ratio"], int(r["p"]), int(r["sms"]), r["kind"]): r for r in read_csv(out, "balance_ratios")}
    run = DATA / "h200_s8" / "call3" / "bal" / "lo_sms34"
    medians = {}
    for line in (run / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)["record"]
        if rec["order"] == 255:
            medians.setdefault(rec["path"], []).append(rec["device_sum_ms"] / rec["device_intervals"])
    expected = statistics.median(medians["GEMM"]) / statistics.median(medians["FUSED_TC"])
    row = ratios[("GEMM/FUSED_TC", 255, 34, "measured")]
    assert float(row["value"]) == pytest.approx(expected, rel=1e-12)
    assert float(row["bytes_per_sm_cycle"]) == pytest.approx(4.8e12 / (34 * 1.98e9), rel=1e-12)
    assert ("GEMM/FUSED_TC", 255, 34, "predicted") in ratios
    assert {int(r["sms"]) for r in read_csv(out, "balance")} == {22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46, 48,
                                                                 50, 52, 54, 56, 58, 60, 62, 66, 70, 76, 78, 80, 88, 90,
                                                                 94, 96, 98, 100, 106, 110, 112, 116, 120, 124, 132}


# --- synthetic inputs: the sections that appear with their data, bad input ------------------------------


def _runs(directory: Path, cells: dict[tuple[str, int], float], sms: int | None = None, rounds: int = 4) -> None:
    store = ResultStore(directory)
    store.write_provenance({"date_utc": f"2026-12-0{2 if sms else 1}T00:00:00+00:00", "git": {"commit": "a" * 40},
                            "nvml": {"driver_version": "580", "gpus": [{"name": "NVIDIA H200", "compute_capability": [9, 0],
                                                                         "memory_total_bytes": 150754820096}]},
                            "device": "Device(0: NVIDIA H200, sm_90, 132 SMs)"})
    for (path, order), seconds in cells.items():
        for r in range(rounds):
            t = seconds * (1 + 0.001 * r)
            store.append(RunRecord(path=path, order=order, grid=(1, 1, 1), round_index=r, stage_wall_s=1.1 * t,
                                   device_sum_ms=t * 1e3 * 57, device_intervals=57, end_to_end_s=3.3 * t,
                                   timed_stages=57, warmup_steps=1, nstep=20,
                                   options={"graph": False, **({"sms": sms} if sms else {})}))


def test_model_and_balance_sections_appear_with_their_files(tmp_path):
    _runs(tmp_path / "full", {("GEMM", 255): 1e-3, ("FUSED_TC", 255): 1.2e-3})
    _runs(tmp_path / "sms66", {("GEMM", 255): 1.6e-3, ("FUSED_TC", 255): 1.5e-3}, sms=66)
    predictions = {"schema": "composer.model-predictions", "version": 1,
                   "target": {"machine": "h200", "label": "h200@66", "sm_count": 66, "full_sm_count": 132},
                   "paths": [{"path": "GEMM", "order": 255, "seconds": 1.7e-3},
                             {"path": "FUSED_TC", "order": 255, "seconds": 1.4e-3}],
                   "fastest": [{"order": 255, "path": "FUSED_TC", "seconds": 1.4e-3, "paths": 2, "se": 1.3,
                                "screened": True}]}
    (tmp_path / "pred.json").write_text(json.dumps(predictions))
    other = {**predictions, "target": {"machine": "gb200", "label": "gb200", "sm_count": 152, "full_sm_count": 152}}
    (tmp_path / "pred_gb200.json").write_text(json.dumps(other))  # another machine: nothing of it was measured
    out = tmp_path / "report"
    report = build_report([tmp_path], out)
    ids = [s.id for s in report.sections]
    assert "model" in ids and "balance" in ids
    rows = read_csv(out, "predicted")
    assert all(not r["measured_us"] for r in rows if r["target"] == "gb200")
    predicted = {r["path"]: r for r in rows if r["target"] == "h200@66"}
    median = 1.6e-3 * 1.0015  # of the sms=66 run's four rounds
    assert float(predicted["GEMM"]["measured_us"]) == pytest.approx(median * 1e6, rel=1e-12)
    assert float(predicted["GEMM"]["error_pct"]) == pytest.approx(100 * math.log(1.7e-3 / median), rel=1e-9)
    fastest = next(r for r in read_csv(out, "predicted_fastest") if r["target"] == "h200@66")
    assert fastest["predicted"] == fastest["measured"] == "FUSED_TC" and fastest["right"] == "true"
    balance = {(r["kind"], int(r["sms"])): r for r in read_csv(out, "balance_ratios")}
    assert float(balance[("measured", 66)]["value"]) == pytest.approx(1.6 / 1.5, rel=1e-12)
    assert float(balance[("measured", 132)]["value"]) == pytest.approx(1.0 / 1.2, rel=1e-12)
    assert float(balance[("predicted", 66)]["value"]) == pytest.approx(1.7 / 1.4, rel=1e-12)
    x66 = float(balance[("measured", 66)]["bytes_per_sm_cycle"])
    assert x66 == pytest.approx(4.8e12 / (66 * 1.98e9), rel=1e-12)  # datasheet HBM over active SMs x clock


def test_no_runs_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "notes.json").write_text("[1, 2]")
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no benchmark runs under")
    with pytest.raises(NoRunsError):
        build_report([tmp_path / "empty"], tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_cli_writes_the_report(tmp_path, capsys):
    _runs(tmp_path / "runs", {("GEMM", 7): 2e-3, ("FUSED", 7): 5e-4})
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "r"), "--metric", "stage_wall_s"]) == 0
    assert "report.html" in capsys.readouterr().out
    rows = read_csv(tmp_path / "r", "landscape")
    assert float(rows[0]["FUSED_us"]) == pytest.approx(1.1 * 5e-4 * 1.0015 * 1e6, rel=1e-12)  # the stage metric


# --- the page in a browser ---------------------------------------------------------------------------------


def test_page_opens_in_headless_chromium(shipped, tmp_path):
    from tests.headless import find_browser, open_page

    browser = find_browser()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("no chromium on this machine (apt-get install -y chromium)")
    report, out = shipped
    result = open_page(out / HTML_NAME, browser)
    assert result.errors == [], result.messages
    assert result.images and all(result.images) and len(result.images) == len(report.rendered.figures)
    assert result.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(result.screenshot) > 50_000
    (tmp_path / "screenshot.png").write_bytes(result.screenshot)


def test_paper_comparison_is_what_composer_model_paper_wrote(shipped):
    """The report's table of our predictions next to the paper's ratios agrees with the shipped output
    of `composer model paper` on the session-9 predictions (the newest of every machine and order)."""
    _, out = shipped
    rows = {(r["machine"], int(r["p"])): r for r in read_csv(out, "paper_comparison")}
    written = json.loads((DATA / "h200_s9/model/machines/paper_comparison.json").read_text())
    assert len(rows) == len(written["rows"]) == 26
    for w in written["rows"]:
        r = rows[(w["machine"], w["order"])]
        assert (r["fastest_ours"], r["fastest_paper"]) == (w["ours_fastest"], w["paper_fastest"])
        for name, sides in w["ratios"].items():
            for side, value in (("ours", sides["ours_predicted"]), ("paper", sides["paper_measured"])):
                assert (r[f"{name}_{side}"] == "") == (value is None)
                if value is not None:
                    assert float(r[f"{name}_{side}"]) == pytest.approx(value, rel=1e-12)
