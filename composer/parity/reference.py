"""NumPy definitions of the parity decomposition (``composer.parity``), the reference of its kernels.

A volume array *split along axis a* keeps its shape: along ``a`` its first half holds the even parts
``f_m + f_{p-m}`` and its second half the odd parts ``f_m - f_{p-m}`` (``m < h``). The parity volume
flux kernel writes ``q*u`` split along i, ``q*v`` along j and ``q*w`` along k (each flux array feeds
one contraction only); the GEMMs contract each half with its ``h x h`` matrix in place, so the
derivative arrays hold ``[A e | B o]`` along the same axis; the parity lift merges them back node by
node (``merge``) on its way to dqdt.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from composer.errors import ComposerError

#: The axis of the [e, k, j, i] volume layout each role's flux is split along (i, j, k).
ROLE_AXIS = {"x": 3, "y": 2, "z": 1}


def check_order(order: int) -> int:
    """``h = Nq / 2``; a clear error for even orders (odd ``Nq`` has a middle node of its own)."""
    nq = int(order) + 1
    if nq % 2:
        raise ComposerError(f"the parity decomposition needs an odd order p (an even number of nodes); got p = {order}")
    return nq // 2


def parity_matrices(diff: np.ndarray) -> np.ndarray:
    """``[A, B]`` as one ``(2, h, h)`` array (row-major, what the GEMMs read)."""
    nq = diff.shape[0]
    h = check_order(nq - 1)
    left, mirrored = diff[:h, :h], diff[:h, ::-1][:, :h]  # D[i, m] and D[i, p-m] for i, m < h
    return np.stack([0.5 * (left + mirrored), 0.5 * (left - mirrored)])


def parity_rows(diff: np.ndarray) -> np.ndarray:
    """``[A | B]`` as ``h`` rows of ``Nq`` values: the D operand of the fused kernels with ``parity``
    (row a: A's row a, then B's; the same row stride as D, so that their B-fragment loads keep D's form)."""
    mats = parity_matrices(diff)
    return np.ascontiguousarray(np.concatenate([mats[0], mats[1]], axis=1))


def split_basis(diff: np.ndarray) -> np.ndarray:
    """``M`` (``Nq x Nq``, row-major like D) with ``M split(f) = D f`` along a line: the full contraction
    of a split flux, written at the nodes. ``M[r, m] = (D[r, m] + D[r, p-m]) / 2`` and
    ``M[r, h+m] = (D[r, m] - D[r, p-m]) / 2`` (m < h), since ``f_m = (e_m + o_m) / 2`` and
    ``f_{p-m} = (e_m - o_m) / 2``: what a GEMM that must produce a node's derivative (GEMM_FUSED's
    carrier) reads in place of D when every flux comes split."""
    nq = diff.shape[0]
    h = check_order(nq - 1)
    left, mirrored = diff[:, :h], diff[:, ::-1][:, :h]
    return np.ascontiguousarray(np.concatenate([0.5 * (left + mirrored), 0.5 * (left - mirrored)], axis=1))


def split(f: np.ndarray, axis: int) -> np.ndarray:
    """``f`` split along ``axis``: even parts in the first half, odd parts in the second."""
    f = np.moveaxis(f, axis, 0)
    h = check_order(f.shape[0] - 1)
    low, high = f[:h], f[::-1][:h]
    return np.moveaxis(np.concatenate([low + high, low - high]), 0, axis)


def merge(g: np.ndarray, axis: int) -> np.ndarray:
    """The derivative from ``[A e | B o]`` along ``axis``: ``a + b`` at ``i < h``, ``b - a`` at ``p - i``."""
    g = np.moveaxis(g, axis, 0)
    h = check_order(g.shape[0] - 1)
    a, b = g[:h], g[h:]
    return np.moveaxis(np.concatenate([a + b, (b - a)[::-1]]), 0, axis)


def contract_split(g: np.ndarray, mats: np.ndarray, axis: int) -> np.ndarray:
    """``[A e | B o]`` from a split array: each half contracted with its matrix along ``axis``."""
    g = np.moveaxis(g, axis, -1)
    h = mats.shape[1]
    out = np.concatenate([g[..., :h] @ mats[0].T, g[..., h:] @ mats[1].T], axis=-1)
    return np.moveaxis(out, -1, axis)


def contract(f: np.ndarray, diff: np.ndarray, axis: int) -> np.ndarray:
    """``sum_m D[i, m] f[.., m, ..]`` along ``axis`` through the parity decomposition."""
    return merge(contract_split(split(f, axis), parity_matrices(diff), axis), axis)


def split_fluxes(fields: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the parity volume flux kernel writes: each role's flux split along its own axis."""
    q = fields["q"]
    return {role: split(q * fields[vel], ROLE_AXIS[role]) for role, vel in (("x", "u"), ("y", "v"), ("z", "w"))}


def split_derivatives(fluxes: Mapping[str, np.ndarray], diff: np.ndarray) -> dict[str, np.ndarray]:
    """What the parity GEMMs write: ``[A e | B o]`` of each role's split flux, along its axis."""
    mats = parity_matrices(diff)
    return {role: contract_split(g, mats, ROLE_AXIS[role]) for role, g in fluxes.items()}


def lift_from_split(derivatives: Mapping[str, np.ndarray], fields: Mapping[str, np.ndarray], fstar: np.ndarray,
                    mesh: object) -> np.ndarray:
    """What the parity lift kernel writes: ``-(Ex dx + Ey dy + Ez dz + LIFT(fstar))`` from the split
    derivatives (``mesh``: the ``composer.dg.Mesh`` whose face maps place fstar)."""
    from composer.dg import add_lift

    out = sum(fields[f"E{role}"] * merge(derivatives[role], ROLE_AXIS[role]) for role in ("x", "y", "z"))
    add_lift(out, fstar, mesh)
    return -out
