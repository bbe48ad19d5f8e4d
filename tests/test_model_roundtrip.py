"""`composer model fit | predict | score` on saved data, as the prospective balance-axis protocol
runs them (calibrate at 132 SMs, predict restricted counts with the model's hash, score the
measured sweep), plus the S/E screen on a synthetic ratio family and every bad input's one line."""

from __future__ import annotations

import json
import math

import pytest

from composer.cli.main import main
from composer.model.score import score

from tests.model_fixtures import MACHINES_FILE, kernel_row, write_bench, write_build, write_profile

FACE = "fused_face_flux_nq64"


@pytest.fixture(autouse=True)
def _worktree_machines(monkeypatch):
    monkeypatch.setenv("COMPOSER_MACHINES", str(MACHINES_FILE))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Profiles of FUSED and FUSED_TC at p = 63 on the full H200 and an sm_90 build of their kernels
    (and of FUSED_TC16's, at 16x8x4)."""
    root = tmp_path_factory.mktemp("model")
    face = dict(name=FACE, dram=1.6e9, cycles=1.2e6, issue=1e7)
    write_profile(root / "prof", "FUSED_TC", 63, [
        kernel_row(**face),
        kernel_row(name="fused_tc_p63_s0_x", dmma=5.28e7, fp64=1.32e6, cycles=2e6, dram=1e9,
                   budget=1.02 * (4 * 5.28e7 + 0.5 * 1.32e6))])
    write_profile(root / "prof", "FUSED", 63, [
        kernel_row(**face),
        kernel_row(name="fused_p63_k0_xyz", fp64=3.2e8, lsu=1.6e8, cycles=2.4e6, dram=1e9)])
    write_build(root / "build", "sm_90", {FACE: None, "fused_tc_p63_s0_x": "8x8x4", "fused_p63_k0_xyz": None,
                                          "fused_tc16_p63_s0_x": "16x8x4"}, root / "nvrtc")
    return root


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_fit_predict_score_round_trip(saved, tmp_path, capsys):
    model = tmp_path / "model.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--out", str(model), "--json"]) == 0
    fitted = _json(capsys)
    assert fitted["closure"]["n"] == 1 and fitted["closure"]["median"] == pytest.approx(1.02)
    assert json.loads(model.read_text())["hash"] == fitted["model_hash"]

    predictions = {}
    for sms in (132, 66):
        out = tmp_path / f"p{sms}.json"
        assert main(["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build"),
                     "--sms", str(sms), "--as", "FUSED_TC16=FUSED_TC", "--out", str(out), "--json"]) == 0
        predictions[sms] = _json(capsys)
        assert predictions[sms]["model_hash"] == fitted["model_hash"]
        assert json.loads(out.read_text())["hash"] == predictions[sms]["hash"]
    totals = {sms: {(p["path"], p["order"]): p["seconds"] for p in doc["paths"]} for sms, doc in predictions.items()}
    assert set(totals[132]) == {("FUSED", 63), ("FUSED_TC", 63), ("FUSED_TC16", 63)}
    x132 = next(k for p in predictions[132]["paths"] if p["path"] == "FUSED_TC" for k in p["kernels"] if k["role"] == "s0_x")
    x66 = next(k for p in predictions[66]["paths"] if p["path"] == "FUSED_TC" for k in p["kernels"] if k["role"] == "s0_x")
    face132 = next(k for p in predictions[132]["paths"] if p["path"] == "FUSED_TC" for k in p["kernels"] if k["role"] == "face_flux")
    # at full size the calibration is reproduced exactly; half the SMs double the FP64-bound kernel
    assert x132["seconds"] == pytest.approx(2e6 / 1.98e9) and x66["seconds"] == pytest.approx(2 * x132["seconds"])
    assert face132["seconds"] == pytest.approx(1.2e6 / 1.98e9)
    tc16 = next(p for p in predictions[132]["paths"] if p["path"] == "FUSED_TC16")
    assert tc16["source_path"] == "FUSED_TC" and tc16["kernels"][1]["target_name"] == "fused_tc16_p63_s0_x"
    fastest = {f["order"]: f["path"] for f in predictions[66]["fastest"]}
    assert fastest == {63: min(("FUSED", "FUSED_TC", "FUSED_TC16"), key=lambda p: totals[66][(p, 63)])}

    # measured: the prediction at 132 SMs exactly, at 66 SMs 10 % slower for FUSED_TC
    full = write_bench(tmp_path / "bench132", totals[132])
    cut = write_bench(tmp_path / "bench66", {**totals[66], ("FUSED_TC", 63): 1.1 * totals[66][("FUSED_TC", 63)]}, sms=66)
    score_file = tmp_path / "score.json"
    assert main(["model", "score", "--predictions", str(tmp_path / "p132.json"), str(tmp_path / "p66.json"),
                 "--measured", str(full), str(cut), "--out", str(score_file), "--json"]) == 0
    result = _json(capsys)
    errors = {(c["target"], c["path"]): c["error_pct"] for c in result["cells"]}
    assert errors[("h200", "FUSED_TC")] == pytest.approx(0.0, abs=1e-9)
    assert errors[("h200@66", "FUSED_TC")] == pytest.approx(100 * math.log(1 / 1.1))
    assert result["summary"]["paths"]["n"] == 6 and result["model_hashes"] == [fitted["model_hash"]]
    assert result["measured_without_prediction"] == [] and result["predicted_without_measurement"] == []
    other = write_bench(tmp_path / "bench34", {("FUSED", 63): 1.0}, sms=34)
    assert main(["model", "score", "--predictions", str(tmp_path / "p66.json"), "--measured", str(cut), str(other),
                 "--json"]) == 0
    partial = _json(capsys)
    assert partial["measured_without_prediction"] == [f"FUSED p=63 at 34 SMs ({other / 'summary.json'})"]
    assert json.loads(score_file.read_text())["family_errors"] == result["family_errors"]


