"""composer.model without a GPU: the counters it reads (on the real H200 profiles in docs/data),
demands and eta by hand, kernel identities, the non-mma tensor-count pitfall, DMMA counts carried
across shapes through real cross-compiled SASS, the Equation 8 enumeration, the calibration
rule, and the SM-count checks of the balance axis."""

from __future__ import annotations

import pytest

from composer.arch.machines import get_machine
from composer.model.build import Build
from composer.model.calibrate import calibrate_kernels, fit, ProfileSource
from composer.model.capacity import capacities
from composer.model.counters import QUANTITIES, _read_quantity, kernel_counters, read_profile_csv
from composer.model.demand import demands, eta
from composer.model.errors import KernelListMismatch, MissingMetricError, ModelError
from composer.model.kernels import identify
from composer.model.measured import read_measured
from composer.model.predict import choose_calibration, predict
from composer.model.shapes import transfer_dmma
from composer.profile.ncu import parse_raw_csv
from composer.runtime.green import SmCountError, check_sm_count

from tests.model_fixtures import (MACHINES_FILE, REPO, kernel_row, nvrtc_cache, worktree_machines,  # noqa: F401 (fixtures)
                                  write_build, write_profile)

REAL = REPO / "docs" / "data" / "h200_s5" / "ncu"
CUBLAS_884 = "sm80_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize64x32x16_stage4_warpsize2x2x1_tensor8x8x4_kernel"
CUTLASS_884 = "void cutlass::Kernel2<cutlass_80_tensorop_d884gemm_64x64_16x4_nn_align1>(T1::Params)#1"
CUBLAS_1688 = "sm90_xmma_gemm_f64f64_f64f64_f64_tn_n_tilesize64x32x32_stage3_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas"


def _counters(**kw):
    return kernel_counters(kernel_row(**kw), 0, "test")


# --- the real H200 profiles ---------------------------------------------------------------------


def test_real_profile_lacks_the_tensor_count_and_says_so():
    """The section-only profiles of docs/data carry utilizations, not the counts the model needs."""
    with pytest.raises(MissingMetricError, match=r"FUSED_TC-p511.csv: kernel fused_face_flux_nq512: metric "
                                                 r"sm__inst_executed_pipe_tensor_op_dmma.sum is missing"):
        read_profile_csv(REAL / "FUSED_TC-p511.csv")


def test_real_profile_quantities_read_through_their_equivalent_metrics():
    rows = parse_raw_csv((REAL / "FUSED_TC-p511.csv").read_text())
    by_name = {q.name: q for q in QUANTITIES}
    x = next(r for r in rows if r["Kernel Name"] == "fused_tc_p511_s0_x")
    issue, issue_from = _read_quantity(x, by_name["issue"], "t")
    assert (issue, issue_from) == (885_129_216, "smsp__inst_executed.sum")
    dram, dram_from = _read_quantity(x, by_name["dram_bytes"], "t")
    assert dram == 3_259_705_856 + 1_064_080_640 and dram_from == "dram__bytes_read.sum+dram__bytes_write.sum"
    clock, clock_from = _read_quantity(x, by_name["clock_hz"], "t")
    assert clock_from == "gpc__cycles_elapsed.avg.per_second" and 1.8e9 < clock < 2.0e9
    assert _read_quantity(x, by_name["duration_ns"], "t")[0] == 5_050_048


def test_real_profiles_as_measured_kernel_sums():
    cells = {(c.path, c.order): c for c in read_measured(REAL)}
    assert set(cells) == {("FUSED_TC", 511), ("FUSED_TC16", 127), ("FUSED_TC16", 255), ("FUSED_TC16", 511)}
    tc = cells[("FUSED_TC", 511)]
    assert tc.sms is None and set(tc.kernels) == {"face_flux", "s0_x", "s1_y", "s2_z"}
    assert tc.kernels["s0_x"] == pytest.approx(5_050_048e-9)
    assert tc.seconds == pytest.approx(sum(tc.kernels.values()))


# --- identities, demands, eta -------------------------------------------------------------------


