"""Register-only DMMA loops: each FP64 MMA shape's dependent latency and issue interval on the SM,
against the independent accumulator chains per warp and the warps per SM.

Why: the model prices a DMMA by its pipe cycles (machines.toml, the four-cycle floor), which holds
while enough independent DMMAs are in flight per sub-partition. A shape twin that holds half the
warps (session 20: the 16-row twins at p = 255 and 511, one block per SM against two) has half the
chains in flight, and how much that costs depends on the shape's latency, which no table of ours
states. A loop of ``chains`` independent accumulators per warp, one block of ``warps`` warps per
SM, measures it: at one chain and one warp the cycles per DMMA are its dependent latency; with
enough chains and warps, the issue interval per sub-partition (4 warps' worth of DMMAs share one).

The kernels are the fused kernels' own atom (``_mma_atom.cuh.j2``), timed with clock64 per warp;
the dynamic shared memory is padded so that one block fits per SM, and every block's %smid is
recorded, so a result states whether the blocks really had an SM each.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from composer.arch.mma import mma_shape
from composer.kernels.render import render

#: Independent accumulator chains per warp and warps per block (one block per SM) a run covers.
CHAINS = (1, 2, 4, 8)
WARPS = (1, 2, 4, 8, 16)
#: Loop trips per launch (each trip: one mma per chain): long enough that clock64 overhead and the
#: first trips' pipeline fill are below a percent.
TRIPS = 4096
#: The outer loop's unroll: amortizes its three loop instructions over unroll x chains DMMAs
#: (the trips a multiple of it, so that the loop has no remainder copy).
UNROLL = 4
#: Sub-partitions (warp schedulers, tensor-core quarters) per SM on sm_80-sm_100.
SUBPARTITIONS = 4


def kernel_name(shape: str, chains: int) -> str:
    return f"dmma_loop_{mma_shape(shape).ptx}_c{chains}"


def loop_source(shape: str, chains: int) -> str:
    """CUDA C++ of the loop for one (shape, chains)."""
    from composer.fused.builder import TEMPLATE_DIR

    s = mma_shape(shape)
    return render("dmma_loop.cu.j2", template_dir=TEMPLATE_DIR, name=kernel_name(shape, chains),
                  mma_ptx=s.ptx, a_regs=s.a_regs, b_regs=s.b_regs, c_regs=s.c_regs, chains=chains, unroll=UNROLL)


@dataclass(frozen=True)
class LoopPoint:
    """One (shape, chains, warps) measurement: median cycles per DMMA of one warp, and whether
    every block ran on its own SM."""

    shape: str
    chains: int
    warps: int
    cycles_per_dmma: float  # clock64 cycles of a warp over its DMMAs (median over the grid's warps)
    blocks: int
    distinct_sms: int

    @property
    def subpartition_interval(self) -> float:
        """SM cycles between two DMMAs issued on one sub-partition (warps spread over the four)."""
        per_sub = max(1.0, self.warps / SUBPARTITIONS)
        return self.cycles_per_dmma / per_sub

    def to_dict(self) -> dict:
        return {"shape": self.shape, "chains": self.chains, "warps": self.warps,
                "cycles_per_dmma": self.cycles_per_dmma, "subpartition_interval": self.subpartition_interval,
                "blocks": self.blocks, "distinct_sms": self.distinct_sms}


def summarize(points: list[LoopPoint]) -> dict[str, dict[str, float]]:
    """Per shape: the dependent latency (one chain, one warp), the shortest interval per
    sub-partition over the grid, and the DMMAs in flight per sub-partition the shortest interval
    needs (latency / interval): below that, a kernel's DMMAs wait on each other."""
    out: dict[str, dict[str, float]] = {}
    for shape in sorted({p.shape for p in points}):
        mine = [p for p in points if p.shape == shape]
        single = [p for p in mine if p.chains == 1 and p.warps == 1]
        latency = single[0].cycles_per_dmma if single else float("nan")
        interval = min(p.subpartition_interval for p in mine)
        out[shape] = {"latency_cycles": latency, "interval_cycles": interval,
                      "in_flight_to_saturate": latency / interval}
    return out


def measure(device, shapes: list[str], chains: tuple[int, ...] = CHAINS, warps: tuple[int, ...] = WARPS,
            trips: int = TRIPS) -> list[LoopPoint]:
    """Every (shape, chains, warps) on ``device``: one block of ``warps`` warps per SM; a point whose block
    exceeds what the loop's registers allow is left out (the summary reads the points that ran)."""
    import numpy as np

    from composer.runtime import DeviceBuffer, Module
    from composer.runtime.nvrtc import compile_cuda
    from composer.runtime.params import params

    if trips % UNROLL:
        raise ValueError(f"trips {trips} is not a multiple of the loop's unroll {UNROLL}")
    blocks = device.sm_count
    points: list[LoopPoint] = []
    for shape in shapes:
        for c in chains:
            name = kernel_name(shape, c)
            compiled = compile_cuda(loop_source(shape, c), f"{name}.cu", arch=device.arch, entry_points=[name])
            module = Module.from_cubin(compiled.cubin, device)
            try:
                kernel = module.get_kernel(compiled.symbol(name), params("sink:ptr cycles:ptr smid:ptr trips:i32"))
                pad = device.max_smem_optin // 2 + 1024  # more than half an SM: one block each
                kernel.set_max_dynamic_smem(pad)
                for w in warps:
                    threads = 32 * w
                    if threads > kernel.max_threads:
                        # the loop's registers cap its block (m16n8k4 at 8 chains: 16 warps do not fit);
                        # the point is left out, not launched into CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
                        continue
                    sink = DeviceBuffer(8 * blocks * threads, device)
                    cyc = DeviceBuffer(8 * blocks * w, device)
                    ids = DeviceBuffer(4 * blocks, device)
                    try:
                        args = (sink, cyc, ids, trips)
                        kernel.launch(blocks, threads, args=args, shared=pad)  # warm-up (clocks up)
                        kernel.launch(blocks, threads, args=args, shared=pad)
                        per_warp = cyc.to_numpy(blocks * w, np.int64)
                        sms = ids.to_numpy(blocks, np.uint32)
                    finally:
                        for buf in (sink, cyc, ids):
                            buf.free()
                    points.append(LoopPoint(shape, c, w, statistics.median(per_warp.tolist()) / (trips * c),
                                            blocks, len(set(sms.tolist()))))
            finally:
                module.close()
    return points
