"""Epilogue visitor trees: what a GEMM does with each accumulator before (instead of) storing it.

A tree is composed in Python from small frozen dataclasses and is a compile-time constant of the
kernel it specializes. Leaves name where a value comes from, compute nodes combine values, and
the root :class:`Store` writes one value per output element to the kernel's C:

- :class:`Accumulator`: the GEMM's own result at the output element;
- :class:`Aux`: an auxiliary volume array read at the output element's index (same layout as C:
  the three derivatives, the metric weights and the fold's partial sum are all volume arrays);
- :class:`Face`: face data at the boundary nodes: the LIFT of a face array (``fstar``), i.e. the
  sum of the face values of every face the output node lies on (``shared/spec/operator.md``);
- :class:`SplitAux`: a derivative a parity GEMM wrote split along its axis (``composer.parity``:
  ``[A e | B o]``), merged at the output node: two loads at the node's mirrored position;
- :class:`Scalar`: one of the kernel ABI's runtime scalars (``alpha``, ``beta``);
- :class:`Mul`, :class:`Add`, :class:`Neg`, :class:`Fma` (``a * b + c``, one rounding on the GPU).

Python operators compose them: ``Store(-(fma(Aux("Ez"), ACC, Aux("partial")) + Face()))``.
:func:`to_dict`/:func:`from_dict` give the JSON form the build manifest records, :func:`text`
the one-line form ``composer inspect`` and error messages show.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from composer.errors import ComposerError

#: The runtime scalars of the GEMM kernel ABI a Scalar leaf may read.
SCALARS = ("alpha", "beta")
#: The directions a SplitAux leaf merges along (the GEMM roles: x along i, y along j, z along k).
SPLIT_AXES = ("x", "y", "z")


class EpilogueTreeError(ComposerError, ValueError):
    """A tree that no kernel can be specialized for (the message says why)."""


class Node:
    """Base of every tree node; operators build compute nodes."""

    kind: ClassVar[str]

    def __add__(self, other: Node) -> Add:
        return Add(self, _node(other))

    def __mul__(self, other: Node) -> Mul:
        return Mul(self, _node(other))

    def __neg__(self) -> Neg:
        return Neg(self)

    def children(self) -> tuple[Node, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Node))


def _node(value: Any) -> Node:
    if not isinstance(value, Node):
        raise EpilogueTreeError(f"an epilogue tree combines nodes, got {value!r}")
    return value


@dataclass(frozen=True)
class Accumulator(Node):
    """The GEMM result at the output element."""

    kind: ClassVar[str] = "acc"


@dataclass(frozen=True)
class Aux(Node):
    """Volume array ``name`` at the output element's index (C's leading dimension and batch stride)."""

    name: str
    kind: ClassVar[str] = "aux"


@dataclass(frozen=True)
class Face(Node):
    """LIFT of face array ``name`` (layout ``[e, f, b, a]``) at the output node: the sum, faces
    0..5 in order, of the face values of every face the node lies on (0 for interior nodes)."""

    name: str = "fstar"
    kind: ClassVar[str] = "face"


@dataclass(frozen=True)
class SplitAux(Node):
    """Volume array ``name`` written split along ``axis``'s direction (``x``: i, ``y``: j, ``z``: k) by a
    parity GEMM, merged at the output node: with ``c`` the node's coordinate along the axis and
    ``h = Nq/2``, ``u + w`` at ``c < h`` and ``w - u`` at ``c >= h``, where ``u`` and ``w`` are the
    array at the node moved to coordinate ``c' = min(c, p - c)`` and to ``c' + h``
    (``composer.parity.reference.merge``)."""

    name: str
    axis: str
    kind: ClassVar[str] = "split"


@dataclass(frozen=True)
class Scalar(Node):
    """The kernel's runtime scalar ``name`` (one of SCALARS)."""

    name: str
    kind: ClassVar[str] = "scalar"


@dataclass(frozen=True)
class Mul(Node):
    a: Node
    b: Node
    kind: ClassVar[str] = "mul"


@dataclass(frozen=True)
class Add(Node):
    a: Node
    b: Node
    kind: ClassVar[str] = "add"


@dataclass(frozen=True)
class Neg(Node):
    a: Node
    kind: ClassVar[str] = "neg"


@dataclass(frozen=True)
class Fma(Node):
    """``a * b + c``."""

    a: Node
    b: Node
    c: Node
    kind: ClassVar[str] = "fma"


@dataclass(frozen=True)
class Store(Node):
    """The root: write ``value`` to C at the output element."""

    value: Node
    kind: ClassVar[str] = "store"


#: The accumulator leaf (the one instance trees share; every Accumulator() is equal to it).
ACC = Accumulator()

