"""What a path's kernels touch: the named arrays of a tendency call and the cost hints of its kernels.

Why: the scheduler (``composer.sched``) derives a path's launch order, streams and events from the
arrays each kernel reads and writes, so every path names its arrays with the same words. The
problem's own arrays (``PROBLEM_INPUTS``) exist before the call; everything else a kernel reads
must be written by an earlier kernel of the same call, or the declaration is wrong and the
scheduler says so. ``dqdt`` is the call's output.

The cost hints only shape the stream assignment (which chain is critical, which side stream a
kernel joins), never correctness: a kernel's roofline time in seconds on a reference machine,
``max(flop / FP64-tensor peak, bytes / HBM bandwidth)``, from the bytes and FLOPs the operator
implies (``composer.counts``).
"""

from __future__ import annotations

from composer.arch.machines import Machine

#: The arrays a tendency call starts from: the stage value, the velocities, the metric, the face
#: normals and scaling, the trace index maps and the differentiation matrix.
PROBLEM_INPUTS: tuple[str, ...] = ("q", "u", "v", "w", "Ex", "Ey", "Ez", "nx", "ny", "nz", "F",
                                   "vmapM", "vmapP", "D")
#: The call's output.
OUTPUT = "dqdt"
#: The arrays the face-flux kernels read: traces of q and the velocities through the index maps.
FACE_FLUX_READS: tuple[str, ...] = ("q", "u", "v", "w", "vmapM", "vmapP", "nx", "ny", "nz", "F")
FP64 = 8
INDEX = 8


def volume_bytes(nq: int, num_elements: int) -> int:
    """Bytes of one FP64 volume array."""
    return FP64 * num_elements * nq**3


def face_bytes(nq: int, num_elements: int) -> int:
    """Bytes of one FP64 face array (six faces of Nq^2 nodes per element)."""
    return FP64 * num_elements * 6 * nq**2


def roof_seconds(machine: Machine, flop: float = 0.0, nbytes: float = 0.0) -> float:
    """A kernel's roofline time on ``machine``: the cost hint of a kernel node."""
    return max(flop / machine.fp64_tc_peak_flops, nbytes / machine.hbm_bandwidth)


def face_flux_cost(machine: Machine, nq: int, num_elements: int) -> float:
    """The face flux: the traces of q, u, v, w on both sides (8 face-sized gathers), the normals and
    F (4), the two int64 index maps, and fstar written (1)."""
    face = face_bytes(nq, num_elements)
    return roof_seconds(machine, nbytes=13 * face + 2 * face * INDEX // FP64)
