"""The JSON description and the DOT drawing of a plan (what ``composer graph`` will print)."""

from __future__ import annotations

import json

from composer.sched import build_graph, describe, plan, to_dot, to_json
from tests.sched_programs import INPUTS, gemm_program


def _plan(max_streams: int = 4):
    return plan(build_graph(gemm_program(), INPUTS), max_streams)


def test_describe_holds_the_plan_as_json() -> None:
    built = _plan()
    data = json.loads(to_json(built))
    assert {"nodes", "edges", "streams", "events", "critical_path"} <= set(data)
    assert data == describe(built)
    by_name = {n["name"]: n for n in data["nodes"]}
    assert set(by_name) == {n.name for n in gemm_program()}
    assert by_name["gemm_y"] == {"name": "gemm_y", "role": "gemm", "reads": ["D", "flux_y"], "writes": ["dy"],
                                 "stream": built.stream_of["gemm_y"]}
    assert sorted(map(tuple, data["edges"])) == sorted(built.reduced.edges)
    assert data["streams"] == built.streams == 3
    assert [e["name"] for e in data["events"]] == list(built.events)
    fork = data["events"][0]
    assert fork == {"name": "fork", "recorded_on": 0, "waited_on_by": [1, 2]}
    assert data["critical_path"] == ["volume_flux", "gemm_x", "lift"]
    assert len(data["steps"]) == len(built.steps)
    assert {"edge": ["surface_flux", "lift"], "hazards": [["raw", "fstar"]]} in data["hazards"]


def test_serial_plan_has_no_events() -> None:
    data = describe(_plan(1))
    assert data["streams"] == 1 and data["events"] == []
    assert {n["stream"] for n in data["nodes"]} == {0}


def test_dot_draws_streams_and_marks_event_edges() -> None:
    built = _plan()
    dot = to_dot(built, title="GEMM p=7")
    assert dot.startswith('digraph "GEMM p=7" {') and dot.rstrip().endswith("}")
    for s in range(built.streams):
        assert f"subgraph cluster_{s} " in dot
    assert '"gemm_y" [label="gemm_y\\ngemm"];' in dot
    assert '"lift" [label="lift\\nlift", style=bold];' in dot
    cross = sum(built.stream_of[u] != built.stream_of[v] for u, v in built.reduced.edges)
    assert dot.count("style=dashed") == cross > 0
    assert '"surface_flux" -> "lift" [label="fstar", style=dashed];' in dot
