"""Which meshes ``traces = "xfaces"`` (and ``x_pairs``) serve: the x-face maps must point at the
element's own boundary nodes in the order the staging loop meets them (and, for pairs, elements
2b and 2b + 1 must be x neighbours whose shared face's nodes line up).

Why a check and not a fallback in the kernel: the staging thread of a pair holding an x-face node
forms that node's flux from the values it loaded, so the kernel reads no vmapM at all. A fallback
(gather both traces when vmapM names another node) would give the right number on any mesh and
hide a wrong index formula on the GPU (session 21 review); instead the path refuses the key, in one
line, on a mesh whose maps are numbered otherwise.
"""

from __future__ import annotations

import numpy as np


def x_face_maps_problem(vmap_m: np.ndarray, nq: int) -> str | None:
    """None if every x-face slot (element e, side s, face node b * Nq + a) of ``vmap_m`` (the
    interior map, shape (Ne, 6, Nq, Nq) or (Ne, 6, Nq * Nq)) is node (k, j, i) = (b, a, s ? Nq - 1 : 0)
    of element e, else what is wrong (the first slot that is not)."""
    ne = vmap_m.shape[0]
    maps = vmap_m.reshape(ne, 6, nq, nq)[:, :2]  # faces 0, 1: x low, x high; [e, side, b, a]
    e = np.arange(ne).reshape(ne, 1, 1, 1)
    side = np.arange(2).reshape(1, 2, 1, 1)
    b = np.arange(nq).reshape(1, 1, nq, 1)
    a = np.arange(nq).reshape(1, 1, 1, nq)
    own = e * nq**3 + b * nq * nq + a * nq + side * (nq - 1)
    wrong = np.argwhere(maps != own)
    if not len(wrong):
        return None
    we, ws, wb, wa = (int(v) for v in wrong[0])
    return (f'traces = "xfaces" needs x-face maps that name the element\'s own boundary nodes: vmapM of element {we}, '
            f"x face {ws}, node ({wa}, {wb}) is {int(maps[we, ws, wb, wa])}, not {int(own[we, ws, wb, wa])}")


def x_pairs_maps_problem(vmap_p: np.ndarray, nq: int) -> str | None:
    """None if the elements pair up for ``x_pairs`` under the exterior map ``vmap_p``: an even
    element count, and for every pair (2b, 2b + 1) the high x face of 2b sees node (b', a, 0) of
    2b + 1 and the low x face of 2b + 1 sees node (b', a, Nq - 1) of 2b at the same face node
    (a, b') (the kernel exchanges the shared face's nodes line by line), else what is wrong."""
    ne = vmap_p.shape[0]
    if ne % 2:
        return f"x_pairs needs an even number of elements, got {ne}"
    maps = vmap_p.reshape(ne, 6, nq, nq)
    b = np.arange(nq).reshape(1, nq, 1)
    a = np.arange(nq).reshape(1, 1, nq)
    first = np.arange(0, ne, 2).reshape(-1, 1, 1)
    expected_high = (first + 1) * nq**3 + b * nq * nq + a * nq  # 2b's face 1 -> 2b + 1's i = 0 nodes
    expected_low = first * nq**3 + b * nq * nq + a * nq + nq - 1  # 2b + 1's face 0 -> 2b's i = Nq - 1 nodes
    for got, expected, what in ((maps[0::2, 1], expected_high, "high x face of element"),
                                (maps[1::2, 0], expected_low, "low x face of element")):
        wrong = np.argwhere(got != expected)
        if len(wrong):
            pair, wb, wa = (int(v) for v in wrong[0])
            element = 2 * pair + (0 if what.startswith("high") else 1)
            return (f"x_pairs needs elements 2b and 2b + 1 to be x neighbours: the {what} {element} sees node "
                    f"{int(got[pair, wb, wa])} at ({wa}, {wb}), not {int(expected[pair, wb, wa])} (an odd x extent, "
                    "or elements numbered otherwise)")
    return None
