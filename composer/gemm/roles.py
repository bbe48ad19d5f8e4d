"""The three volume GEMMs of the library paths in BLAS (column-major) terms.

The [e, k, j, i] arrays are row-major with i fastest. Read column-major, a row-major
``R x C`` block is its ``C x R`` transpose, so each directional derivative becomes one
(strided, batched) column-major GEMM on the unmodified buffers (the paper's Section 3.5):

- x: ``dx^T = D * (qu)^T``: M = K = Nq, N = Nq^2 Ne, one GEMM (A = D read transposed);
- y: per (e, k) slab ``dy^T = (qv)^T * D^T``: M = N = K = Nq, batch Nq Ne;
- z: per element ``dz^T = (qw)^T * D^T``: M = Nq^2, N = K = Nq, batch Ne.

``D`` is stored row-major, so its buffer read column-major is ``D^T``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROLES = ("x", "y", "z")


@dataclass(frozen=True)
class GemmSpec:
    """A column-major ``C = op(A) op(B)`` with strided batching; operands named by role."""

    role: str
    transa: bool
    transb: bool
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    stride_a: int
    stride_b: int
    stride_c: int
    batch: int
    a_operand: str  # "D", "parity" (composer.parity.gemm) or "flux"
    b_operand: str
    a_offset: int = 0  # elements from the operand's or output's start (the parity GEMMs' halves)
    b_offset: int = 0
    c_offset: int = 0

    @property
    def flop(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch


def gemm_spec(role: str, nq: int, num_elements: int) -> GemmSpec:
    """The BLAS call that computes the ``role`` derivative from its volume flux."""
    plane, cube = nq * nq, nq**3
    if role == "x":
        return GemmSpec("x", True, False, nq, plane * num_elements, nq, nq, nq, nq, 0, 0, 0, 1, "D", "flux")
    if role == "y":
        return GemmSpec("y", False, False, nq, nq, nq, nq, nq, nq, plane, 0, plane, nq * num_elements, "flux", "D")
    if role == "z":
        return GemmSpec("z", False, False, plane, nq, nq, plane, nq, plane, cube, 0, cube, num_elements, "flux", "D")
    raise ValueError(f"unknown GEMM role {role!r}; expected one of {ROLES}")


def emulate(spec: GemmSpec, diff: np.ndarray, flux: np.ndarray) -> np.ndarray:
    """Execute ``spec`` with NumPy exactly as column-major BLAS would (CPU check of the mapping)."""
    out = np.zeros(flux.size)
    emulate_into(spec, {"D": diff, "flux": flux}, out)
    return out.reshape(flux.shape)


def emulate_into(spec: GemmSpec, operands: dict[str, np.ndarray], out: np.ndarray) -> None:
    """Execute ``spec`` on flat copies of ``operands`` (by operand name), writing its C blocks into the
    flat ``out`` at the spec's offsets; what the call does not write keeps its value."""
    buffers = {name: np.ascontiguousarray(array).reshape(-1) for name, array in operands.items()}

    def column_major(buf: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
        if offset + (cols - 1) * ld + rows > buf.size:
            raise ValueError(f"GEMM {spec.role}: a {rows}x{cols} block at {offset} (ld {ld}) leaves its buffer")
        return np.lib.stride_tricks.as_strided(buf[offset:], (rows, cols), (8, 8 * ld))

    a_rows, a_cols = (spec.k, spec.m) if spec.transa else (spec.m, spec.k)
    b_rows, b_cols = (spec.n, spec.k) if spec.transb else (spec.k, spec.n)
    for batch in range(spec.batch):
        a = column_major(buffers[spec.a_operand], spec.a_offset + batch * spec.stride_a, a_rows, a_cols, spec.lda)
        b = column_major(buffers[spec.b_operand], spec.b_offset + batch * spec.stride_b, b_rows, b_cols, spec.ldb)
        c = (a.T if spec.transa else a) @ (b.T if spec.transb else b)
        column_major(out, spec.c_offset + batch * spec.stride_c, spec.m, spec.n, spec.ldc)[...] = c