def test_s_over_e_on_a_synthetic_family():
    """Three targets of one family A/B: each cell's family error is the median over the other two
    targets' ratio errors; S/E = |ln r_pred| / that."""
    def doc(label, sms, a, b):
        return {"model_hash": "m", "target": {"label": label, "sm_count": sms, "full_sm_count": 132},
                "paths": [{"path": "FUSED", "order": 255, "seconds": a, "kernels": []},
                          {"path": "FUSED_TC", "order": 255, "seconds": b, "kernels": []}]}

    from composer.model.measured import MeasuredCell

    preds = [doc("h200", 132, 1.30, 1.0), doc("h200@96", 96, 1.20, 1.0), doc("h200@34", 34, 0.98, 1.0)]
    measured_ratio = {132: 1.25, 96: 1.10, 34: 1.05}
    measured = [MeasuredCell(path, 255, None if sms == 132 else sms, seconds, "t")
                for sms, r in measured_ratio.items() for path, seconds in (("FUSED", r), ("FUSED_TC", 1.0))]
    result = score(preds, measured)
    by = {r["target"]: r for r in result["ratios"]}
    err = {t: abs(100 * math.log(p / m)) for t, p, m in (("h200", 1.30, 1.25), ("h200@96", 1.20, 1.10),
                                                         ("h200@34", 0.98, 1.05))}
    assert by["h200"]["family_error_pct"] == pytest.approx((err["h200@96"] + err["h200@34"]) / 2)
    assert by["h200@96"]["se"] == pytest.approx(100 * math.log(1.20) / ((err["h200"] + err["h200@34"]) / 2))
    assert [by[t]["sign_right"] for t in ("h200", "h200@96", "h200@34")] == [True, True, False]
    assert [by[t]["screened"] for t in ("h200", "h200@96", "h200@34")] == [True, True, False]
    s = result["summary"]["ratios"]
    assert (s["n"], s["sign_right"], s["screened"], s["screened_right"]) == (3, 2, 2, 2)
    choice = {c["target"]: c for c in result["choices"]}
    assert choice["h200@34"]["predicted"] == "FUSED" and choice["h200@34"]["measured"] == "FUSED_TC"
    assert choice["h200@34"]["loss_pct"] == pytest.approx(5.0)


def _one_error_line(capsys, *words):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for word in words:
        assert word in err[0], err[0]


def test_bad_inputs_are_one_line(saved, tmp_path, capsys):
    model = tmp_path / "model.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--out", str(model)]) == 0
    capsys.readouterr()
    real = str(__import__("tests.model_fixtures", fromlist=["REPO"]).REPO / "docs" / "data" / "h200_s5" / "ncu")
    cases = [
        (["model", "fit", "--profiles", real, "--out", str(tmp_path / "x.json")],
         ("sm__inst_executed_pipe_tensor_op_dmma.sum",)),
        (["model", "fit", "--profiles", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x.json")],
         ("no such profile directory",)),
        (["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build"),
          "--sms", "97"], ("97 SMs is odd",)),
        (["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build"),
          "--sms", "134"], ("134 SMs requested but machine h200 has 132",)),
        (["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(tmp_path)],
         ("no manifest.json",)),
        (["model", "predict", "--model", str(model), "--machine", "gb200", "--build", str(saved / "build")],
         ("built for sm_90, the machine is sm_100",)),
        (["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build"),
          "--as", "FUSED_DFMA=FUSED_TC"], ("FUSED_DFMA p=63 s0_x (fused_tc_p63_s0_x)",)),
        (["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build"),
          "--as", "FUSED_TC16"], ("--as expects PATH=CALIBRATED",)),
        (["model", "score", "--predictions", str(model), "--measured", str(tmp_path)],
         ("not a composer.model-predictions v1 file",)),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        _one_error_line(capsys, *words)
    raw = json.loads(model.read_text())
    raw["kernels"][0]["eta"] *= 0.5
    model.write_text(json.dumps(raw))
    assert main(["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build")]) == 2
    _one_error_line(capsys, "does not match its hash")


