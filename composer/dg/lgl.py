"""Legendre–Gauss–Lobatto nodes, weights and the differentiation matrix.

Computed in FP64 to round-off for every order up to (at least) 1023: Newton's method on
the Legendre three-term recurrence, started from the Chebyshev–Gauss–Lobatto points, on
one half of the interval and mirrored so that the node set is exactly symmetric.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

MAX_NEWTON_ITERATIONS = 100


def _check_order(order: int) -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        raise ValueError(f"order must be an integer >= 1, got {order!r}")
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    return int(order)


def legendre_pair(order: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (P_order(x), P_{order-1}(x)) by the three-term recurrence (stable for all x in [-1, 1])."""
    p_prev = np.ones_like(x)
    p_curr = x.copy()
    for n in range(1, order):
        p_prev, p_curr = p_curr, ((2 * n + 1) * x * p_curr - n * p_prev) / (n + 1)
    return p_curr, p_prev


@lru_cache(maxsize=64)
def _lgl_cached(order: int) -> tuple[np.ndarray, np.ndarray]:
    n = order
    # Newton on q(x) = x P_n(x) - P_{n-1}(x), whose interior roots are the LGL nodes
    # (q = (1 - x^2) P_n'(x) / n); q'(x) = (n + 1) P_n(x). Only the left half is solved.
    half = (n + 2) // 2
    x = -np.cos(np.pi * np.arange(half) / n)
    interior = np.ones(half, dtype=bool)
    interior[0] = False
    for _ in range(MAX_NEWTON_ITERATIONS):
        p_n, p_nm1 = legendre_pair(n, x)
        step = np.where(interior, (x * p_n - p_nm1) / ((n + 1) * p_n), 0.0)
        x = x - step
        if np.max(np.abs(step)) <= 2.0 * np.finfo(float).eps:
            break
    else:  # pragma: no cover - never observed up to p = 4096
        raise RuntimeError(f"LGL Newton iteration did not converge at order {order}")
    nodes = np.empty(n + 1)
    nodes[:half] = x
    nodes[n + 1 - half :] = -x[::-1]
    if n % 2 == 0:
        nodes[n // 2] = 0.0
    p_n, _ = legendre_pair(n, nodes)
    weights = 2.0 / (n * (n + 1) * p_n**2)
    weights = 0.5 * (weights + weights[::-1])
    nodes.setflags(write=False)
    weights.setflags(write=False)
    return nodes, weights


def lgl(order: int) -> tuple[np.ndarray, np.ndarray]:
    """LGL nodes ``xi_0 = -1 < ... < xi_p = 1`` and quadrature weights on [-1, 1] (fresh copies)."""
    nodes, weights = _lgl_cached(_check_order(order))
    return nodes.copy(), weights.copy()


@lru_cache(maxsize=64)
def _diff_cached(order: int) -> np.ndarray:
    nodes, _ = _lgl_cached(order)
    p_n, _ = legendre_pair(order, nodes)
    diff = nodes[:, None] - nodes[None, :]
    np.fill_diagonal(diff, 1.0)
    d = (p_n[:, None] / p_n[None, :]) / diff
    np.fill_diagonal(d, 0.0)
    # Negative-sum trick: the diagonal makes every row sum to zero to round-off, so the
    # derivative of a constant vanishes exactly (free-stream preservation).
    np.fill_diagonal(d, -d.sum(axis=1))
    d.setflags(write=False)
    return d


def diff_matrix(order: int) -> np.ndarray:
    """``D[i, m] = l_m'(xi_i)``: the LGL differentiation matrix of shape (Nq, Nq)."""
    return _diff_cached(_check_order(order)).copy()
