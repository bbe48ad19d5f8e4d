"""How many SMs a stream's kernels actually run on, read back with ``%smid`` in the same process.

Why measure: an SM restriction is only as good as its check (the paper read the active SMs from
%smid under MPS, §8.1). A green context that silently ran on the whole GPU would put every
restricted point of the balance axis at the full machine. The probe launches blocks of 1024
threads, of which an SM holds at most two, several times as many as the device has SMs, each
spinning ~20 µs: the first wave alone must occupy every SM the stream may use. Each block records
its ``%smid``; the number of distinct ids is the active SM count.
"""

from __future__ import annotations

import numpy as np

from .device import Device, ensure_context
from .memory import DeviceBuffer
from .module import Module
from .nvrtc import compile_cuda
from .params import params

SMID_SLOTS = 1024  # above any %nsmid of current GPUs
BLOCK_THREADS = 1024  # at most 2048 threads per SM: two such blocks fill one
BLOCKS_PER_SM = 4
SPIN_CYCLES = 40_000  # ~20 µs at 2 GHz: far longer than launching a wave

_SOURCE = r"""
extern "C" __global__ void smid_probe(unsigned int* seen, unsigned int slots, long long spin) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (threadIdx.x == 0 && smid < slots) atomicOr(&seen[smid], 1u);
    long long start = clock64();
    while (clock64() - start < spin) { }
}
"""


def active_sm_ids(stream: object | None = None, device: Device | None = None) -> list[int]:
    """The distinct ``%smid`` values of a probe kernel launched on ``stream`` (a Stream, a raw
    CUstream, or None for the current context's default stream)."""
    dev = ensure_context(device)
    compiled = compile_cuda(_SOURCE, "smid_probe.cu", arch=dev.arch, entry_points=["smid_probe"])
    module = Module.from_cubin(compiled.cubin, dev)
    seen = DeviceBuffer(4 * SMID_SLOTS, dev)
    try:
        seen.zero(stream)
        kernel = module.get_kernel(compiled.symbol("smid_probe"), params("seen:ptr slots:u32 spin:i64"), BLOCK_THREADS)
        kernel.launch(BLOCKS_PER_SM * dev.sm_count, args=(seen, SMID_SLOTS, SPIN_CYCLES), stream=stream)
        flags = seen.to_numpy(SMID_SLOTS, np.uint32, stream=stream)
    finally:
        seen.free()
        module.close()
    return [int(i) for i in np.flatnonzero(flags)]


def active_sm_count(stream: object | None = None, device: Device | None = None) -> int:
    """How many distinct SMs a probe kernel on ``stream`` ran on."""
    return len(active_sm_ids(stream, device))
