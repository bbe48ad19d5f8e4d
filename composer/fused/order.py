"""The order in which a whole-element fused kernel's blocks take their elements (``element_bricks``).

Why: a block gathers the exterior traces of its six neighbours' face layers (q, u, v, w at the nodes
across each face). The neighbour's layer is read from DRAM twice when the neighbour's own block runs
so much earlier or later that the streamed arrays in between have pushed the layer out of L2. In the
default order (block b takes element b) a z neighbour is NeX * NeY blocks away: 1024 at p = 7 on the
32^3 benchmark grid, about one wave of resident blocks, whose streamed bytes (48 KB per element,
about 50 MB) fill the L2. ncu at p = 7 (H100, session 31): 1538 MB of DRAM reads against the 1426 MB
the kernel must read, the 112 MB about what re-reading every z-face layer costs (134 MB); bricks of
32 x 8 x 32 brought it to 1477 MB, x0.964 of the time. Taking the
elements brick by brick (bricks of ``bx x by x bz`` elements, the bricks and the elements inside each
in the kji order of the grid) keeps every neighbour inside a brick a few hundred blocks away.

The kernel reads its element from a permutation array (``order[b]``), so it serves any mesh: this
module makes the permutation of the structured grid (composer.dg.Mesh numbers element (ex, ey, ez)
as ex + NeX * (ey + NeY * ez)); an unstructured mesh would bring its own locality order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from composer.fused.config import FusedConfig

#: Fractions of the L2 that may hold the streamed working set between a layer's two reads (the rest goes
#: to the lines in flight and the writes; how much is not known: at p = 7 the H100's 50 MB did not hold
#: the 1024 blocks between z neighbours, 49 MB): ``ranked_bricks`` scores a brick over all of them.
L2_WINDOW_FRACTIONS = (0.25, 0.5, 0.75)


def brick_order(grid: Sequence[int], bricks: Sequence[int]) -> np.ndarray:
    """The element each block takes (int32, one per element): bricks of ``bricks`` = (bx, by, bz)
    elements in kji order, the elements of a brick in kji order; bricks at the grid's high ends are
    cut where the extent is not a multiple of the brick. A permutation of range(Ne)."""
    nex, ney, nez = (int(n) for n in grid)
    bx, by, bz = (int(b) for b in bricks)
    if min(bx, by, bz) < 1:
        raise ValueError(f"brick extents must be positive, got {tuple(bricks)}")
    ez, ey, ex = np.meshgrid(np.arange(nez), np.arange(ney), np.arange(nex), indexing="ij")
    nbx, nby = -(-nex // bx), -(-ney // by)
    brick = (ez // bz * nby + ey // by) * nbx + ex // bx
    inner = ((ez % bz) * by + ey % by) * bx + ex % bx
    key = brick.ravel().astype(np.int64) * (bx * by * bz) + inner.ravel()
    order = np.argsort(key, kind="stable").astype(np.int32)  # element indices e = ex + NeX * (ey + NeY * ez)
    return order


def launch_order(grid: Sequence[int], bricks: Sequence[int], pairs: bool = False) -> np.ndarray:
    """The permutation a bricked kernel uploads (int32, one entry per block): the element each block
    takes, or with ``pairs`` (``x_pairs``: a block holds the x neighbours 2P and 2P + 1) the first
    element of each block's pair, the pairs taken brick by brick over the grid of pairs (NeX / 2, NeY,
    NeZ) in bricks of bx / 2 x by x bz pairs. Why pairs need their own order: the pair's two elements
    must stay one block (the face they share is exchanged in shared memory), so a brick is a brick of
    pairs; bx must be even (``element_bricks_problem``)."""
    if not pairs:
        return brick_order(grid, bricks)
    nex, ney, nez = (int(n) for n in grid)
    bx, by, bz = (int(b) for b in bricks)
    if nex % 2 or bx % 2:
        raise ValueError(f"pairs need an even x extent and an even brick bx, got grid {tuple(grid)}, brick {tuple(bricks)}")
    pair = brick_order((nex // 2, ney, nez), (bx // 2, by, bz))  # P = ex / 2 + NeX / 2 * (ey + NeY * ez)
    return (2 * pair).astype(np.int32)  # the pair's first element, e = 2 P (ex even)


def element_sequence(grid: Sequence[int], bricks: Sequence[int], pairs: bool = False) -> np.ndarray:
    """The elements in launch position order (a permutation of range(Ne)): ``launch_order`` with each
    pair's two elements one after the other, the order the reuse estimates (``reread_bytes``) and the
    emulation walk."""
    first = launch_order(grid, bricks, pairs)
    return first if not pairs else np.stack([first, first + 1], axis=1).ravel().astype(np.int32)


def positions(order: np.ndarray) -> np.ndarray:
    """Launch position of each element (the inverse permutation of ``order``)."""
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    return pos


def face_layer_bytes(nq: int) -> tuple[int, int, int]:
    """DRAM bytes of one face layer of q, u, v, w as a neighbour's gathers fetch it, per direction:
    32-byte sectors, so an x face (one node in each row of Nq doubles) costs a sector per node, a y
    face Nq rows of Nq contiguous doubles, a z face one contiguous plane."""
    sector = 32
    x = 4 * nq * nq * sector
    y = 4 * nq * (-(-nq * 8 // sector) * sector)
    z = 4 * nq * nq * 8
    return x, y, z


def reread_bytes(grid: Sequence[int], order: np.ndarray, nq: int, window: int) -> int:
    """Estimated DRAM bytes read twice per call: every face layer whose element and gathering
    neighbour are more than ``window`` launch positions apart (periodic neighbours included)."""
    nex, ney, nez = (int(n) for n in grid)
    pos = positions(order).reshape(nez, ney, nex)
    total = 0
    for axis, layer in zip((2, 1, 0), face_layer_bytes(nq)):  # x, y, z: the array axes ex, ey, ez
        far = np.abs(pos - np.roll(pos, -1, axis=axis)) > window
        total += 2 * layer * int(np.count_nonzero(far))  # both layers of the shared face
    return total


def reuse_window(l2_bytes: float, element_bytes: float) -> int:
    """Launch positions between two reads of a layer that still find it in ``l2_bytes`` of L2: the
    elements whose streamed bytes fill it."""
    return max(1, int(l2_bytes / element_bytes))


def ranked_bricks(grid: Sequence[int], nq: int, l2_bytes: int, keep: int) -> list[tuple[int, int, int]]:
    """The ``keep`` bricks with the fewest estimated re-read bytes (``reread_bytes`` summed over the reuse
    windows of ``L2_WINDOW_FRACTIONS`` of ``l2_bytes``), larger bricks first among equals; every brick spans whole x rows (an x face's
    layer, a sector per node, is the costliest to read twice) and powers of two (or the whole extent)
    along y and z. Bricks whose permutation is the default order (any NeX x NeY x bz brick) or one
    another brick gives are left out."""
    nex, ney, nez = (int(n) for n in grid)
    ne = nex * ney * nez
    element_bytes = 8 * (8 * nq**3 + 4 * 6 * nq * nq) + 2 * 4 * 6 * nq * nq  # the fields, dqdt and int32 maps
    windows = [reuse_window(f * l2_bytes, element_bytes) for f in L2_WINDOW_FRACTIONS]

    def extents(n: int) -> list[int]:
        return sorted({1 << s for s in range(n.bit_length()) if 1 << s <= n} | {n})

    scored, seen = [], {np.arange(ne, dtype=np.int32).tobytes()}  # the default order is no candidate
    for by in extents(ney):
        for bz in extents(nez):
            bricks = (nex, by, bz)
            order = brick_order(grid, bricks)
            if order.tobytes() in seen:
                continue  # the default order, or a permutation a brick scored already gives
            seen.add(order.tobytes())
            scored.append((sum(reread_bytes(grid, order, nq, w) for w in windows), -by * bz, bricks))
    return [bricks for *_, bricks in sorted(scored)[:keep]]


def gather_rereads(config: "FusedConfig", grid: Sequence[int], l2_bytes: int | None) -> tuple[int, int] | None:
    """The range of ``reread_bytes`` over the windows of ``L2_WINDOW_FRACTIONS`` of ``l2_bytes`` for a table
    whose one kernel carries x, y and z over whole elements, one per block, in its element order (the
    default or ``element_bricks``, pairs as two consecutive positions); None for other tables (several
    kernels or boxes per element, chains, walks: their blocks' distances are not an element's), or
    without an L2 size."""
    if (l2_bytes is None or config.volume != "box" or len(config.kernels) != 1
            or config.kernels[0].box != (config.nq,) * 3 or config.x_chain
            or config.elements_per_block != 1 or config.trace_cluster != 1 or config.kernels[0].cluster > 1):
        return None
    nq = config.nq
    ne = int(np.prod([int(n) for n in grid]))
    order = (element_sequence(grid, config.element_bricks, config.x_pairs) if config.element_bricks is not None
             else np.arange(ne, dtype=np.int32))
    element_bytes = 8 * (8 * nq**3 + 4 * 6 * nq * nq) + 2 * 4 * 6 * nq * nq
    found = [reread_bytes(grid, order, nq, reuse_window(f * l2_bytes, element_bytes)) for f in L2_WINDOW_FRACTIONS]
    return min(found), max(found)


def l2_handoffs(config: "FusedConfig") -> tuple[int, int]:
    """(matched, total) kernel boundaries of one RK stage where the next kernel starts on the elements
    the one before it touched last. The stage is a cycle: the RK update (a grid-stride loop upwards over
    its arrays, ending on the highest elements), the face-flux kernel of an ``flux = "array"`` table
    (grid-stride, upwards), then the volume kernels in launch order, each upwards or, with
    ``descending``, downwards. A kernel that ends high hands over to one that starts high, and one that
    ends low to one that starts low: the next kernel's first wave then finds in L2 the lines the previous
    kernel's last wave left there (some tens of MB on an H200, against 0.4-2 GB per kernel). Why count:
    an RK stage of k kernels has k boundaries, and the directions can match at most all of them for an
    even cycle, all but one for an odd one. It does not predict the time (session 38 on an H100: a
    descending z kernel at p = 31 x0.982, a descending first or streamed kernel up to x1.08 with as many
    handoffs): the sweep measures which order pays."""
    downs = ([False] if config.flux == "array" else []) + [k.descending for k in config.kernels]
    cycle = [False, *downs]  # the RK update first: it runs between two tendency calls
    matched = sum(1 for before, after in zip(cycle, cycle[1:] + cycle[:1]) if before != after)
    return matched, len(cycle)
