"""The ``xyz_cluster`` family: all three directions in one box kernel over a whole element that a
thread-block cluster holds (each block 1/c of the k-planes, z contracted across the cluster through
distributed shared memory): the xyz decomposition at p = 31, whose element's flux tiles outgrow one SM,
and at p = 15 with more blocks per SM than the one-block element.

CPU: the family's tables split z (the last direction) over clusters of 2-4 with whole x and y lines;
every candidate, emulated lane by lane, matches the reference on the point-varying input (<= 1e-13) and
round-trips through its table. GPU (marked): every candidate against the reference on a small grid and
the Table S29 grid."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from composer import dg
from composer.fused.candidates import (candidate_list, label, to_table, xyz_cluster_candidates,
                                       xyz_cluster_refine_candidates)
from composer.fused.config import fused_config
from composer.fused.emulate import emulate

SMALL = {15: (2, 1, 1), 31: (1, 1, 1)}


def test_the_family_splits_z_over_the_cluster() -> None:
    assert xyz_cluster_candidates("FUSED", 31) == [] and xyz_cluster_candidates("FUSED_TC", 63) == []
    for variant in ("FUSED_TC", "FUSED_TC16"):
        for order, sizes in ((15, {2}), (31, {4})):
            found = xyz_cluster_candidates(variant, order)
            assert found
            nq = order + 1
            for name, config in found:
                (k,) = config.kernels
                assert k.dirs == (0, 1, 2) and k.split == 2 and k.cluster in sizes
                assert k.box == (nq // k.cluster, nq, nq) and config.flux == "inline" and config.d_stage == "smem"
                assert label(config) == name
                table = tomllib.loads(to_table(config))["paths"][variant]
                assert fused_config(variant, order, {variant: table}) == config
            assert [n for n, _ in candidate_list(variant, order, "xyz_cluster")][1:] == [n for n, _ in found]


def test_the_refinement_keeps_clusters_of_two_splits_every_axis_and_forms_x_faces() -> None:
    assert xyz_cluster_refine_candidates("FUSED_TC", 31) == [] and xyz_cluster_refine_candidates("FUSED", 15) == []
    for variant in ("FUSED_TC", "FUSED_TC16"):
        found = xyz_cluster_refine_candidates(variant, 15)
        assert any(c.traces == "xfaces" for _, c in found) and any(c.min_blocks == 3 for _, c in found)
        assert {c.kernels[0].split for _, c in found} == {0, 1, 2}  # the pair splits x, y or z
        for name, config in found:
            (k,) = config.kernels
            assert k.cluster == 2 and k.dirs[-1] == k.split and label(config) == name
            assert config.tile_swizzle == (k.box[2] % 16 == 0)  # x split: rows of 8 doubles, padded
            table = tomllib.loads(to_table(config))["paths"][variant]
            assert fused_config(variant, 15, {variant: table}) == config


def test_x_faces_need_whole_x_lines_in_a_cluster() -> None:
    from composer.errors import ConfigError
    from composer.fused.config import parse_table

    table = {"flux": "inline", "mma": "8x8x4", "d_stage": "smem", "traces": "tiles",
             "kernels": [{"dirs": "xyz", "box": [8, 16, 16], "threads": 256, "tile": [2, 1], "cluster": 2}]}
    with pytest.raises(ConfigError, match="forms its x faces from its own staged pairs"):
        parse_table("FUSED_TC", 15, table)
    assert parse_table("FUSED_TC", 15, dict(table, traces="xfaces")).traces == "xfaces"


@pytest.mark.parametrize("variant,order", [("FUSED_TC", 15), ("FUSED_TC16", 15), ("FUSED_TC", 31), ("FUSED_TC16", 31)])
def test_emulated_candidates_match_the_reference(variant: str, order: int) -> None:
    grid = SMALL[order]
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    for name, config in xyz_cluster_candidates(variant, order) + xyz_cluster_refine_candidates(variant, order):
        out = emulate(config, fields, grid)
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13, name


@pytest.fixture(scope="module")
def device():
    from composer.runtime import default_device

    return default_device()


@pytest.mark.gpu
@pytest.mark.parametrize("variant,order", [("FUSED_TC", 15), ("FUSED_TC16", 15), ("FUSED_TC", 31), ("FUSED_TC16", 31)])
@pytest.mark.parametrize("grid_kind", ["small", "benchmark"])
def test_xyz_cluster_tables_match_the_reference_on_the_gpu(device, variant: str, order: int, grid_kind: str) -> None:
    from tests.test_fused_gpu import assert_candidates_validate

    found = xyz_cluster_candidates(variant, order) + [
        (n, c) for n, c in xyz_cluster_refine_candidates(variant, order) if c.traces == "xfaces"]
    assert_candidates_validate(device, order, grid_kind, found)
