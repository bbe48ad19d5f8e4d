"""Face links: the exterior map of a conforming hexahedral mesh as one link per element face.

Why (issue 16, ``exterior_maps = false``): the fused p = 7 kernel reads its bytes at about 89 % of the
DRAM peak, so its time follows its bytes, and vmapP is 4 Nq^2 bytes per element face (50 MB of
about 1440 MB at p = 7, 25 MB at p = 15). On a conforming hexahedral mesh, structured or not, the
exterior nodes of a face are the nodes of one face of one neighbour in one of eight orientations, and
every such map is affine in the face position (a, b): node = base + a * stride_a + b * stride_b
(``linked_offsets`` spells out the 6 x 8 of them). A link of two int32 (the base; the two strides,
16 bits each) names all Nq^2 nodes; the kernel adds two products. The kernels still take the
exterior nodes from an index map that would serve an unstructured mesh (``../shared/spec/operator.md``).

The path derives the links from the mesh's vmapP (three nodes per face) and checks that they name
exactly the same nodes (:func:`face_links_problem`); a mesh whose exterior map is not face to face
(a non-conforming one) is refused in one line, as ``interior_maps = false`` refuses its maps.
``linked_nodes`` is the NumPy form of the template's ``linked_node`` (``_face_links.cuh.j2``); a test
compiles that device function as host code and compares the two on links of every face and
orientation.
"""

from __future__ import annotations

import numpy as np

#: Orientations of a face's Nq x Nq nodes on its neighbour's face (the dihedral group of the square).
ORIENTATIONS = 8


