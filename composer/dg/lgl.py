"""Legendre–Gauss–Lobatto nodes, weights and the differentiation matrix.

Computed to round-off for every order up to (at least) 1023, on one half of the interval and
mirrored so that nodes, weights and ``P_N`` at the nodes are exactly symmetric:

- nodes: Newton's method on ``(1 - x^2) P_N'(x) / N = x P_N - P_{N-1}`` (FP64 three-term
  recurrence), started from the Chebyshev–Gauss–Lobatto points, then one Newton step whose
  residual is evaluated in double-double, so each node is its correctly rounded value up to a
  fraction of an ulp;
- ``P_N`` at the nodes: the recurrence in double-double. In plain FP64 it loses up to
  ``~N**1.3`` ulp next to the end points (weights off by 1.07e-12 relative at N = 1023 against
  mpmath) and ~100 ulp in the interior (1.1e-14), with nodes correct to half an ulp; Reinsch's
  form of the recurrence near x = +-1 only brings the end points down to the interior's level;
- weights ``w_i = 2 / (N (N + 1) P_N(x_i)^2)``, the last division in double-double too.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from composer.dg import double_double as dd

MAX_NEWTON_ITERATIONS = 100


class _LglTables(NamedTuple):
    """Read-only, cached: the nodes, the weights and ``P_N`` at the nodes (for ``D``)."""

    nodes: np.ndarray
    weights: np.ndarray
    legendre_at_nodes: np.ndarray


def _check_order(order: int) -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        raise ValueError(f"order must be an integer >= 1, got {order!r}")
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    return int(order)


def legendre_pair(order: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (P_order(x), P_{order-1}(x)) by the three-term recurrence in FP64 (accurate to ~N ulp)."""
    p_prev = np.ones_like(x)
    p_curr = x.copy()
    for n in range(1, order):
        p_prev, p_curr = p_curr, ((2 * n + 1) * x * p_curr - n * p_prev) / (n + 1)
    return p_curr, p_prev


def legendre_pair_dd(order: int, x: np.ndarray) -> tuple[dd.DoubleDouble, dd.DoubleDouble]:
    """(P_order(x), P_{order-1}(x)) at the FP64 points ``x`` by the recurrence in double-double.

    ``P_{n+1} = a_n x P_n - b_n P_{n-1}`` with ``a_n = (2n+1)/(n+1)`` and ``b_n = n/(n+1)`` held
    to double-double precision; the ~N**1.3 ulp amplification of the recurrence near the end
    points then stays far below FP64 round-off.
    """
    p_prev = dd.from_float(np.ones_like(x))
    p_curr = dd.from_float(x)
    for n in range(1, order):
        a_n = dd.from_fraction(Fraction(2 * n + 1, n + 1))
        b_n = dd.from_fraction(Fraction(n, n + 1))
        p_prev, p_curr = p_curr, dd.sub(dd.mul(a_n, dd.mul_float(p_curr, x)), dd.mul(b_n, p_prev))
    return p_curr, p_prev


def _newton_left_half(n: int) -> np.ndarray:
    """Nodes ``x_0 = -1 < ... < x_{(n+2)//2 - 1} <= 0`` to a few ulp (FP64 Newton)."""
    half = (n + 2) // 2
    x = -np.cos(np.pi * np.arange(half) / n)
    interior = np.arange(half) > 0
    for _ in range(MAX_NEWTON_ITERATIONS):
        p_n, p_nm1 = legendre_pair(n, x)
        # Newton on q(x) = x P_n - P_{n-1}, whose interior roots are the LGL nodes; q' = (n + 1) P_n.
        step = np.where(interior, (x * p_n - p_nm1) / ((n + 1) * p_n), 0.0)
        x = x - step
        if np.max(np.abs(step)) <= 2.0 * np.finfo(float).eps:
            break
    else:  # pragma: no cover - never observed up to p = 4096
        raise RuntimeError(f"LGL Newton iteration did not converge at order {n}")
    if n % 2 == 0:
        x[-1] = 0.0  # the middle node, exactly
    return x


def _polish(n: int, x: np.ndarray) -> np.ndarray:
    """One Newton step with the residual ``x P_n - P_{n-1}`` in double-double (interior nodes)."""
    p_n, p_nm1 = legendre_pair_dd(n, x)
    residual = dd.sub(dd.mul_float(p_n, x), p_nm1)
    step = residual.hi / ((n + 1) * p_n.hi)
    step[0] = 0.0  # x_0 = -1 is exact
    return x - step


@lru_cache(maxsize=64)
def _lgl_tables(order: int) -> _LglTables:
    n = order
    x = _polish(n, _newton_left_half(n))
    p_n, _ = legendre_pair_dd(n, x)
    scaled = dd.mul_float(dd.mul(p_n, p_n), np.full_like(x, float(n * (n + 1))))  # exact integer factor
    w = dd.div(dd.from_float(np.full_like(x, 2.0)), scaled).hi
    half = x.size
    nodes, weights, legendre = np.empty(n + 1), np.empty(n + 1), np.empty(n + 1)
    nodes[:half], weights[:half], legendre[:half] = x, w, p_n.hi
    nodes[n + 1 - half :] = -x[::-1]
    weights[n + 1 - half :] = w[::-1]
    legendre[n + 1 - half :] = (-1.0) ** n * p_n.hi[::-1]  # P_n(-x) = (-1)^n P_n(x)
    for table in (nodes, weights, legendre):
        table.setflags(write=False)
    return _LglTables(nodes, weights, legendre)


def lgl(order: int) -> tuple[np.ndarray, np.ndarray]:
    """LGL nodes ``xi_0 = -1 < ... < xi_p = 1`` and quadrature weights on [-1, 1] (fresh copies)."""
    tables = _lgl_tables(_check_order(order))
    return tables.nodes.copy(), tables.weights.copy()


@lru_cache(maxsize=64)
def _diff_cached(order: int) -> np.ndarray:
    tables = _lgl_tables(order)
    nodes, p_n = tables.nodes, tables.legendre_at_nodes
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
