"""DRAM traffic of a fused schedule: the byte floor of its kernel decomposition.

Why: the unique-bytes roof assumes one pass over every array, which only a single kernel that
carries all three directions can reach. A schedule that splits the directions over kernels
re-reads q (and writes then re-reads dqdt) per kernel, and a separate face kernel gathers traces
through the maps; this model counts those bytes per kernel, so that ``composer info`` can show
how far a schedule's own floor sits above the roof (p = 63, two kernels: about 1.46x), and a
measured time can be read against the floor it can reach.

Model, per tendency call (each kernel streams its arrays once; traces of a field the kernel
streams anyway are L2 hits; a traced field it does not stream costs 8 bytes per value):
- volume kernel carrying directions D: q, and u/v/w and Ex/Ey/Ez of D; dqdt written by the first
  kernel, read and written by the others; for the 2|D| faces of D: inline fluxes read nx, ny, nz,
  F and the two 32-bit maps and gather the velocity components outside D on both sides; with the
  face array they read fstar;
- face kernel (``flux = "array"``): nx, ny, nz, F, the maps and fstar for all six faces, and the
  traces of q, u, v, w on both sides, one 32-byte sector per value on x faces (nodes Nq doubles
  apart) and 8 bytes on y and z faces.
"""

from __future__ import annotations

from dataclasses import dataclass

from composer import counts
from composer.arch.limits import DEFAULT_ARCH
from composer.fused.config import FusedConfig

FP64 = 8
SECTOR = 32  # bytes one strided 8-byte gather pulls from DRAM
MAP = 4  # bytes per entry of the 32-bit index maps


@dataclass(frozen=True)
class KernelTraffic:
    """Bytes one kernel of a fused schedule moves per tendency call."""

    name: str
    volume_bytes: int
    face_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.volume_bytes + self.face_bytes


def schedule_traffic(config: FusedConfig, grid: counts.Grid) -> list[KernelTraffic]:
    """Per-kernel DRAM bytes of ``config`` on ``grid`` (face kernel first, as launched)."""
    ne = counts.num_elements(grid)
    nq = config.nq
    vol = FP64 * nq**3 * ne  # one volume array
    face_points = nq * nq * ne  # nodes on one face of every element
    out: list[KernelTraffic] = []
    if config.flux == "array":
        face_fields = 6 * face_points * (4 * FP64 + 2 * MAP + FP64)  # nx ny nz F, maps, fstar write
        traces = 2 * 4 * face_points * (2 * SECTOR + 4 * FP64)  # q u v w, both sides; x faces strided
        out.append(KernelTraffic(f"face flux nq{nq}", 0, face_fields + traces))
    for index, kernel in enumerate(config.kernels):
        dirs = kernel.dirs
        streamed = (1 + 2 * len(dirs)) * vol + (vol if index == 0 else 2 * vol)
        faces = 2 * len(dirs) * face_points
        if config.flux == "inline":
            face_bytes = faces * (4 * FP64 + 2 * MAP + 2 * (3 - len(dirs)) * FP64)
        else:
            face_bytes = faces * FP64
        out.append(KernelTraffic(f"k{index} {kernel.dir_names}", streamed, face_bytes))
    return out


def operand_bytes_per_flop(config: FusedConfig, arch: str = DEFAULT_ARCH) -> list[float | None]:
    """Bytes each volume kernel copies from L2 into shared memory per contraction FLOP, laid out
    for ``arch`` (its shared memory decides the staged D panel).

    Why: where the tensor-core kernels are bound by L2 tag lookups rather than DRAM (the box
    kernels at p >= 255), this is the traffic the block tiling decides. A box kernel with D staged
    in panels re-reads D once per block of L lines: 8 B per D value for 2 L FLOP, 4 / L (the flux tile is
    staged once and reused over the whole axis, left out). A streamed kernel with an output tile of
    L lines x A positions reads, per contraction value, D for its A positions and q, vel for its L
    lines: (8 A + 16 L) / (2 L A) = 4 / L + 8 / A. None where D is read through the read-only
    cache (unstaged): no copy to count."""
    from composer.fused.builder import StreamPlan, kernel_plans

    out: list[float | None] = []
    for plan in kernel_plans(config, arch):
        d = plan.kernel.dirs[0]
        lines = plan.lines(d)
        if isinstance(plan, StreamPlan):
            out.append(4 / lines + 8 / plan.positions(d))
        elif plan.d_panel:
            out.append(4 / lines)
        else:
            out.append(None)
    return out


def byte_floor_bytes(config: FusedConfig, grid: counts.Grid) -> int:
    """Total DRAM bytes of the schedule's kernels per tendency call."""
    return sum(k.total_bytes for k in schedule_traffic(config, grid))
