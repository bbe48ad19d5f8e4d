"""The volume flux overlapped with the library paths' GEMMs: a DRAM-bound kernel beside compute-bound ones.

Why: at p >= 511 the library paths run one DRAM-bound kernel (the volume flux: 1850 µs of GEMM_FUSED's
10909 at p = 511, DRAM 84 %) before GEMMs that draw 0.9-2.2 TB/s of the 4.24 (ncu, session 10/15),
each filling the machine, so nothing overlaps and the scheduler measured 0.4-0.6 % of overlap there
(results.md section 8). A streaming kernel needs few SMs for most of the bandwidth (a copy inside a
green context: 3.84 TB/s on 132 SMs, 3.73 on 52, 3.14 on 34; session 8 call 4), while a GEMM's time
scales with its SMs. So the flux is split by direction:

- the first GEMM's product (``volume_flux_<r>``, q * vel_r) runs alone on every SM;
- the other two (``volume_flux_<rest>``) run beside that GEMM, confined to ``overlap_sms`` SMs by
  ``%smid`` (``composer/kernels/templates/volume_products.cu.j2``): their blocks on other SMs leave
  at once, so the GEMM's blocks take those SMs, and when the products are done the GEMM's blocks
  refill the partition. No green context: the partition is dynamic and needs no second context.

The data flow does the rest (``composer.sched``): the first GEMM reads only its own flux, so it
starts after the first product; the two products share the resource ``dram`` with the first, so
they follow it instead of competing with it; the confined kernel gets a side stream of the highest
priority (``KernelNode.sm_limit``). The products are those of volume_flux bit for bit.

Which product goes first (``overlap_first``): the GEMM that draws the least DRAM beside the confined
products (cuBLAS's z GEMM: 0.92 TB/s at p = 511, against 2.17 for x), unless the data flow fixes it
(GEMM_FUSED with the fold: x is first in the chain; a carrier is always last).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from composer.arch.machines import Machine
from composer.errors import ComposerError
from composer.gemm.roles import ROLES
from composer.kernels.support import (DEFAULT_BLOCK, PRODUCT_ARGS, PRODUCT_LEFTOVER_SLOT, PRODUCT_WORK_BYTES,
                                      launch_shape, launch_volume_products, load_products_kernel)
from composer.paths.program import roof_seconds, volume_bytes
from composer.runtime.smid import active_sm_ids
from composer.sched import KernelNode

#: The resource the flux kernels share (``KernelNode.resource``): they follow one another.
DRAM = "dram"
#: The preference for the first product where the data flow leaves it open.
FIRST_PREFERENCE = ("z", "x", "y")
#: Below about this many SMs a streaming kernel's bandwidth falls with its SMs (the copy curve above:
#: 3.73 TB/s on 52 SMs, 3.14 on 34): the confined kernel's cost hint scales by KNEE_SMS / sms below it.
KNEE_SMS = 48
#: The velocity array of each role (the problem's names).
VELOCITY = {role: vel for role, (vel, _) in PRODUCT_ARGS.items()}


def sms_option(value: int | str) -> int:
    """SMs of the partition the overlapped products run on (0: no overlap)."""
    number = int(value)
    if number < 0:
        raise ValueError(f"expected a non-negative number of SMs, got {value!r}")
    return number


def flag_option(value: bool | str) -> bool:
    """A boolean given as an option (a bool, or true/false/1/0/yes/no/on/off)."""
    if isinstance(value, bool):
        return value
    text_value = str(value).strip().lower()
    if text_value in ("true", "1", "yes", "on"):
        return True
    if text_value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def role_option(value: str) -> str:
    """A GEMM role given as an option (x, y or z; GEMM_FUSED's carrier, the overlap's first product)."""
    role = str(value).strip().lower()
    if role not in ROLES:
        raise ValueError(f"expected one of {', '.join(ROLES)}, got {value!r}")
    return role


#: The options every library path reads for the overlap.
OVERLAP_OPTIONS: Mapping[str, Any] = MappingProxyType({
    "overlap_sms": (sms_option, "run two of the three volume-flux products beside the first GEMM, confined to "
                                "this many SMs (its blocks take the rest); 0: one volume_flux kernel before "
                                "the GEMMs, as the paper (default 0)"),
    "overlap_first": (role_option, "with overlap_sms: the GEMM whose product runs first, alone (default: "
                                    "z, the GEMM drawing the least DRAM, unless the data flow fixes it)"),
    "overlap_face": (flag_option, "with overlap_sms: the face flux follows the confined products (beside a "
                                  "GEMM) instead of sharing DRAM with the first product, which runs alone "
                                  "(default false)"),
    "overlap_formed": (flag_option, "with overlap_sms (GEMM_FUSED): the first GEMM forms its own flux operand "
                                    "once per staged element (flux = \"staged\" for that GEMM alone), so no "
                                    "product runs alone and the confined two start with it (default false)"),
})
#: Paths whose first GEMM can form its own flux operand (``overlap_formed``): CuTe kernels with
#: ``GemmConfig.product``; cuBLAS (GEMM) reads the array, and GEMM_CUTE's path does not build the products.
FORMING_PATHS = frozenset({"GEMM_FUSED"})


@dataclass(frozen=True)
class Overlap:
    """The overlapped flux of one path instance: ``first`` alone, then ``rest`` on ``sms`` SMs;
    with ``face`` the face flux after ``rest`` (``face_after``), so that the first product has DRAM
    to itself: the phase nothing else can hide (session 26, H100 call timeline at p = 511: the first
    product and the face flux together 1.25 ms of an 11.09-ms call, the product alone 1.08)."""

    sms: int
    first: str
    face: bool = False
    #: the first GEMM forms its product itself (``overlap_formed``): no ``volume_flux_<first>`` node
    formed: bool = False

    @property
    def rest(self) -> str:
        return "".join(r for r in ROLES if r != self.first)

    @property
    def tag(self) -> str:
        """How plan settings and node times name it."""
        return f"overlap={self.sms}:{self.first}" + ("+face" if self.face else "") + ("+formed" if self.formed else "")


def overlap_of(options: Mapping[str, Any], sm_count: int, path: str, allowed_first: tuple[str, ...] = ROLES,
               fixed_first: str | None = None) -> Overlap | None:
    """The overlap the parsed ``options`` ask for (None: off), checked against the machine's
    ``sm_count`` and the roles that may go first (``allowed_first``; ``fixed_first`` when the data
    flow leaves one choice)."""
    sms = options.get("overlap_sms") or 0
    first = options.get("overlap_first")
    face = bool(options.get("overlap_face") or False)
    formed = bool(options.get("overlap_formed") or False)
    if not sms:
        if first is not None or face or formed:
            key = "overlap_first" if first is not None else "overlap_face" if face else "overlap_formed"
            raise ComposerError(f"path {path}: option {key} needs overlap_sms (the partition's SMs)")
        return None
    if formed and path not in FORMING_PATHS:
        raise ComposerError(f"path {path}: option overlap_formed needs a GEMM that forms its flux operand "
                            f"({', '.join(sorted(FORMING_PATHS))}); {path}'s GEMMs read the flux arrays")
    if sms >= sm_count:
        raise ComposerError(f"path {path}: option overlap_sms={sms}: the partition must leave SMs to the GEMM; "
                            f"the device has {sm_count}")
    if first is None:
        first = fixed_first or next(r for r in FIRST_PREFERENCE if r in allowed_first)
    elif first not in allowed_first:
        raise ComposerError(f"path {path}: option overlap_first={first}: its GEMM cannot run first here "
                            f"(the first GEMM may be {', '.join(allowed_first)})")
    return Overlap(int(sms), first, face, formed)


def flux_nodes(overlap: Overlap, nq: int, ne: int, machine: Machine) -> tuple[KernelNode, ...]:
    """The first product alone and the other two confined, with the arrays each touches (with
    ``overlap.formed`` the confined two only: the first GEMM forms its product)."""
    vol = volume_bytes(nq, ne)
    grid, block = launch_shape("volume_flux", nq, ne, DEFAULT_BLOCK, machine.sm_count)
    first, rest = overlap.first, overlap.rest
    slow = max(1.0, KNEE_SMS / overlap.sms)
    confined = KernelNode(f"volume_flux_{rest}", "volume_flux", ("q", *(VELOCITY[r] for r in rest)),
                          tuple(f"flux_{r}" for r in rest), cost=slow * roof_seconds(machine, nbytes=5 * vol),
                          block=block, resource=DRAM, sm_limit=overlap.sms)
    if overlap.formed:
        return (confined,)
    return (KernelNode(f"volume_flux_{first}", "volume_flux", ("q", VELOCITY[first]), (f"flux_{first}",),
                       cost=roof_seconds(machine, nbytes=3 * vol), grid=grid, block=block, resource=DRAM),
            confined)


def face_after(overlap: Overlap | None, surface_flux: KernelNode) -> KernelNode:
    """The face flux node as the overlap places it: with ``overlap.face`` it shares the flux kernels'
    resource, so that declared after them it follows the confined products (and runs beside the GEMM
    they run beside) instead of beside the first product; otherwise unchanged."""
    if overlap is None or not overlap.face:
        return surface_flux
    return dataclasses.replace(surface_flux, resource=DRAM)


def partition_threshold(sm_ids: list[int], sms: int) -> int:
    """The ``%smid`` bound that keeps exactly ``sms`` of the SMs ``sm_ids`` (the ids a probe kernel ran
    on): the ids need not be 0 .. N-1 (on sm_90 ``%smid`` reads the virtual SM id, and PTX does not
    promise contiguous numbering), so the bound is one past the ``sms``-th smallest id."""
    ids = sorted(set(int(i) for i in sm_ids))
    if not 1 <= sms < len(ids):
        raise ComposerError(f"overlap_sms={sms}: the probe saw {len(ids)} SMs; the partition must leave SMs "
                            f"to the GEMM")
    return ids[sms - 1] + 1


class OverlapKernels:
    """The two product kernels of an instance, the counters of the confined one and its ``%smid``
    bound (read from the SMs a probe kernel runs on, ``composer.runtime.smid``)."""

    def __init__(self, overlap: Overlap, nq: int, device: Any, allocate: Any, owner: str = "overlap") -> None:
        self.overlap = overlap
        # overlap_formed: the first GEMM forms its product, so only the confined kernel is loaded
        self.first = None if overlap.formed else load_products_kernel(overlap.first, nq, device)
        self.rest = load_products_kernel(overlap.rest, nq, device)
        self.sm_ids = active_sm_ids(device=device)
        self.sm_limit = partition_threshold(self.sm_ids, overlap.sms)
        self.work = allocate(f"{owner}.overlap_work", PRODUCT_WORK_BYTES)  # named per path, as its arrays
        self.work.zero()

    def leftover(self) -> int:
        """Chunks the confined kernel's last block took itself since the instance was made (waits for
        the device): 0 when the partition's SMs did all the work; otherwise the fallback ran, and the
        confined product ran on whatever SM the last block landed on, not beside the GEMM."""
        self.work.device.synchronize()
        return int(self.work.to_numpy(PRODUCT_WORK_BYTES // 8, dtype=np.uint64)[PRODUCT_LEFTOVER_SLOT])

    def launches(self, q_ptr: int, velocity: Mapping[str, int], flux: Mapping[str, int], ne: int,
                 confine: bool = True) -> dict[str, Any]:
        """The two launches of a call reading ``q_ptr``, by node name; ``confine`` False (the serial
        plan) launches the second product on every SM."""
        first, rest = self.overlap.first, self.overlap.rest
        launches = {
            f"volume_flux_{rest}": lambda s: launch_volume_products(
                self.rest, rest, q_ptr, {r: velocity[r] for r in rest}, {r: flux[r] for r in rest}, ne,
                sm_limit=self.sm_limit if confine else 0, work=self.work.ptr, stream=s),
        }
        if self.first is not None:
            launches[f"volume_flux_{first}"] = lambda s: launch_volume_products(
                self.first, first, q_ptr, {first: velocity[first]}, {first: flux[first]}, ne, stream=s)
        return launches


# --- the prospective estimate (tools/overlap_predict.py) ---------------------------------------------

def bandwidth_at(curve: Mapping[int, float], sms: int) -> float:
    """A streaming kernel's bandwidth on ``sms`` SMs, linear between the measured points of ``curve``
    (SMs -> bytes/s: the copy inside green contexts, ``tools/measure_bandwidth.py --sms``), flat
    beyond its ends."""
    points = sorted((int(s), float(b)) for s, b in curve.items())
    if not points:
        raise ComposerError("the bandwidth curve has no points")
    if sms <= points[0][0]:
        return points[0][1] * sms / points[0][0]  # below the smallest partition: in proportion to the SMs
    for (s0, b0), (s1, b1) in zip(points, points[1:]):
        if s0 <= sms <= s1:
            return b0 + (b1 - b0) * (sms - s0) / (s1 - s0)
    return points[-1][1]


def confined_seconds(nbytes: float, sms: int, sm_count: int, curve: Mapping[int, float], hbm_Bps: float,
                     beside_Bps: float) -> float:
    """The confined products' time on ``sms`` SMs: their bytes at the lesser of the partition's
    streaming bandwidth and what DRAM has left beside the GEMM on the other SMs (its measured DRAM
    rate on the whole machine, ``beside_Bps``, in proportion to the SMs it keeps)."""
    left = hbm_Bps - beside_Bps * (sm_count - sms) / sm_count
    rate = min(bandwidth_at(curve, sms), left)
    if not rate > 0:
        raise ComposerError(f"no DRAM bandwidth left for the confined products on {sms} SMs")
    return nbytes / rate
