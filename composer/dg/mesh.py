"""The periodic hexahedral mesh of the unit cube and its indirect face addressing.

Elements are numbered ``e = ex + NeX * (ey + NeY * ez)``; volume nodes are stored
``[e, k, j, i]`` and face nodes ``[e, f, b, a]`` (see shared/spec/operator.md). ``vmapM``
and ``vmapP`` map every face node to the flat index of the interior node and of the
coincident node of the neighbour across the face (periodic wrap). Kernels use these maps
rather than the structured mesh, so the same kernels would serve an unstructured mesh.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from composer.dg.lgl import _check_order, lgl

NUM_FACES = 6
# Face f -> (axis of the normal in (x, y, z) order, side: 0 = minus, 1 = plus).
FACE_AXIS = (0, 0, 1, 1, 2, 2)
FACE_SIDE = (0, 1, 0, 1, 0, 1)


def check_grid(grid: object) -> tuple[int, int, int]:
    """Normalize ``grid`` to ``(NeX, NeY, NeZ)``; an int means a cubic grid."""
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        grid = (int(grid),) * 3
    try:
        dims = tuple(int(n) for n in grid)  # type: ignore[union-attr]
        exact = all(int(n) == n and not isinstance(n, bool) for n in grid)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"grid must be an int or (NeX, NeY, NeZ), got {grid!r}") from None
    if len(dims) != 3 or not exact or min(dims) < 1:
        raise ValueError(f"grid must be three positive integers (NeX, NeY, NeZ), got {grid!r}")
    return dims  # type: ignore[return-value]


@dataclass(frozen=True)
class Mesh:
    """Geometry and connectivity of an ``order``-``p`` mesh of ``grid`` elements."""

    order: int
    grid: tuple[int, int, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", _check_order(self.order))
        object.__setattr__(self, "grid", check_grid(self.grid))

    @property
    def nq(self) -> int:
        return self.order + 1

    @property
    def num_elements(self) -> int:
        nex, ney, nez = self.grid
        return nex * ney * nez

    @property
    def num_points(self) -> int:
        return self.num_elements * self.nq**3

    @property
    def volume_shape(self) -> tuple[int, int, int, int]:
        return (self.num_elements, self.nq, self.nq, self.nq)

    @property
    def face_shape(self) -> tuple[int, int, int, int]:
        return (self.num_elements, NUM_FACES, self.nq, self.nq)

    @property
    def spacing(self) -> tuple[float, float, float]:
        return tuple(1.0 / n for n in self.grid)  # type: ignore[return-value]

    def element_coords(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Element indices (ex, ey, ez), each of shape (Ne,), in element order."""
        nex, ney, nez = self.grid
        e = np.arange(self.num_elements)
        return e % nex, (e // nex) % ney, e // (nex * ney)

    def axis_coords(self, axis: int) -> np.ndarray:
        """Physical coordinate along ``axis`` of every (element, node) pair: shape (Ne, Nq)."""
        nodes, _ = lgl(self.order)
        h = self.spacing[axis]
        return self.element_coords()[axis][:, None] * h + (nodes[None, :] + 1.0) * (h / 2.0)

    def volume_coords(self, axis: int, elements: slice = slice(None)) -> np.ndarray:
        """Coordinate along ``axis`` broadcast to the volume layout ``[e, k, j, i]``."""
        c = self.axis_coords(axis)[elements]
        shape = [c.shape[0], 1, 1, 1]
        shape[3 - axis] = self.nq
        return np.broadcast_to(c.reshape(shape), (c.shape[0],) + (self.nq,) * 3)

    @cached_property
    def face_maps(self) -> tuple[np.ndarray, np.ndarray]:
        """(vmapM, vmapP): int64 arrays of shape (Ne, 6, Nq, Nq) of flat volume indices."""
        nq, p = self.nq, self.order
        nex, ney, nez = self.grid
        ex, ey, ez = self.element_coords()
        a = np.arange(nq)
        vmap_m = np.empty(self.face_shape, dtype=np.int64)
        vmap_p = np.empty(self.face_shape, dtype=np.int64)
        for f in range(NUM_FACES):
            axis, side = FACE_AXIS[f], FACE_SIDE[f]
            shift = 1 if side else -1
            own = (ex, ey, ez)
            nbr = list(own)
            nbr[axis] = (own[axis] + shift) % (nex, ney, nez)[axis]
            e_nbr = nbr[0] + nex * (nbr[1] + ney * nbr[2])
            # (i, j, k) of face node (a, b): the in-face indices run over the two other axes
            # in increasing axis order; the normal axis is fixed at 0 or p.
            b_idx, a_idx = np.meshgrid(a, a, indexing="ij")
            ijk_m: list[np.ndarray | int] = [0, 0, 0]
            others = [ax for ax in range(3) if ax != axis]
            ijk_m[others[0]], ijk_m[others[1]] = a_idx, b_idx
            ijk_p = list(ijk_m)
            ijk_m[axis] = p if side else 0
            ijk_p[axis] = 0 if side else p
            local_m = (np.asarray(ijk_m[2]) * nq + ijk_m[1]) * nq + ijk_m[0]
            local_p = (np.asarray(ijk_p[2]) * nq + ijk_p[1]) * nq + ijk_p[0]
            vmap_m[:, f] = np.arange(self.num_elements)[:, None, None] * nq**3 + local_m
            vmap_p[:, f] = e_nbr[:, None, None] * nq**3 + local_p
        vmap_m.setflags(write=False)
        vmap_p.setflags(write=False)
        return vmap_m, vmap_p