_KINDS: dict[str, type[Node]] = {cls.kind: cls for cls in (Accumulator, Aux, SplitAux, Face, Scalar, Mul, Add, Neg,
                                                             Fma, Store)}


def fma(a: Node, b: Node, c: Node) -> Fma:
    """``a * b + c`` as one node (one rounding in the kernel)."""
    return Fma(_node(a), _node(b), _node(c))


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, depth first, parents before children, left to right."""
    yield node
    for child in node.children():
        yield from walk(child)


def aux_names(tree: Node) -> tuple[str, ...]:
    """The Aux and SplitAux arrays a tree reads, in order of first appearance (the kernel's aux slot order)."""
    return tuple(dict.fromkeys(n.name for n in walk(tree) if isinstance(n, (Aux, SplitAux))))


def reads_split(tree: Node) -> bool:
    """Whether the tree merges a split array (its loads then follow each node's own coordinates)."""
    return any(isinstance(n, SplitAux) for n in walk(tree))


def face_names(tree: Node) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n.name for n in walk(tree) if isinstance(n, Face)))


def reads_accumulator(tree: Node) -> bool:
    return any(isinstance(n, Accumulator) for n in walk(tree))


def check_tree(tree: Node, max_aux: int, max_faces: int = 1) -> Store:
    """``tree`` if a kernel can be specialized for it: a Store root, no Store below it, scalars the
    ABI has, at most ``max_aux`` distinct Aux arrays and ``max_faces`` face arrays."""
    if not isinstance(tree, Store):
        raise EpilogueTreeError(f"an epilogue tree has a Store at its root, got {text(tree)}")
    problems = []
    if any(isinstance(n, Store) for n in walk(tree.value)):
        problems.append("a Store below the root (a tree writes C once)")
    bad = sorted({n.name for n in walk(tree) if isinstance(n, Scalar) and n.name not in SCALARS})
    if bad:
        problems.append(f"scalars {bad} are not kernel parameters (allowed: {', '.join(SCALARS)})")
    if len(aux_names(tree)) > max_aux:
        problems.append(f"{len(aux_names(tree))} aux arrays {list(aux_names(tree))}: the kernel has {max_aux} slots")
    if len(face_names(tree)) > max_faces:
        problems.append(f"face arrays {list(face_names(tree))}: the kernel has {max_faces} face parameter")
    for n in walk(tree):
        for f in fields(n):
            value = getattr(n, f.name)
            if f.name == "name" and not (isinstance(value, str) and value.isidentifier()):
                problems.append(f"{n.kind} name {value!r} is not an identifier")
        if isinstance(n, SplitAux) and n.axis not in SPLIT_AXES:
            problems.append(f"split({n.name}) along {n.axis!r}: the axis is one of {', '.join(SPLIT_AXES)}")
    split_as = {}
    for n in walk(tree):
        if isinstance(n, (Aux, SplitAux)):
            form = n.axis if isinstance(n, SplitAux) else None
            if split_as.setdefault(n.name, form) != form:
                problems.append(f"array {n.name} read both split and unsplit (or split along two axes)")
    if problems:
        raise EpilogueTreeError(f"epilogue tree {text(tree)}: " + "; ".join(problems))
    return tree


def text(node: Node) -> str:
    """One-line form: ``store(neg(add(fma(aux(Ez), acc, aux(partial)), face(fstar))))``."""
    if isinstance(node, Accumulator):
        return "acc"
    if isinstance(node, (Aux, Face, Scalar)):
        return f"{node.kind}({node.name})"
    if isinstance(node, SplitAux):
        return f"split({node.name}, {node.axis})"
    return f"{node.kind}({', '.join(text(c) for c in node.children())})"


def to_dict(node: Node) -> dict[str, Any]:
    """JSON-ready form (what the build manifest records)."""
    out: dict[str, Any] = {"kind": node.kind}
    for f in fields(node):
        value = getattr(node, f.name)
        out[f.name] = to_dict(value) if isinstance(value, Node) else value
    return out


def from_dict(raw: Mapping[str, Any]) -> Node:
    """Inverse of :func:`to_dict`; an unknown kind or field is an EpilogueTreeError."""
    try:
        cls = _KINDS[raw["kind"]]
    except (KeyError, TypeError):
        raise EpilogueTreeError(f"not an epilogue tree node: {raw!r}") from None
    names = {f.name for f in fields(cls)}
    given = {k: v for k, v in raw.items() if k != "kind"}
    if set(given) != names:
        raise EpilogueTreeError(f"{cls.kind} node needs fields {sorted(names)}, got {sorted(given)}")
    return cls(**{k: from_dict(v) if isinstance(v, Mapping) else v for k, v in given.items()})
