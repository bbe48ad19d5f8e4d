"""One calibration per binary (composer.model.sharing): a kernel two paths launch at one order is
priced from one calibration, so two paths of the same kernels predict a ratio of exactly one."""

from __future__ import annotations

import json

import pytest

from composer.arch.machines import get_machine
from composer.model.calibrate import Model, ProfileSource, fit
from composer.model.capacity import capacities
from composer.model.predict import predict

from tests.model_fixtures import kernel_row, write_profile

H200 = get_machine("h200")
CUBLAS = "sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize64x128x16_stage3_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas"
CUTLASS = "void cutlass::Kernel2<cutlass_80_tensorop_d884gemm_64x64_16x4_nn_align1>(T1::Params)"


def _rows(cycles: float, *, grid: int = 2048) -> list[dict[str, str]]:
    """Two library GEMMs of one call at p = 127 (library kernels: priced without a build): a CUTLASS
    one the same in both paths and a cuBLAS one whose time is ``cycles``."""
    return [kernel_row(CUTLASS, dmma=2e8, fp64=2e8, issue=3e8, lsu=1e8, l2=3e9, dram=2e9, cycles=1.2e6,
                       grid=4096, block=128, registers=168),
            kernel_row(CUBLAS, dmma=4e8, fp64=4e8, issue=5e8, lsu=1e8, l2=6e9, dram=2e9, cycles=cycles,
                       grid=grid, block=128, registers=232)]


def _profiles(tmp_path, gemm_cute_cycles: float, *, grid: int = 2048, restricted: bool = False):
    full = tmp_path / "cal132"
    write_profile(full, "GEMM", 127, _rows(3.00e6))
    write_profile(full, "GEMM_CUTE", 127, _rows(gemm_cute_cycles, grid=grid))
    sources = [ProfileSource(full, H200)]
    if restricted:  # GEMM_CUTE alone has a restricted calibration: it is the better-informed one
        low = tmp_path / "sms66"
        write_profile(low, "GEMM_CUTE", 127, _rows(2.2 * gemm_cute_cycles, grid=grid), sms=66)
        sources.append(ProfileSource(low, H200))
    return sources


def _totals(model: Model, sms: int | None = None) -> dict[str, float]:
    return {p.path: p.seconds for p in predict(model, capacities(H200, sms), None)}


def test_two_paths_of_one_binary_predict_the_same_time_and_the_separate_fit_does_not(tmp_path):
    sources = _profiles(tmp_path, 3.06e6)  # GEMM_CUTE's profile of the same kernels ran 2 % slower
    shared, separate = fit(sources, overlap=4.0), fit(sources, overlap=4.0, share=False)
    assert shared.shared_kernels and not separate.shared_kernels
    t = _totals(shared)
    assert t["GEMM_CUTE"] == t["GEMM"]
    s = _totals(separate)
    assert s["GEMM_CUTE"] / s["GEMM"] == pytest.approx(1.0 + 0.06e6 / 4.2e6, rel=1e-3)
    by_path = {(k.path, k.role): k for k in shared.kernels}
    assert by_path[("GEMM_CUTE", CUBLAS + "#1")].shared_from == "GEMM"  # GEMM's, the preferred path
    assert by_path[("GEMM", CUBLAS + "#1")].shared_from is None
    assert all(k.shared_from is None for k in separate.kernels)


def test_the_better_informed_calibration_is_the_one_shared(tmp_path):
    model = fit(_profiles(tmp_path, 3.06e6, restricted=True), overlap=4.0)
    gemm = next(k for k in model.kernels if k.path == "GEMM" and k.role == CUBLAS + "#1")
    cute = next(k for k in model.kernels if k.path == "GEMM_CUTE" and k.role == CUBLAS + "#1" and k.machine == "h200")
    assert gemm.shared_from == "GEMM_CUTE" and gemm.sm_scaling == cute.sm_scaling is not None
    assert gemm.counters.elapsed_cycles == cute.counters.elapsed_cycles
    t = _totals(model, 66)
    assert t["GEMM"] == t["GEMM_CUTE"]
    # the restricted calibration is a record, left as profiled
    assert [k.shared_from for k in model.kernels if "@" in k.machine] == [None, None]


def test_another_launch_of_the_same_name_is_another_kernel(tmp_path):
    model = fit(_profiles(tmp_path, 3.06e6, grid=4096), overlap=4.0)
    shared = {(k.path, k.role) for k in model.kernels if k.shared_from}
    # the CUTLASS kernel is shared; the cuBLAS kernel at another grid is not
    assert shared == {("GEMM_CUTE", CUTLASS + "#1")}
    t = _totals(model)
    assert t["GEMM_CUTE"] > t["GEMM"]


