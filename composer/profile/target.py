"""The process that ``composer profile`` runs under Nsight Compute.

Why a separate process: ncu must wrap a whole program. The program uploads the benchmark input at
the schedule's grid, runs one untimed warm-up tendency call (module loads, lazy allocations, and
kernels that only run once are kept out of the report), then brackets exactly one tendency call
with cuProfilerStart/Stop so that ``--profile-from-start off`` captures that call's kernels only.

    python3 -m composer.profile.target PATH ORDER [NEX NEY NEZ]
"""

from __future__ import annotations

import sys


def profile_one_call(path: str, order: int, grid: tuple[int, int, int] | None = None) -> None:
    from cuda.bindings import driver

    from composer import dg
    from composer.config.schedules import load_schedule
    from composer.paths.registry import path_class
    from composer.paths.problem import DeviceProblem, check_fits
    from composer.runtime import Device

    grid = grid or tuple(load_schedule(order).benchmark.grid)
    cls = path_class(path)
    cls.check_order(order)
    device = Device()
    check_fits(order, grid, cls.name, device)
    fields = dg.make_fields(order, grid, varying=True)
    problem = DeviceProblem.upload(fields, order, grid, device)
    del fields
    impl = cls(problem)
    try:
        impl.launch(problem.ptr("q"), problem.dqdt.ptr)  # warm-up, not profiled
        problem.stream.synchronize()
        (err,) = driver.cuProfilerStart()
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuProfilerStart failed: {err}")
        impl.launch(problem.ptr("q"), problem.dqdt.ptr)
        problem.stream.synchronize()
        driver.cuProfilerStop()
    finally:
        impl.close()
        problem.close()


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 5):
        print(__doc__, file=sys.stderr)
        return 2
    grid = tuple(int(x) for x in argv[2:5]) if len(argv) == 5 else None
    profile_one_call(argv[0], int(argv[1]), grid)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
