"""The structure shared by the library paths (GEMM, GEMM_CUTE, GEMM_FUSED).

Declared data flow (``program``): the volume flux writes the three flux products, each volume GEMM
reads one and writes its derivative, the face flux reads the traces and writes fstar, and the
lift-and-assembly kernel reads the three derivatives and fstar and writes dqdt. The scheduler
derives from it that the three GEMMs and the face flux may run concurrently and puts them on side
streams. Subclasses choose who runs each GEMM.
"""

from __future__ import annotations

import dataclasses

from abc import abstractmethod
from types import MappingProxyType
from typing import Any

from collections.abc import Mapping

from composer import counts
from composer.arch.machines import Machine
from composer.gemm.roles import ROLES, GemmSpec, gemm_spec
from composer.kernels.support import (DEFAULT_BLOCK, SupportKernels, launch_separable_lift,
                                      launch_separable_lift_parity, launch_shape, launch_surface_flux,
                                      launch_volume_flux, launch_volume_flux_parity, products_grid)
from composer.config.schedules import load_schedule
from composer.errors import ComposerError
from composer.paths.base import Launcher, Path, PathOption
from composer.paths.overlap import (OVERLAP_OPTIONS, Overlap, OverlapKernels, face_after, flux_nodes as overlap_flux_nodes,
                                    overlap_of)
from composer.paths.problem import DeviceProblem
from composer.paths.program import FACE_FLUX_READS, OUTPUT, face_bytes, face_flux_cost, roof_seconds, volume_bytes
from composer.runtime import Stream
from composer.sched import MAIN, KernelNode


#: The launch helper of each volume-flux and lift family (same arguments in each pair).
SUPPORT_LAUNCHERS = {"volume_flux": launch_volume_flux, "volume_flux_parity": launch_volume_flux_parity,
                     "separable_lift": launch_separable_lift, "separable_lift_parity": launch_separable_lift_parity}


def unfused_workspace(order: int, grid: counts.Grid) -> tuple[counts.MemoryItem, ...]:
    """The arrays between the unfused stages: the three volume fluxes, the three contraction
    outputs and the face flux (what LibraryPath allocates)."""
    vol = counts.volume_array_bytes(order, grid)
    return (
        counts.MemoryItem("volume fluxes", 3, vol, "qu, qv, qw: GEMM operands"),
        counts.MemoryItem("derivatives", 3, vol, "the three GEMM outputs, combined afterwards"),
        counts.MemoryItem("face flux", 1, counts.face_array_bytes(order, grid), "fstar written by the face kernel"),
    )


