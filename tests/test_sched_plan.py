"""The launch plan: reduction, critical path, streams, events, and its replay under random durations."""

from __future__ import annotations

import dataclasses
import random

import pytest

from composer.sched import (DataFlowError, KernelNode, Launch, Record, Wait, build_graph, critical_path,
                            hazard_violations, plan, run_plan, simulate, transitive_reduction)
from tests.sched_programs import INPUTS, folded_program, gemm_program, random_inputs, random_program

GEMMS = ("gemm_x", "gemm_y", "gemm_z")


def _gemm_graph():
    return build_graph(gemm_program(), INPUTS)


def _programs():
    """(label, graph) for the path programs, a WAR/WAW program and random ones."""
    rng = random.Random(13)
    war = [KernelNode("a", "r", ("q",), ("t",)), KernelNode("b", "r", ("t",), ("u",)),
           KernelNode("c", "r", ("q",), ("t",)), KernelNode("d", "r", ("t", "u"), ("q",))]
    yield "gemm", _gemm_graph()
    yield "folded", build_graph(folded_program(), INPUTS)
    yield "war", build_graph(war, {"q"})
    # two concurrent readers of x, then a kernel overwriting x: it must wait for both (WAR)
    readers = [KernelNode("p", "r", (), ("x",)), KernelNode("r1", "r", ("x",), ("y",)),
               KernelNode("r2", "r", ("x",), ("z",)), KernelNode("w", "r", (), ("x",)),
               KernelNode("f", "r", ("x", "y", "z"), ("out",))]
    yield "war_concurrent", build_graph(readers)
    for i in range(10):  # few arrays: mostly chains of hazards; many: wide graphs
        yield f"random{i}", build_graph(random_program(rng, rng.randint(3, 16), rng.randint(2, 24)),
                                        random_inputs(24))


def test_transitive_reduction_drops_implied_edges_and_keeps_attributes() -> None:
    nodes = [KernelNode("a", "r", (), ("x",)), KernelNode("b", "r", ("x",), ("y",)),
             KernelNode("c", "r", ("x", "y"), ("z",))]
    graph = build_graph(nodes)
    assert graph.has_edge("a", "c")
    reduced = transitive_reduction(graph)
    assert set(reduced.edges) == {("a", "b"), ("b", "c")}
    assert reduced.edges["b", "c"]["hazards"] == (("raw", "y"),)
    assert reduced.nodes["c"]["node"].name == "c"
    built = plan(graph, 4)
    assert built.graph is graph and set(built.reduced.edges) == set(reduced.edges)


def test_critical_path_follows_the_weights() -> None:
    graph = _gemm_graph()
    assert critical_path(graph) == ["volume_flux", "gemm_x", "lift"]
    assert critical_path(graph, {"gemm_z": 5.0}) == ["volume_flux", "gemm_z", "lift"]
    assert critical_path(graph, {"surface_flux": 10.0}) == ["surface_flux", "lift"]
    heavy = plan(graph, 4, {"surface_flux": 10.0})
    assert heavy.critical_path == ("surface_flux", "lift")
    assert heavy.stream_of["surface_flux"] == 0 and heavy.stream_of["lift"] == 0


def test_cost_hints_are_the_default_weights() -> None:
    program = [dataclasses.replace(n, cost=4.0) if n.name == "gemm_y" else n for n in gemm_program()]
    assert critical_path(build_graph(program, INPUTS)) == ["volume_flux", "gemm_y", "lift"]


def test_one_stream_is_the_serial_program() -> None:
    built = plan(_gemm_graph(), max_streams=1)
    assert built.steps == tuple(Launch(n.name, 0) for n in gemm_program())
    assert built.streams == 1 and built.events == ()


def test_gemm_plan_runs_the_three_gemms_and_the_face_flux_concurrently() -> None:
    built = plan(_gemm_graph(), max_streams=4)
    assert built.critical_path == ("volume_flux", "gemm_x", "lift")
    assert {built.stream_of[g] for g in GEMMS} == {0, 1, 2}
    assert built.stream_of["volume_flux"] == built.stream_of["lift"] == 0
    assert built.stream_of["surface_flux"] != 0
    # the fork comes first and every side stream waits on it before anything else
    assert built.steps[0] == Record("fork", 0)
    assert set(built.steps[1:built.streams]) == {Wait(s, "fork") for s in range(1, built.streams)}
    records = [s.event for s in built.steps if isinstance(s, Record)]
    assert len(records) == len(set(records)) == len(built.events)
    # ideal machine, unit durations: the call takes the critical path
    timeline = simulate(built, {n: 1.0 for n in built.graph})
    assert timeline.call_time == 3.0
    assert simulate(plan(_gemm_graph(), 1), {n: 1.0 for n in built.graph}).call_time == 6.0


def test_fold_leaves_nothing_to_overlap_but_the_face_flux() -> None:
    built = plan(build_graph(folded_program(), INPUTS), max_streams=4)
    assert built.critical_path == ("volume_flux", "gemm_x", "gemm_y", "gemm_z")
    assert [n for n, s in built.stream_of.items() if s != 0] == ["surface_flux"]
    assert built.streams == 2


