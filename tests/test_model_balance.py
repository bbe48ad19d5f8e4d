"""The balance axis's two additions of session 8, by hand: the DRAM capacity per active SM stops
at what one SM can draw (the copy-kernel ceiling of the machine table), and a kernel that ran
slower on a restricted calibration than its eta x roof predicts gets a latency term that scales as
1 / active SMs; the S/E screen divides by at least the bench's resolution."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from composer.arch.machines import get_machine
from composer.model.calibrate import LATENCY_MARGIN, Model, attach_latency, calibrate_kernels
from composer.model.capacity import capacities
from composer.model.counters import kernel_counters
from composer.model.demand import demands
from composer.model.predict import _kernel, choose_calibration
from composer.model.ratios import RESOLUTION_PCT, separation_to_error

from tests.model_fixtures import REPO, kernel_row

H200 = get_machine("h200")


def _gemm(cycles: float):
    """A DRAM-bound library kernel without mma (no build needed to price it elsewhere)."""
    return kernel_counters(kernel_row(name="gemmSN_NN_kernel", dmma=0, fp64=1e5, issue=1e6, alu=1e5, fma=1e5,
                                      lsu=1e6, l2=1e8, dram=1e9, cycles=cycles), 0, "test")


def test_dram_capacity_grows_with_restriction_until_the_per_sm_ceiling():
    full = capacities(H200).per_sm_cycle["dram"]
    assert full == pytest.approx(4.24e12 / (132 * 1.98e9))
    assert capacities(H200, 98).per_sm_cycle["dram"] == pytest.approx(full * 132 / 98)
    ceiling = H200.capacity.dram_sm_ceiling
    assert ceiling == pytest.approx(48.9 * 4.24 / 3.84, abs=0.05)  # the copy kernel's, on the memcpy basis
    assert capacities(H200, 16).per_sm_cycle["dram"] == pytest.approx(ceiling)  # 16 SMs: the SMs limit
    assert "dram_sm_ceiling" in H200.capacity.source


def test_l2_capacity_follows_the_measured_copy_curve_where_chosen_and_a_bad_curve_is_one_clear_error(
        tmp_path, monkeypatch):
    """With ``l2_from = "copy"`` (balance test 4's table, docs/data/h200_s10/model/machines_l2_copy.toml)
    the H200's L2 capacity per active SM cycle is its measured L2-resident copy bandwidth at that SM
    count (interpolated) over SMs x clock; the shipped table records the curve and prices the
    normalization, and reproduces test 4's capacities through that user file."""
    import json
    from pathlib import Path

    from composer.arch.machines import MACHINES_ENV, load_machines
    from composer.errors import ComposerError

    assert H200.capacity.l2_from == "normalization" and H200.capacity.l2_copy_tbs
    assert capacities(H200, 42).per_sm_cycle["l2_bytes"] == 64.0
    copy = load_machines(Path("docs/data/h200_s10/model/machines_l2_copy.toml"))["h200"]
    clock = copy.clock_hz
    measured = json.loads(Path("docs/data/h200_s10/call1/bw/l2_sms.json").read_text())["kernel_copy_by_sms"]
    for sms, row in measured.items():  # the table holds the measurement, rounded to 1 GB/s
        assert capacities(copy, int(sms)).per_sm_cycle["l2_bytes"] == pytest.approx(
            row["median_Bps"] / (int(sms) * clock), rel=2e-3)
    whole, one_sm = capacities(copy).per_sm_cycle["l2_bytes"], capacities(copy, 16).per_sm_cycle["l2_bytes"]
    assert 28 < whole < 33 and 60 < one_sm < 64
    mid = capacities(copy, 90).per_sm_cycle["l2_bytes"] * 90 * clock  # between the 80- and 98-SM points
    assert min(measured["80"]["median_Bps"], measured["98"]["median_Bps"]) <= mid <= max(
        measured["80"]["median_Bps"], measured["98"]["median_Bps"])
    assert capacities(copy, 8).per_sm_cycle["l2_bytes"] == pytest.approx(one_sm)  # per SM below the curve
    for n in (112, 76, 42):  # test 4's predictions were priced with exactly this table
        recorded = json.loads(Path(f"docs/data/h200_s10/model/pro4/predict_h200_sms{n}.json").read_text())
        assert recorded["target"]["per_sm_cycle"] == capacities(copy, n).per_sm_cycle
    shipped = Path("schedules/machines.toml").read_text()
    h200 = shipped[shipped.index("[machines.h200]"):]
    line = next(ln for ln in h200.splitlines() if ln.startswith("l2_copy_tbs = {"))
    for curve, message in (("{ sms = [16, 24], tbs = [2.0] }", "sms and tbs need the same number"),
                           ("{ sms = [16, 16], tbs = [2.0, 2.0] }", "expected distinct positive SM counts"),
                           ("{ sms = [16], tbs = [-1.0] }", "expected positive finite bandwidths"),
                           ("{ sms = [16], tbs = [nan] }", "expected positive finite bandwidths"),
                           ("{ sms = 16, tbs = 2.0 }", "sms: expected a list"),
                           ("{ sms = [16, 264], tbs = [2.0, 9.0] }", "l2_copy_tbs names 264 SMs; the machine has 132")):
        user = tmp_path / "machines.toml"
        user.write_text(h200.replace("machines.h200", "machines.h200_bad").replace(line, f"l2_copy_tbs = {curve}"))
        with pytest.raises(ComposerError, match=message):
            load_machines(user)
    user.write_text(h200.replace("machines.h200", "machines.h200_bad").replace(line, "").replace(
        'l2_from = "normalization"', 'l2_from = "copy"'))
    with pytest.raises(ComposerError, match="l2_from = 'copy' needs the measured curve l2_copy_tbs"):
        load_machines(user)


def _calibrated(full_cycles: float, restricted_cycles: float, sms: int = 66):
    full, restricted = capacities(H200), capacities(H200, sms)
    kernels = (calibrate_kernels("GEMM", 63, [_gemm(full_cycles)], full)
               + calibrate_kernels("GEMM", 63, [_gemm(restricted_cycles)], restricted))
    return attach_latency(kernels, {full.label: full, restricted.label: restricted}), full, restricted


def test_a_kernel_at_its_roof_on_fewer_sms_gets_no_latency_term():
    d = demands(_gemm(1).counts, {}, capacities(H200))
    roof = d.roof  # DRAM-bound: the same cycles on 66 SMs (the bandwidth stays)
    kernels, _, _ = _calibrated(1.2 * roof, 1.2 * roof * LATENCY_MARGIN * 0.99)
    assert kernels[0].latency_sm_cycles is None


def test_a_kernel_slower_on_fewer_sms_scales_as_one_over_the_active_sms():
    roof = demands(_gemm(1).counts, {}, capacities(H200)).roof
    kernels, full, _ = _calibrated(1.1 * roof, 2.0 * roof)  # 66 SMs: 1.82x slower, DRAM unchanged
    whole = kernels[0]
    assert whole.machine == "h200" and whole.latency_from == "h200@66"
    assert whole.latency_sm_cycles == pytest.approx(2.0 * roof * 66)
    # the restricted calibration is not a prediction source where the full one exists
    chosen, _ = choose_calibration({"h200": [kernels[0]], "h200@66": [kernels[1]]}, capacities(H200, 98))
    assert chosen == [kernels[0]]
    problems: list[str] = []
    at132 = _kernel(whole, full, None, "GEMM", None, problems)
    assert at132.binding == "dram" and at132.seconds == pytest.approx(1.1 * roof / full.clock_hz)
    at34 = _kernel(whole, capacities(H200, 34), None, "GEMM", None, problems)
    assert at34.binding == "latency"
    assert at34.seconds == pytest.approx(2.0 * roof * 66 / 34 / full.clock_hz)
    # another machine does not take the H200's latency term, even restricted to few SMs where it
    # would dominate (the same kernel relabelled as an H100 calibration does take it there)
    h100_16 = capacities(get_machine("h100"), 16)
    assert _kernel(whole, h100_16, None, "GEMM", None, problems).binding != "latency"
    assert _kernel(replace(whole, machine="h100"), h100_16, None, "GEMM", None, problems).binding == "latency"
    assert not problems


def test_the_latency_term_never_predicts_the_full_machine_slower_than_it_ran():
    """A kernel bound by an SM-side resource runs more than 1.15x its roof on fewer SMs too; its term
    is capped at the full-SM run's own SM-cycles, so the 132-SM prediction stays the calibration."""
    roof = demands(_gemm(1).counts, {}, capacities(H200)).roof
    kernels, full, _ = _calibrated(1.1 * roof, 4.0 * roof)  # 66 SMs: 3.6x slower (more than 132/66)
    whole = kernels[0]
    assert whole.latency_sm_cycles == pytest.approx(1.1 * roof * 132)
    at132 = _kernel(whole, full, None, "GEMM", None, [])
    assert at132.seconds == pytest.approx(1.1 * roof / full.clock_hz)


def test_a_loaded_model_keeps_the_hash_its_file_carries(tmp_path):
    """A model file written before CalibratedKernel gained its latency fields keeps its hash: the
    predictions committed from it cite that hash."""
    shipped = REPO / "docs" / "data" / "h200_s8" / "model" / "model_h200_132.json"  # fitted before the fields
    raw = json.loads(shipped.read_text())
    assert "latency_sm_cycles" not in raw["kernels"][0]
    assert Model.load(shipped).hash == raw["hash"]
    predictions = json.loads((shipped.parent / "predict_h200_sms98.json").read_text())
    assert predictions["model_hash"] == raw["hash"]


def test_the_screen_divides_by_at_least_the_bench_resolution():
    r = math.exp(0.003)  # a 0.3 % predicted difference
    assert separation_to_error(r, 0.3) == pytest.approx(0.3 / RESOLUTION_PCT)
    assert separation_to_error(r, 0.3) < 1.0  # not screened in
    assert separation_to_error(math.exp(0.05), 2.0) == pytest.approx(2.5)
    assert separation_to_error(r, None) is None
    assert separation_to_error(r, 0.3, floor_pct=0.0) == pytest.approx(1.0)  # the paper's rule
    assert separation_to_error(r, 0.0, floor_pct=0.0) == math.inf


def test_a_tensor_op_library_kernel_without_a_readable_shape_is_refused():
    from composer.model.errors import ModelError
    from composer.model.kernels import identify

    with pytest.raises(ModelError, match="tensorop_z884gemm.*cannot read"):
        identify("cutlass_80_tensorop_z884gemm_64x64_16x4_nn_align1")
    assert identify("cutlass_80_tensorop_d884gemm_64x64_16x4_nn_align1").named_shape == "8x8x4"
