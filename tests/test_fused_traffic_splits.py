"""Byte floors of the direction splits (composer.fused.traffic.split_floors, `composer info`)."""

from __future__ import annotations

import json

import pytest

from composer.config.schedules import load_schedule
from composer.fused.config import fused_config
from composer.fused.traffic import SPLITS, byte_floor_bytes, placement, split_floors, staged_bytes, unread_vmapm_faces


@pytest.mark.parametrize("order, variant", [(7, "FUSED"), (15, "FUSED_TC16"), (63, "FUSED_TC16"), (127, "FUSED_TC16"),
                                            (255, "FUSED_TC16")])
def test_the_shipped_schedule_floor_is_its_split_row(order, variant):
    """A shipped schedule's own floor is the row of its split and flux, less the vmapM entries its kernels
    do not read (the x faces with "xfaces"): one traffic model, not two."""
    config = fused_config(variant, order)
    grid = load_schedule(order).benchmark.grid
    split = "|".join(k.dir_names for k in config.kernels)
    row = next(f for f in split_floors(order, grid) if f.split == split and f.flux == config.flux)
    face_points = (order + 1) ** 2 * grid[0] * grid[1] * grid[2]
    unread = sum(unread_vmapm_faces(config, k.dirs) for k in config.kernels) if config.flux == "inline" else 0
    assert row.bytes - unread * face_points * 4 == byte_floor_bytes(config, grid)


def test_fewer_kernels_move_fewer_bytes_and_need_more_on_chip():
    grid = (2, 2, 2)
    for flux in ("array", "inline"):
        rows = {f.split: f for f in split_floors(127, grid) if f.flux == flux}
        assert rows["x|y|z"].bytes > rows["xy|z"].bytes > rows["xyz"].bytes
        assert rows["x|y|z"].staged_bytes < rows["xy|z"].staged_bytes < rows["xyz"].staged_bytes
    assert set(SPLITS) == {f.split for f in split_floors(7, (1, 1, 1))}


def test_placement_follows_the_arch_limits():
    assert staged_bytes("xy|z", 64) == 64 * 1024 and placement(64 * 1024) == "one block"
    assert placement(staged_bytes("xy|z", 128)) == "cluster of 2 blocks"  # 256 KiB > 227 KiB
    assert placement(staged_bytes("xyz", 32)) == "cluster of 4 blocks"  # 768 KiB
    assert placement(staged_bytes("xyz", 64)) == "does not fit on chip"  # 6 MiB > 16 x 227 KiB
    assert placement(staged_bytes("xy|z", 128), "sm_80") == "does not fit on chip"  # no clusters on sm_80


def test_info_json_lists_the_splits(capsys):
    from composer.cli.main import main

    assert main(["info", "--order", "127", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {(r["split"], r["flux"]) for r in report["splits"]} == {(s, f) for s in SPLITS for f in ("array", "inline")}
    assert all(r["floor_s"] > 0 and r["over_unique"] >= 1.0 for r in report["splits"])


def test_floors_by_hand_at_nq_2():
    """One element at Nq = 2 (64 B per volume array, 4 nodes per face), the module docstring's model
    counted by hand: every kernel streams q and its velocities and metric factors; dqdt is written by
    the first kernel and read and written by the others; inline faces read nx, ny, nz, F (32 B), the
    two 4-byte maps and the off-direction velocities on both sides; the face kernel reads the face
    fields, the two maps, writes fstar and gathers q, u, v, w on both sides (x faces a sector each)."""
    rows = {(f.split, f.flux): f.bytes for f in split_floors(1, (1, 1, 1))}
    # xyz inline: (1 + 6) * 64 + 64 (dqdt) volume, 2 * 3 * 4 face nodes * (32 + 8 + 0) B
    assert rows[("xyz", "inline")] == 7 * 64 + 64 + 24 * 40
    # x|y|z array: face kernel 6*4*(32+8+8) + 2*4*4*(2*32+4*8); kernels 3*64+64, then twice 3*64+128,
    # each reading fstar on its 2 faces (2*4 nodes * 8 B)
    assert rows[("x|y|z", "array")] == 6 * 4 * 48 + 32 * 96 + (256 + 320 + 320) + 3 * 64
    # xy|z inline: k0 carries 2 (5*64+64, 16 face nodes * (40 + 2*1*8)), k1 carries 1 (3*64+128, 8 * (40 + 2*2*8))
    assert rows[("xy|z", "inline")] == (5 * 64 + 64 + 16 * 56) + (3 * 64 + 128 + 8 * 72)