class LibraryPath(Path):
    """Unfused volume GEMMs around the support kernels; the GEMM runner is the subclass's."""

    family = "library"
    build_kinds = frozenset({"support"})
    options = MappingProxyType({key: PathOption(parse, doc) for key, (parse, doc) in OVERLAP_OPTIONS.items()})

    @classmethod
    def overlap_roles(cls, order: int, options: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
        """The roles whose GEMM may run first under the overlap, and the one the data flow fixes
        (None: any). Every GEMM of the unfused paths reads only its own flux."""
        return ROLES, None

    @classmethod
    def overlap_options(cls, order: int, options: Mapping[str, Any]) -> dict[str, Any]:
        """``overlap_sms`` and ``overlap_first`` as given, over the schedule's ``[paths.NAME]`` keys
        (GEMM_CUTE's and GEMM_FUSED's tables; GEMM's has none). An ``overlap_sms`` given as 0 turns
        the schedule's overlap off, its ``overlap_first`` with it."""
        given = {k: options[k] for k in OVERLAP_OPTIONS if options.get(k) is not None}
        if "overlap_sms" in given and not given["overlap_sms"]:
            return given
        try:
            table = dict(load_schedule(order).paths.get(cls.name, {}))
        except ComposerError:
            table = {}
        return {**{k: table[k] for k in OVERLAP_OPTIONS if k in table}, **given}

    @classmethod
    def overlap_settings(cls, order: int, sm_count: int, options: Mapping[str, Any]) -> Overlap | None:
        """The flux overlap the options (or the schedule) ask for (``composer.paths.overlap``), None when off."""
        allowed, fixed = cls.overlap_roles(order, options)
        return overlap_of(cls.overlap_options(order, options), sm_count, cls.name, allowed, fixed)

    @classmethod
    def volume_flux_nodes(cls, nq: int, ne: int, machine: Machine, options: Mapping[str, Any]) -> list[KernelNode]:
        """The volume flux as one kernel, or split for the overlap: the first GEMM's product alone,
        then the other two confined beside that GEMM."""
        overlap = cls.overlap_settings(nq - 1, machine.sm_count, options)
        if overlap is None:
            node = cls.flux_nodes(nq, ne, machine)[0]
            family = cls.support_families(nq - 1, options)["volume_flux"]
            grid, block = launch_shape(family, nq, ne, DEFAULT_BLOCK, machine.sm_count)
            return [dataclasses.replace(node, grid=grid, block=block)]
        return list(overlap_flux_nodes(overlap, nq, ne, machine))

    @classmethod
    def support_families(cls, order: int, options: Mapping[str, Any]) -> dict[str, str]:
        """The kernel family of the volume_flux and lift nodes (the plan's launch shapes); a path
        with another form of them (GEMM's parity) says so."""
        return {"volume_flux": "volume_flux", "lift": "separable_lift"}

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        """The overlap where it is on (its nodes differ)."""
        return cls.overlap_tag(order, options)

    @classmethod
    def overlap_tag(cls, order: int, options: Mapping[str, Any]) -> str:
        """`` overlap=SMS:FIRST`` (leading space) when the overlap is on, else ``""``; the tag does
        not depend on the machine (its SM count is checked where the plan is built)."""
        resolved = cls.overlap_options(order, options)
        sms = resolved.get("overlap_sms") or 0
        if not sms:
            return ""
        allowed, fixed = cls.overlap_roles(order, options)
        overlap = overlap_of(resolved, sms + 1, cls.name, allowed, fixed)
        return f" {overlap.tag}" if overlap else ""

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        return unfused_workspace(order, grid)

    @classmethod
    def gemm_flop(cls, order: int, num_elements: int, options: Mapping[str, Any]) -> int:
        """FLOP one volume GEMM executes (the plan's cost hint): the full contraction's count."""
        nq = order + 1
        return 2 * nq**4 * num_elements

    @classmethod
    def flux_nodes(cls, nq: int, ne: int, machine: Machine) -> tuple[KernelNode, KernelNode]:
        """The volume flux (the three GEMM operands) and the face flux (fstar) kernels."""
        vol = volume_bytes(nq, ne)

        def support(family: str) -> dict[str, Any]:
            grid, block = launch_shape(family, nq, ne, DEFAULT_BLOCK, machine.sm_count)
            return {"grid": grid, "block": block}

        return (KernelNode("volume_flux", "volume_flux", ("q", "u", "v", "w"), ("flux_x", "flux_y", "flux_z"),
                           cost=roof_seconds(machine, nbytes=7 * vol), **support("volume_flux")),
                KernelNode("surface_flux", "face_flux", FACE_FLUX_READS, ("fstar",),
                           cost=face_flux_cost(machine, nq, ne), **support("surface_flux")))

    @classmethod
    def program(cls, order: int, num_elements: int, machine: Machine, **options: Any) -> list[KernelNode]:
        nq, ne = order + 1, num_elements
        vol, face = volume_bytes(nq, ne), face_bytes(nq, ne)
        _, surface_flux = cls.flux_nodes(nq, ne, machine)
        fluxes = cls.volume_flux_nodes(nq, ne, machine, options)
        grid, block = launch_shape(cls.support_families(order, options)["lift"], nq, ne, DEFAULT_BLOCK, machine.sm_count)
        gemm_flop = cls.gemm_flop(order, ne, options)
        # The face flux first: it shares no array with the volume flux, so the order changes no
        # edge, only the plan's tie-break, which then issues it first, as the hand-written launches
        # did (H200 session 6 call 5: that order 44 us faster at p = 7 than the plan issuing the
        # volume flux first; the plan with this order is not measured yet). With the overlap's
        # ``overlap_face`` it follows the flux kernels instead (composer.paths.overlap.face_after).
        face_flux = face_after(cls.overlap_settings(order, machine.sm_count, options), surface_flux)
        early, late = ([face_flux], []) if face_flux is surface_flux else ([], [face_flux])
        return [
            *early,
            *fluxes,
            *late,
            *(KernelNode(f"gemm_{r}", "gemm", ("D", f"flux_{r}"), (f"d{r}",),
                         cost=roof_seconds(machine, gemm_flop, 2 * vol)) for r in ROLES),
            KernelNode("lift", "lift", ("dx", "dy", "dz", "Ex", "Ey", "Ez", "fstar"), (OUTPUT,),
                       cost=roof_seconds(machine, nbytes=7 * vol + face), grid=grid, block=block),
        ]

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        super().__init__(problem, **options)
        pb = problem
        self.support = SupportKernels.load(pb.nq, pb.device)
        self.specs: dict[str, GemmSpec] = {r: gemm_spec(r, pb.nq, pb.num_elements) for r in ROLES}
        self.allocate_gemm_operands()
        self.allocate_gemm_outputs()
        self.fstar = pb.allocate(f"{self.name}.fstar", 8 * pb.num_elements * 6 * pb.nq**2)
        self.overlap = self.overlap_settings(pb.order, pb.device.sm_count, self.options)
        self.overlap_kernels = (OverlapKernels(self.overlap, pb.nq, pb.device, pb.allocate, self.name)
                                if self.overlap is not None else None)
        self.schedule()
        # the serial plan runs the confined products on the main stream, with nothing to overlap:
        # they then take every SM (confining them there would only slow the call)
        self.overlap_confined = self.overlap is not None and any(
            self.plan.stream_of[n] != MAIN for n in self.plan.stream_of if self.plan.node(n).sm_limit is not None)
        self.gemm_streams = {r: self.streams[self.plan.stream_of[f"gemm_{r}"]] for r in ROLES}
        self.setup_gemms()

    def allocate_gemm_operands(self) -> None:
        """The volume fluxes q*u, q*v, q*w the GEMMs read (``workspace_items`` counts them)."""
        pb = self.problem
        self.flux = {r: pb.allocate(f"{self.name}.flux_{r}", pb.volume_bytes) for r in ROLES}

    def allocate_gemm_outputs(self) -> None:
        """The arrays the GEMMs write: one derivative per role (``workspace_items`` counts them)."""
        pb = self.problem
        self.derivative = {r: pb.allocate(f"{self.name}.d{r}", pb.volume_bytes) for r in ROLES}

    @abstractmethod
    def setup_gemms(self) -> None:
        """Create whatever runs the GEMMs (handles, kernels) on ``self.gemm_streams``."""

    @abstractmethod
    def run_gemm(self, role: str, stream: Stream) -> None:
        """Enqueue the ``role`` GEMM: ``derivative[role] = D-contraction of flux[role]``."""

    def support_kernels(self) -> dict[str, Any]:
        """The loaded support kernels by family (a path loading other forms adds them)."""
        s = self.support
        return {"volume_flux": s.volume_flux, "surface_flux": s.surface_flux, "separable_lift": s.separable_lift}

    def support_nodes(self) -> dict[str, tuple[str, Any]]:
        """The support kernels this path launches: node name -> (kernel family, loaded kernel), the
        families as ``support_families`` (the plan's) names them. The single volume_flux node is left
        out under the overlap (its product kernels run instead)."""
        families = {**self.support_families(self.problem.order, self.options), "surface_flux": "surface_flux"}
        kernels = self.support_kernels()
        nodes = {node: (families[node], kernels[families[node]]) for node in ("volume_flux", "surface_flux", "lift")}
        if self.overlap_kernels is not None:
            del nodes["volume_flux"]
        return nodes

    def launch_blocks(self) -> dict[str, int]:
        pb = self.problem
        return {node: launch_shape(family, pb.nq, pb.num_elements, kernel.block[0] if kernel.block else DEFAULT_BLOCK,
                                   pb.device.sm_count)[0]
                for node, (family, kernel) in self.support_nodes().items()} | self.overlap_kernel_map(
            lambda k, sms: products_grid(pb.nq, pb.num_elements, k.block[0], pb.device.sm_count, sms))

    def resident_blocks(self) -> dict[str, int]:
        resident = {node: kernel.resident_blocks(kernel.block[0] if kernel.block else DEFAULT_BLOCK, 0)
                    for node, (_, kernel) in self.support_nodes().items()}
        return {**resident, **self.overlap_kernel_map(lambda k, _: k.resident_blocks(k.block[0], 0))}

    def diagnostics(self) -> dict[str, Any]:
        """With the overlapped flux: the chunks of the confined product its last block took itself
        (``OverlapKernels.leftover``; nonzero means the partition did not do all the work and the
        figure does not measure the overlap as designed)."""
        if self.overlap_kernels is None:
            return {}
        return {"overlap_leftover_chunks": self.overlap_kernels.leftover(), "overlap_confined": self.overlap_confined}

    def overlap_kernel_map(self, value: Any) -> dict[str, int]:
        """``value(kernel, sm_limit)`` of each overlap product kernel by node name ({} without the
        overlap); the single volume_flux node is then not launched (``launch_blocks`` drops it)."""
        ok = self.overlap_kernels
        if ok is None:
            return {}
        ov = ok.overlap
        first = {} if ok.first is None else {f"volume_flux_{ov.first}": value(ok.first, 0)}
        return {**first, f"volume_flux_{ov.rest}": value(ok.rest, ov.sms if self.overlap_confined else 0)}

    def flux_launches(self, q_ptr: int) -> dict[str, Launcher]:
        """The volume flux and the face flux of a call reading ``q_ptr``."""
        pb, ne = self.problem, self.problem.num_elements
        u, v, w = pb.ptr("u"), pb.ptr("v"), pb.ptr("w")
        volume: dict[str, Launcher]
        if self.overlap_kernels is not None and self.flux:
            volume = self.overlap_kernels.launches(q_ptr, {"x": u, "y": v, "z": w},
                                                   {r: array.ptr for r, array in self.flux.items()}, ne,
                                                   confine=self.overlap_confined)
        else:
            family, kernel = self.support_nodes()["volume_flux"]
            launch = SUPPORT_LAUNCHERS[family]
            volume = {"volume_flux": lambda s: launch(kernel, q_ptr, u, v, w, self.flux["x"].ptr, self.flux["y"].ptr,
                                                      self.flux["z"].ptr, ne, s)}
        return {
            **volume,
            "surface_flux": lambda s: launch_surface_flux(
                self.support.surface_flux, q_ptr, u, v, w, pb.vmap_m.ptr, pb.vmap_p.ptr, pb.ptr("nx"),
                pb.ptr("ny"), pb.ptr("nz"), pb.ptr("F"), self.fstar.ptr, ne, s),
        }

    def bind(self, q_ptr: int, dqdt_ptr: int) -> Mapping[str, Launcher]:
        pb, ne = self.problem, self.problem.num_elements
        family, kernel = self.support_nodes()["lift"]
        lift = SUPPORT_LAUNCHERS[family]
        launches: dict[str, Launcher] = {
            **self.flux_launches(q_ptr),
            "lift": lambda s: lift(kernel, self.derivative["x"].ptr, self.derivative["y"].ptr, self.derivative["z"].ptr,
                                   pb.ptr("Ex"), pb.ptr("Ey"), pb.ptr("Ez"), self.fstar.ptr, dqdt_ptr, ne, s),
        }
        for role in ROLES:
            launches[f"gemm_{role}"] = lambda s, role=role: self.run_gemm(role, s)
        return launches
