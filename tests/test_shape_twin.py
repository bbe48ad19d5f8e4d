"""The shape twins (FUSED_TC's table on 16x8x4) and the gzipped profiles the model reads."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import pytest

from composer.errors import ComposerError
from composer.fused.candidates import candidate_list, shape_twin, shape_twin_candidates
from composer.fused.config import fused_config
from composer.model.counters import profile_files, read_profile_csv
from composer.model.measured import read_measured

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "docs" / "data" / "h200_s19" / "call6" / "prof" / "tc"


@pytest.mark.parametrize("order", [15, 63, 127, 255])
def test_twin_differs_only_in_shape(order: int) -> None:
    source = fused_config("FUSED_TC", order)
    twin = shape_twin(source)
    assert twin is not None and twin.variant == "FUSED_TC16" and twin.mma == "16x8x4"
    assert [k.tile for k in twin.kernels] == [(k.tile[0] // 2, k.tile[1]) for k in source.kernels]
    # everything else, the compiler included, is the source's
    back = dataclasses.replace(twin, variant="FUSED_TC", mma="8x8x4", kernels=source.kernels)
    assert back == source


def test_twin_needs_even_wm_and_an_8_row_source() -> None:
    p7 = fused_config("FUSED_TC", 7)
    assert p7.kernels[0].tile[0] == 1 and shape_twin(p7) is None
    with pytest.raises(ComposerError, match="8x8x4 FUSED_TC"):
        shape_twin(fused_config("FUSED_TC16", 15))


@pytest.mark.usefixtures("xfaces_tables")  # the p = 7 and 15 tables the family was written against
def test_twin_family() -> None:
    # p = 31's shipped FUSED_TC16 table is one of FUSED_TC's twins (16x8x8 since session 20): only the other is added
    shipped = fused_config("FUSED_TC16", 31)
    assert shipped in (shape_twin(fused_config("FUSED_TC", 31), m) for m in ("16x8x4", "16x8x8"))
    assert [c.mma for _, c in shape_twin_candidates("FUSED_TC16", 31)] == [
        m for m in ("16x8x4", "16x8x8") if m != shipped.mma]
    assert shape_twin_candidates("FUSED_TC", 15) == []
    names = [name for name, _ in candidate_list("FUSED_TC16", 15, "shape_twin")]
    assert names[0] == "base" and len(names) == 3 and all("tile[1, 2]" in n for n in names[1:])
    assert "@16x8x4" in names[1] and "@16x8x8" in names[2]


def test_gzipped_profiles_read_like_plain_ones(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(PROFILES / "profile.json", plain / "profile.json")
    for file in PROFILES.glob("*.csv.gz"):
        (plain / file.name[:-3]).write_bytes(gzip.decompress(file.read_bytes()))
    gz, raw = profile_files(PROFILES), profile_files(plain)
    assert set(gz) == set(raw) == {("FUSED_TC", 7), ("FUSED_TC", 15), ("FUSED_TC", 31)}
    for key in gz:
        assert read_profile_csv(gz[key]) == read_profile_csv(raw[key])
    times = {(c.path, c.order): c.seconds for c in read_measured(PROFILES)}
    assert times == {(c.path, c.order): c.seconds for c in read_measured(plain)}
    assert 450e-6 < times[("FUSED_TC", 7)] < 460e-6  # the ncu duration of fused_tc_p7_k0_xyz, 456.16 us


# --- the spill-aware transfer (composer.model.predict.spill_transfer) ---------------------------

from composer.arch.machines import get_machine  # noqa: E402
from composer.model.build import Build  # noqa: E402
from composer.model.calibrate import ProfileSource, fit  # noqa: E402
from composer.model.capacity import capacities  # noqa: E402
from composer.model.predict import predict, spill_transfer  # noqa: E402
from tests.model_fixtures import (kernel_row, nvrtc_cache, worktree_machines,  # noqa: E402,F401 (fixtures)
                                  write_build, write_profile)

GRID = 8192



def _twin_setup(tmp_path: Path, cache: Path, registers: int | None = None):
    """A FUSED_TC p = 31 kernel calibrated with its build (a tiny 8x8x4 kernel of that name), and a
    build of its FUSED_TC16 twin (16x8x4)."""
    source = Build(write_build(tmp_path / "src", "sm_90", {"fused_tc_p31_k0_xy": "8x8x4"}, cache))
    regs = source.sass(source.kernels[0]).registers if registers is None else registers
    block = source.kernels[0].threads  # the profile launched the built kernel as built
    write_profile(tmp_path / "prof", "FUSED_TC", 31, [kernel_row(
        "fused_tc_p31_k0_xy", dmma=1e6, dram=9.75e8, l2=2e9, cycles=6e5, grid=GRID, block=block, registers=regs)])
    model = fit([ProfileSource(tmp_path / "prof", get_machine("h200"))], build=source.directory)
    target = Build(write_build(tmp_path / "tgt", "sm_90", {"fused_tc16_p31_k0_xy": "16x8x4"}, cache))
    return model, target


def test_calibration_records_the_spills_of_the_binary_that_ran(tmp_path, nvrtc_cache):
    model, _ = _twin_setup(tmp_path, nvrtc_cache)
    assert model.kernels[0].spill_bytes == 0
    # a build whose kernel of that name allocates other registers is another compiler's binary
    other, _ = _twin_setup(tmp_path / "other", nvrtc_cache, registers=200)
    assert other.kernels[0].spill_bytes is None


def test_twin_spills_add_their_write_back_to_dram_and_l2(tmp_path, nvrtc_cache, monkeypatch):
    model, target = _twin_setup(tmp_path, nvrtc_cache)
    (plain,) = predict(model, capacities(get_machine("h200")), target, paths=["FUSED_TC16"],
                       aliases={"FUSED_TC16": "FUSED_TC"})
    monkeypatch.setattr(Build, "spill_bytes", lambda self, kernel: 32)  # ptxas spilled 32 B/thread
    (spilled,) = predict(model, capacities(get_machine("h200")), target, paths=["FUSED_TC16"],
                       aliases={"FUSED_TC16": "FUSED_TC"})
    extra = 32 * GRID * model.kernels[0].counters.block  # at 256 threads 67 MB: session 20 measured 65 MB more at p = 31
    k0, k1 = plain.kernels[0], spilled.kernels[0]
    h200 = capacities(get_machine("h200"))
    assert k1.demands["dram"] - k0.demands["dram"] == pytest.approx(extra / (h200.per_sm_cycle["dram"] * 132))
    assert k1.demands["l2_bytes"] - k0.demands["l2_bytes"] == pytest.approx(extra / (h200.per_sm_cycle["l2_bytes"] * 132))
    assert k0.binding == k1.binding == "dram" and k1.dmma == k0.dmma
    assert k1.seconds / k0.seconds == pytest.approx(1 + extra / 9.75e8)  # DRAM-bound: time follows the bytes


def test_spill_transfer_without_the_source_spills_keeps_the_counts(tmp_path, nvrtc_cache):
    model, _ = _twin_setup(tmp_path, nvrtc_cache)
    k = model.kernels[0]
    assert spill_transfer(k, 0) == k.counters.counts
    unknown = dataclasses.replace(k, spill_bytes=None)
    assert spill_transfer(unknown, 64) == k.counters.counts
    # a target that spills less than the source loses that write-back, never below zero
    spilling = dataclasses.replace(k, spill_bytes=10**6)
    assert spill_transfer(spilling, 0)["dram_bytes"] == 0.0


def test_a_target_holding_fewer_warps_is_flagged(tmp_path, nvrtc_cache, monkeypatch):
    model, target = _twin_setup(tmp_path, nvrtc_cache)
    held = model.kernels[0].blocks_per_sm
    assert held is not None and held >= 1
    (same,) = predict(model, capacities(get_machine("h200")), target, paths=["FUSED_TC16"],
                      aliases={"FUSED_TC16": "FUSED_TC"})
    assert same.notes == [] and same.kernels[0].fewer_warps == []
    original = Build.blocks_per_sm
    monkeypatch.setattr(Build, "blocks_per_sm",
                        lambda self, k: original(self, k) if k.entry.symbol.startswith("fused_tc_") else held - 1 or 0)
    (fewer,) = predict(model, capacities(get_machine("h200")), target, paths=["FUSED_TC16"],
                       aliases={"FUSED_TC16": "FUSED_TC"})
    warps = model.kernels[0].counters.block // 32
    assert fewer.kernels[0].fewer_warps == [held * warps, (held - 1) * warps]
    assert fewer.seconds == same.seconds  # flagged, not corrected
    assert "warps per SM against the calibration binary's" in fewer.notes[0]


# --- the occupancy axis: the same binary held to fewer blocks per SM -----------------------------

from composer.model.predict import occupancy_factor  # noqa: E402


def test_occupancy_factor_interpolates_in_log_warps_and_holds_at_the_ends():
    points = [[8.0, 2.0e6], [16.0, 1.0e6], [32.0, 0.8e6]]
    assert occupancy_factor(points, 16, 8) == pytest.approx(2.0)
    assert occupancy_factor(points, 32, 16) == pytest.approx(1.25)
    # halfway in log warps between 16 and 32: the geometric mean of the cycles
    assert occupancy_factor(points, 32, 16 * 2 ** 0.5) == pytest.approx((1.0e6 * 0.8e6) ** 0.5 / 0.8e6)
    assert occupancy_factor(points, 16, 4) == pytest.approx(2.0)  # below the lowest cap: held there


def test_the_resident_option_is_a_positive_block_count():
    from composer.paths.registry import path_class

    option = path_class("FUSED_TC").options["resident"]
    assert option.parse("2") == 2
    with pytest.raises((ValueError, ComposerError)):
        option.parse("0")


def test_capped_profiles_give_the_occupancy_axis(tmp_path, nvrtc_cache):
    """A profile directory taken with --option FUSED_TC.resident=N calibrates nothing itself: its
    kernels become points on the full calibration's occupancy axis, and a twin of the same block
    that holds fewer warps is priced from them."""
    import json

    model, target = _twin_setup(tmp_path, nvrtc_cache)
    k = model.kernels[0]
    block = k.counters.block
    # the same kernel at half its warps, 1.5x the cycles (ncu's theoretical occupancy says the warps)
    full_pct, half_pct = 100.0 * 32 / 64, 100.0 * 16 / 64
    rows = {}
    for label, pct, cycles in (("full", full_pct, 6e5), ("cap", half_pct, 9e5)):
        row = kernel_row("fused_tc_p31_k0_xy", dmma=1e6, dram=9.75e8, l2=2e9, cycles=cycles, grid=GRID, block=block,
                         registers=k.counters.registers)
        row["sm__maximum_warps_per_active_cycle_pct"] = f"{pct}"
        rows[label] = row
    write_profile(tmp_path / "full", "FUSED_TC", 31, [rows["full"]])
    write_profile(tmp_path / "cap", "FUSED_TC", 31, [rows["cap"]])
    summary = json.loads((tmp_path / "cap" / "profile.json").read_text())
    for entry in summary.values():
        entry["options"] = {"resident": 2}
    (tmp_path / "cap" / "profile.json").write_text(json.dumps(summary))
    source = tmp_path / "src"
    axis = fit([ProfileSource(tmp_path / "full", get_machine("h200")), ProfileSource(tmp_path / "cap", get_machine("h200"))],
               build=source)
    assert len(axis.kernels) == 1  # the capped profile is not a calibration of its own
    assert axis.kernels[0].occupancy == [[16.0, pytest.approx(9e5)], [32.0, pytest.approx(6e5)]]
    # a twin of the same block at 16 warps: the source's own 1.5x, on top of the plain transfer
    (plain,) = predict(model, capacities(get_machine("h200")), target, paths=["FUSED_TC16"],
                       aliases={"FUSED_TC16": "FUSED_TC"})
    import composer.model.build as build_module

    original = build_module.Build.blocks_per_sm
    try:
        build_module.Build.blocks_per_sm = (lambda self, kernel: original(self, kernel)
                                            if kernel.entry.symbol.startswith("fused_tc_") else 16 // (block // 32))
        held = dataclasses.replace(axis.kernels[0], blocks_per_sm=32 // (block // 32))
        axis.kernels[0] = held
        (priced,) = predict(axis, capacities(get_machine("h200")), target, paths=["FUSED_TC16"],
                            aliases={"FUSED_TC16": "FUSED_TC"})
    finally:
        build_module.Build.blocks_per_sm = original
    assert priced.kernels[0].fewer_warps == [32, 16]
    assert priced.kernels[0].occupancy_factor == pytest.approx(1.5)
    assert priced.seconds == pytest.approx(1.5 * plain.seconds)  # the same counts and eta otherwise
    assert "x1.500, the calibration binary's own slowdown there" in priced.notes[0]


@pytest.mark.gpu
@pytest.mark.parametrize("order,cap", [(31, 2), (255, 1)])
def test_resident_cap_holds_the_blocks_and_the_path_still_validates(order: int, cap: int) -> None:
    """`--option FUSED_TC.resident=N`: every volume kernel at most N blocks per SM (at least one at
    exactly N), the result equal to the reference on the point-varying input."""
    import numpy as np

    from composer import dg
    from composer.paths.problem import DeviceProblem
    from composer.paths.registry import path_class
    from composer.runtime import default_device

    grid = {31: (2, 1, 1), 255: (1, 1, 1)}[order]
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    problem = DeviceProblem.upload(fields, order, grid, default_device())
    free = path_class("FUSED_TC")(problem)
    held = path_class("FUSED_TC")(problem, resident=cap)
    natural, capped = free.resident_blocks(), held.resident_blocks()
    volume = [name for name in capped if "face" not in name]
    assert all(capped[n] <= cap for n in volume) and any(natural[n] > cap for n in volume)
    assert any(capped[n] == cap for n in volume)
    problem.dqdt.copy_from(np.full(ref.shape, np.nan), problem.stream)
    held.launch(problem.ptr("q"), problem.dqdt.ptr)
    out = problem.download(problem.dqdt)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-12


def test_a_capped_profile_without_its_full_calibration_is_refused(tmp_path):
    import json

    from composer.model.errors import ModelError

    row = kernel_row("fused_tc_p31_k0_xy", dmma=1e6, dram=9.75e8, cycles=9e5, grid=GRID, block=256)
    row["sm__maximum_warps_per_active_cycle_pct"] = "25.0"
    write_profile(tmp_path / "cap", "FUSED_TC", 31, [row])
    summary = json.loads((tmp_path / "cap" / "profile.json").read_text())
    for entry in summary.values():
        entry["options"] = {"resident": "2"}  # as the CLI records it
    (tmp_path / "cap" / "profile.json").write_text(json.dumps(summary))
    with pytest.raises(ModelError, match=r"without a full calibration to attach to: FUSED_TC p=31 on h200"):
        fit([ProfileSource(tmp_path / "cap", get_machine("h200"))])


def test_per_cycle_scales_bench_times_by_their_clock(tmp_path):
    """`composer model score --per-cycle`: a bench cell at 1740 MHz against a prediction priced at the
    1980-MHz boost clock is compared as its cycles at 1980 MHz; a cell without clock samples is refused."""
    import json

    from composer.model.errors import ModelError
    from composer.model.measured import per_cycle, read_measured
    from tests.model_fixtures import write_bench

    bench = write_bench(tmp_path / "b", {("FUSED_TC16", 767): 65.3e-3, ("FUSED_TC", 767): 81.4e-3})
    with pytest.raises(ModelError, match="no SM clock samples"):
        per_cycle(read_measured(bench), 1.98e9)
    summary = json.loads((bench / "summary.json").read_text())
    for entry, mhz in zip(summary["summaries"], (1740, 1950)):
        entry["clocks"] = {"sm_clock_mhz_median": mhz}
    (bench / "summary.json").write_text(json.dumps(summary))
    cells = {c.path: c.seconds for c in per_cycle(read_measured(bench), 1.98e9)}
    assert cells["FUSED_TC16"] == pytest.approx(65.3e-3 * 1740 / 1980)
    assert cells["FUSED_TC"] == pytest.approx(81.4e-3 * 1950 / 1980)


def test_occupancy_padding_holds_a_kernel_to_its_cap(monkeypatch):
    """The padding against an occupancy calculator stand-in (sm_90: 228 KiB per SM, 1 KiB reserved
    per block): the padded kernel holds exactly the cap; one at or under the cap keeps its memory."""
    import types

    import composer.paths.fused as fused

    monkeypatch.setattr(fused, "_prefer_shared_carveout", lambda kernel: None)

    class FakeKernel:
        name, static_smem = "k", 1024
        device = types.SimpleNamespace(arch="sm_90")

        def __init__(self) -> None:
            self.max_dynamic = 48 * 1024

        def set_max_dynamic_smem(self, nbytes: int) -> None:
            self.max_dynamic = nbytes

        def resident_blocks(self, threads: int, smem: int) -> int:
            if smem > self.max_dynamic:
                return 0
            return min(4, (228 * 1024) // (smem + self.static_smem + 1024))  # registers cap it at 4

    kernel = FakeKernel()
    assert fused.occupancy_padding(kernel, 256, 20480, 4) == 20480  # holds 4 already
    for cap in (1, 2, 3):
        pad = fused.occupancy_padding(FakeKernel(), 256, 20480, cap)
        probe = FakeKernel()
        probe.set_max_dynamic_smem(pad)
        assert pad > 20480 and probe.resident_blocks(256, pad) == cap