def test_cross_stream_edges_are_the_only_waits() -> None:
    for label, graph in _programs():
        built = plan(graph, max_streams=3)
        waited = {s.event for s in built.steps if isinstance(s, Wait)}
        assert waited == set(built.events), label
        cross = {(u, built.stream_of[v]) for u, v in built.reduced.edges if built.stream_of[u] != built.stream_of[v]}
        last_on = {built.stream_of[n]: n for n in built.issue_order}
        for step in built.steps:
            if isinstance(step, Wait) and step.event != "fork":
                producer = step.event.removesuffix(".done")
                is_join = step.stream == 0 and last_on[built.stream_of[producer]] == producer
                assert (producer, step.stream) in cross or is_join, (label, step)


@pytest.mark.parametrize("max_streams", [1, 2, 3, 4])
def test_replay_with_random_durations_keeps_every_hazard(max_streams: int) -> None:
    rng = random.Random(max_streams)
    for label, graph in _programs():
        built = plan(graph, max_streams)
        assert built.streams <= max_streams
        assert sorted(built.issue_order) == sorted(graph)
        for _ in range(200):
            durations = {n: rng.choice([0.0, rng.uniform(0.01, 1.0), rng.uniform(1.0, 100.0)]) for n in graph}
            timeline = simulate(built, durations)
            assert hazard_violations(built, timeline) == [], label
            assert timeline.call_time == max(timeline.end.values(), default=0.0), label  # joined


def test_every_wait_is_needed() -> None:
    """Dropping any wait lets a hazard (or the call's end) race when its producer runs long."""
    for label, graph in _programs():
        built = plan(graph, max_streams=4)
        for wait in (s for s in built.steps if isinstance(s, Wait) and s.event != "fork"):
            broken = dataclasses.replace(built, steps=tuple(s for s in built.steps if s != wait))
            durations = {n: 1.0 for n in graph} | {wait.event.removesuffix(".done"): 1000.0}
            timeline = simulate(broken, durations)
            raced = hazard_violations(broken, timeline) or timeline.call_time < max(timeline.end.values())
            assert raced, (label, wait)


def test_a_wait_before_its_record_is_caught() -> None:
    built = plan(_gemm_graph(), max_streams=4)
    wait = next(s for s in built.steps if isinstance(s, Wait) and s.event != "fork")
    with pytest.raises(DataFlowError, match="before it is recorded"):
        simulate(dataclasses.replace(built, steps=(wait, *built.steps)), {n: 1.0 for n in built.graph})


class FakeStream:
    def __init__(self, index: int, log: list) -> None:
        self.index, self.log = index, log

    def wait(self, event: FakeEvent) -> None:
        self.log.append(("wait", self.index, event.name))


class FakeEvent:
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def record(self, stream: FakeStream) -> None:
        self.log.append(("record", self.name, stream.index))


def _fake(built, log):
    streams = [FakeStream(i, log) for i in range(built.streams)]
    return streams, {e: FakeEvent(e, log) for e in built.events}


def test_run_plan_issues_the_steps_on_the_streams() -> None:
    log: list = []

    def launcher(name):
        return lambda stream: log.append(("launch", name, stream.index))

    nodes = [KernelNode("a", "r", (), ("x",), launch=launcher("a")),
             KernelNode("b", "r", (), ("y",), launch=launcher("b")),
             KernelNode("c", "r", ("x", "y"), ("z",), launch=launcher("c"))]
    built = plan(build_graph(nodes), max_streams=2)
    run_plan(built, *_fake(built, log))
    assert log == [("record", "fork", 0), ("wait", 1, "fork"), ("launch", "a", 0), ("launch", "b", 1),
                   ("record", "b.done", 1), ("wait", 0, "b.done"), ("launch", "c", 0)]


def test_run_plan_binds_launches_and_checks_before_issuing() -> None:
    built = plan(_gemm_graph(), max_streams=4)
    log: list = []
    streams, events = _fake(built, log)
    with pytest.raises(DataFlowError, match="planning-only"):
        run_plan(built, streams, events)
    with pytest.raises(DataFlowError, match="streams"):
        run_plan(built, streams[:1], events)
    with pytest.raises(DataFlowError, match="fork"):
        run_plan(built, streams, {})
    assert log == []
    launches = {n: (lambda name: lambda s: log.append(("launch", name, s.index)))(n) for n in built.graph}
    run_plan(built, streams, events, launches)
    issued = [("launch", s.node, s.stream) if isinstance(s, Launch) else
              ("record", s.event, s.stream) if isinstance(s, Record) else ("wait", s.stream, s.event)
              for s in built.steps]
    assert log == issued


def test_max_streams_must_be_positive() -> None:
    with pytest.raises(DataFlowError, match="max_streams"):
        plan(_gemm_graph(), 0)
