"""Three-stage third-order SSP Runge–Kutta (Shu–Osher), the error norm and the mass.

The integrator takes any tendency callable ``L(q) -> dq/dt``, so the same loop drives the
NumPy reference and every GPU path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from composer.dg.lgl import lgl
from composer.dg.mesh import Mesh

Tendency = Callable[[np.ndarray], np.ndarray]

# Shu–Osher form: stage s computes a_s * q + b_s * (q_stage + dt * L(q_stage)).
RK3_STAGES: tuple[tuple[float, float], ...] = ((0.0, 1.0), (0.75, 0.25), (1.0 / 3.0, 2.0 / 3.0))


def ssp_rk3_step(q: np.ndarray, dt: float, tendency: Tendency) -> np.ndarray:
    """One step ``q -> q_new`` with three tendency calls."""
    stage = q
    for a, b in RK3_STAGES:
        update = stage + dt * tendency(stage)
        stage = update if a == 0.0 else a * q + b * update
    return stage


def integrate(q: np.ndarray, dt: float, nstep: int, tendency: Tendency) -> np.ndarray:
    """``nstep`` SSP-RK3 steps of size ``dt``."""
    if nstep < 0 or not dt > 0:
        raise ValueError(f"need dt > 0 and nstep >= 0, got dt={dt}, nstep={nstep}")
    for _ in range(nstep):
        q = ssp_rk3_step(q, dt, tendency)
    return q


def quadrature_weights(mesh: Mesh) -> np.ndarray:
    """Tensor-product LGL weights times the element Jacobian, broadcastable to [e, k, j, i]."""
    _, w = lgl(mesh.order)
    hx, hy, hz = mesh.spacing
    return (w[:, None, None] * w[None, :, None] * w[None, None, :]) * (hx * hy * hz / 8.0)


def mass(q: np.ndarray, mesh: Mesh) -> float:
    """``sum_e sum_kji w_i w_j w_k q * (hx hy hz / 8)``: conserved to round-off."""
    return float(np.einsum("ekji,kji->", q, quadrature_weights(mesh)))


def l2_norm(q: np.ndarray, mesh: Mesh) -> float:
    """The LGL-quadrature L2 norm."""
    return float(np.sqrt(np.einsum("ekji,kji->", q * q, quadrature_weights(mesh))))


def relative_l2_error(q: np.ndarray, q_exact: np.ndarray, mesh: Mesh) -> float:
    """``||q - q_exact|| / ||q_exact||`` in the LGL-quadrature L2 norm."""
    return l2_norm(q - q_exact, mesh) / l2_norm(q_exact, mesh)