def test_skip_missing_leaves_out_the_cells_the_build_lacks_and_lists_them(saved, tmp_path, capsys):
    """FUSED_DFMA predicted from FUSED_TC needs fused_dfma_p63_s0_x, which this build lacks: without
    --skip-missing the prediction stops naming it; with it the other paths are predicted, the cell is
    listed in the file's 'skipped', and the predictions are those of a run without the alias."""
    model = tmp_path / "model.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--out", str(model)]) == 0
    base = ["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build")]
    assert main(base + ["--out", str(tmp_path / "plain.json")]) == 0
    capsys.readouterr()
    out = tmp_path / "p.json"
    assert main(base + ["--as", "FUSED_DFMA=FUSED_TC", "--skip-missing", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["skipped"] == ["FUSED_DFMA p=63: s0_x (fused_tc_p63_s0_x)"]
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert {(p["path"], p["seconds"]) for p in doc["paths"]} == {(p["path"], p["seconds"]) for p in plain["paths"]}
    assert "skipped" not in plain  # files made without the flag hash as before


def test_a_restricted_profile_scales_the_calibrated_binary_and_not_a_transferred_one(saved, tmp_path, capsys):
    """FUSED_TC's x kernel ran 2.6x slower on 66 SMs (FP64-bound: 2x from its roof, the rest latency):
    the norm form fits it a latency demand, the 66-SM prediction reproduces that run, and FUSED_TC16
    predicted from FUSED_TC's counters (another binary) is priced by the eta alone, as a model without
    the restricted profile prices it (session 8's max form gave it the calibrated binary's latency term)."""
    face = dict(name=FACE, dram=1.6e9, cycles=1.2e6, issue=1e7)
    write_profile(tmp_path / "prof66", "FUSED_TC", 63, [
        kernel_row(**face),
        kernel_row(name="fused_tc_p63_s0_x", dmma=5.28e7, fp64=1.32e6, cycles=5.2e6, dram=1e9,
                   budget=1.02 * (4 * 5.28e7 + 0.5 * 1.32e6))], sms=66)
    out, fitted = {}, None
    for form in ("norm", "bare"):
        model = tmp_path / f"model_{form}.json"
        restricted = [str(tmp_path / "prof66")] if form == "norm" else []
        assert main(["model", "fit", "--profiles", str(saved / "prof"), *restricted, "--overlap", "4",
                     "--out", str(model), "--json"]) == 0
        summary = _json(capsys)
        assert summary["latency_form"] == "interp"  # the default (session 12; one restricted run: as norm)
        fitted = summary if form == "norm" else fitted
        for sms in (132, 66):
            assert main(["model", "predict", "--model", str(model), "--machine", "h200", "--build",
                         str(saved / "build"), "--sms", str(sms), "--as", "FUSED_TC16=FUSED_TC",
                         "--out", str(tmp_path / f"{form}{sms}.json"), "--json"]) == 0
            out[form, sms] = {(p["path"], k["role"]): k for p in _json(capsys)["paths"] for k in p["kernels"]}
    x = [k for k in fitted["kernels"] if k["role"] == "s0_x" and k["machine"] == "h200"]
    norm_x = json.loads((tmp_path / "model_norm.json").read_text())["kernels"]
    scaling = next(k["sm_scaling"] for k in norm_x if k["role"] == "s0_x" and k["machine"] == "h200")
    assert x and scaling["latency_sm_cycles"] > 0 and scaling["fitted_from"] == ["h200@66"]
    assert out["norm", 132][("FUSED_TC", "s0_x")]["seconds"] == pytest.approx(2e6 / 1.98e9, rel=1e-9)
    assert out["norm", 66][("FUSED_TC", "s0_x")]["seconds"] == pytest.approx(5.2e6 / 1.98e9, rel=1e-5)
    for sms in (132, 66):  # the transferred binary: as without the restricted profile
        assert out["norm", sms][("FUSED_TC16", "s0_x")]["seconds"] == pytest.approx(
            out["bare", sms][("FUSED_TC16", "s0_x")]["seconds"], rel=1e-12)
