"""GPU validation of the library paths against the NumPy reference (run on the H200)."""

from __future__ import annotations

import numpy as np
import pytest

import composer
from composer import dg
from composer.config.schedules import load_schedule
from composer.validation import relative_max_difference

pytestmark = pytest.mark.gpu

LIBRARY_PATHS = ["GEMM", "EINSUM"]
TOLERANCE = 1e-12


@pytest.fixture(scope="module")
def device():
    from composer.runtime import Device

    return Device()


@pytest.mark.parametrize("path", LIBRARY_PATHS)
@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (3, (2, 3, 1)), (7, (1, 2, 3)), (15, (2, 1, 2))])
def test_small_non_cubic_grids(path: str, order: int, grid: tuple[int, int, int], device) -> None:
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    got = composer.tendency(fields, order, grid, path=path, device=device)
    assert relative_max_difference(got, ref) <= TOLERANCE


@pytest.mark.parametrize("path", LIBRARY_PATHS)
@pytest.mark.parametrize("order", [7, 63])
def test_table_s29_size(path: str, order: int, device) -> None:
    grid = load_schedule(order).benchmark.grid
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    err = relative_max_difference(composer.tendency(fields, order, grid, path=path, device=device), ref)
    print(f"{path} p={order} grid={grid}: max|diff|/max|ref| = {err:.3e}")
    assert err <= TOLERANCE


def _device_run(path: str, order: int, grid, dt: float, nstep: int, graph: bool, device) -> np.ndarray:
    from composer.kernels.support import SupportKernels
    from composer.paths.registry import path_class
    from composer.paths.problem import DeviceProblem
    from composer.paths.stepper import Stepper

    fields = dg.make_fields(order, grid)
    problem = DeviceProblem.upload(fields, order, grid, device)
    impl = path_class(path)(problem)
    stepper = Stepper(impl, dt, SupportKernels.load(problem.nq, device))
    try:
        if graph:
            stepper.use_graphs()
        for _ in range(nstep):
            stepper.step()
        return problem.download(problem.fields["q"])
    finally:
        stepper.close()
        impl.close()
        problem.close()


@pytest.mark.parametrize("path", LIBRARY_PATHS)
def test_device_time_stepping_matches_numpy(path: str, device) -> None:
    order, grid, dt, nstep = 5, (2, 3, 2), 2e-3, 5
    fields = dg.make_fields(order, grid)
    q_ref = dg.integrate(fields["q"], dt, nstep, lambda q: dg.reference_tendency({**fields, "q": q}, order, grid))
    q_gpu = _device_run(path, order, grid, dt, nstep, False, device)
    assert relative_max_difference(q_gpu, q_ref) <= TOLERANCE


def test_graph_replay_equals_eager_bit_for_bit(device) -> None:
    order, grid, dt, nstep = 7, (2, 2, 3), 1e-4, 4
    eager = _device_run("GEMM", order, grid, dt, nstep, False, device)
    graphed = _device_run("GEMM", order, grid, dt, nstep, True, device)
    assert np.array_equal(eager, graphed)


def test_too_large_problem_stops_before_allocating(device) -> None:
    from composer.errors import ComposerError
    from composer.paths.problem import check_fits

    with pytest.raises(ComposerError, match="device memory"):
        check_fits(1023, (1, 1, 1), "GEMM", device)