def test_the_flag_is_saved_refitted_and_files_without_it_hash_as_before(tmp_path):
    model = fit(_profiles(tmp_path, 3.06e6), overlap=4.0)
    digest = model.save(tmp_path / "m.json")
    raw = json.loads((tmp_path / "m.json").read_text())
    assert raw["shared_kernels"] is True
    assert any(k.get("shared_from") == "GEMM" for k in raw["kernels"])
    loaded = Model.load(tmp_path / "m.json")
    assert loaded.hash == digest and loaded.shared_kernels
    assert [k.to_dict() for k in loaded.kernels] == [k.to_dict() for k in model.kernels]
    from composer.model.calibrate import with_overlap
    again = with_overlap(loaded, 3.0)  # re-derived from the sources, shared again
    assert _totals(again)["GEMM_CUTE"] == _totals(again)["GEMM"]
    plain = fit(_profiles(tmp_path / "b", 3.06e6), overlap=4.0, share=False)
    body = plain.body()
    assert "shared_kernels" not in body and all("shared_from" not in k for k in body["kernels"])
    alone = tmp_path / "c"  # one path: nothing to share, so the file is what a fit before the sharing wrote
    write_profile(alone, "GEMM", 127, _rows(3.0e6))
    assert "shared_kernels" not in fit([ProfileSource(alone, H200)], overlap=4.0).body()


def _gemm_fused_rows(z_cycles: float) -> list[dict[str, str]]:
    """GEMM_FUSED's call: the cuBLAS kernel once, for the z GEMM (GEMM's second launch of it)."""
    return [kernel_row(CUBLAS, dmma=3e8, fp64=3e8, issue=4.1e8, lsu=1e8, l2=5e9, dram=2e9, cycles=z_cycles,
                       grid=2048, block=128, registers=232)]


def test_a_library_kernel_is_matched_by_the_work_it_does_not_by_its_launch_count(tmp_path):
    """The same cuBLAS kernel serves GEMM's y GEMM (#1) and z GEMM (#2, other instruction counts) and
    GEMM_FUSED's z GEMM (its #1): the copy in GEMM_FUSED is GEMM's z calibration, in GEMM_FUSED's own
    role and launch index; restricted calibrations of both paths stay as profiled."""
    full, low = tmp_path / "cal132", tmp_path / "sms66"
    y = kernel_row(CUBLAS, dmma=4e8, fp64=4e8, issue=5e8, lsu=1e8, l2=6e9, dram=2e9, cycles=3.0e6,
                   grid=2048, block=128, registers=232)
    write_profile(full, "GEMM", 127, [y, *_gemm_fused_rows(2.4e6)])
    write_profile(full, "GEMM_FUSED", 127, [kernel_row(CUTLASS, dmma=2e8, fp64=2e8, issue=3e8, cycles=1.1e6,
                                                       grid=4096, block=128, registers=168),
                                            *_gemm_fused_rows(2.46e6)])
    write_profile(low, "GEMM", 127, [{**y, "gpu__time_duration.sum": "3000"}, *_gemm_fused_rows(5.6e6)], sms=66)
    write_profile(low, "GEMM_FUSED", 127, [kernel_row(CUTLASS, dmma=2e8, fp64=2e8, issue=3e8, cycles=2.4e6,
                                                      grid=4096, block=128, registers=168),
                                           *_gemm_fused_rows(5.8e6)], sms=66)
    model = fit([ProfileSource(full, H200), ProfileSource(low, H200)], overlap=4.0)
    full_k = {(k.path, k.role): k for k in model.kernels if k.machine == "h200"}
    copy, z = full_k[("GEMM_FUSED", CUBLAS + "#1")], full_k[("GEMM", CUBLAS + "#2")]
    assert copy.shared_from == "GEMM" and z.shared_from is None
    assert copy.counters.elapsed_cycles == z.counters.elapsed_cycles and copy.sm_scaling == z.sm_scaling
    assert copy.counters.index == 1 and copy.role == CUBLAS + "#1"
    assert full_k[("GEMM", CUBLAS + "#1")].shared_from is None  # the y GEMM: other work, not shared
    assert all(k.shared_from is None for k in model.kernels if "@" in k.machine)


def test_a_refit_with_another_exponent_copies_from_the_same_source(tmp_path):
    """``with_overlap`` re-derives the latency terms, on which the choice of source can depend (the max
    form takes a term only past a margin): the copies are taken again from the path they were copied
    from, so the refit predicts what a fit with that exponent from the start predicts, and no two
    kernels name each other as their source."""
    from composer.model.calibrate import with_overlap

    full, low = tmp_path / "cal132", tmp_path / "sms66"
    write_profile(full, "GEMM", 127, _rows(3.00e6))
    write_profile(full, "GEMM_CUTE", 127, _rows(3.06e6))
    write_profile(low, "GEMM", 127, _rows(2.3 * 3.00e6), sms=66)
    write_profile(low, "GEMM_CUTE", 127, _rows(2.4 * 3.06e6), sms=66)
    sources = [ProfileSource(full, H200), ProfileSource(low, H200)]
    for form in ("max", "interp"):
        for k_from, k_to in ((None, 4.0), (4.0, None)):
            refit = with_overlap(fit(sources, overlap=k_from, latency_form=form), k_to)
            direct = fit(sources, overlap=k_to, latency_form=form)
            assert {(p.path, p.order): p.seconds for p in predict(refit, capacities(H200, 66), None)} == pytest.approx(
                {(p.path, p.order): p.seconds for p in predict(direct, capacities(H200, 66), None)}, rel=1e-12)
            sources_of = {(k.path, k.role): k.shared_from for k in refit.kernels if k.machine == "h200"}
            for (path, role), src in sources_of.items():
                assert src is None or sources_of[(src, role)] is None, (form, path, role, src)
