"""The SM-count form of session 11 (composer.model.sm_scaling): a latency demand inside the k-norm
and an eta exponent in the SM count, fitted per kernel from its full and restricted calibrations."""

from __future__ import annotations

import json
import math

import pytest

from composer.arch.machines import get_machine
from composer.model.calibrate import Model, attach_sm_scaling, calibrate_kernels, fit
from composer.model.capacity import capacities
from composer.model.counters import kernel_counters
from composer.model.demand import combined, demands
from composer.model.errors import ModelError
from composer.model.predict import _kernel
from composer.model.sm_scaling import RestrictedRun, SmScaling, fit_sm_scaling

from tests.model_fixtures import kernel_row

H200 = get_machine("h200")
K = 4.0


def _gemm(cycles: float):
    """A DRAM-bound library kernel without mma (its roof keeps its time on fewer SMs, so a latency
    demand is what tells a slower restricted run apart)."""
    return kernel_counters(kernel_row(name="gemmSN_NN_kernel", dmma=0, fp64=1e5, issue=1e7, alu=1e5, fma=1e5,
                                      lsu=1e7, l2=1e8, dram=1e9, cycles=cycles), 0, "test")


def _sm_bound(cycles: float):
    """A kernel bound by SM-side demands only (they and a latency demand all scale as 1/N)."""
    return kernel_counters(kernel_row(name="gemmSN_NN_kernel", dmma=0, fp64=1e5, issue=4e9, alu=1e5, fma=1e5,
                                      lsu=1e5, l2=1e5, dram=1e5, cycles=cycles), 0, "test")


def _runs(counts, truth: SmScaling, sms: list[int]) -> tuple[float, dict, list[RestrictedRun]]:
    """Elapsed cycles a kernel following ``truth`` exactly would show on 132 and on ``sms``."""
    full = capacities(H200)
    d_full = demands(counts, {}, full).cycles
    runs = []
    for n in sms:
        d = demands(counts, {}, capacities(H200, n)).cycles
        runs.append(RestrictedRun(f"h200@{n}", n, truth.cycles(d, n, K), d))
    return truth.cycles(d_full, 132, K), d_full, runs


def _truth(lam: float, eta: float, gamma: float) -> SmScaling:
    return SmScaling(latency_sm_cycles=lam, eta=eta, eta_sm_exponent=gamma, full_sm_count=132,
                     fitted_from=(), rms_log_error=0.0)


def test_one_slower_restricted_run_gives_a_latency_demand_and_no_eta_exponent():
    counts = _gemm(1).counts
    roof = demands(counts, {}, capacities(H200)).roof
    full_elapsed, d_full, runs = _runs(counts, _truth(lam=1.5 * roof * 132, eta=1.1, gamma=0.0), [66])
    s = fit_sm_scaling(full_elapsed, d_full, 132, runs, K)
    assert s.eta_sm_exponent == pytest.approx(0.0, abs=1e-3)
    assert s.latency_sm_cycles == pytest.approx(1.5 * roof * 132, rel=1e-4)
    assert s.eta == pytest.approx(1.1, rel=1e-4)
    assert s.rms_log_error < 1e-6 and s.fitted_from == ("h200@66",)
    # the fit reproduces both calibrations
    assert s.cycles(d_full, 132, K) == pytest.approx(full_elapsed, rel=1e-9)
    assert s.cycles(runs[0].demands, 66, K) == pytest.approx(runs[0].elapsed_cycles, rel=1e-6)


def test_one_faster_restricted_run_gives_an_eta_exponent_and_no_latency_demand():
    """The p = 7 surface flux's case: 66 SMs ran faster than its eta x k-norm of the demands there."""
    counts = _gemm(1).counts
    full = capacities(H200)
    d_full = demands(counts, {}, full).cycles
    d66 = demands(counts, {}, capacities(H200, 66)).cycles
    full_elapsed = 1.2 * combined(d_full, K)
    faster = 0.8 * 1.2 * combined(d66, K)
    s = fit_sm_scaling(full_elapsed, d_full, 132, [RestrictedRun("h200@66", 66, faster, d66)], K)
    assert s.latency_sm_cycles == 0.0
    assert s.eta_sm_exponent == pytest.approx(math.log(0.8) / math.log(0.5), rel=1e-4)
    assert s.cycles(d66, 66, K) == pytest.approx(faster, rel=1e-6)
    assert s.cycles(d_full, 132, K) == pytest.approx(full_elapsed, rel=1e-9)


