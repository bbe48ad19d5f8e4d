"""The ``parity`` option of the library paths (GEMM and GEMM_CUTE; beyond the paper, ``composer.parity``).

The volume flux is written split into even and odd parts along each contraction axis, each role's
GEMM becomes two half-size products (``composer.parity.gemm.parity_specs``: half the multiply-adds)
and the lift merges the halves on its way to dqdt. Same arrays, same bytes; the two h x h matrices
A and B are the only new buffer. Whoever runs a GEMM (cuBLAS or a CuTe kernel) runs the calls of
``gemm_calls[role]`` in order, with the ``"parity"`` operand bound to ``parity_mats``: the CuTe
kernels take their sizes, leading dimensions and strides at run time, so the kernels GEMM_CUTE
builds for the full contractions (same majors) run the half-size ones too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from composer import counts, dg
from composer.errors import ComposerError
from composer.gemm.roles import ROLES, GemmSpec, gemm_spec
from composer.kernels.support import PARITY_FAMILIES, load_parity_kernels
from composer.parity.gemm import parity_specs
from composer.parity.reference import check_order, parity_matrices
from composer.paths.base import PathOption
from composer.paths.overlap import flag_option

PARITY_DOC = ("contract through the even and odd parts of each line (D is centro-antisymmetric on LGL nodes): "
              "two half-size GEMMs per direction, half the multiply-adds, the flux written split and the lift "
              "merging; odd orders, not with overlap_sms (default false)")
#: The option as a library path declares it.
PARITY_OPTION = {"parity": PathOption(flag_option, PARITY_DOC)}


class ParityGemms:
    """Mixin before ``LibraryPath`` in a library path's bases: the ``parity`` option's plan (FLOP,
    support kernel families, settings, memory) and, on an instance, its kernels, matrices and the
    BLAS calls of each role (``gemm_calls``; one per role without parity)."""

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
    def parity_tag(cls, order: int, options: Mapping[str, Any]) -> str:
        """`` parity`` (leading space) where it is on: its nodes take other times."""
        return " parity" if cls.parity(order, options) else ""

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """The path's workspace (with parity the split fluxes and derivatives take the same arrays)
        and, with parity, the two h x h matrices A and B."""
        items = super().workspace_items(order, grid, options)
        if not cls.parity(order, options or {}):
            return items
        h = check_order(order)
        return items + (counts.MemoryItem("parity matrices", 2, counts.FP64 * h * h,
                                          "A and B, h x h (h = Nq/2): the split contractions' operands"),)

    def setup_parity(self, problem: Any, options: Mapping[str, Any]) -> None:
        """Before ``LibraryPath.__init__`` (which sets up the GEMMs): the parity kernels and matrices
        where the option is on, and every role's BLAS calls."""
        parsed = self.parse_options(options)
        self.parity_on = self.parity(problem.order, parsed)
        self.parity_kernels: dict[str, Any] = {}
        self.parity_mats = None
        if self.parity_on:
            self.parity_kernels = load_parity_kernels(problem.nq, problem.device)
            mats = np.ascontiguousarray(parity_matrices(dg.diff_matrix(problem.order)))
            self.parity_mats = problem.allocate(f"{self.name}.parity", mats.nbytes)
            self.parity_mats.copy_from(mats, problem.stream)
            problem.stream.synchronize()
        nq, ne = problem.nq, problem.num_elements
        self.gemm_calls: dict[str, tuple[GemmSpec, ...]] = {
            r: parity_specs(r, nq, ne) if self.parity_on else (gemm_spec(r, nq, ne),) for r in ROLES}

    def gemm_operands(self, role: str, flux: int | None = None) -> dict[str, int]:
        """The device pointers the ``role`` calls read, by operand name (``flux``: another flux array)."""
        operands = {"D": self.problem.diff.ptr, "flux": self.flux[role].ptr if flux is None else flux}
        if self.parity_mats is not None:
            operands["parity"] = self.parity_mats.ptr
        return operands

    def support_kernels(self) -> dict[str, Any]:
        return {**super().support_kernels(), **self.parity_kernels}

    def diagnostics(self) -> dict[str, Any]:
        return {**super().diagnostics(), **({"parity": True} if self.parity_on else {})}
