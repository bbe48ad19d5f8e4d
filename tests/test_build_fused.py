"""``composer build --paths FUSED...``: the fused kernels cross-compiled into the build directory
(CUBINs + manifest entries with block, shared memory, parameters and grid rule), incremental,
rebuilt when a schedule changes, with clear errors for paths, orders and architectures."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from composer.build.builder import build
from composer.build.plan import plan
from composer.errors import ComposerError
from composer.fused.builder import kernel_plans
from composer.fused.config import fused_config
from composer.runtime.manifest import read_manifest
from tests.test_fused_cpu import needs_nvrtc

SCHEDULES = Path(__file__).resolve().parents[1] / "schedules"


@needs_nvrtc
def test_fused_kernels_build_into_the_manifest(tmp_path) -> None:
    jobs = plan("sm_90", "16x8x4", [511], ["FUSED_TC16", "FUSED_DFMA"])
    # one face kernel for both variants, then each variant's three streamed kernels
    assert [j.spec["kernel"] for j in jobs] == ["face", 0, 1, 2, 0, 1, 2]
    report = build(jobs, tmp_path)
    assert len(report.built) == 7
    entries = {e.config["job"]: e for e in read_manifest(tmp_path / "manifest.json")}
    config = fused_config("FUSED_TC16", 511)
    for kp in kernel_plans(config):
        entry = entries[kp.name]
        assert entry.config["kind"] == "fused" and entry.config["volume"] == "stream"
        assert entry.block == (kp.kernel.threads, 1, 1)  # read_manifest returns a tuple
        assert entry.dynamic_smem == kp.smem_bytes
        assert entry.grid(ne=1, sms=132)[0] == kp.blocks_per_element
        assert [p.name for p in entry.params][-2:] == ["dqdt", "ne"]
    assert build(jobs, tmp_path).built == []  # up to date
    from composer.cli.inspect import collect

    rows, problems = collect(tmp_path, None)  # TC16 volume kernels checked for DMMA.16x8x4
    assert len(rows) == 7 and problems == []
    _, problems = collect(tmp_path, "8x8x4")  # the DFMA and face kernels are not held to a shape
    assert len(problems) == 3 and all("fused_tc16_p511" in p for p in problems)
    # --hot-loop: the panel loop of each volume kernel (the shipped p = 511 schedules unroll their
    # copies: no loop nested in it but, in a kernel with an epilogue prefetch, the prefetch loop that
    # runs once, in the panel `prefetch` before the end); the face kernel has no MMA loop
    rows, _ = collect(tmp_path, None, loops=True)
    hot = {r["name"]: r["hot_loop"] for r in rows}
    assert hot["fused_face_flux_nq512"] is None
    for variant in ("FUSED_TC16", "FUSED_DFMA"):
        cfg = fused_config(variant, 511)
        shape = cfg.mma_shape
        for kp in kernel_plans(cfg):
            loop = hot[kp.name]
            assert loop["ldgsts"] > 0 and loop["lds"] > 0, (kp.name, loop)
            # one panel: k_panel / MK MMA k-steps over each warp's tiles (a DFMA build: MM*8*MK/32 each)
            wm, wn = kp.kernel.tile
            iters = (kp.lines(kp.dir) // (shape.m * wm)) * (kp.positions(kp.dir) // (8 * wn)) // (kp.kernel.threads // 32)
            mmas = cfg.k_panel // shape.k * wm * wn * iters
            per_panel = mmas * shape.m * 8 * shape.k // 32 if cfg.dfma else mmas
            if loop["mma"] == per_panel * (kp.nq // kp.k_panel):
                # ptxas (NVRTC 13.5 here) unrolled the whole panel loop of this kernel despite `#pragma unroll 1`
                # (the shipped p = 511 x kernel on 16x8x8 with pointer copies): every panel's MMAs in straight line
                continue
            assert loop["nested_loops"] == (1 if kp.prefetch else 0), (kp.name, loop)
            assert loop["mma"] == per_panel, (kp.name, loop)
            assert loop["instructions_per_mma"] == round(loop["instructions"] / loop["mma"], 2)


@needs_nvrtc
def test_a_schedule_change_rebuilds_its_kernels(tmp_path, monkeypatch) -> None:
    out = tmp_path / "build"
    build(plan("sm_90", "16x8x4", [511], ["FUSED_TC16"]), out)
    override = tmp_path / "schedules"
    override.mkdir()
    text = (SCHEDULES / "p0511.toml").read_text()
    start = text.index("[paths.FUSED_TC16]")
    stages = re.search(r"^stages = (\d+)$", text[start:], re.M)
    changed = text[:start] + text[start:].replace(stages.group(0), f"stages = {3 if stages.group(1) != '3' else 2}", 1)
    assert changed != text
    (override / "p0511.toml").write_text(changed)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(override))
    report = build(plan("sm_90", "16x8x4", [511], ["FUSED_TC16"]), out)
    assert sorted(report.built) == sorted(p.name for p in kernel_plans(fused_config("FUSED_TC16", 511)))
    assert all(r == "configuration changed" for r in report.reasons.values())
    shutil.rmtree(out)


def test_fused_build_errors_are_clear() -> None:
    with pytest.raises(ComposerError, match="needs sm_90 or newer"):
        plan("sm_80", "8x8x4", [511], ["FUSED_TC16"])
    with pytest.raises(ValueError, match="implements none of the orders"):
        plan("sm_90", "16x8x4", [511], ["FUSED"])
    with pytest.raises(ValueError, match="no kernels for"):
        plan("sm_90", "16x8x4", [7], ["BOGUS"])


@needs_nvrtc
def test_fused_path_takes_its_kernels_from_the_build_directory(tmp_path, monkeypatch) -> None:
    """prebuilt(): every kernel from the build directory, byte-identical to what NVRTC compiles
    for the path; a schedule whose source differs, another arch or a corrupt CUBIN: None (the
    path then compiles)."""
    from composer.fused.builder import build as build_fused
    from composer.fused.builder import prebuilt

    from composer.runtime.nvrtc import nvrtc_version

    build(plan("sm_90", "16x8x4", [511], ["FUSED_TC16"]), tmp_path)
    # the table as if measured with this NVRTC (a build directory's kernels load only for the table's
    # compiler: tests/test_fused_compiler.py)
    config = dataclasses.replace(fused_config("FUSED_TC16", 511), nvrtc="{}.{}".format(*nvrtc_version()))
    ready = prebuilt(config, "sm_90", tmp_path)
    assert ready is not None
    fresh = build_fused(config, "sm_90")
    assert [k.name for k in ready.kernels] == [k.name for k in fresh.kernels]
    for a, b in zip(ready.kernels, fresh.kernels):
        assert a.compiled.cubin == b.compiled.cubin and a.compiled.symbol(a.name) == b.compiled.symbol(b.name)
        assert (a.threads, a.smem_bytes, a.blocks_per_element, a.signature) == (
            b.threads, b.smem_bytes, b.blocks_per_element, b.signature)
    from composer.fused.builder import kernel_origin

    # what a bench run records as its kernels' origin: this NVRTC, named from the manifest
    assert kernel_origin(ready, tmp_path) == "nvrtc {}.{} (build {})".format(*nvrtc_version(), tmp_path)

    assert prebuilt(dataclasses.replace(config, stages=3), "sm_90", tmp_path) is None
    assert prebuilt(config, "sm_100", tmp_path) is None
    assert prebuilt(config, "sm_90", tmp_path / "nowhere") is None
    victim = tmp_path / f"{kernel_plans(config)[0].name}.cubin"
    victim.write_bytes(victim.read_bytes()[:-8] + b"\0" * 8)
    assert prebuilt(config, "sm_90", tmp_path) is None


@pytest.mark.gpu
def test_prebuilt_fused_kernels_validate_on_gpu(tmp_path, monkeypatch) -> None:
    """FUSED_TC16 and FUSED_DFMA at p = 255 launched from a composer build directory."""
    from composer.fused.builder import prebuilt
    from composer.fused.trial import TOLERANCE, run_case
    from composer.runtime.device import ensure_context

    device = ensure_context(None)
    build(plan(device.arch, "16x8x4", [255], ["FUSED_TC16", "FUSED_DFMA"]), tmp_path)
    from composer.runtime.nvrtc import nvrtc_version

    here = dataclasses.replace(fused_config("FUSED_TC16", 255), nvrtc="{}.{}".format(*nvrtc_version()))
    assert prebuilt(here, device.arch, tmp_path) is not None
    monkeypatch.setenv("COMPOSER_BUILD_DIR", str(tmp_path))
    for rec in run_case(255, (1, 1, 1), ["FUSED_TC16", "FUSED_DFMA"], device):
        assert rec.get("passed") and rec["rel_err"] <= TOLERANCE, rec


@needs_nvrtc
def test_an_x_pairs_table_builds_with_a_grid_of_half_the_elements(tmp_path, monkeypatch) -> None:
    """A schedule on x_pairs (two x-neighbour elements per block): the manifest launches ne / 2 blocks of
    the table's threads, and an odd element count is a grid-rule error, not a silently dropped element."""
    from composer.runtime.gridexpr import GridRuleError

    override = tmp_path / "schedules"
    shutil.copytree(SCHEDULES, override, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    text = (override / "p0007.toml").read_text()
    start = text.index("[paths.FUSED_TC]")
    end = text.index("\n[paths.", start + 1)
    table = re.sub(r'(?m)^traces = .*\n', "", text[start:end])  # the shipped table may name its traces already
    table = re.sub(r'(?m)^element_bricks = .*\n', "", table)  # bricks order single elements, pairs consecutive ones
    table = table.replace("threads = 256", "threads = 512", 1).replace(
        "pair_io = true", 'pair_io = true\ntraces = "xfaces"\nx_pairs = true', 1)
    (override / "p0007.toml").write_text(text[:start] + table + text[end:])
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(override))
    config = fused_config("FUSED_TC", 7)
    assert config.x_pairs and config.kernels[0].threads == 512
    build(plan("sm_90", "8x8x4", [7], ["FUSED_TC"]), tmp_path / "build")
    entry = next(e for e in read_manifest(tmp_path / "build" / "manifest.json") if e.config["job"] == "fused_tc_p7_k0_xyz")
    assert entry.block == (512, 1, 1) and entry.dynamic_smem == kernel_plans(config)[0].smem_bytes
    assert entry.grid(ne=32768, sms=132)[0] == 16384
    with pytest.raises(GridRuleError, match="not an integer"):
        entry.grid(ne=7, sms=132)
