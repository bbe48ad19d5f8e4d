"""A launch plan as JSON-able data and as Graphviz DOT (for ``composer graph``).

Why: the plan replaces hand-written streams and events, so a user must be able to see what it
decided — which kernel runs on which stream, which edges cost an event, which chain is critical —
without reading code. :func:`describe` is the machine-readable form (``--json``); :func:`to_dot`
draws the reduced DAG with one cluster per stream and the cross-stream (event) edges dashed.
"""

from __future__ import annotations

import json
from typing import Any

from composer.sched.plan import Launch, LaunchPlan, Record, Wait


def describe(plan: LaunchPlan) -> dict[str, Any]:
    """``nodes`` (name, role, reads, writes, stream, in issue order), ``edges`` (the reduced DAG's
    ``[first, second]`` pairs), ``hazards`` (every hazard edge with its kinds and arrays), ``streams``
    (count), ``events`` (name, the stream recording it, the streams waiting on it), ``critical_path``
    ``steps`` (issue order) and ``priority_streams`` (the streams of the kernels confined to part of
    the SMs, created at the highest priority); a confined node carries its ``sm_limit``, a node that
    names a resource its ``resource``."""
    nodes = []
    for name in plan.issue_order:
        k = plan.node(name)
        nodes.append({"name": name, "role": k.role, "reads": list(k.reads), "writes": list(k.writes),
                      "stream": plan.stream_of[name],
                      **({"sm_limit": k.sm_limit} if k.sm_limit is not None else {}),
                      **({"resource": k.resource if isinstance(k.resource, str) else list(k.resource)}
                         if k.resource is not None else {})})
    events: dict[str, dict[str, Any]] = {}
    steps: list[dict[str, Any]] = []
    for step in plan.steps:
        if isinstance(step, Launch):
            steps.append({"launch": step.node, "stream": step.stream})
        elif isinstance(step, Record):
            events[step.event] = {"name": step.event, "recorded_on": step.stream, "waited_on_by": []}
            steps.append({"record": step.event, "stream": step.stream})
        elif isinstance(step, Wait):
            events[step.event]["waited_on_by"].append(step.stream)
            steps.append({"wait": step.event, "stream": step.stream})
    return {
        "nodes": nodes,
        "edges": [[u, v] for u, v in plan.reduced.edges],
        "hazards": [{"edge": [u, v], "hazards": [list(h) for h in d["hazards"]]}
                    for u, v, d in plan.graph.edges(data=True)],
        "streams": plan.streams,
        "events": list(events.values()),
        "critical_path": list(plan.critical_path),
        "priority_streams": list(plan.priority_streams),
        "steps": steps,
    }


def to_json(plan: LaunchPlan) -> str:
    return json.dumps(describe(plan), indent=2)


def _quote(*lines: str) -> str:
    """A DOT string literal of ``lines`` joined by DOT's line break."""
    return '"' + "\\n".join(t.replace("\\", "\\\\").replace('"', '\\"') for t in lines) + '"'


def to_dot(plan: LaunchPlan, title: str = "kernels") -> str:
    """The reduced DAG in DOT: a cluster per stream, critical-path kernels bold, event edges dashed."""
    critical = set(plan.critical_path)
    lines = [f"digraph {_quote(title)} {{", "  rankdir=LR;", "  node [shape=box];"]
    for s in range(plan.streams):
        label = "stream 0 (main)" if s == 0 else f"stream {s}"
        lines.append(f"  subgraph cluster_{s} {{ label={_quote(label)};")
        for name in plan.issue_order:
            if plan.stream_of[name] == s:
                style = ", style=bold" if name in critical else ""
                lines.append(f"    {_quote(name)} [label={_quote(name, plan.node(name).role)}{style}];")
        lines.append("  }")
    for u, v, data in plan.reduced.edges(data=True):
        arrays = ",".join(sorted({a for _, a in data["hazards"]}))
        style = "" if plan.stream_of[u] == plan.stream_of[v] else ", style=dashed"
        lines.append(f"  {_quote(u)} -> {_quote(v)} [label={_quote(arrays)}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