def face_positions(nq: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of every node of a face, shape (Nq, Nq) each, in the face array's [b, a] order."""
    b, a = np.meshgrid(np.arange(nq), np.arange(nq), indexing="ij")
    return a, b


def linked_offsets(face: np.ndarray | int, orientation: np.ndarray | int, a: np.ndarray, b: np.ndarray,
                   nq: int) -> np.ndarray:
    """In-element offsets (k Nq^2 + j Nq + i) of the neighbour face ``face``'s nodes that this face's
    nodes (a, b) meet under ``orientation`` (arrays broadcast)."""
    orientation = np.asarray(orientation)
    swap = (orientation & 1).astype(bool)
    an = np.where(swap, b, a)
    bn = np.where(swap, a, b)
    an = np.where(orientation & 2, nq - 1 - an, an)
    bn = np.where(orientation & 4, nq - 1 - bn, bn)
    face = np.asarray(face)
    at = np.where(face & 1, nq - 1, 0)
    d = face >> 1
    return np.where(d == 0, (bn * nq + an) * nq + at,  # x face: (k, j, i) = (b', a', at)
                    np.where(d == 1, (bn * nq + at) * nq + an,  # y face: (b', at, a')
                             (at * nq + bn) * nq + an))  # z face: (at, b', a')


#: Largest |stride| a link holds: the two strides share one int32, 16 bits each (Nq^2 <= 32767, p <= 180;
#: the tables with inline face fluxes run to p = 63).
MAX_STRIDE = 2**15 - 1


def pack(base: np.ndarray, stride_a: np.ndarray, stride_b: np.ndarray) -> np.ndarray:
    """Links (..., 2) int32: (base, stride_a & 0xffff | stride_b << 16)."""
    base, stride_a, stride_b = (np.asarray(v, dtype=np.int64) for v in (base, stride_a, stride_b))
    if max(np.abs(stride_a).max(initial=0), np.abs(stride_b).max(initial=0)) > MAX_STRIDE:
        raise ValueError(f"face links hold strides up to {MAX_STRIDE} (Nq^2 at most)")
    if np.abs(base).max(initial=0) >= 2**31:
        raise ValueError("face links address nodes in 32 bits")
    packed = (stride_a & 0xFFFF) | (stride_b << 16)
    return np.stack([base, packed], axis=-1).astype(np.int32)


def unpack(links: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base, stride_a, stride_b) of links (..., 2), int64 each: the kernel's decoding of the second entry
    (the low 16 bits as a signed short, the high 16 by an arithmetic shift)."""
    links = np.asarray(links).astype(np.int64)
    packed = links[..., 1]
    low = packed & 0xFFFF
    return links[..., 0], np.where(low >= 2**15, low - 2**16, low), packed >> 16


def linked_nodes(links: np.ndarray, nq: int) -> np.ndarray:
    """The exterior map the links name, shape (Ne, 6, Nq, Nq) (int64): base + a stride_a + b stride_b
    for every face node (a, b), what the kernel's ``linked_node`` computes."""
    base, stride_a, stride_b = (v[..., None, None] for v in unpack(np.asarray(links).reshape(-1, 6, 2)))
    a, b = face_positions(nq)
    return base + a * stride_a + b * stride_b


def links_of(neighbour: np.ndarray, face: np.ndarray, orientation: np.ndarray, nq: int) -> np.ndarray:
    """Links (..., 2) int32 of faces that meet face ``face`` of element ``neighbour`` in ``orientation``."""
    a0, a1, b1 = (linked_offsets(face, orientation, np.array(a), np.array(b), nq) for a, b in ((0, 0), (1, 0), (0, 1)))
    return pack(np.asarray(neighbour) * nq**3 + a0, a1 - a0, b1 - a0)


def derive_face_links(vmap_p: np.ndarray, nq: int) -> np.ndarray:
    """Links (Ne, 6, 2) int32 read off ``vmap_p`` (shape (Ne, 6, Nq, Nq) or (Ne, 6 Nq^2)) from the nodes
    (0, 0), (1, 0) and (0, 1) of each face. Check them with :func:`face_links_problem` before use."""
    if nq < 2:
        raise ValueError("face links need Nq >= 2 (three distinct nodes per face)")
    ne = vmap_p.shape[0]
    maps = np.asarray(vmap_p).reshape(ne, 6, nq, nq).astype(np.int64)
    base = maps[:, :, 0, 0]
    return pack(base, maps[:, :, 0, 1] - base, maps[:, :, 1, 0] - base)


def face_links_problem(vmap_p: np.ndarray, links: np.ndarray, nq: int) -> str | None:
    """None if ``links`` name exactly the nodes of ``vmap_p``, else the first face node where they do
    not (the mesh's exterior map is then not face to face)."""
    ne = vmap_p.shape[0]
    maps = np.asarray(vmap_p).reshape(ne, 6, nq, nq)
    named = linked_nodes(links, nq)
    wrong = np.argwhere(named != maps)
    if not len(wrong):
        return None
    e, f, b, a = (int(v) for v in wrong[0])
    return (f"exterior_maps = false needs an exterior map that links whole faces (a conforming hexahedral "
            f"mesh): vmapP of element {e}, face {f}, node ({a}, {b}) is {int(maps[e, f, b, a])}, but its face's "
            f"link names {int(named[e, f, b, a])}")


def face_links(vmap_p: np.ndarray, nq: int) -> tuple[np.ndarray | None, str | None]:
    """The mesh's face links and what is wrong with them (None: they name exactly vmapP's nodes). A face
    whose nodes (1, 0) or (0, 1) lie further from node (0, 0) than a link's 16-bit strides reach cannot be
    one face of one neighbour (its strides are at most Nq^2): no links, and the first such face named."""
    ne = vmap_p.shape[0]
    maps = np.asarray(vmap_p).reshape(ne, 6, nq, nq).astype(np.int64)
    strides = np.abs(maps[:, :, (0, 1), (1, 0)] - maps[:, :, :1, 0])  # nodes (1, 0) and (0, 1) from (0, 0)
    far = np.argwhere(strides.max(axis=-1) > MAX_STRIDE)
    if len(far):
        e, f = (int(v) for v in far[0])
        return None, (f"exterior_maps = false needs an exterior map that links whole faces (a conforming hexahedral "
                      f"mesh): vmapP of element {e}, face {f} names nodes {int(maps[e, f, 0, 0])}, "
                      f"{int(maps[e, f, 0, 1])} and {int(maps[e, f, 1, 0])} at (0, 0), (1, 0) and (0, 1), further "
                      f"apart than one face of one element")
    links = derive_face_links(vmap_p, nq)
    return links, face_links_problem(vmap_p, links, nq)
