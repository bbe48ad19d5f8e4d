"""Every registered path's declared kernels, planned by the scheduler on the CPU: the derived edges
are the data flow the operator implies, and the plan keeps every hazard under random durations."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from composer.arch.machines import get_machine
from composer.paths.program import PROBLEM_INPUTS
from composer.paths.registry import path_class, path_names
from composer.sched import build_graph, hazard_violations, simulate

MACHINE = get_machine("h200")
ORDERS = (7, 63, 255, 767)
NUM_ELEMENTS = 4096


def _cases() -> list[tuple[str, int]]:
    return [(name, order) for name in path_names() for order in ORDERS
            if path_class(name).orders is None or order in path_class(name).orders]


@pytest.mark.parametrize("name", ["GEMM", "GEMM_CUTE"])
@pytest.mark.parametrize("order", ORDERS)
def test_library_paths_derive_the_unfused_data_flow(name: str, order: int) -> None:
    graph = build_graph(path_class(name).program(order, NUM_ELEMENTS, MACHINE), PROBLEM_INPUTS)
    gemms = {f"gemm_{r}" for r in "xyz"}
    assert set(graph.edges) == ({("volume_flux", g) for g in gemms}
                                | {(g, "lift") for g in gemms | {"surface_flux"}})
    assert not nx.has_path(graph, "volume_flux", "surface_flux")
    plan = path_class(name).launch_plan(order, NUM_ELEMENTS, MACHINE)
    # the three GEMMs run on three different streams; the face flux is off the volume flux's stream
    assert len({plan.stream_of[g] for g in gemms}) == 3
    assert plan.stream_of["surface_flux"] != plan.stream_of["volume_flux"]
    assert plan.issue_order[-1] == "lift" and plan.stream_of["lift"] == 0


@pytest.mark.parametrize("name", [n for n in path_names() if path_class(n).family == "fused"])
@pytest.mark.parametrize("order", [7, 63, 255])
def test_fused_paths_are_one_chain(name: str, order: int) -> None:
    cls = path_class(name)
    if order not in cls.orders:
        pytest.skip(f"{name} has no order {order}")
    nodes = cls.program(order, NUM_ELEMENTS, MACHINE)
    graph = build_graph(nodes, PROBLEM_INPUTS)
    # the face kernel (when there is one) feeds every volume kernel; the volume kernels accumulate dqdt
    assert nx.is_directed_acyclic_graph(graph)
    assert list(nx.topological_sort(graph)) == [n.name for n in nodes]
    reduced = nx.transitive_reduction(graph)
    assert set(reduced.edges) == {(a.name, b.name) for a, b in zip(nodes, nodes[1:])}
    plan = cls.launch_plan(order, NUM_ELEMENTS, MACHINE)
    assert plan.streams == 1 and not plan.events
    faces = [n for n in nodes if n.role == "face_flux"]
    assert bool(faces) == ("fstar" in nodes[-1].reads)


@pytest.mark.parametrize("name,order", _cases())
@pytest.mark.parametrize("max_streams", [1, 2, None])
def test_every_plan_keeps_its_hazards_under_random_durations(name: str, order: int, max_streams: int | None) -> None:
    cls = path_class(name)
    plan = cls.launch_plan(order, NUM_ELEMENTS, MACHINE, max_streams=max_streams)
    if max_streams is not None:
        assert plan.streams <= max_streams
    rng = random.Random(order * 31 + len(name))
    for _ in range(50):
        durations = {n: rng.uniform(0.1, 10.0) for n in plan.issue_order}
        timeline = simulate(plan, durations)
        assert hazard_violations(plan, timeline) == []
        assert timeline.call_time == pytest.approx(max(timeline.end.values()))


def test_max_streams_one_is_the_program_order_without_events() -> None:
    cls = path_class("GEMM")
    nodes = cls.program(255, NUM_ELEMENTS, MACHINE)
    plan = cls.launch_plan(255, NUM_ELEMENTS, MACHINE, max_streams=1)
    assert plan.streams == 1 and plan.events == ()
    assert list(plan.issue_order) == [n.name for n in nodes]


def test_max_streams_is_a_declared_option_of_every_path() -> None:
    for name in path_names():
        cls = path_class(name)
        assert cls.parse_options({"max_streams": "2"}) == {"max_streams": 2}
        with pytest.raises(Exception, match="max_streams"):
            cls.parse_options({"max_streams": "0"})


@pytest.mark.parametrize("order", [7, 63, 511])
def test_graph_cli_json_for_every_path(order: int, capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    import json

    from composer.cli.main import main

    names = [n for n in path_names() if path_class(n).orders is None or order in path_class(n).orders]
    dot = tmp_path / "plan.dot"
    assert main(["graph", "--path", ",".join(names), "--order", str(order), "--grid", "2,3,1", "--json",
                 "--dot", str(dot)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["order"] == order and document["grid"] == [2, 3, 1]
    assert [r["path"] for r in document["paths"]] == names
    for report in document["paths"]:
        assert {"nodes", "edges", "streams", "critical_path", "events"} <= set(report)
        names_in_plan = [n["name"] for n in report["nodes"]]
        assert all({"name", "role", "reads", "writes", "stream"} <= set(n) for n in report["nodes"])
        assert all(a in names_in_plan and b in names_in_plan for a, b in report["edges"])
        assert report["critical_path"][-1] == names_in_plan[-1]
        assert max(n["stream"] for n in report["nodes"]) + 1 == report["streams"]
        assert (tmp_path / f"plan.{report['path']}.dot").read_text().startswith("digraph")


def test_graph_cli_bad_input_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from composer.cli.main import main

    assert main(["graph", "--path", "GEMM_FUSE", "--order", "7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown path" in err and "Traceback" not in err
    assert main(["graph", "--path", "FUSED", "--order", "511"]) == 2
    assert "does not implement order 511" in capsys.readouterr().err
    assert main(["graph", "--path", "GEMM", "--order", "7", "--max-streams", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
