"""Which volume node each GEMM output element is: the index math every epilogue tree runs on.

The three volume GEMMs (``composer.gemm.roles``) write their result straight into the volume
layout ``[e, k, j, i]``, so the flat offset of output element (m, n, batch) *is* the node's flat
index, and an Aux leaf reads its array at C's offset. The Face leaf needs the node's coordinates:
they follow from the role's shape and whether the kernel runs the transposed problem (``swap``):

- x: ``M = Nq`` (i), ``N = Nq^2 Ne`` (the row ``j + Nq k + Nq^2 e``), one batch; swapped,
  the row is M and i is N;
- y: ``M = N = Nq`` (i, j), batch ``k + Nq e``; swapped, j is M and i is N;
- z: ``M = Nq^2`` (``i + Nq j``), ``N = Nq`` (k), batch e; swapped, k is M and ``i + Nq j`` is N.

The arithmetic is written once, with Python operators only, so the same code runs on NumPy
integer arrays (the emulation the tests check against the reference) and on the CuTe DSL's
Int32 values inside the kernel (where ``Nq`` is a compile-time constant: ``//`` and ``%`` become
shifts or a multiply-high, never a division instruction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from composer.gemm.roles import ROLES


@dataclass(frozen=True)
class NodeIndex:
    """Coordinates of one volume node (backend integers: NumPy arrays or DSL Int32 values)."""

    e: Any
    k: Any
    j: Any
    i: Any


@dataclass(frozen=True)
class OutputIndex:
    """The output-element -> node mapping of one role's kernel (compile-time constants)."""

    role: str
    swap: bool
    nq: int

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown GEMM role {self.role!r}; expected one of {ROLES}")
        if self.nq < 2:
            raise ValueError(f"nq must be >= 2, got {self.nq}")

    @property
    def c_n_contiguous(self) -> bool:
        """Whether consecutive n are adjacent in memory (the transposed problem: C is i-fastest
        along n), so a thread's accumulator pair (n, n+1) is 16 contiguous bytes."""
        return self.swap

    @property
    def pairs_share_row(self) -> bool:
        """Whether an accumulator pair at even n is two nodes (i, i+1) of one (e, k, j) row: true
        for the transposed problem when Nq is even (n even means i even, so i + 1 < Nq)."""
        return self.c_n_contiguous and self.nq % 2 == 0

    def node(self, m: Any, n: Any, batch: Any) -> NodeIndex:
        """Node of output element (m, n) of ``batch`` (in-batch coordinates of the kernel's frame)."""
        nq = self.nq
        if self.role == "x":
            row, i = (m, n) if self.swap else (n, m)
            plane = row // nq
            return NodeIndex(plane // nq, plane % nq, row % nq, i)
        if self.role == "y":
            j, i = (m, n) if self.swap else (n, m)
            return NodeIndex(batch // nq, batch % nq, j, i)
        k, col = (m, n) if self.swap else (n, m)
        return NodeIndex(batch, k, col // nq, col % nq)
