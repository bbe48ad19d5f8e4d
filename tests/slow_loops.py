"""An independent, deliberately slow implementation of the tendency with explicit loops.

It shares nothing with composer.dg.reference: neighbours come from the structured element
coordinates (not vmapM/vmapP), contractions are scalar loops, and the lift is written per
face. Used only on tiny grids to check the vectorized reference.
"""

from __future__ import annotations

import numpy as np


def slow_tendency(fields: dict, order: int, grid: tuple[int, int, int], diff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (volume term, lift term) such that dqdt = -(volume + lift)."""
    nq = order + 1
    p = order
    nex, ney, nez = grid
    ne = nex * ney * nez
    q, u, v, w = (fields[k] for k in "quvw")
    volume = np.zeros((ne, nq, nq, nq))
    lift = np.zeros((ne, nq, nq, nq))
    for e in range(ne):
        for k in range(nq):
            for j in range(nq):
                for i in range(nq):
                    sx = sum(diff[i, m] * q[e, k, j, m] * u[e, k, j, m] for m in range(nq))
                    sy = sum(diff[j, m] * q[e, k, m, i] * v[e, k, m, i] for m in range(nq))
                    sz = sum(diff[k, m] * q[e, m, j, i] * w[e, m, j, i] for m in range(nq))
                    volume[e, k, j, i] = (
                        fields["Ex"][e, k, j, i] * sx + fields["Ey"][e, k, j, i] * sy + fields["Ez"][e, k, j, i] * sz
                    )
    for e in range(ne):
        ex, ey, ez = e % nex, (e // nex) % ney, e // (nex * ney)
        for f in range(6):
            axis, side = f // 2, f % 2
            nb = [ex, ey, ez]
            nb[axis] = (nb[axis] + (1 if side else -1)) % grid[axis]
            en = nb[0] + nex * (nb[1] + ney * nb[2])
            for b in range(nq):
                for a in range(nq):
                    if axis == 0:
                        own, other = (b, a, p if side else 0), (b, a, 0 if side else p)
                    elif axis == 1:
                        own, other = (b, p if side else 0, a), (b, 0 if side else p, a)
                    else:
                        own, other = (p if side else 0, b, a), (0 if side else p, b, a)
                    n = (fields["nx"][e, f, b, a], fields["ny"][e, f, b, a], fields["nz"][e, f, b, a])
                    vm = u[(e,) + own] * n[0] + v[(e,) + own] * n[1] + w[(e,) + own] * n[2]
                    vp = u[(en,) + other] * n[0] + v[(en,) + other] * n[1] + w[(en,) + other] * n[2]
                    qm, qp = q[(e,) + own], q[(en,) + other]
                    fstar = 0.5 * fields["F"][e, f, b, a] * (qp * vp - qm * vm - 0.5 * abs(vp + vm) * (qp - qm))
                    lift[(e,) + own] += fstar
    return volume, lift