def test_two_restricted_counts_recover_both_parameters():
    counts = _gemm(1).counts
    roof = demands(counts, {}, capacities(H200)).roof
    truth = _truth(lam=0.9 * roof * 132, eta=1.05, gamma=-0.12)
    full_elapsed, d_full, runs = _runs(counts, truth, [34, 66])
    s = fit_sm_scaling(full_elapsed, d_full, 132, runs, K)
    # within the small bias the exponent's penalty gives (it holds gamma at 0 for one run)
    assert s.latency_sm_cycles == pytest.approx(truth.latency_sm_cycles, rel=5e-3)
    assert s.eta_sm_exponent == pytest.approx(truth.eta_sm_exponent, abs=2e-3)
    assert s.rms_log_error < 1e-4
    d50 = demands(counts, {}, capacities(H200, 50)).cycles
    assert s.cycles(d50, 50, K) == pytest.approx(truth.cycles(d50, 50, K), rel=1e-3)


def test_the_interp_form_passes_through_every_restricted_calibration_and_interpolates_in_log_n():
    """Three restricted counts the two-parameter form cannot all fit (a kernel whose time falls off
    faster below 34 SMs): the plain fit misses each; the interp form keeps the residuals, meets
    every calibration exactly, interpolates linearly in log N between neighbours, holds the lowest
    residual below it, and serializes them (the plain form's dictionary is unchanged)."""
    counts = _gemm(1).counts
    roof = demands(counts, {}, capacities(H200)).roof
    truth = _truth(lam=0.5 * roof * 132, eta=1.05, gamma=-0.05)
    full_elapsed, d_full, runs = _runs(counts, truth, [20, 34, 66])
    runs[0] = RestrictedRun(runs[0].label, 20, 1.25 * runs[0].elapsed_cycles, runs[0].demands)
    plain = fit_sm_scaling(full_elapsed, d_full, 132, runs, K)
    interp = fit_sm_scaling(full_elapsed, d_full, 132, runs, K, residuals=True)
    assert plain.rms_log_error > 1e-3 and not plain.residuals and "residuals" not in plain.to_dict()
    assert [n for n, _ in interp.residuals] == [20, 34, 66]
    for r in runs:
        assert interp.cycles(r.demands, r.sm_count, K) == pytest.approx(r.elapsed_cycles, rel=1e-9)
        assert abs(plain.cycles(r.demands, r.sm_count, K) / r.elapsed_cycles - 1) > 1e-4
    assert interp.cycles(d_full, 132, K) == pytest.approx(full_elapsed, rel=1e-9)
    res = dict(interp.residuals)
    w = (math.log(48) - math.log(34)) / (math.log(66) - math.log(34))
    assert interp.correction(48) == pytest.approx(res[34] + w * (res[66] - res[34]), rel=1e-12)
    assert interp.correction(10) == res[20] and interp.correction(132) == 0.0
    w = (math.log(100) - math.log(66)) / (math.log(132) - math.log(66))
    assert interp.correction(100) == pytest.approx((1 - w) * res[66], rel=1e-12)
    assert SmScaling.from_dict(interp.to_dict()) == interp


def test_a_cost_flat_in_lambda_takes_no_latency_demand_and_lambda_stays_under_the_full_run():
    """An SM-bound kernel under the max: every demand and lambda / N scale alike, so no lambda is
    better than none (none is reported, not a rounding winner); a run slower on half the SMs than
    pure 1/N gets lambda at most the full run's SM-cycles and the rest in gamma."""
    counts = _sm_bound(1).counts
    full = capacities(H200)
    d_full, d66 = demands(counts, {}, full).cycles, demands(counts, {}, capacities(H200, 66)).cycles
    full_elapsed = 1.2 * combined(d_full, None)
    s = fit_sm_scaling(full_elapsed, d_full, 132, [RestrictedRun("h200@66", 66, 1.5 * 1.2 * combined(d66, None), d66)],
                       None)
    assert s.latency_sm_cycles == 0.0 and not s.latency_binds(d_full, 132)
    counts = _gemm(1).counts
    d_full, d66 = demands(counts, {}, full).cycles, demands(counts, {}, capacities(H200, 66)).cycles
    full_elapsed = 1.1 * combined(d_full, K)
    slow = RestrictedRun("h200@66", 66, 2.6 * full_elapsed, d66)  # 2.6x on half the SMs
    s = fit_sm_scaling(full_elapsed, d_full, 132, [slow], K)
    assert 0 < s.latency_sm_cycles <= full_elapsed * 132 * (1 + 1e-12) and s.eta_sm_exponent < 0
    assert s.cycles(d66, 66, K) == pytest.approx(slow.elapsed_cycles, rel=1e-4)
    assert s.cycles(d_full, 132, K) == pytest.approx(full_elapsed, rel=1e-9)


def test_a_fit_without_a_restricted_run_or_with_a_zero_time_is_refused():
    with pytest.raises(ValueError, match="at least one restricted"):
        fit_sm_scaling(1.0, {"dram": 1.0}, 132, [], K)
    with pytest.raises(ValueError, match="positive"):
        fit_sm_scaling(1.0, {"dram": 1.0}, 132, [RestrictedRun("h200@66", 66, 0.0, {"dram": 1.0})], K)


