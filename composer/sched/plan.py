"""The launch plan: which stream runs each kernel, and the fewest events that keep the hazards.

Why a plan and not the DAG itself: CUDA streams execute in issue order, so a DAG becomes launches
by choosing a stream per kernel and an issue order; the edges that cross streams become an event
record on the producer's stream and a wait on the consumer's. The plan is built as follows:

1. The transitive reduction of the hazard DAG: an edge implied by a path needs no event.
2. The critical path (node weights = the kernels' cost hints, default 1) goes onto stream 0,
   the main stream, so the longest chain never pays a cross-stream wait.
3. A list schedule over estimated times (the same weights) issues, at each step, the ready kernel
   that can start earliest (ties: program order). A kernel off the critical path goes onto the
   side stream (1 .. max_streams-1) where it starts earliest, preferring one whose last kernel is
   a predecessor (no event needed), then one already in use. ``max_streams=1`` puts everything on
   the main stream in program order, with no events: the serial program.
4. Events: a wait for each cross-stream edge of the reduction, unless the consumer's stream is
   already known (through stream order and earlier waits, tracked as vector clocks) to follow the
   producer; one record per producer that some wait needs.
   A kernel confined to part of the SMs (``KernelNode.sm_limit``) is meant to run beside the
   others, so it never takes the main stream and shares its side stream only with other
   confined kernels; those streams are the plan's ``priority_streams``, created at the highest
   priority, so that as the concurrent GEMM's blocks finish, the confined kernel's pending
   blocks are dispatched first and settle on its SMs. With ``max_streams=1`` (the serial program)
   it runs on the main stream like every kernel, alone on its partition: what
   ``composer.sched.measure`` times as its node time, the input the contention estimate expects.
5. Fork and join: every side stream first waits on an event recorded on the main stream at the
   start (so it follows whatever was enqueued on the main stream before the call, and joins a
   stream capture), and the main stream finally waits for the last kernel of every side stream it
   does not already follow. A call issued on the main stream is thus complete when the main
   stream is, which is the contract of ``Path.launch`` and what graph capture requires.

The estimated times only shape the assignment; correctness rests on the hazards alone (see
``composer.sched.simulate``, which replays plans under arbitrary durations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx

from composer.sched.graph import DataFlowError, KernelNode, check_acyclic, kernel, program_order

MAIN = 0
FORK = "fork"


@dataclass(frozen=True)
class Launch:
    """Enqueue kernel ``node`` on stream ``stream``."""

    node: str
    stream: int


@dataclass(frozen=True)
class Record:
    """Record event ``event`` on stream ``stream`` (after the work issued there so far)."""

    event: str
    stream: int


@dataclass(frozen=True)
class Wait:
    """Make later work on stream ``stream`` wait for event ``event``."""

    stream: int
    event: str


Step = Launch | Record | Wait


def done_event(node: str) -> str:
    """The name of the event recorded after ``node``."""
    return f"{node}.done"


@dataclass(frozen=True)
class LaunchPlan:
    """A path's launches in issue order, with the streams and events they need.

    ``graph`` is the hazard DAG, ``reduced`` its transitive reduction (the edges the plan keeps),
    ``stream_of`` the stream of each kernel, ``streams`` the number of streams used (stream 0 is the
    main stream), ``events`` the names of the events the steps record, in first-record order.
    """

    graph: nx.DiGraph
    reduced: nx.DiGraph
    steps: tuple[Step, ...]
    stream_of: Mapping[str, int]
    streams: int
    events: tuple[str, ...]
    critical_path: tuple[str, ...]
    priority_streams: tuple[int, ...] = ()

    @property
    def issue_order(self) -> tuple[str, ...]:
        """The kernels in the order the plan launches them."""
        return tuple(s.node for s in self.steps if isinstance(s, Launch))

    def node(self, name: str) -> KernelNode:
        return kernel(self.graph, name)


def node_weights(graph: nx.DiGraph, weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """``weights`` where given, else each kernel's cost hint, else 1."""
    given = weights or {}
    result = {}
    for n in graph:
        hint = graph.nodes[n]["node"].cost if "node" in graph.nodes[n] else None
        result[n] = float(given.get(n, 1.0 if hint is None else hint))
    return result


