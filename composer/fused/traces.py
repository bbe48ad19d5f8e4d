"""Which meshes ``traces = "xfaces"`` (and ``x_pairs``, ``x_chain``, ``interior_maps = false``) serve: the x-face
maps (every face's, without the maps) must point at the
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


def own_face_nodes(nq: int, face: int) -> np.ndarray:
    """Flat in-element index (k * Nq^2 + j * Nq + i) of each node (b, a) of ``face`` (shape (Nq, Nq)):
    the element's own boundary nodes in the face order of the spec (x faces (a, b) = (j, k), y faces
    (i, k), z faces (i, j))."""
    d, side = divmod(face, 2)
    b = np.arange(nq).reshape(nq, 1)
    a = np.arange(nq).reshape(1, nq)
    at = side * (nq - 1)
    k, j, i = ((b, a, at), (b, at, a), (at, b, a))[d]
    return np.broadcast_to(k * nq * nq + j * nq + i, (nq, nq))


def own_face_maps_problem(vmap_m: np.ndarray, nq: int, faces: tuple[int, ...], what: str) -> str | None:
    """None if every slot of ``faces`` in ``vmap_m`` (the interior map, shape (Ne, 6, Nq, Nq) or (Ne, 6,
    Nq * Nq)) names the element's own boundary node (``own_face_nodes``), else what is wrong, starting
    with ``what`` (the first slot that is not)."""
    ne = vmap_m.shape[0]
    maps = vmap_m.reshape(ne, 6, nq, nq)
    e = np.arange(ne).reshape(ne, 1, 1)
    for face in faces:
        own = e * nq**3 + own_face_nodes(nq, face)
        wrong = np.argwhere(maps[:, face] != own)
        if len(wrong):
            we, wb, wa = (int(v) for v in wrong[0])
            return (f"{what}: vmapM of element {we}, {'xyz'[face // 2]} face {face % 2}, node ({wa}, {wb}) is "
                    f"{int(maps[we, face, wb, wa])}, not {int(own[we, wb, wa])}")
    return None


def x_face_maps_problem(vmap_m: np.ndarray, nq: int) -> str | None:
    """None if every x-face slot (element e, side s, face node b * Nq + a) of ``vmap_m`` (the
    interior map, shape (Ne, 6, Nq, Nq) or (Ne, 6, Nq * Nq)) is node (k, j, i) = (b, a, s ? Nq - 1 : 0)
    of element e, else what is wrong (the first slot that is not)."""
    return own_face_maps_problem(vmap_m, nq, (0, 1),
                                 'traces = "xfaces" needs x-face maps that name the element\'s own boundary nodes')


def interior_maps_problem(vmap_m: np.ndarray, nq: int) -> str | None:
    """None if every slot of ``vmap_m`` names the element's own boundary node, which a table with
    ``interior_maps = false`` addresses without reading the map, else what is wrong."""
    return own_face_maps_problem(vmap_m, nq, tuple(range(6)),
                                 "interior_maps = false needs face maps that name the element's own boundary nodes")


def x_pairs_maps_problem(vmap_p: np.ndarray, nq: int) -> str | None:
    """None if the elements pair up for ``x_pairs`` under the exterior map ``vmap_p``: an even
    element count, and for every pair (2b, 2b + 1) the high x face of 2b sees node (b', a, 0) of
    2b + 1 and the low x face of 2b + 1 sees node (b', a, Nq - 1) of 2b at the same face node
    (a, b') (the kernel exchanges the shared face's nodes line by line), else what is wrong."""
    ne = vmap_p.shape[0]
    if ne % 2:
        return f"x_pairs needs an even number of elements, got {ne}"
    return _x_links_problem(vmap_p, nq, 2, "x_pairs needs elements 2b and 2b + 1 to be x neighbours", "an odd x extent")


def x_chain_maps_problem(vmap_p: np.ndarray, nq: int, length: int) -> str | None:
    """None if the elements form x chains of ``length`` for ``x_chain`` under the exterior map
    ``vmap_p``: an element count that is a multiple of ``length``, and in every chain (L b ... L b +
    L - 1) each element's high x face sees the next one's i = 0 nodes and the next one's low x face
    sees its i = Nq - 1 nodes, node for node (the block carries the shared faces' traces from one
    element to the next line by line), else what is wrong."""
    ne = vmap_p.shape[0]
    if ne % length:
        return f"x_chain needs a multiple of elements_per_block = {length} elements, got {ne}"
    return _x_links_problem(vmap_p, nq, length,
                            f"x_chain needs elements {length}b ... {length}b + {length - 1} to be consecutive x neighbours",
                            f"an x extent that is not a multiple of {length}")


def _x_links_problem(vmap_p: np.ndarray, nq: int, length: int, need: str, likely: str) -> str | None:
    """The link check of :func:`x_pairs_maps_problem` (``length`` 2) and :func:`x_chain_maps_problem`:
    every link (e, e + 1) inside a group of ``length`` consecutive elements is an x-neighbour pair;
    else ``need``, the first wrong node, and ``likely`` (the usual cause)."""
    ne = vmap_p.shape[0]
    maps = vmap_p.reshape(ne, 6, nq, nq)
    b = np.arange(nq).reshape(1, nq, 1)
    a = np.arange(nq).reshape(1, 1, nq)
    firsts = np.flatnonzero(np.arange(ne) % length != length - 1)  # e of every link (e, e + 1)
    first = firsts.reshape(-1, 1, 1)
    expected_high = (first + 1) * nq**3 + b * nq * nq + a * nq  # e's face 1 -> e + 1's i = 0 nodes
    expected_low = first * nq**3 + b * nq * nq + a * nq + nq - 1  # e + 1's face 0 -> e's i = Nq - 1 nodes
    for got, expected, what in ((maps[firsts, 1], expected_high, "high x face of element"),
                                (maps[firsts + 1, 0], expected_low, "low x face of element")):
        wrong = np.argwhere(got != expected)
        if len(wrong):
            link, wb, wa = (int(v) for v in wrong[0])
            element = int(firsts[link]) + (0 if what.startswith("high") else 1)
            return (f"{need}: the {what} {element} sees node {int(got[link, wb, wa])} at ({wa}, {wb}), not "
                    f"{int(expected[link, wb, wa])} ({likely}, or elements numbered otherwise)")
    return None