def _calibrated(full_cycles: float, restricted_cycles: float):
    full, restricted = capacities(H200), capacities(H200, 66)
    kernels = (calibrate_kernels("GEMM", 63, [_gemm(full_cycles)], full)
               + calibrate_kernels("GEMM", 63, [_gemm(restricted_cycles)], restricted))
    return attach_sm_scaling(kernels, {full.label: full, restricted.label: restricted}, K), full


def test_predictions_follow_the_fit_on_the_own_machine_only():
    roof = demands(_gemm(1).counts, {}, capacities(H200)).roof
    kernels, full = _calibrated(1.1 * roof, 2.2 * roof)
    whole, restricted = kernels
    assert restricted.sm_scaling is None and whole.sm_scaling is not None
    problems: list[str] = []
    at132 = _kernel(whole, full, None, "GEMM", None, problems, K)
    assert at132.seconds == pytest.approx(1.1 * roof / full.clock_hz, rel=1e-9)
    at66 = _kernel(whole, capacities(H200, 66), None, "GEMM", None, problems, K)
    assert at66.seconds == pytest.approx(2.2 * roof / full.clock_hz, rel=1e-5)
    at24 = _kernel(whole, capacities(H200, 24), None, "GEMM", None, problems, K)
    assert at24.binding == "latency" and at24.seconds > at66.seconds * 2.0
    # H100 does not take the H200's SM scaling
    h100 = capacities(get_machine("h100"), 16)
    assert _kernel(whole, h100, None, "GEMM", None, problems, K).binding != "latency"
    assert not problems


def test_the_form_is_saved_and_a_max_form_file_hashes_as_before(tmp_path):
    roof = demands(_gemm(1).counts, {}, capacities(H200)).roof
    kernels, full = _calibrated(1.1 * roof, 2.2 * roof)
    model = Model(kernels=kernels, machines={full.label: full.to_dict(),
                                             "h200@66": capacities(H200, 66).to_dict()},
                  overlap=K, latency_form="norm")
    digest = model.save(tmp_path / "m.json")
    raw = json.loads((tmp_path / "m.json").read_text())
    assert raw["latency_form"] == "norm" and "sm_scaling" in raw["kernels"][0]
    assert "sm_scaling" not in raw["kernels"][1]  # the restricted kernel has none: its key is absent
    loaded = Model.load(tmp_path / "m.json")
    assert loaded.hash == digest and loaded.kernels[0].sm_scaling == kernels[0].sm_scaling
    plain = Model(kernels=[kernels[1]], machines=model.machines, overlap=K)
    assert "latency_form" not in plain.body()  # the max form: the body of a file fitted before
    raw["latency_form"] = "cubic"
    bad = tmp_path / "bad.json"
    from composer.model.calibrate import content_hash
    body = {k: v for k, v in raw.items() if k != "hash"}
    bad.write_text(json.dumps({**body, "hash": content_hash(body)}))
    with pytest.raises(ModelError, match="latency form 'cubic' is not one of norm, interp, max"):
        Model.load(bad)


def test_fit_refuses_an_unknown_form(tmp_path):
    with pytest.raises(ModelError, match="latency form"):
        fit([], latency_form="linear")


def test_test_5s_committed_predictions_cite_their_model_and_the_shipped_capacities():
    """Balance test 5 (session 11, predicted before any run): each predictions file names the committed
    model by its hash, is priced with the shipped machine table's capacities at its SM count, and
    every kernel of the model's (path, order) cells with an SM scaling is priced by it (no cell
    fell back to the calibration's eta)."""
    import json
    from pathlib import Path

    model = Model.load("docs/data/h200_s11/model/model_h200_s11_norm.json")
    assert model.hash.startswith("0da7e3bb99146f0b") and model.latency_form == "norm"
    for n in (56, 46, 30):
        doc = json.loads(Path(f"docs/data/h200_s11/model/pro5/predict_h200_sms{n}.json").read_text())
        assert doc["model_hash"] == model.hash
        assert doc["target"]["per_sm_cycle"] == capacities(H200, n).per_sm_cycle
        assert {(p["path"], p["order"]) for p in doc["paths"]} == {
            (p, o) for p in ("GEMM", "GEMM_CUTE", "GEMM_FUSED", "FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16")
            for o in (7, 15, 31, 63, 127, 255)}
        scaled = {(k.path, k.order, k.role): k.sm_scaling for k in model.kernels
                  if k.machine == "h200" and k.sm_scaling is not None}
        checked = 0
        for cell in doc["paths"]:
            for k in cell["kernels"]:
                scaling = scaled.get((cell["path"], cell["order"], k["role"]))
                if scaling is not None:
                    expected = scaling.cycles(k["demands"], n, model.overlap) / doc["target"]["clock_hz"]
                    assert k["seconds"] == pytest.approx(expected, rel=1e-12)
                    checked += 1
        assert checked >= 50
