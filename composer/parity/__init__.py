"""The parity decomposition of the three contractions (beyond the paper).

The LGL nodes are symmetric (``xi_{p-m} = -xi_m``), so the differentiation matrix is
centro-antisymmetric: ``D[p-i, p-m] = -D[i, m]``. Split a line ``f`` into its even and odd parts
under reversal, ``e_m = f_m + f_{p-m}`` and ``o_m = f_m - f_{p-m}`` (``m < h = Nq/2``), and

    (D f)_i     =  (A e)_i + (B o)_i
    (D f)_{p-i} = -(A e)_i + (B o)_i        (i < h)

with the ``h x h`` matrices ``A[i, m] = (D[i, m] + D[i, p-m]) / 2`` and ``B[i, m] = (D[i, m] - D[i, p-m]) / 2``.
Two half-size products replace one full one: half the multiply-adds of every contraction, with the
same arrays in and out. It holds for any hexahedral mesh (a property of the reference element), so
no path exploits the structured grid through it. Odd orders only (``Nq`` even), which is every order
the benchmarks run.

``reference`` holds the NumPy definitions (the split, the merge, the matrices, the kernels' outputs);
``gemm`` the column-major BLAS calls that contract a split flux array.
"""

from composer.parity.reference import (check_order, contract, merge, parity_matrices, split, split_basis,
                                       split_fluxes, split_derivatives)

__all__ = ["check_order", "contract", "merge", "parity_matrices", "split", "split_basis", "split_derivatives",
           "split_fluxes"]
