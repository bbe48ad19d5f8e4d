"""Hardware facts (composer.arch.limits: per-architecture SM and block limits, as the CUDA
programming guide's "Technical Specifications per Compute Capability" table and the tuning guides
state them), the layering of composer.arch, and the one atomic-write helper (composer.fileio)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from composer.arch.limits import DEFAULT_ARCH, UnknownArchError, arch_limits, load_arch_limits, resident_blocks
from composer.arch.machines import DEFAULT_MACHINE, get_machine, load_machines
from composer.errors import ComposerError, ConfigError
from composer.fileio import atomic_write, atomic_write_bytes, atomic_write_text

KIB = 1024


# --- limits as documented --------------------------------------------------------------------


@pytest.mark.parametrize("arch,per_block_kib,per_sm_kib,threads_per_sm,blocks_per_sm", [
    ("sm_80", 163, 164, 2048, 32),  # Ampere tuning guide: A100 164 KB per SM, 163 KB per block
    ("sm_86", 99, 100, 1536, 16),
    ("sm_89", 99, 100, 1536, 24),
    ("sm_90", 227, 228, 2048, 32),  # Hopper tuning guide; CUTLASS sm90_smem_capacity_bytes = 232448
    ("sm_100", 227, 228, 2048, 32),  # Blackwell tuning guide
])
def test_limits_as_documented(arch: str, per_block_kib: int, per_sm_kib: int, threads_per_sm: int,
                              blocks_per_sm: int) -> None:
    limits = arch_limits(arch)
    assert limits.arch == arch
    assert limits.smem_per_block_optin == per_block_kib * KIB
    assert limits.smem_per_sm == per_sm_kib * KIB
    assert (limits.max_threads_per_sm, limits.max_blocks_per_sm) == (threads_per_sm, blocks_per_sm)
    assert (limits.registers_per_sm, limits.registers_per_block, limits.max_registers_per_thread) == (65536, 65536, 255)
    assert (limits.max_threads_per_block, limits.warp_size, limits.smem_static_per_block) == (1024, 32, 48 * KIB)
    assert limits.max_warps_per_sm == threads_per_sm // 32


def test_sm80_is_not_given_the_sm90_budget() -> None:
    """The reported bug: 227 KiB was applied to sm_80 too."""
    assert arch_limits("sm_80").smem_per_block_optin == 166912
    assert arch_limits("sm_90").smem_per_block_optin == 232448


def test_feature_suffix_shares_the_base_limits() -> None:
    assert arch_limits("sm_90a") == arch_limits("sm_90")
    assert arch_limits("sm_100a") == arch_limits("sm_100")


def test_smem_per_block_leaves_room_for_the_blocks_per_sm() -> None:
    sm90 = arch_limits("sm_90")
    assert sm90.smem_per_block(0) == sm90.smem_per_block(1) == 227 * KIB
    assert sm90.smem_per_block(2) == 228 * KIB // 2 - KIB  # each block costs the reserved 1 KiB
    assert arch_limits("sm_80").smem_per_block(2) == 164 * KIB // 2 - KIB


def test_unknown_arch_lists_the_known_ones() -> None:
    with pytest.raises(UnknownArchError, match="sm_75.*known architectures: sm_80, sm_86, sm_89, sm_90, sm_100"):
        arch_limits("sm_75")
    assert issubclass(UnknownArchError, ComposerError)
    with pytest.raises(ValueError, match="must look like 'sm_90'"):
        arch_limits("hopper")


# --- the loader checks the table --------------------------------------------------------------


def _entry(**overrides: object) -> str:
    values = {"description": '"test"', "compute_capability": '"9.0"', "smem_per_sm_kib": 228,
              "smem_per_block_optin_kib": 227, "smem_reserved_per_block_kib": 1, "smem_static_per_block_kib": 48,
              "registers_per_sm": 65536, "registers_per_block": 65536, "max_registers_per_thread": 255,
              "max_threads_per_block": 1024, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32, "warp_size": 32,
              "max_cluster_blocks": 16, "smem_carveouts_kib": "[0, 8, 16, 32, 64, 100, 132, 164, 196, 228]",
              "l1_shared_per_sm_kib": 256}
    values.update(overrides)
    return "[archs.sm_90]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


def test_loader_reads_a_well_formed_file(tmp_path: Path) -> None:
    path = tmp_path / "archs.toml"
    path.write_text(_entry())
    loaded = load_arch_limits(path)["sm_90"]
    assert loaded.description == "test"
    assert dataclasses.replace(loaded, description=arch_limits("sm_90").description) == arch_limits("sm_90")


@pytest.mark.parametrize("overrides,message", [
    ({"smem_per_block_optin_kib": 228}, "exceed smem_per_sm_kib"),
    ({"compute_capability": '"8.0"'}, "compute_capability 8.0 is not sm_90"),
    ({"max_threads_per_block": 1000}, "not whole warps"),
    ({"max_threads_per_sm": 512}, "max_threads_per_block exceeds max_threads_per_sm"),
    ({"registers_per_sm": "65536.0"}, "registers_per_sm: expected a positive integer"),
    ({"l1_kib": 256}, "unknown key"),
    ({"smem_carveouts_kib": "[0, 8, 16, 32, 64, 100, 132, 164, 196]"}, "largest of smem_carveouts_kib is not smem_per_sm"),
    ({"smem_carveouts_kib": "[8, 16, 228]"}, "ascending list of KiB capacities from 0"),
    ({"smem_carveouts_kib": "[0, 64, 32, 228]"}, "ascending list"),
    ({"l1_shared_per_sm_kib": 128}, "l1_shared_per_sm_kib is below smem_per_sm_kib"),
])
def test_loader_rejects_inconsistent_entries(tmp_path: Path, overrides: dict, message: str) -> None:
    path = tmp_path / "archs.toml"
    path.write_text(_entry(**overrides))
    with pytest.raises(ConfigError, match=f"archs.toml: archs.sm_90.*{message}"):
        load_arch_limits(path)


# --- machines name an arch with limits; the default arch is the lab machine's ------------------


def test_every_shipped_machine_has_arch_limits() -> None:
    for machine in load_machines().values():
        assert machine.limits == arch_limits(machine.arch)


def test_default_arch_is_the_default_machines() -> None:
    assert get_machine(DEFAULT_MACHINE).arch == DEFAULT_ARCH


def test_arch_sits_below_config_and_the_rest() -> None:
    """composer.arch imports nothing of composer but the error types, the generic TOML field
    readers and the packaged-data locator (no schedule loader, runtime, path or generator)."""
    code = ("import sys, composer.arch.limits, composer.arch.machines, composer.arch.mma, composer.arch.sass, "
            "composer.arch.hotloop, json; print(json.dumps([m for m in sys.modules if m.startswith('composer')]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    loaded = set(json.loads(out.stdout))
    outside = {m for m in loaded if not m.startswith("composer.arch")}
    assert outside == {"composer", "composer.errors", "composer.config", "composer.config.fields", "composer.packaged"}


# --- atomic writes ----------------------------------------------------------------------------


def test_atomic_write_text_and_bytes_create_and_replace(tmp_path: Path) -> None:
    text_file, bin_file = tmp_path / "new" / "a.json", tmp_path / "b.cubin"
    atomic_write_text(text_file, "first\r\n")
    atomic_write_bytes(bin_file, b"\x00\x01")
    assert text_file.read_bytes() == b"first\r\n" and bin_file.read_bytes() == b"\x00\x01"  # no newline translation
    atomic_write_text(text_file, "second ü")
    atomic_write_bytes(bin_file, b"\x02")
    assert text_file.read_text(encoding="utf-8") == "second ü" and bin_file.read_bytes() == b"\x02"
    assert sorted(os.listdir(tmp_path)) == ["b.cubin", "new"] and os.listdir(tmp_path / "new") == ["a.json"]


def test_atomic_write_leaves_the_old_file_and_no_temp_file_on_an_exception(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    atomic_write_bytes(target, b"old")

    def half_then_fail(fh) -> None:
        fh.write(b"ne")
        raise KeyboardInterrupt  # not only Exception: an interrupted write cleans up too

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, half_then_fail, binary=True)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["manifest.json"]


def test_atomic_write_failed_rename_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "plan.json"
    atomic_write_text(target, "old")

    def refuse(*args: object) -> None:
        raise OSError("rename refused")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="rename refused"):
        atomic_write_bytes(target, b"new")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["plan.json"]


def test_every_writer_uses_the_one_helper() -> None:
    """No second implementation: the writers' atomic helpers are composer.fileio's."""
    import composer.bench.results as results
    import composer.build.builder as builder
    import composer.runtime.manifest as manifest
    import composer.runtime.nvrtc as nvrtc

    assert results.atomic_write is atomic_write and results.atomic_write_text is atomic_write_text
    assert builder.atomic_write_bytes is manifest.atomic_write_bytes is nvrtc.atomic_write_bytes is atomic_write_bytes
    root = Path(__file__).resolve().parents[1] / "composer"
    replacing = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "os.replace(" in p.read_text())
    assert replacing == ["fileio.py"]


# --- the L1/shared split: a preferred carveout's shared memory, L1 and blocks per SM ---------------


@pytest.mark.parametrize("arch,percent,smem_kib,l1_kib", [
    ("sm_90", 100, 228, 28), ("sm_90", 72, 196, 60), ("sm_90", 64, 164, 92), ("sm_90", 50, 132, 124),
    ("sm_90", 1, 8, 248), ("sm_90", 0, 0, 256), ("sm_80", 50, 100, 92), ("sm_80", 100, 164, 28), ("sm_86", 40, 64, 64),
])
def test_a_preferred_carveout_takes_the_next_supported_capacity(arch: str, percent: int, smem_kib: int,
                                                                l1_kib: int) -> None:
    """The guides' capacities (0, 8, ..., 228 KB of a 256-KB store on sm_90): 64 % of 228 KB is 145.9 KB, so 164."""
    limits = arch_limits(arch)
    capacity = limits.carveout_capacity(percent)
    assert (capacity // 1024, (limits.l1_shared_per_sm - capacity) // 1024) == (smem_kib, l1_kib)


def test_the_carveout_caps_the_blocks_per_sm() -> None:
    """FUSED_TC's p = 7 kernel (256 threads, 32 registers, 22272 bytes of shared memory): 8 blocks per SM by
    its threads at the default split (196 KB of shared memory, 60 KB of L1); a 164-KB carveout holds 7 and
    leaves 92 KB of L1, a 132-KB one 5 and 124 KB."""
    limits = arch_limits("sm_90")
    blocks = {pct: resident_blocks(limits, 256, 22272, 32, smem_capacity=limits.carveout_capacity(pct))
              for pct in (100, 72, 64, 50, 1)}
    assert blocks == {100: 8, 72: 8, 64: 7, 50: 5, 1: 0}
    assert resident_blocks(limits, 256, 22272, 32) == 8  # no carveout given: the largest
    with pytest.raises(ValueError, match="percentage 0 ... 100"):
        limits.carveout_capacity(101)


def test_the_carveout_option_is_a_percentage() -> None:
    from composer.paths.registry import path_class

    for variant in ("FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16"):
        option = path_class(variant).options["carveout"]
        assert option.parse("64") == 64 and option.parse(0) == 0 and option.parse(100) == 100
        for bad in ("-1", "101", "half", 57.9, True, "57.9"):
            with pytest.raises(ValueError):
                option.parse(bad)
