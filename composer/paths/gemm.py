"""Path GEMM: the three volume GEMMs by cuBLAS (nvmath-python bindings).

Option ``parity`` (beyond the paper; ``composer.parity``): the volume flux is written split into
even and odd parts along each contraction axis, each GEMM becomes two half-size products (half the
multiply-adds), and the lift merges the halves on its way to dqdt. Same arrays, same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from composer import counts, dg
from composer.errors import ComposerError
from composer.gemm.cublas import CublasGemm
from composer.gemm.roles import ROLES, GemmSpec
from composer.kernels.support import PARITY_FAMILIES, load_parity_kernels
from composer.parity.gemm import parity_specs
from composer.parity.reference import check_order, parity_matrices
from composer.paths.base import PathOption
from composer.paths.library import LibraryPath
from composer.paths.overlap import flag_option
from composer.runtime import Stream

if TYPE_CHECKING:
    from composer.runtime import DeviceBuffer

PARITY_DOC = ("contract through the even and odd parts of each line (D is centro-antisymmetric on LGL nodes): "
              "two half-size GEMMs per direction, half the multiply-adds, the flux written split and the lift "
              "merging; odd orders, not with overlap_sms (default false)")


class GemmPath(LibraryPath):
    name = "GEMM"
    options = MappingProxyType({**LibraryPath.options, "parity": PathOption(flag_option, PARITY_DOC)})

    @classmethod
    def parity(cls, order: int, options: Mapping[str, Any]) -> bool:
        """Whether ``options`` turn the parity decomposition on; a clear error where it cannot run."""
        if not options.get("parity"):
            return False
        check_order(order)
        if cls.overlap_options(order, options).get("overlap_sms"):
            raise ComposerError(f"path {cls.name}: parity and overlap_sms do not combine (the overlap's product "
                                f"kernels write the fluxes unsplit)")
        return True

    @classmethod
    def gemm_flop(cls, order: int, num_elements: int, options: Mapping[str, Any]) -> int:
        full = super().gemm_flop(order, num_elements, options)
        return full // 2 if cls.parity(order, options) else full

    @classmethod
    def support_families(cls, order: int, options: Mapping[str, Any]) -> dict[str, str]:
        if cls.parity(order, options):
            volume, lift = PARITY_FAMILIES
            return {"volume_flux": volume, "lift": lift}
        return super().support_families(order, options)

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        return super().plan_settings(order, **options) + (" parity" if cls.parity(order, options) else "")

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """The unfused workspace (with parity the split fluxes and derivatives take the same arrays)
        and, with parity, the two h x h matrices A and B."""
        items = super().workspace_items(order, grid, options)
        if not cls.parity(order, options or {}):
            return items
        h = check_order(order)
        return items + (counts.MemoryItem("parity matrices", 2, counts.FP64 * h * h,
                                          "A and B, h x h (h = Nq/2): the split contractions' operands"),)

    def __init__(self, problem: Any, **options: Any) -> None:
        parsed = self.parse_options(options)
        self.parity_on = self.parity(problem.order, parsed)
        self.parity_kernels: dict[str, Any] = {}
        self.parity_mats: DeviceBuffer | None = None
        if self.parity_on:
            self.parity_kernels = load_parity_kernels(problem.nq, problem.device)
            mats = np.ascontiguousarray(parity_matrices(dg.diff_matrix(problem.order)))
            self.parity_mats = problem.allocate(f"{self.name}.parity", mats.nbytes)
            self.parity_mats.copy_from(mats, problem.stream)
            problem.stream.synchronize()
        super().__init__(problem, **options)
        self.gemm_calls: dict[str, tuple[GemmSpec, ...]] = (
            {r: parity_specs(r, problem.nq, problem.num_elements) for r in ROLES} if self.parity_on
            else {r: (spec,) for r, spec in self.specs.items()})

    def support_kernels(self) -> dict[str, Any]:
        return {**super().support_kernels(), **self.parity_kernels}

    def setup_gemms(self) -> None:
        self.blas = {role: CublasGemm(int(stream.handle)) for role, stream in self.gemm_streams.items()}

    def run_gemm(self, role: str, stream: Stream) -> None:
        operands = {"D": self.problem.diff.ptr, "flux": self.flux[role].ptr}
        if self.parity_mats is not None:
            operands["parity"] = self.parity_mats.ptr
        for spec in self.gemm_calls[role]:
            self.blas[role].run(spec, operands, self.derivative[role].ptr, int(stream.handle))

    def diagnostics(self) -> dict[str, Any]:
        return {**super().diagnostics(), **({"parity": True} if self.parity_on else {})}

    def close(self) -> None:
        for blas in self.blas.values():
            blas.close()
        super().close()
