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


def test_twin_family() -> None:
    # p = 31's shipped FUSED_TC16 table is already FUSED_TC's twin: nothing to add
    assert shape_twin_candidates("FUSED_TC16", 31) == []
    assert shape_twin_candidates("FUSED_TC", 15) == []
    names = [name for name, _ in candidate_list("FUSED_TC16", 15, "shape_twin")]
    assert names[0] == "base" and len(names) == 2 and "tile[1, 2]" in names[1]


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
from tests.model_fixtures import MACHINES_FILE, kernel_row, write_build, write_profile  # noqa: E402

GRID = 8192


@pytest.fixture(autouse=True)
def _worktree_machines(monkeypatch):
    monkeypatch.setenv("COMPOSER_MACHINES", str(MACHINES_FILE))


@pytest.fixture(scope="module")
def nvrtc_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("nvrtc")


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
