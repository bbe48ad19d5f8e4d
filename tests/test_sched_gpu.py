"""The scheduler on the GPU: every plan (concurrent and serial) gives the reference's field, the
plans agree bit for bit, graph capture replays the plan bit for bit, and the overlap figures are
ordered as they must be (critical path <= measured <= serial sum + launch gaps)."""

from __future__ import annotations

import numpy as np
import pytest

from composer import dg
from composer.paths.registry import path_class
from composer.validation import relative_max_difference

pytestmark = pytest.mark.gpu

TOLERANCE = 1e-12
CASES = [("GEMM", 7, (2, 3, 2)), ("GEMM", 15, (3, 2, 2)), ("FUSED_TC16", 7, (2, 2, 3)),
         ("FUSED_TC16", 63, (2, 1, 2)), ("FUSED", 15, (1, 2, 3))]


@pytest.fixture(scope="module")
def device():
    from composer.runtime import Device

    return Device()


def _run(name: str, order: int, grid, device, graph: bool = False, **options) -> np.ndarray:
    from composer.paths.problem import DeviceProblem
    from composer.runtime.graph import CudaGraph

    fields = dg.make_fields(order, grid, varying=True)
    problem = DeviceProblem.upload(fields, order, grid, device)
    impl = path_class(name)(problem, **options)
    try:
        problem.dqdt.poison(problem.stream)
        call = lambda _s: impl.launch(problem.ptr("q"), problem.dqdt.ptr)  # noqa: E731
        if graph:
            captured = CudaGraph.capture(call, problem.stream)
            captured.replay(problem.stream)
            captured.close()
        else:
            call(problem.stream)
        return problem.download(problem.dqdt)
    finally:
        impl.close()
        problem.close()


@pytest.mark.parametrize("name,order,grid", CASES)
def test_concurrent_serial_and_captured_plans_agree_bit_for_bit(name, order, grid, device) -> None:
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    planned = _run(name, order, grid, device)
    assert relative_max_difference(planned, ref) <= TOLERANCE
    serial = _run(name, order, grid, device, max_streams=1)
    captured = _run(name, order, grid, device, graph=True)
    assert np.array_equal(planned, serial)
    assert np.array_equal(planned, captured)


@pytest.mark.parametrize("name,order", [("GEMM", 15), ("GEMM", 63), ("FUSED_TC16", 63)])
def test_overlap_figures_are_ordered(name, order, device) -> None:
    from composer.config.schedules import load_schedule
    from composer.paths.problem import DeviceProblem
    from composer.sched.measure import measure_overlap

    grid = load_schedule(order).benchmark.grid
    problem = DeviceProblem.upload(dg.make_fields(order, grid), order, grid, device)
    impl = path_class(name)(problem)
    try:
        fig = measure_overlap(impl, repeats=10)
    finally:
        impl.close()
        problem.close()
    slack = 0.02 * fig.serial_sum_ms  # event resolution and run-to-run noise
    assert fig.critical_path_ms <= fig.measured_ms + slack
    assert fig.measured_ms <= fig.serial_sum_ms + max(fig.launch_gaps_ms, 0.0) + slack
    assert set(fig.node_ms) == set(impl.plan.issue_order)
    assert fig.predicted_ms > 0
