"""Thread-block clusters: the launch shape's checks and the distributed-shared-memory probe
(composer.runtime.cluster). CPU: the checks and the probe's compilation for sm_90 (and its refusal
on sm_80); GPU (marked): the probe on the H200 with clusters of 2 ... 16 blocks."""

from __future__ import annotations

import pytest

from composer.arch.limits import arch_limits
from composer.runtime.cluster import SOURCE, expected_neighbours
from composer.runtime.errors import CompileError, LaunchError
from composer.runtime.nvrtc import compile_cuda
from composer.runtime.params import cluster_dims


def test_cluster_shape_divides_the_grid_and_respects_the_arch():
    assert cluster_dims(2, (8, 1, 1), 16) == (2, 1, 1)
    assert cluster_dims((2, 2), (4, 4, 1), 16) == (2, 2, 1)
    with pytest.raises(LaunchError, match="not a whole number of clusters .* along x"):
        cluster_dims(4, (6, 1, 1), 16)
    with pytest.raises(LaunchError, match="holds 32 blocks; this architecture allows at most 16"):
        cluster_dims((8, 4), (8, 4, 1), 16)
    with pytest.raises(LaunchError, match="no thread-block clusters before sm_90"):
        cluster_dims(2, (2, 1, 1), arch_limits("sm_80").max_cluster_blocks)
    assert arch_limits("sm_90").max_cluster_blocks == 16 and arch_limits("sm_100").max_cluster_blocks == 16


def test_probe_compiles_for_sm_90_and_not_for_sm_80(tmp_path):
    compiled = compile_cuda(SOURCE, "cluster_probe.cu", arch="sm_90", entry_points=["cluster_neighbour"],
                            cache_dir=tmp_path)
    assert compiled.cubin[:4] == b"\x7fELF"
    with pytest.raises(CompileError, match="cluster"):
        compile_cuda(SOURCE, "cluster_probe.cu", arch="sm_80", entry_points=["cluster_neighbour"], cache_dir=tmp_path)


def test_expected_neighbours():
    assert expected_neighbours(4, 2) == [1002, 2, 1002, 2]
    assert expected_neighbours(3, 3) == [1003, 2003, 3]


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [2, 4, 8, 16])
def test_each_block_reads_its_neighbours_shared_memory(cluster):
    from composer.runtime import gpu_available

    if not gpu_available():
        pytest.skip("no GPU")
    from composer.runtime.cluster import cluster_neighbours
    from composer.runtime.device import ensure_context

    if arch_limits(ensure_context(None).arch).max_cluster_blocks < cluster:
        pytest.skip("clusters of this size need sm_90+")
    assert cluster_neighbours(cluster, clusters=3) == expected_neighbours(3 * cluster, cluster)
