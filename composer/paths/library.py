"""The structure shared by the library paths (GEMM, GEMM_CUTE, GEMM_FUSED).

volume flux -> three volume GEMMs on three streams (concurrently) while the face flux runs
on a side stream -> join -> lift-and-assembly kernel. Subclasses choose who runs each GEMM.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from composer import counts
from composer.gemm.roles import ROLES, GemmSpec, gemm_spec
from composer.kernels.support import (SupportKernels, launch_separable_lift, launch_surface_flux,
                                      launch_volume_flux)
from composer.paths.base import Path
from composer.paths.problem import DeviceProblem
from composer.runtime import Event, Stream


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

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid) -> tuple[counts.MemoryItem, ...]:
        return unfused_workspace(order, grid)

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        super().__init__(problem, **options)
        dev, pb = problem.device, problem
        self.support = SupportKernels.load(pb.nq, dev)
        self.specs: dict[str, GemmSpec] = {r: gemm_spec(r, pb.nq, pb.num_elements) for r in ROLES}
        self.flux = {r: pb.allocate(f"{self.name}.flux_{r}", pb.volume_bytes) for r in ROLES}
        self.derivative = {r: pb.allocate(f"{self.name}.d{r}", pb.volume_bytes) for r in ROLES}
        self.fstar = pb.allocate(f"{self.name}.fstar", 8 * pb.num_elements * 6 * pb.nq**2)
        self.gemm_streams = {r: Stream(dev) for r in ROLES}
        self.face_stream = Stream(dev)
        self._start, self._fluxes_ready, self._face_done = Event(dev), Event(dev), Event(dev)
        self._gemm_done = {r: Event(dev) for r in ROLES}
        self.setup_gemms()

    @abstractmethod
    def setup_gemms(self) -> None:
        """Create whatever runs the GEMMs (handles, kernels) on ``self.gemm_streams``."""

    @abstractmethod
    def run_gemm(self, role: str, stream: Stream) -> None:
        """Enqueue the ``role`` GEMM: ``derivative[role] = D-contraction of flux[role]``."""

    def launch(self, q_ptr: int, dqdt_ptr: int) -> None:
        pb, main = self.problem, self.problem.stream
        ne = pb.num_elements
        self._start.record(main)
        self.face_stream.wait(self._start)
        launch_surface_flux(self.support.surface_flux, q_ptr, pb.ptr("u"), pb.ptr("v"), pb.ptr("w"),
                            pb.vmap_m.ptr, pb.vmap_p.ptr, pb.ptr("nx"), pb.ptr("ny"), pb.ptr("nz"),
                            pb.ptr("F"), self.fstar.ptr, ne, self.face_stream)
        self._face_done.record(self.face_stream)
        launch_volume_flux(self.support.volume_flux, q_ptr, pb.ptr("u"), pb.ptr("v"), pb.ptr("w"),
                           self.flux["x"].ptr, self.flux["y"].ptr, self.flux["z"].ptr, ne, main)
        self._fluxes_ready.record(main)
        for role, stream in self.gemm_streams.items():
            stream.wait(self._fluxes_ready)
            self.run_gemm(role, stream)
            self._gemm_done[role].record(stream)
            main.wait(self._gemm_done[role])
        main.wait(self._face_done)
        launch_separable_lift(self.support.separable_lift, self.derivative["x"].ptr, self.derivative["y"].ptr,
                              self.derivative["z"].ptr, pb.ptr("Ex"), pb.ptr("Ey"), pb.ptr("Ez"),
                              self.fstar.ptr, dqdt_ptr, ne, main)

    def close(self) -> None:
        for stream in [*self.gemm_streams.values(), self.face_stream]:
            stream.close()
