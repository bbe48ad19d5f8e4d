"""``composer.tendency``: one tendency evaluation on the GPU, same signature as the reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from composer import dg
from composer.paths.registry import path_class
from composer.runtime import Device


def tendency(fields: Mapping[str, np.ndarray], order: int, grid: object, path: str = "GEMM",
             device: Device | None = None, **options: Any) -> np.ndarray:
    """Evaluate ``dq/dt`` with implementation ``path`` on the GPU and return it as a NumPy array.

    Same inputs and output as :func:`composer.dg.reference_tendency`; ``options`` are handed
    to the path (those it declares: ``path_class(path).options``; any other key is an error).
    ``path="auto"`` takes the fastest path of the order on this GPU from the crossover map
    (:mod:`composer.config.crossover`; the choice is printed on stderr). Checks the options and the
    device memory before allocating.
    """
    from composer.config.crossover import is_auto, resolve_auto
    from composer.paths.problem import DeviceProblem, check_fits

    mesh = dg.Mesh(order, grid)
    dg.check_fields(fields, mesh)
    if is_auto(path):
        device = device or Device()
        path = resolve_auto(mesh.order, device).path
    cls = path_class(path)
    cls.check_order(mesh.order)
    cls.parse_options(options)
    device = device or Device()
    check_fits(mesh.order, mesh.grid, cls.name, device, options)
    problem = DeviceProblem.upload(fields, mesh.order, mesh.grid, device)
    impl = None
    try:
        impl = cls(problem, **options)
        problem.dqdt.poison(problem.stream)  # a path that skips a point cannot pass validation
        impl.launch(problem.ptr("q"), problem.dqdt.ptr)
        return problem.download(problem.dqdt)
    finally:
        if impl is not None:
            impl.close()
        problem.close()