@pytest.mark.parametrize("name,kind,order,role,shape,mma", [
    ("dgemm_p0511_x_m16_8_4_0", "cute_gemm", 511, "x", "16x8x4", True),
    ("dgemm_p0511_z_m8_8_4_carry_fold_0", "cute_gemm", 511, "z_carry_fold", "8x8x4", True),
    ("dgemm_p0063_y_m16_8_8_fold", "cute_gemm", 63, "y_fold", "16x8x8", True),
    ("dgemm_p0007_y_m16_8_4_qv_0", "cute_gemm", 7, "y_qv", "16x8x4", True),  # flux formed in the mainloop
    ("dgemm_p0511_y_m16_8_8_carry_qs_0", "cute_gemm", 511, "y_carry_qs", "16x8x8", True),  # ... in the stage
    ("dgemm_p0063_x_m16_8_8_carry_qv_t64x128x16w2x2s3_0", "cute_gemm", 63, "x_carry_qv_t64x128x16w2x2s3",
     "16x8x8", True),  # a swept carrier tile (--fused-variants tiles)
    ("dgemm_p0511_y_m16_8_8_carry_t128x64x16w2x2s3e16s_0", "cute_gemm", 511, "y_carry_t128x64x16w2x2s3e16s",
     "16x8x8", True),  # with the carrier's split epilogue prefetch
    ("fused_tc16_p511_s0_x", "fused", 511, "s0_x", None, True),
    ("fused_tc_p63_k0_xyz", "fused", 63, "k0_xyz", None, True),
    ("fused_dfma_p255_s1_y", "fused", 255, "s1_y", None, False),
    ("fused_p63_k0_xyz", "fused", 63, "k0_xyz", None, False),
    ("fused_face_flux_nq512", "face", 511, "face_flux", None, False),
    ("volume_flux_nq64", "support", 63, "volume_flux", None, False),
    # the overlapped volume flux's kernels (composer.paths.overlap; compiled at run time, in no build: priced
    # from their own counters like a SIMT library kernel) and a staggered carrier (stagger_us)
    ("volume_products_z_nq512", "library", None, "volume_products_z_nq512", None, False),
    ("volume_products_xy_nq512", "library", None, "volume_products_xy_nq512", None, False),
    ("dgemm_p0511_y_m16_8_8_carry_t128x64x16w2x2s3st50_0", "cute_gemm", 511, "y_carry_t128x64x16w2x2s3st50",
     "16x8x8", True),
    (CUBLAS_1688, "library", None, CUBLAS_1688, "16x8x8", True),
    ("gemmSN_NN_kernel", "library", None, "gemmSN_NN_kernel", None, False),
    # the CUTLASS kernel cuBLAS dispatched for GEMM at p = 63 on the H200 (session 8): m8n8k4
    (CUTLASS_884, "library", None, CUTLASS_884, "8x8x4", True),
])
def test_kernel_identity(name, kind, order, role, shape, mma):
    k = identify(name)
    assert (k.kind, k.order, k.role, k.named_shape, k.issues_mma) == (kind, order, role, shape, mma)


def test_a_project_kernel_name_the_model_does_not_know_is_refused():
    with pytest.raises(ModelError, match="dgemm_p0511_w_m8_8_4_0: named like one of this project's kernels"):
        identify("dgemm_p0511_w_m8_8_4_0")


def test_demands_and_eta_by_hand():
    h200 = capacities(get_machine("h200"))
    c = _counters(name="fused_tc_p63_s0_x", dmma=5.28e7, fp64=1.32e6, issue=1e6, alu=1e5, fma=1e5, lsu=1e6,
                  l2=1e8, dram=1e9, cycles=2e6)
    d = demands(c.counts, {"8x8x4": 5.28e7}, h200)
    assert d.cycles["fp64"] == pytest.approx((4 * 5.28e7 + 0.5 * 1.32e6) / 132)
    assert d.cycles["dram"] == pytest.approx(1e9 / (4.24e12 / 1.98e9))  # B / (C_DRAM x N_SM)
    assert d.cycles["issue"] == pytest.approx(1e6 / (4 * 132))
    assert d.cycles["alu"] == pytest.approx(1e5 / (2 * 132))
    assert d.cycles["fma"] == pytest.approx(1e5 / (4 * 132))
    assert d.cycles["lsu_wavefronts"] == pytest.approx(1e6 / 132)
    assert d.cycles["l2_bytes"] == pytest.approx(1e8 / (64 * 132))
    assert d.binding == "fp64"
    assert c.elapsed_cycles == pytest.approx(2e6)
    assert eta(c.elapsed_cycles, d) == pytest.approx(2e6 * 132 / (4 * 5.28e7 + 0.5 * 1.32e6))


def test_calibration_eta_closure_and_the_non_mma_tensor_pitfall():
    h200 = capacities(get_machine("h200"))
    launches = [
        _counters(name="volume_flux_nq64", dmma=7e6, fp64=1e6, dram=3.2e9, cycles=2.5e6),  # no mma, tensor count
        _counters(name="fused_tc_p63_s0_x", dmma=5.28e7, fp64=1.32e6, cycles=2e6,
                  budget=1.02 * (4 * 5.28e7 + 0.5 * 1.32e6)),
    ]
    flux, x = calibrate_kernels("FUSED_TC", 63, launches, h200)
    assert flux.shape is None and flux.dmma == {} and flux.dmma_unpriced == 7e6  # recorded, not priced
    assert flux.demands["fp64"] == pytest.approx(0.5 * 1e6 / 132)
    assert flux.binding == "dram" and flux.eta == pytest.approx(2.5e6 / (3.2e9 / (4.24e12 / 1.98e9)))
    assert x.shape == "8x8x4" and x.binding == "fp64" and x.closure == pytest.approx(1.02)


