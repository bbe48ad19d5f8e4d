"""The interface every implementation path implements, and the path registry.

A path turns the device-resident stage value ``q`` into ``dqdt`` by enqueueing kernels on
the problem's main stream (forking to side streams internally and joining back before it
returns), so that one driver can time, step and graph-capture every path the same way.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from composer.errors import ComposerError
from composer.paths.problem import DeviceProblem

# name -> "module:Class"; imported lazily so that a path's optional dependency (CuPy,
# nvmath-python) is needed only when that path is used.
PATH_CLASSES: dict[str, str] = {
    "GEMM": "composer.paths.gemm:GemmPath",
    "GEMM_CUTE": "composer.paths.gemm_cute:GemmCutePath",
    "EINSUM": "composer.paths.einsum:EinsumPath",
    "FUSED": "composer.paths.fused:FusedPath",
    "FUSED_TC": "composer.paths.fused:FusedTcPath",
    "FUSED_DFMA": "composer.paths.fused:FusedDfmaPath",
    "FUSED_TC16": "composer.paths.fused:FusedTc16Path",
}


class Path(ABC):
    """One implementation of the tendency on the device."""

    name: ClassVar[str]
    #: Orders this path implements; ``None`` means every order.
    orders: ClassVar[frozenset[int] | None] = None

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        self.check_order(problem.order)
        self.problem = problem
        self.options = options

    @classmethod
    def check_order(cls, order: int) -> None:
        if cls.orders is not None and order not in cls.orders:
            raise ComposerError(
                f"path {cls.name} does not implement order {order}; it supports {sorted(cls.orders)}"
            )

    @abstractmethod
    def launch(self, q_ptr: int, dqdt_ptr: int) -> None:
        """Enqueue one tendency evaluation ``dqdt = L(q)`` on ``problem.stream``."""

    def close(self) -> None:
        """Release the path's own resources (handles, streams, workspace)."""


def path_names() -> list[str]:
    return list(PATH_CLASSES)


def path_class(name: str) -> type[Path]:
    """Resolve a path by name (case-insensitive), with a clear error for unknown names."""
    key = name.upper()
    if key not in PATH_CLASSES:
        raise ComposerError(f"unknown path {name!r}; available paths: {', '.join(PATH_CLASSES)}")
    module_name, class_name = PATH_CLASSES[key].split(":")
    return getattr(importlib.import_module(module_name), class_name)
