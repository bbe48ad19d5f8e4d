"""One walk of an epilogue tree, shared by the NumPy emulation and the CuTe DSL emission.

The walk turns the tree into values of one output *site*: ``width`` adjacent output elements
(1, or 2 when the kernel stores an accumulator pair as one 16-byte vector) handled by one thread.
Everything that touches memory or rounds goes through a :class:`Backend`; the index math of the
Face leaf (which faces a node lies on, where their values sit in the ``[e, f, b, a]`` layout) is
written here once, so the NumPy emulation executes exactly the arithmetic the kernel does.

LIFT on a pair (width 2): the two nodes are (i, i+1) of one row with i even and Nq even
(``OutputIndex.pairs_share_row``), so the -x face can only hold the first and the +x face only the
second node, while each y and z face either holds both or neither, at adjacent face offsets: one
predicated 16-byte load per y/z face, one 8-byte load per x face.

SplitAux (a parity GEMM's split derivative merged at the node) loads two elements per node at the
node's mirrored position along the split axis, one element at a time: on a pair site the two
nodes (i, i+1) mirror to (p-i, p-i-1) along x, so no 16-byte load serves them.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from composer.epilogues.index import NodeIndex
from composer.epilogues.tree import Accumulator, Add, Aux, Face, Fma, Mul, Neg, Node, Scalar, SplitAux, Store


class Backend(Protocol):
    """What a tree's values are made of at one site of ``width`` elements."""

    width: int

    def accumulator(self) -> Sequence[Any]:
        """The site's accumulators."""

    def aux(self, name: str) -> Sequence[Any]:
        """Aux array ``name`` at the site's elements (one vector load when width is 2)."""

    def scalar(self, name: str) -> Any:
        """The runtime scalar ``name``."""

    def face(self, name: str, predicate: Any, offset: Any) -> Any:
        """Face array ``name`` at element ``offset`` where ``predicate`` holds, else 0."""

    def face_pair(self, name: str, predicate: Any, offset: Any) -> tuple[Any, Any]:
        """Elements ``offset`` and ``offset + 1`` of face array ``name`` where ``predicate`` holds."""

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        """``a * b + c`` rounded once."""

    def wide(self, value: Any) -> Any:
        """An index as a 64-bit integer (element offsets of the face array exceed 2^31)."""

    def aux_at(self, name: str, offset: Any) -> Any:
        """Aux array ``name`` at element ``offset`` (a 64-bit node index): one 8-byte load."""

    def select(self, predicate: Any, a: Any, b: Any) -> Any:
        """``a`` where ``predicate`` holds, else ``b`` (no branch)."""


def site_values(tree: Store, backend: Backend, node: NodeIndex, nq: int) -> list[Any]:
    """The values the tree stores at the site whose first element is ``node``."""
    return _values(tree.value, backend, node, nq)


def _values(n: Node, be: Backend, node: NodeIndex, nq: int) -> list[Any]:
    if isinstance(n, Accumulator):
        return list(be.accumulator())
    if isinstance(n, Aux):
        return list(be.aux(n.name))
    if isinstance(n, Scalar):
        return [be.scalar(n.name)] * be.width
    if isinstance(n, Face):
        return lift(be, n.name, node, nq)
    if isinstance(n, SplitAux):
        return merged(be, n.name, n.axis, node, nq)
    if isinstance(n, Neg):
        return [-a for a in _values(n.a, be, node, nq)]
    if isinstance(n, (Mul, Add)):
        a, b = _values(n.a, be, node, nq), _values(n.b, be, node, nq)
        return [x * y for x, y in zip(a, b)] if isinstance(n, Mul) else [x + y for x, y in zip(a, b)]
    if isinstance(n, Fma):
        a, b, c = (_values(x, be, node, nq) for x in (n.a, n.b, n.c))
        return [be.fma(x, y, z) for x, y, z in zip(a, b, c)]
    raise TypeError(f"not an epilogue value node: {n!r}")


def lift(be: Backend, name: str, node: NodeIndex, nq: int) -> list[Any]:
    """LIFT of face array ``name`` at the site: per element the face values of the faces it lies
    on, added in face order 0..5 (the separable lift's order)."""
    nq2, p = nq * nq, nq - 1
    base = be.wide(node.e) * (6 * nq2)
    # in-face offsets b*Nq + a: x faces (a, b) = (j, k), y faces (i, k), z faces (i, j)
    x_face, y_face, z_face = node.k * nq + node.j, node.k * nq + node.i, node.j * nq + node.i
    yz = ((2, node.j == 0, y_face), (3, node.j == p, y_face), (4, node.k == 0, z_face), (5, node.k == p, z_face))
    if be.width == 1:
        total = be.face(name, node.i == 0, base + x_face)
        total = total + be.face(name, node.i == p, base + (nq2 + x_face))
        for f, predicate, offset in yz:
            total = total + be.face(name, predicate, base + (f * nq2 + offset))
        return [total]
    if be.width != 2:
        raise ValueError(f"a site holds 1 or 2 elements, got {be.width}")
    first = be.face(name, node.i == 0, base + x_face)  # i even: only the first node can be on -x
    second = be.face(name, node.i == p - 1, base + (nq2 + x_face))  # only i + 1 can be p
    for f, predicate, offset in yz:
        v0, v1 = be.face_pair(name, predicate, base + (f * nq2 + offset))
        first, second = first + v0, second + v1
    return [first, second]


def merged(be: Backend, name: str, axis: str, node: NodeIndex, nq: int) -> list[Any]:
    """Split array ``name`` merged at the site's nodes along ``axis`` (``tree.SplitAux``): per node,
    ``fma(s, u, w)`` with ``s = +1`` below the middle and ``-1`` above, exactly ``w + u`` or ``w - u``.
    The coordinates stay non-negative (``p - c``, never ``c' - c``): the kernel's are unsigned."""
    h, p = nq // 2, nq - 1
    out = []
    for lane in range(be.width):  # a pair site's nodes are (i, i + 1) of one row
        coords = {"x": node.i + lane, "y": node.j, "z": node.k}
        c = coords[axis]
        low = c < h
        coords[axis] = be.select(low, c, p - c)
        stride = {"x": 1, "y": nq, "z": nq * nq}[axis]
        offset = ((be.wide(node.e) * nq + coords["z"]) * nq + coords["y"]) * nq + coords["x"]
        u, w = be.aux_at(name, offset), be.aux_at(name, offset + h * stride)
        out.append(be.fma(be.select(low, 1.0, -1.0), u, w))
    return out