# --- shapes ------------------------------------------------------------------------------------


def test_transfer_holds_the_dmma_flop():
    assert transfer_dmma(1000, "8x8x4", {"16x8x4": 1}) == {"16x8x4": 500}  # halves
    assert transfer_dmma(1000, "16x8x4", {"8x8x4": 6}) == {"8x8x4": 2000}  # sm_100's two 8x8x4 each
    assert transfer_dmma(1000, "16x8x8", {"16x8x16": 1}) == {"16x8x16": 500}
    split = transfer_dmma(1000, "8x8x4", {"8x8x4": 1, "16x8x4": 1})  # FLOP split as the binary's
    assert split == pytest.approx({"8x8x4": 1000 / 3, "16x8x4": 1000 / 3})


def _one_kernel_model(tmp_path, name, machine="h200", **row):
    write_profile(tmp_path / "prof", "GEMM_CUTE", 63, [kernel_row(name=name, **row)])
    return fit([ProfileSource(tmp_path / "prof", get_machine(machine))])


def test_sass_of_a_16x8x4_build_halves_an_8x8x4_count(tmp_path, nvrtc_cache):
    model = _one_kernel_model(tmp_path, "dgemm_p0063_x_m8_8_4_0", dmma=1.32e8, cycles=5e6)
    build = Build(write_build(tmp_path / "b90", "sm_90", {"dgemm_p0063_x_m16_8_4_0": "16x8x4"}, nvrtc_cache))
    (p,) = predict(model, capacities(get_machine("h200")), build)
    (k,) = p.kernels
    assert k.target_name == "dgemm_p0063_x_m16_8_4_0" and k.dmma == {"16x8x4": pytest.approx(6.6e7)}
    # the floor: 16x8x4 costs 4 cycles like 8x8x4, so half the instructions is half the budget
    assert p.seconds == pytest.approx(k.eta * 4 * 6.6e7 / 132 / 1.98e9)


def test_sm100_build_expands_a_wide_shape_into_8x8x4(tmp_path, nvrtc_cache):
    model = _one_kernel_model(tmp_path, "dgemm_p0063_x_m16_8_4_0", dmma=1.32e8, cycles=5e6)
    assert model.kernels[0].shape == "16x8x4"
    build = Build(write_build(tmp_path / "b100", "sm_100", {"dgemm_p0063_x_m16_8_4_0": "16x8x4"}, nvrtc_cache))
    (p,) = predict(model, capacities(get_machine("gb200")), build)
    assert p.kernels[0].dmma == {"8x8x4": pytest.approx(2 * 1.32e8)}  # 2 DMMA.8x8x4 per m16n8k4


def test_build_of_another_arch_or_without_the_kernel_is_refused(tmp_path, nvrtc_cache):
    model = _one_kernel_model(tmp_path, "dgemm_p0063_x_m8_8_4_0", dmma=1.32e8, cycles=5e6)
    b90 = Build(write_build(tmp_path / "b90", "sm_90", {"dgemm_p0063_y_m8_8_4_0": "8x8x4"}, nvrtc_cache))
    with pytest.raises(KernelListMismatch, match=r"built for sm_90, the machine is sm_100"):
        predict(model, capacities(get_machine("gb200")), b90)
    with pytest.raises(KernelListMismatch, match=r"does not match the calibration's kernel list: GEMM_CUTE p=63 x "
                                                 r"\(dgemm_p0063_x_m8_8_4_0\)"):
        predict(model, capacities(get_machine("h200")), b90)


def test_instruction_family_change_is_a_mismatch(tmp_path, nvrtc_cache):
    model = _one_kernel_model(tmp_path, "dgemm_p0063_x_m8_8_4_0", dmma=1.32e8, cycles=5e6)
    build = Build(write_build(tmp_path / "b", "sm_90", {"dgemm_p0063_x_m8_8_4_0": None}, nvrtc_cache))
    with pytest.raises(KernelListMismatch, match=r"issues DMMA but dgemm_p0063_x_m8_8_4_0 does not"):
        predict(model, capacities(get_machine("h200")), build)


