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
  F and the two 32-bit maps (vmapM not on the x faces with traces = "xfaces", on none with
  interior_maps = false; vmapP replaced by one 8-byte link per face with exterior_maps = false) and
  gather the velocity components outside D on both sides; with the
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
LINK = 8  # bytes per face link (exterior_maps = false: a base and two 16-bit strides; composer.fused.links)


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
        out.append(KernelTraffic(f"face flux nq{nq}", 0, _face_kernel_bytes(face_points)))
    for index, kernel in enumerate(config.kernels):
        streamed, face_bytes = _volume_kernel_bytes(len(kernel.dirs), index, config.flux, vol, face_points)
        if config.flux == "inline":
            face_bytes -= unread_vmapm_faces(config, kernel.dirs) * face_points * MAP
        if not config.exterior_maps:  # one 8-byte link per face instead of vmapP's Nq^2 entries
            face_bytes -= 2 * len(kernel.dirs) * (face_points * MAP - ne * LINK)
        out.append(KernelTraffic(f"k{index} {kernel.dir_names}", streamed, face_bytes))
    return out


def unread_vmapm_faces(config: FusedConfig, dirs: tuple[int, ...]) -> int:
    """Faces (of the 2 per carried direction) whose vmapM an inline-flux kernel carrying ``dirs`` does not
    read: all of them with ``interior_maps = false``, the two x faces with ``traces = "xfaces"``."""
    if not config.interior_maps:
        return 2 * len(dirs)
    return 2 if config.traces == "xfaces" and 0 in dirs else 0


def _face_kernel_bytes(face_points: int) -> int:
    """The separate face kernel (``flux = "array"``): see the module docstring."""
    face_fields = 6 * face_points * (4 * FP64 + 2 * MAP + FP64)  # nx ny nz F, maps, fstar write
    traces = 2 * 4 * face_points * (2 * SECTOR + 4 * FP64)  # q u v w, both sides; x faces strided
    return face_fields + traces


def _volume_kernel_bytes(ndirs: int, index: int, flux: str, vol: int, face_points: int) -> tuple[int, int]:
    """(volume, face) bytes of the ``index``-th volume kernel carrying ``ndirs`` directions."""
    streamed = (1 + 2 * ndirs) * vol + (vol if index == 0 else 2 * vol)
    faces = 2 * ndirs * face_points
    if flux == "inline":
        return streamed, faces * (4 * FP64 + 2 * MAP + 2 * (3 - ndirs) * FP64)
    return streamed, faces * FP64


#: The direction splits of a fused decomposition: one kernel per direction, x and y in one kernel
#: then z, all three in one kernel (the S14.2 schedules use the first two at p >= 31, the last at p <= 15).
SPLITS: dict[str, tuple[int, ...]] = {"x|y|z": (1, 1, 1), "xy|z": (2, 1), "xyz": (3,)}


@dataclass(frozen=True)
class SplitFloor:
    """The byte floor of one direction split with one flux source, and what its largest kernel must
    hold on chip per unit of work to read each value once (``staged_bytes``), and where that fits."""

    split: str
    flux: str
    bytes: int
    staged_bytes: int
    placement: str  # "one block", "cluster of N blocks", or "does not fit on chip"


def staged_bytes(split: str, nq: int) -> int:
    """On-chip bytes the split's widest kernel needs per unit of work to read each flux value once:
    a line of each flux (x|y|z), a (j, i) plane of q*u and q*v (xy|z: both directions of a k-plane),
    or a whole element of the three fluxes (xyz)."""
    widest = max(SPLITS[split])
    if widest == 1:
        return FP64 * nq
    if widest == 2:
        return 2 * FP64 * nq * nq
    return 3 * FP64 * nq**3


def placement(nbytes: int, arch: str = DEFAULT_ARCH) -> str:
    """Where ``nbytes`` of staged data fit: one block's shared memory, a thread-block cluster's
    distributed shared memory (sm_90+), or nowhere on chip (``composer.arch.limits``)."""
    from composer.arch.limits import arch_limits

    limits = arch_limits(arch)
    per_block = limits.smem_per_block_optin
    if nbytes <= per_block:
        return "one block"
    blocks = -(-nbytes // per_block)
    if blocks <= limits.max_cluster_blocks:
        return f"cluster of {1 << (blocks - 1).bit_length()} blocks"
    return "does not fit on chip"


def split_floors(order: int, grid: counts.Grid, arch: str = DEFAULT_ARCH) -> list[SplitFloor]:
    """The byte floor of every direction split with each flux source at ``order`` on ``grid``: the
    decompositions issue 16 weighs against its targets (a target below a split's floor cannot be
    reached by tuning that split)."""
    ne = counts.num_elements(grid)
    nq = order + 1
    vol, face_points = FP64 * nq**3 * ne, nq * nq * ne
    out = []
    for split, kernels in SPLITS.items():
        staged = staged_bytes(split, nq)
        where = placement(staged, arch)
        for flux in ("array", "inline"):
            total = _face_kernel_bytes(face_points) if flux == "array" else 0
            total += sum(sum(_volume_kernel_bytes(n, i, flux, vol, face_points)) for i, n in enumerate(kernels))
            out.append(SplitFloor(split, flux, total, staged, where))
    return out


def operand_bytes_per_flop(config: FusedConfig, arch: str = DEFAULT_ARCH) -> list[float | None]:
    """Bytes each volume kernel copies from L2 into shared memory per contraction FLOP, laid out
    for ``arch`` (its shared memory decides the staged D panel).

    Why: where the tensor-core kernels are bound by L2 tag lookups rather than DRAM (the box
    kernels at p >= 255), this is the traffic the block tiling decides. A box kernel with D staged
    in panels re-reads D once per block of L lines: 8 B per D value for 2 L FLOP, 4 / L (the flux tile is
    staged once and reused over the whole axis, left out). A streamed kernel with an output tile of
    L lines x A positions reads, per contraction value, D for its A positions and q, vel for its L
    lines: (8 A + 16 L) / (2 L A) = 4 / L + 8 / A. With ``parity`` a streamed kernel reads, per value
    of the half axis, D for 2 A virtual rows and q, vel at two positions of each line for 4 L A FLOP:
    the same 4 / L + 8 / A per executed FLOP, over half the FLOP. None where D is read through the
    read-only cache (unstaged): no copy to count."""
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
