"""The SM-sharing estimate: its limits, and its agreement with the ideal replay on an unlimited machine."""

from __future__ import annotations

import random

import pytest

from composer.sched import DataFlowError, KernelNode, build_graph, contended_timeline, demand, plan, simulate
from tests.sched_programs import INPUTS, gemm_program

SMS = 100


def _pair(grid_a: int, grid_b: int):
    """Two independent kernels, planned onto two streams."""
    nodes = [KernelNode("a", "r", (), ("x",), grid=grid_a), KernelNode("b", "r", (), ("y",), grid=grid_b)]
    built = plan(build_graph(nodes), max_streams=2)
    assert built.stream_of == {"a": 0, "b": 1}
    return built


def test_one_kernel_alone_takes_its_time() -> None:
    built = plan(build_graph([KernelNode("a", "r", (), ("x",), grid=5000)]), max_streams=2)
    assert contended_timeline(built, {"a": 3.5}, SMS).call_time == 3.5


def test_two_machine_filling_kernels_take_the_sum() -> None:
    timeline = contended_timeline(_pair(SMS, 4 * SMS), {"a": 2.0, "b": 3.0}, SMS)
    assert timeline.call_time == pytest.approx(5.0)
    assert timeline.end["a"] == pytest.approx(4.0)  # half speed while b shares the machine


def test_two_small_kernels_overlap_completely() -> None:
    timeline = contended_timeline(_pair(10, 30), {"a": 2.0, "b": 3.0}, SMS)
    assert timeline.call_time == pytest.approx(3.0)


def test_partial_demands_share_in_proportion() -> None:
    # demands 0.75 + 0.75: each runs at 1/1.5 of its speed while both run
    timeline = contended_timeline(_pair(75, 75), {"a": 1.0, "b": 1.0}, SMS)
    assert timeline.call_time == pytest.approx(1.5)


def test_occupancy_caps_the_demand() -> None:
    assert demand(264, 2, 132) == 1.0
    assert demand(132, 2, 132) == 0.5
    assert demand(10_000, 1, 132) == 1.0
    built = _pair(2 * SMS, 2 * SMS)
    both = {"a": 1.0, "b": 1.0}
    assert contended_timeline(built, both, SMS, blocks_per_sm={"a": 4, "b": 4}).call_time == pytest.approx(1.0)
    assert contended_timeline(built, both, SMS).call_time == pytest.approx(2.0)
    with pytest.raises(DataFlowError, match="positive"):
        demand(0, 1, 132)


def test_blocks_override_the_grid_and_are_required() -> None:
    program = gemm_program()
    built = plan(build_graph(program, INPUTS), max_streams=4)
    times = {n.name: 1.0 for n in program}
    with pytest.raises(DataFlowError, match="no grid size"):
        contended_timeline(built, times, SMS)
    full = contended_timeline(built, times, SMS, blocks={n.name: SMS for n in program})
    assert full.call_time == pytest.approx(6.0)  # every kernel fills the machine: the serial sum


def test_an_unlimited_machine_reproduces_the_ideal_replay() -> None:
    program = gemm_program()
    built = plan(build_graph(program, INPUTS), max_streams=4)
    rng = random.Random(3)
    for _ in range(50):
        times = {n.name: rng.uniform(0.1, 10.0) for n in program}
        contended = contended_timeline(built, times, sm_count=10**9, blocks={n.name: 1 for n in program})
        ideal = simulate(built, times)
        assert contended.call_time == pytest.approx(ideal.call_time)
        for n in built.graph:
            assert contended.start[n] == pytest.approx(ideal.start[n])
            assert contended.end[n] == pytest.approx(ideal.end[n])


def test_one_stream_is_the_sum_whatever_the_demand() -> None:
    program = gemm_program()
    built = plan(build_graph(program, INPUTS), max_streams=1)
    times = {n.name: float(i + 1) for i, n in enumerate(program)}
    timeline = contended_timeline(built, times, SMS, blocks={n.name: 1 for n in program})
    assert timeline.call_time == pytest.approx(sum(times.values()))
