"""Issue a launch plan onto runtime streams and events.

Why so thin: the plan already holds the issue order, so running it is a literal walk over its
steps. The objects are duck-typed (``stream.wait(event)``, ``event.record(stream)``,
``launch(stream)``), which is what ``composer.runtime.Stream``/``Event`` provide, so the same call
works for timing, for stepping and inside ``CudaGraph.capture``: capture follows the fork events
from the capturing main stream into the side streams and records whatever they are given, and the
plan's join brings every side stream back before the capture ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from composer.sched.graph import DataFlowError
from composer.sched.plan import Launch, LaunchPlan, Record, Wait


def run_plan(plan: LaunchPlan, streams: Sequence[Any], events: Mapping[str, Any],
             launches: Mapping[str, Callable[[Any], None]] | None = None) -> None:
    """Issue ``plan``'s steps: ``streams[0]`` is the main stream, ``events`` maps the plan's event names.

    ``launches`` overrides the nodes' own ``launch`` callables, so that a plan built once from
    planning-only nodes can be run per call with launches bound to that call's buffers. Everything
    is checked before the first step is issued, so a bad plan never leaves half a call enqueued.
    """
    if len(streams) < plan.streams:
        raise DataFlowError(f"the plan uses {plan.streams} streams; {len(streams)} given")
    missing = [e for e in plan.events if e not in events]
    if missing:
        raise DataFlowError(f"no event object for {', '.join(missing)}")
    given = launches or {}
    calls: dict[str, Callable[[Any], None]] = {}
    for name in plan.issue_order:
        call = given.get(name) or plan.node(name).launch
        if call is None:
            raise DataFlowError(f"node {name!r} is planning-only: it has no launch callable")
        calls[name] = call
    for step in plan.steps:
        if isinstance(step, Launch):
            calls[step.node](streams[step.stream])
        elif isinstance(step, Record):
            events[step.event].record(streams[step.stream])
        elif isinstance(step, Wait):
            streams[step.stream].wait(events[step.event])
