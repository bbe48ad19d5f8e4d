"""The balance axis's two additions of session 8, by hand: the DRAM capacity per active SM stops
at what one SM can draw (the copy-kernel ceiling of the machine table), and a kernel that ran
slower on a restricted calibration than its eta x roof predicts gets a latency term that scales as
1 / active SMs; the S/E screen divides by at least the bench's resolution."""

from __future__ import annotations

import math

import pytest

from composer.arch.machines import get_machine
from composer.model.calibrate import LATENCY_MARGIN, attach_latency, calibrate_kernels
from composer.model.capacity import capacities
from composer.model.counters import kernel_counters
from composer.model.demand import demands
from composer.model.predict import _kernel, choose_calibration
from composer.model.ratios import RESOLUTION_PCT, separation_to_error

from tests.model_fixtures import kernel_row

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
    assert ceiling == pytest.approx(48.9)
    assert capacities(H200, 16).per_sm_cycle["dram"] == pytest.approx(ceiling)  # 16 SMs: the SMs limit
    assert "dram_sm_ceiling" in H200.capacity.source


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
    # another machine does not take the H200's latency term
    h100 = capacities(get_machine("h100"))
    assert _kernel(whole, h100, None, "GEMM", None, problems).binding != "latency"
    assert not problems


def test_the_screen_divides_by_at_least_the_bench_resolution():
    r = math.exp(0.003)  # a 0.3 % predicted difference
    assert separation_to_error(r, 0.3) == pytest.approx(0.3 / RESOLUTION_PCT)
    assert separation_to_error(r, 0.3) < 1.0  # not screened in
    assert separation_to_error(math.exp(0.05), 2.0) == pytest.approx(2.5)
    assert separation_to_error(r, None) is None
