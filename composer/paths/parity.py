"""The ``parity`` option of the library paths (GEMM, GEMM_CUTE, GEMM_FUSED; beyond the paper, ``composer.parity``).

The volume flux is written split into even and odd parts along each contraction axis, each role's
GEMM becomes two half-size products (``composer.parity.gemm.parity_specs``: half the multiply-adds)
and the lift merges the halves on its way to dqdt. Same arrays, same bytes; the two h x h matrices
A and B are the only new buffer. A path may keep a role whole (GEMM_FUSED's carrier, which must
produce each node's derivative): with every flux split, that role's GEMM reads the split basis ``M``
(``composer.parity.reference.split_basis``, Nq x Nq) in place of D, a full contraction written at the
nodes. Whoever runs a GEMM (cuBLAS or a CuTe kernel) runs the calls of
``gemm_calls[role]`` in order, with the ``"parity"`` operand bound to ``parity_mats``: the CuTe
kernels take their sizes, leading dimensions and strides at run time, so the kernels GEMM_CUTE
builds for the full contractions (same majors) run the half-size ones too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from composer import counts, dg
from composer.errors import ComposerError
from composer.gemm.roles import ROLES, GemmSpec, gemm_spec
from composer.kernels.support import PARITY_FAMILIES, load_parity_kernels
from composer.parity.gemm import parity_specs
from composer.parity.reference import check_order, parity_matrices, split_basis
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
    def split_roles(cls, order: int, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The roles that run as two half-size products under parity (the others read the split
        basis): every role here; GEMM_FUSED keeps its carrier whole."""
        return ROLES

    @classmethod
    def parity_tag(cls, order: int, options: Mapping[str, Any]) -> str:
        """`` parity`` (leading space) where it is on: its nodes take other times."""
        return " parity" if cls.parity(order, options) else ""

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """The path's workspace (with parity the split fluxes and derivatives take the same arrays)
        and, with parity, the two h x h matrices A and B."""
        return super().workspace_items(order, grid, options) + cls.parity_items(order, options or {})

    @classmethod
    def parity_items(cls, order: int, options: Mapping[str, Any]) -> tuple[counts.MemoryItem, ...]:
        """The parity matrices where the option is on, and the split basis where a role stays whole."""
        if not cls.parity(order, options):
            return ()
        h = check_order(order)
        items = (counts.MemoryItem("parity matrices", 2, counts.FP64 * h * h,
                                   "A and B, h x h (h = Nq/2): the split contractions' operands"),)
        if set(ROLES) - set(cls.split_roles(order, options)):
            items += (counts.MemoryItem("split basis", 1, counts.FP64 * (order + 1) ** 2,
                                        "M, Nq x Nq: the whole contraction of a split flux (the unsplit roles)"),)
        return items

    def setup_parity(self, problem: Any, options: Mapping[str, Any]) -> None:
        """Before ``LibraryPath.__init__`` (which sets up the GEMMs): the parity kernels and matrices
        where the option is on, and every role's BLAS calls."""
        parsed = self.parse_options(options)
        self.parity_on = self.parity(problem.order, parsed)
        self.parity_kernels: dict[str, Any] = {}
        self.parity_mats = self.split_basis = None
        nq, ne = problem.nq, problem.num_elements
        split = self.split_roles(problem.order, parsed) if self.parity_on else ()
        if self.parity_on:
            self.parity_kernels = load_parity_kernels(problem.nq, problem.device)
            diff = dg.diff_matrix(problem.order)
            self.parity_mats = self._upload(problem, "parity", parity_matrices(diff))
            if set(ROLES) - set(split):
                self.split_basis = self._upload(problem, "split_basis", split_basis(diff))
            problem.stream.synchronize()

        def whole(role: str) -> tuple[GemmSpec, ...]:
            spec = gemm_spec(role, nq, ne)
            if not self.parity_on:
                return (spec,)
            return (dataclasses.replace(spec, a_operand="split_basis" if spec.a_operand == "D" else spec.a_operand,
                                        b_operand="split_basis" if spec.b_operand == "D" else spec.b_operand),)

        self.gemm_calls: dict[str, tuple[GemmSpec, ...]] = {
            r: parity_specs(r, nq, ne) if r in split else whole(r) for r in ROLES}

    def _upload(self, problem: Any, name: str, matrix: np.ndarray) -> Any:
        values = np.ascontiguousarray(matrix)
        buffer = problem.allocate(f"{self.name}.{name}", values.nbytes)
        buffer.copy_from(values, problem.stream)
        return buffer

    def gemm_operands(self, role: str, flux: int | None = None) -> dict[str, int]:
        """The device pointers the ``role`` calls read, by operand name (``flux``: another flux array)."""
        operands = {"D": self.problem.diff.ptr, "flux": self.flux[role].ptr if flux is None else flux}
        if self.parity_mats is not None:
            operands["parity"] = self.parity_mats.ptr
        if self.split_basis is not None:
            operands["split_basis"] = self.split_basis.ptr
        return operands

    def support_kernels(self) -> dict[str, Any]:
        return {**super().support_kernels(), **self.parity_kernels}

    def diagnostics(self) -> dict[str, Any]:
        return {**super().diagnostics(), **({"parity": True} if self.parity_on else {})}
