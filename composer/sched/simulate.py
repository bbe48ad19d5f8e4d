"""Replay a launch plan on an ideal machine: the correctness check of the plan.

Why: a plan is correct when, for every possible set of kernel durations, each hazard's second
kernel starts only after its first ends. The ideal machine has unlimited SMs, so the only things
that order kernels are the ones a GPU honours regardless of load: each stream runs its work in
issue order, an event's time is that of the work issued on its stream before the record, and a
wait holds back the later work of its stream until that time. :func:`simulate` applies exactly
these rules to the steps (not to the plan's own idea of its edges); :func:`hazard_violations`
then checks every edge of the full hazard graph, so random durations exercise every interleaving
the plan permits.

:func:`launch_dependencies` reads the same rules as "kernel k starts after kernels D(k)", the form
the contention estimate (``composer.sched.contention``) needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from composer.sched.graph import DataFlowError
from composer.sched.plan import MAIN, Launch, LaunchPlan, Record, Wait


@dataclass(frozen=True)
class Timeline:
    """Start and end time of each kernel; ``call_time`` is when the main stream's work is done."""

    start: Mapping[str, float]
    end: Mapping[str, float]
    call_time: float


def simulate(plan: LaunchPlan, durations: Mapping[str, float]) -> Timeline:
    """Replay ``plan``'s steps with ``durations`` per kernel on the ideal machine."""
    stream_free = [0.0] * plan.streams
    recorded: dict[str, float] = {}
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for step in plan.steps:
        if isinstance(step, Launch):
            if step.node in start:
                raise DataFlowError(f"the plan launches {step.node!r} twice")
            start[step.node] = stream_free[step.stream]
            end[step.node] = stream_free[step.stream] = start[step.node] + durations[step.node]
        elif isinstance(step, Record):
            recorded[step.event] = stream_free[step.stream]
        elif isinstance(step, Wait):
            if step.event not in recorded:  # CUDA would not wait at all
                raise DataFlowError(f"stream {step.stream} waits on {step.event!r} before it is recorded")
            stream_free[step.stream] = max(stream_free[step.stream], recorded[step.event])
    unlaunched = set(plan.graph) - set(start)
    if unlaunched:
        raise DataFlowError(f"the plan never launches {', '.join(sorted(unlaunched))}")
    return Timeline(start=start, end=end, call_time=stream_free[MAIN])


def hazard_violations(plan: LaunchPlan, timeline: Timeline) -> list[tuple[str, str, tuple]]:
    """The hazard edges ``(first, second, hazards)`` whose second kernel starts before the first ends."""
    return [(u, v, data["hazards"]) for u, v, data in plan.graph.edges(data=True)
            if timeline.start[v] < timeline.end[u]]


def launch_dependencies(plan: LaunchPlan) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """The kernels each kernel must wait for under the stream rules, and those the main stream's end waits for.

    A kernel depends on the previous kernel of its stream and on the kernels before each event its
    stream waited on since then (the fork event, recorded before any kernel, adds nothing). Only
    direct dependencies are listed; the rest follow transitively.
    """
    # what each stream's next work follows: its last kernel and the producers of the events it waited on
    frontier: list[frozenset[str]] = [frozenset() for _ in range(plan.streams)]
    after: dict[str, frozenset[str]] = {}  # event -> the kernels it follows
    deps: dict[str, frozenset[str]] = {}
    for step in plan.steps:
        if isinstance(step, Launch):
            deps[step.node] = frontier[step.stream]
            frontier[step.stream] = frozenset({step.node})
        elif isinstance(step, Record):
            after[step.event] = frontier[step.stream]
        elif isinstance(step, Wait):
            frontier[step.stream] |= after[step.event]
    return deps, frontier[MAIN]