def test_enumeration_prices_the_cheaper_shape_for_a_library_role(tmp_path):
    """Equation 8: an A100 cuBLAS role at m8n8k4 on H100 takes a wide shape (the floor makes
    m8n8k4 cost 4 cycles for 512 FLOP there); the wide shapes tie."""
    model = _one_kernel_model(tmp_path, CUBLAS_884, machine="a100", dmma=1.08e9, cycles=4.4e7, dram=1e6)
    h100 = capacities(get_machine("h100"))
    (p,) = predict(model, h100, None)
    (k,) = p.kernels
    assert set(k.enumerated) == {"8x8x4", "16x8x4", "16x8x8", "16x8x16"}
    assert k.enumerated["8x8x4"] == pytest.approx(2 * k.enumerated["16x8x4"])
    assert k.enumerated["16x8x4"] == pytest.approx(k.enumerated["16x8x8"]) == pytest.approx(k.enumerated["16x8x16"])
    assert k.dmma == {"16x8x4": pytest.approx(1.08e9 / 2)} and k.seconds == pytest.approx(k.enumerated["16x8x4"])
    (gb,) = predict(model, capacities(get_machine("gb200")), None)
    assert set(gb.kernels[0].enumerated) == {"8x8x4"}  # GB200 issues no wide shape


def test_library_role_keeps_its_dispatched_shape_on_its_own_machine(tmp_path):
    """On the machine that was run (the balance axis) cuBLAS's dispatched shape is known: no
    enumeration, so the full machine reproduces the calibration exactly."""
    model = _one_kernel_model(tmp_path, CUBLAS_884, machine="h100", dmma=1.32e9, cycles=6e7, dram=1e6)
    (full,) = predict(model, capacities(get_machine("h100")), None)
    (cut,) = predict(model, capacities(get_machine("h100"), 66), None)
    assert full.kernels[0].enumerated == {} and full.kernels[0].dmma == {"8x8x4": 1.32e9}
    assert full.seconds == pytest.approx(6e7 / 1.98e9) and cut.seconds == pytest.approx(2 * full.seconds)


def test_calibration_rule_closest_eta_per_kernel_or_the_target_itself(tmp_path):
    def profile(machine, cycles_x, cycles_y):
        d = tmp_path / machine
        write_profile(d, "FUSED_TC", 63, [kernel_row(name="fused_tc_p63_s0_x", dmma=1e8, cycles=cycles_x),
                                          kernel_row(name="fused_tc_p63_s1_y", dmma=1e8, cycles=cycles_y)])
        return ProfileSource(d, get_machine(machine))

    # roofs on the same numerators: a100 budget 4e8/108 cycles, gb200 4.003e8/152 cycles
    a100_roof, gb_roof = 4e8 / 108, 4.003e8 / 152
    model = fit([profile("a100", 1.1 * a100_roof, 1.9 * a100_roof), profile("gb200", 1.5 * gb_roof, 1.2 * gb_roof)])
    by_machine = model.cells()[("FUSED_TC", 63)]
    chosen, notes = choose_calibration(by_machine, capacities(get_machine("h100")))
    assert [(k.role, k.machine) for k in chosen] == [("s0_x", "a100"), ("s1_y", "gb200")] and notes == []
    own, _ = choose_calibration(by_machine, capacities(get_machine("a100"), 54))
    assert {k.machine for k in own} == {"a100"}


# --- the balance axis' SM counts ------------------------------------------------------------------


@pytest.mark.parametrize("sms,message", [
    (97, r"97 SMs is odd: a green-context split gives multiples of 2 SMs \(nearest: 96 or 98\)"),
    (134, r"134 SMs requested but the device has 132"),
    (1, r"1 SMs is below the minimum green-context partition of 2 SMs"),
    (0, r"0 SMs is below the minimum"),
])
def test_sm_counts_a_split_cannot_give(sms, message):
    with pytest.raises(SmCountError, match=message):
        check_sm_count(sms, 132)


def test_sm_counts_a_split_gives():
    assert [check_sm_count(n, 132) for n in (132, 98, 96, 66, 52, 34, 2)] == [132, 98, 96, 66, 52, 34, 2]
    with pytest.raises(SmCountError, match="machine h200 has 132"):
        capacities(get_machine("h200"), 140)



def test_gemm_fused_profile_calibrates(tmp_path):
    """GEMM_FUSED's kernels in a real H200 profile (session 7 call 2, p = 511, the z carrier with the
    fold: docs/data/h200_s7/call2/prof/gf) are named, priced and closed like every other kernel."""
    import json

    from composer.cli.main import main

    out = tmp_path / "model.json"
    from pathlib import Path

    profiles = Path(__file__).resolve().parents[1] / "docs" / "data" / "h200_s7" / "call2" / "prof" / "gf"
    assert main(["model", "fit", "--profiles", str(profiles), "--out", str(out), "--json"]) == 0
    model = json.loads(out.read_text())
    roles = {k["role"] for k in model["kernels"] if k["path"] == "GEMM_FUSED"}
    assert {"x_fold", "y_fold", "z_carry_fold"} <= roles, roles
    fused = [k for k in model["kernels"] if k["path"] == "GEMM_FUSED" and k["kind"] == "cute_gemm"]
    assert len(fused) == 3 and all(k["shape"] == "16x8x4" and k["eta"] > 0 for k in fused)
