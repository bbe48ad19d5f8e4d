"""Thread-block clusters (sm_90+): a probe that checks, on the GPU, that a cluster launch gives its
blocks each other's shared memory (distributed shared memory).

Why: the fused paths at p = 127 can only reach their target with x and y of a whole k-plane in one
kernel, and at Nq = 128 a plane of q*u and q*v (256 KiB) is more than one block's shared memory: two
blocks of a cluster must hold it together (docs/results.md section 7, issue 16). Before a kernel
is built on that, the runtime's cluster launch (``Kernel.launch(..., cluster=N)``, cuLaunchKernelEx)
and the PTX it relies on (``%cluster_ctarank``, ``mapa.shared::cluster``, ``barrier.cluster``) are
checked here: each block writes its cluster rank into its own shared memory, the cluster syncs, and
each block reads its neighbour's through ``mapa``.

The source is PTX inline assembly, not cooperative_groups: NVRTC here has no CUDA include path.
"""

from __future__ import annotations

import numpy as np

from .device import Device, ensure_context
from .memory import DeviceBuffer
from .module import Module
from .nvrtc import compile_cuda
from .params import params

SOURCE = r"""
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

extern "C" __global__ void cluster_neighbour(int* out) {
    __shared__ int mine;
    unsigned rank, size;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    if (threadIdx.x == 0) mine = (int)rank;
    cluster_sync();
    unsigned local = (unsigned)__cvta_generic_to_shared(&mine);
    unsigned next = (rank + 1) % size, remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(next));
    int value;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(value) : "r"(remote) : "memory");
    if (threadIdx.x == 0) out[blockIdx.x] = value * 1000 + (int)size;
    cluster_sync();  // no block leaves while a neighbour may still read its shared memory
}
"""
BLOCK_THREADS = 32


def expected_neighbours(blocks: int, cluster: int) -> list[int]:
    """What the probe writes for ``blocks`` blocks in 1-D clusters of ``cluster``: block b has rank
    b % cluster and reads its successor's rank."""
    return [((b % cluster + 1) % cluster) * 1000 + cluster for b in range(blocks)]


def cluster_neighbours(cluster: int, clusters: int = 4, device: Device | None = None) -> list[int]:
    """Run the probe with ``clusters`` clusters of ``cluster`` blocks; what each block read."""
    dev = ensure_context(device)
    compiled = compile_cuda(SOURCE, "cluster_probe.cu", arch=dev.arch, entry_points=["cluster_neighbour"])
    module = Module.from_cubin(compiled.cubin, dev)
    blocks = cluster * clusters
    out = DeviceBuffer(4 * blocks, dev)
    try:
        kernel = module.get_kernel(compiled.symbol("cluster_neighbour"), params("out:ptr"), BLOCK_THREADS)
        kernel.launch(blocks, args=(out,), cluster=cluster)
        dev.synchronize()
        values = out.to_numpy(blocks, np.int32)
    finally:
        out.free()
        module.close()
    return [int(v) for v in values]


__all__ = ["SOURCE", "cluster_neighbours", "expected_neighbours"]
