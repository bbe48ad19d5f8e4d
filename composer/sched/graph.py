"""A path's kernels as a dependency DAG derived from the arrays they read and write.

Why derive rather than declare: the hand-written streams and events of a path encode its data
flow implicitly, so a change to one kernel's inputs (the carry, the fold) silently invalidates
them. Here each kernel declares only what it reads and writes; the edges follow from the three
hazards on named arrays, taken in declaration (program) order, which is the order a serial
program would run them in:

- read-after-write (``raw``): a kernel reading ``a`` follows the last earlier writer of ``a``;
- write-after-read (``war``): a kernel writing ``a`` follows every earlier reader of the value it
  overwrites;
- write-after-write (``waw``): a kernel writing ``a`` follows the last earlier writer of ``a``.

One more kind orders kernels that share no array: a ``resource`` a kernel declares (``res``): a
kernel follows the last earlier kernel naming the same resource (a kernel may name several). Two kernels that each stream
DRAM at its full rate gain nothing from running together, and when the second is meant to run
beside a GEMM (the flux overlapped with the GEMMs, ``composer.paths.overlap``) it must not start
beside the first instead.

No edge is ever written by hand, so every edge names the array(s) or the resource that force it. A read of an
array that no earlier kernel wrote is either a declared input (``q``, the metric, ``D``, ...) or
a mistake, reported with the node and the array. Edges point forward in program order, so a graph
from :func:`build_graph` is acyclic; :func:`check_acyclic` guards graphs built or edited by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from composer.errors import ComposerError

RAW, WAR, WAW, RES = "raw", "war", "waw", "res"


class DataFlowError(ComposerError):
    """The declared data flow cannot be scheduled: a missing producer, a duplicate name, a cycle."""


Dims = int | tuple[int, ...]


@dataclass(frozen=True)
class KernelNode:
    """One kernel launch of a path, described by the arrays it touches.

    ``launch(stream)`` enqueues the kernel on a runtime-like stream; ``None`` makes a planning-only
    node (the CLI's ``composer graph``, the tests). ``grid``/``block`` are the launch dimensions
    (used by the contention estimate), ``cost`` a relative duration hint for the critical path and
    the stream assignment (default 1 per kernel). ``resource`` orders this kernel after the last
    earlier kernel naming the same resource (hazard ``res``). ``sm_limit`` says that the kernel
    confines itself to that many SMs (its blocks on other SMs leave at once), so that it runs
    beside another kernel instead of before or after it: the plan gives it a side stream of its
    own at the highest priority, and the contention estimate reserves those SMs for it.
    """

    name: str
    role: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    launch: Callable[[Any], None] | None = field(default=None, compare=False, repr=False)
    grid: Dims | None = None
    block: Dims | None = None
    cost: float | None = None
    resource: str | tuple[str, ...] | None = None
    sm_limit: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise DataFlowError("a kernel node needs a non-empty name")
        if self.sm_limit is not None and (isinstance(self.sm_limit, bool) or not isinstance(self.sm_limit, int)
                                          or self.sm_limit < 1):
            raise DataFlowError(f"node {self.name!r}: sm_limit must be a positive integer, got {self.sm_limit!r}")
        object.__setattr__(self, "reads", tuple(self.reads))
        object.__setattr__(self, "writes", tuple(self.writes))
        if isinstance(self.resource, (list, tuple)):
            object.__setattr__(self, "resource", tuple(self.resource))
        if self.resource is not None and (not self.resources or not all(isinstance(r, str) and r
                                                                        for r in self.resources)):
            raise DataFlowError(f"node {self.name!r}: resources must be non-empty names, got {self.resource!r}")
        if self.cost is not None and not self.cost >= 0:
            raise DataFlowError(f"node {self.name!r}: cost must be a non-negative number, got {self.cost!r}")

    @property
    def resources(self) -> tuple[str, ...]:
        """The resources this kernel names (``resource`` as a tuple; () when none)."""
        if self.resource is None:
            return ()
        return self.resource if isinstance(self.resource, tuple) else (self.resource,)

    @property
    def blocks(self) -> int | None:
        """Thread blocks in the grid (the product of its dimensions), or None when unknown."""
        if self.grid is None:
            return None
        return self.grid if isinstance(self.grid, int) else math.prod(self.grid)


def build_graph(nodes: Iterable[KernelNode], inputs: Iterable[str] = ()) -> nx.DiGraph:
    """The hazard DAG of ``nodes`` in their program order.

    Graph nodes are the kernel names, with attributes ``node`` (the KernelNode) and ``order`` (the
    position in program order). Each edge carries ``hazards``: a sorted tuple of ``(kind, array)``
    pairs, kind one of ``raw``/``war``/``waw``/``res`` (for ``res`` the second item is the resource).
    ``inputs`` are the arrays valid before the first kernel; any other array must be written before
    it is read.
    """
    graph = nx.DiGraph()
    declared_inputs = frozenset(inputs)
    last_writer: dict[str, str] = {}
    readers: dict[str, list[str]] = {}  # readers of each array's current value
    last_user: dict[str, str] = {}  # the last kernel naming each resource

    def hazard(src: str, dst: str, kind: str, array: str) -> None:
        if src == dst:
            return
        if not graph.has_edge(src, dst):
            graph.add_edge(src, dst, hazards=())
        graph.edges[src, dst]["hazards"] = tuple(sorted({*graph.edges[src, dst]["hazards"], (kind, array)}))

    for order, node in enumerate(nodes):
        if node.name in graph:
            raise DataFlowError(f"two kernel nodes are named {node.name!r}")
        graph.add_node(node.name, node=node, order=order)
        for resource in node.resources:
            if resource in last_user:
                hazard(last_user[resource], node.name, RES, resource)
            last_user[resource] = node.name
        for array in dict.fromkeys(node.reads):
            if array in last_writer:
                hazard(last_writer[array], node.name, RAW, array)
            elif array not in declared_inputs:
                raise DataFlowError(f"node {node.name!r} reads {array!r}, which no earlier node writes and "
                                    f"which is not a declared input")
            readers.setdefault(array, []).append(node.name)
        for array in dict.fromkeys(node.writes):
            if array in last_writer:
                hazard(last_writer[array], node.name, WAW, array)
            for reader in readers.get(array, []):
                hazard(reader, node.name, WAR, array)
            last_writer[array] = node.name
            readers[array] = []
    return graph


def check_acyclic(graph: nx.DiGraph) -> None:
    """Raise a DataFlowError naming the nodes of a cycle, if ``graph`` has one."""
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    names = [u for u, _ in cycle]
    raise DataFlowError(f"the kernel graph has a cycle: {' -> '.join([*names, names[0]])}")


def program_order(graph: nx.DiGraph) -> list[str]:
    """A topological order of ``graph`` that follows the declaration order wherever it can."""
    check_acyclic(graph)
    return list(nx.lexicographical_topological_sort(graph, key=lambda n: graph.nodes[n].get("order", 0)))


def kernel(graph: nx.DiGraph, name: str) -> KernelNode:
    """The KernelNode behind graph node ``name``."""
    return graph.nodes[name]["node"]