def critical_path(graph: nx.DiGraph, weights: Mapping[str, float] | None = None) -> list[str]:
    """The heaviest source-to-sink chain by node weight (ties: the earliest in program order)."""
    w = node_weights(graph, weights)
    order = {n: i for i, n in enumerate(program_order(graph))}
    length: dict[str, float] = {}
    best_pred: dict[str, str | None] = {}
    for n in order:
        preds = sorted(graph.predecessors(n), key=lambda p: (-length[p], order[p]))
        best_pred[n] = preds[0] if preds else None
        length[n] = w[n] + (length[preds[0]] if preds else 0.0)
    if not length:
        return []
    tail: str | None = min(length, key=lambda n: (-length[n], order[n]))
    path = []
    while tail is not None:
        path.append(tail)
        tail = best_pred[tail]
    return path[::-1]


def transitive_reduction(graph: nx.DiGraph) -> nx.DiGraph:
    """networkx's transitive reduction, keeping the node and edge attributes."""
    check_acyclic(graph)
    reduced = nx.transitive_reduction(graph)
    reduced.add_nodes_from(graph.nodes(data=True))
    reduced.add_edges_from((u, v, graph.edges[u, v]) for u, v in reduced.edges)
    return reduced


def confined(graph: nx.DiGraph, name: str) -> bool:
    """Whether kernel ``name`` confines itself to part of the SMs (``KernelNode.sm_limit``)."""
    node = graph.nodes[name].get("node")
    return node is not None and node.sm_limit is not None


def _side_candidates(reduced: nx.DiGraph, n: str, side_in_use: int, max_streams: int,
                     kinds: Mapping[int, bool], stream_of: Mapping[str, int]) -> list[int]:
    """The streams kernel ``n`` may take when it is off the critical path.

    Confined kernels and the others never share a side stream (step 3): a confined kernel
    sharing a stream with an ordinary one would serialize them and undo the overlap.  While a
    confined kernel is still unplaced and no stream of its kind exists, the last side stream is
    kept for it and ordinary kernels fall back to the main stream; a confined kernel with no
    stream of its kind left is a plan the caller must widen.
    """
    mine = confined(reduced, n)
    opened = range(1, side_in_use + 1)
    fresh = side_in_use + 1 if side_in_use + 1 < max_streams else None
    same = [s for s in opened if kinds.get(s) == mine]
    if mine:
        candidates = same + ([fresh] if fresh is not None else [])
        if not candidates:
            raise DataFlowError(
                f"kernel {n!r} is confined to part of the SMs and needs a side stream of its own; "
                f"all {max_streams - 1} side streams already run unconfined kernels (raise max_streams)")
        return candidates
    waiting = any(confined(reduced, m) and m not in stream_of and m != n for m in reduced)
    reserve = waiting and True not in kinds.values() and fresh == max_streams - 1
    candidates = same + ([fresh] if fresh is not None and not reserve else [])
    return candidates or [MAIN]


