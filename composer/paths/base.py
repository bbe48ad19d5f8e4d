"""The interface every implementation path implements, with the metadata each path declares.

A path turns the device-resident stage value ``q`` into ``dqdt`` by enqueueing kernels on
the problem's main stream (forking to side streams internally and joining back before it
returns), so that one driver can time, step and graph-capture every path the same way.

Besides ``launch``, a path class states what the rest of the project asks about it without
instantiating it: the orders it implements, its capabilities (``CAPABILITIES``: what
``composer build`` compiles for it, whether it reads the build's MMA shape, its lowest
architecture, ...), the options it reads (``options``) and the device memory it needs
(``memory_estimate``). ``composer.paths.registry`` lists the path classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from types import MappingProxyType
from typing import Any, ClassVar

from composer import counts
from composer.arch.mma import arch_number
from composer.errors import ComposerError
from composer.paths.problem import DeviceProblem

#: The path families: "library" runs the volume GEMMs through a GEMM library (or our CuTe GEMM)
#: around the support kernels, "fused" the element-local kernels of a ``[paths.FUSED*]`` schedule
#: table, "baseline" the operator as a plain CuPy program.
FAMILIES = ("library", "fused", "baseline")
#: What ``composer build`` compiles for a path (``build_kinds``): the CuTe DSL GEMMs, the NVRTC
#: support kernels of the library paths, the kernels of a fused schedule table.
BUILD_KINDS = ("cute", "support", "fused")
#: The class attributes ``registry.paths_with`` selects on.
CAPABILITIES = ("family", "build_kinds", "needs_build", "reads_mma", "min_sm", "supports_graph")


@dataclass(frozen=True)
class PathOption:
    """One option a path reads. ``parse`` turns a given value (a Python object from the API, or
    the string ``--option PATH.KEY=VALUE`` gives) into the value the path uses, raising
    ValueError/TypeError/ComposerError for one it cannot use; ``doc`` says what the option does."""

    parse: Callable[[Any], Any]
    doc: str


def directory_option(value: str | FsPath) -> FsPath:
    """A directory given as an option (a string or a path)."""
    if not isinstance(value, (str, FsPath)) or not str(value):
        raise TypeError(f"expected a directory, got {value!r}")
    return FsPath(value)


class Path(ABC):
    """One implementation of the tendency on the device."""

    name: ClassVar[str]
    #: Orders this path implements; ``None`` means every order.
    orders: ClassVar[frozenset[int] | None] = None
    family: ClassVar[str]  # one of FAMILIES
    #: What ``composer build`` compiles for this path (a subset of BUILD_KINDS; empty: nothing).
    build_kinds: ClassVar[frozenset[str]] = frozenset()
    #: Runs only from a ``composer build`` directory (no kernel of it is compiled at run time).
    needs_build: ClassVar[bool] = False
    #: Its kernels use the MMA shape ``composer build --mma`` names (others take theirs from the
    #: schedule or use none), so only this path makes the build check that shape against the arch.
    reads_mma: ClassVar[bool] = False
    #: Lowest SM architecture that runs it (``None``: no floor beyond the runtime's).
    min_sm: ClassVar[int | None] = None
    #: Whether a tendency call can be captured into a CUDA graph.
    supports_graph: ClassVar[bool] = True
    #: The options the path reads, by key; any other key is refused (``parse_options``).
    options: ClassVar[Mapping[str, PathOption]] = MappingProxyType({})

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        self.check_order(problem.order)
        self.problem = problem
        self.options = self.parse_options(options)

    @classmethod
    def check_order(cls, order: int) -> None:
        if cls.orders is not None and order not in cls.orders:
            raise ComposerError(
                f"path {cls.name} does not implement order {order}; it supports {sorted(cls.orders)}"
            )

    @classmethod
    def check_arch(cls, arch: str) -> None:
        """Clear error for an architecture below the path's ``min_sm``."""
        if cls.min_sm is not None and arch_number(arch) < cls.min_sm:
            raise ComposerError(f"path {cls.name} needs sm_{cls.min_sm} or newer; {arch} cannot run it")

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options parsed by their declarations; a key the path does not read is an error
        (it would be silently ignored), naming the keys it does read. ``None`` means "not given"."""
        unknown = sorted(set(options) - set(cls.options))
        if unknown:
            known = ", ".join(sorted(cls.options)) or "none"
            raise ComposerError(f"path {cls.name} has no option {', '.join(map(repr, unknown))}; "
                                f"its options: {known}")
        parsed = {}
        for key, value in options.items():
            try:
                parsed[key] = None if value is None else cls.options[key].parse(value)
            except (TypeError, ValueError) as exc:
                raise ComposerError(f"path {cls.name} option {key}={value!r}: {exc}") from None
        return parsed

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid) -> tuple[counts.MemoryItem, ...]:
        """The device arrays the path allocates beyond the problem's (``counts.problem_memory_items``)."""
        return ()

    @classmethod
    def memory_estimate(cls, order: int, grid: int | tuple[int, int, int]) -> counts.MemoryEstimate:
        """Itemized device memory of a benchmark run of this path: the problem's arrays and the
        path's workspace (allocator padding and library workspaces not included)."""
        grid = counts.as_grid(grid)
        return counts.MemoryEstimate(cls.name, order, grid,
                                     counts.problem_memory_items(order, grid) + cls.workspace_items(order, grid))

    @classmethod
    def device_bytes(cls, order: int, grid: int | tuple[int, int, int]) -> int:
        """Total device bytes of ``memory_estimate``."""
        return cls.memory_estimate(order, grid).total_bytes

    @abstractmethod
    def launch(self, q_ptr: int, dqdt_ptr: int) -> None:
        """Enqueue one tendency evaluation ``dqdt = L(q)`` on ``problem.stream``."""

    def close(self) -> None:
        """Release the path's own resources (handles, streams, workspace)."""
