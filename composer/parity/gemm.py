"""The parity GEMMs in column-major BLAS terms (``composer.gemm.roles`` explains the reading).

Each role's flux array is split along its contraction axis (``composer.parity.reference``); the
even half times ``A`` and the odd half times ``B`` write the two halves of the derivative array in
place. The matrices are one ``(2, h, h)`` row-major buffer (operand ``"parity"``), so ``B`` sits
``h*h`` doubles after ``A``:

- x: ``[a|b]^T = P_s * half_s^T``: M = K = h, N = Nq^2 Ne, the two halves one strided batch of 2
  (flux and output offsets ``h`` apart within each line, ld Nq);
- y: per (e, k) slab and half s, ``out_s^T = half_s^T * P_s^T``: M = Nq, N = K = h, batch Nq Ne;
- z: per element and half s, M = Nq^2, N = K = h, batch Ne.

Every call does a quarter of the full contraction's multiply-adds; the two together half.
"""

from __future__ import annotations

from composer.gemm.roles import ROLES, GemmSpec
from composer.parity.reference import check_order


def parity_specs(role: str, nq: int, num_elements: int) -> tuple[GemmSpec, ...]:
    """The BLAS calls that write ``role``'s split derivative from its split flux."""
    h = check_order(nq - 1)
    plane, cube = nq * nq, nq**3
    if role == "x":
        return (GemmSpec("x", True, False, h, plane * num_elements, h, h, nq, nq, h * h, h, h, 2, "parity", "flux"),)
    if role == "y":
        return tuple(GemmSpec("y", False, False, nq, h, h, nq, h, nq, plane, 0, plane, nq * num_elements, "flux",
                              "parity", a_offset=s * h * nq, b_offset=s * h * h, c_offset=s * h * nq) for s in (0, 1))
    if role == "z":
        return tuple(GemmSpec("z", False, False, plane, h, h, plane, h, plane, cube, 0, cube, num_elements, "flux",
                              "parity", a_offset=s * h * plane, b_offset=s * h * h, c_offset=s * h * plane)
                     for s in (0, 1))
    raise ValueError(f"unknown GEMM role {role!r}; expected one of {ROLES}")