def _assign(reduced: nx.DiGraph, max_streams: int, weights: Mapping[str, float],
            on_main: set[str]) -> tuple[list[str], dict[str, int]]:
    """The list schedule of step 3: the issue order and the stream of each kernel."""
    order = {n: i for i, n in enumerate(program_order(reduced))}
    finish: dict[str, float] = {}
    free = [0.0] * max_streams
    last: list[str | None] = [None] * max_streams
    side_in_use = 0
    issue: list[str] = []
    stream_of: dict[str, int] = {}
    kinds: dict[int, bool] = {}  # side stream -> whether it runs confined kernels
    while len(issue) < len(order):
        best: tuple[tuple[float, int], str, int] | None = None
        for n in order:
            preds = set(reduced.predecessors(n))
            if n in stream_of or not preds <= stream_of.keys():
                continue
            ready = max((finish[p] for p in preds), default=0.0)
            if max_streams == 1 or n in on_main:
                candidates = [MAIN]
            else:
                candidates = _side_candidates(reduced, n, side_in_use, max_streams, kinds, stream_of)
            stream = min(candidates, key=lambda s: (max(ready, free[s]), last[s] not in preds, s > side_in_use, s))
            key = (max(ready, free[stream]), order[n])
            if best is None or key < best[0]:
                best = (key, n, stream)
        assert best is not None  # the graph is acyclic, so some kernel is always ready
        (start, _), n, stream = best
        issue.append(n)
        stream_of[n] = stream
        finish[n] = free[stream] = start + weights[n]
        last[stream] = n
        side_in_use = max(side_in_use, stream)
        if stream != MAIN:
            kinds.setdefault(stream, confined(reduced, n))
    return issue, stream_of


def _steps(reduced: nx.DiGraph, issue: list[str], stream_of: dict[str, int],
           streams: int) -> tuple[list[Step], list[str]]:
    """Steps 4 and 5: the waits each kernel needs, the records they imply, the fork and the join."""
    position: dict[str, int] = {}  # index of each kernel within its stream
    clock_after: dict[str, list[int]] = {}  # what is known complete once a kernel is
    known = [[-1] * streams for _ in range(streams)]  # known[s][t]: last kernel of t that s follows
    launched = [0] * streams
    waits: dict[str, list[str]] = {}
    needed: set[str] = set()

    def wait_for(stream: int, producer: str) -> bool:
        t = stream_of[producer]
        if t == stream or known[stream][t] >= position[producer]:
            return False
        known[stream] = [max(a, b) for a, b in zip(known[stream], clock_after[producer])]
        needed.add(producer)
        return True

    issued = {n: i for i, n in enumerate(issue)}
    for n in issue:
        s = stream_of[n]
        preds = sorted(reduced.predecessors(n), key=lambda p: -issued[p])  # the latest covers most
        waits[n] = [p for p in preds if wait_for(s, p)]
        position[n] = launched[s]
        launched[s] += 1
        known[s][s] = position[n]
        clock_after[n] = list(known[s])
    last_on = {stream_of[n]: n for n in issue}
    joins = [last_on[s] for s in range(1, streams) if wait_for(MAIN, last_on[s])]

    steps: list[Step] = []
    events: list[str] = []
    if streams > 1:
        steps.append(Record(FORK, MAIN))
        steps.extend(Wait(s, FORK) for s in range(1, streams))
        events.append(FORK)
    for n in issue:
        steps.extend(Wait(stream_of[n], done_event(p)) for p in waits[n])
        steps.append(Launch(n, stream_of[n]))
        if n in needed:
            steps.append(Record(done_event(n), stream_of[n]))
            events.append(done_event(n))
    steps.extend(Wait(MAIN, done_event(p)) for p in joins)
    return steps, events


def plan(graph: nx.DiGraph, max_streams: int, weights: Mapping[str, float] | None = None) -> LaunchPlan:
    """The launch plan of ``graph`` on at most ``max_streams`` streams (see the module docstring)."""
    if max_streams < 1:
        raise DataFlowError(f"max_streams must be at least 1, got {max_streams}")
    reduced = transitive_reduction(graph)
    w = node_weights(graph, weights)
    path = critical_path(reduced, w)
    on_main = {n for n in path if not confined(reduced, n)}
    issue, stream_of = _assign(reduced, max_streams, w, on_main)
    streams = max(stream_of.values(), default=0) + 1
    steps, events = _steps(reduced, issue, stream_of, streams)
    priority = tuple(sorted({s for n, s in stream_of.items() if s != MAIN and confined(reduced, n)}))  # none serially
    return LaunchPlan(graph=graph, reduced=reduced, steps=tuple(steps), stream_of=stream_of, streams=streams,
                      events=tuple(events), critical_path=tuple(path), priority_streams=priority)
