"""Work, traffic and memory counts of one tendency call, the roofline they imply on a machine,
and the device memory each implementation path needs.

FLOP and unique bytes follow shared/spec/operator.md ("Work and traffic counts"), so every
roofline fraction in the project is computed against the same denominators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from composer.arch.machines import Machine

FP64 = 8  # bytes per float64
INT64 = 8  # bytes per index-map entry
INT32 = 4  # bytes per entry of the 32-bit copies of the maps the fused kernels read
NUM_FACES = 6
VOLUME_INPUTS = 7  # q, u, v, w, Ex, Ey, Ez
FACE_INPUTS = 4  # nx, ny, nz, F

Grid = tuple[int, int, int]


def as_grid(grid: int | Sequence[int]) -> Grid:
    """``(NeX, NeY, NeZ)`` from an int (cubic grid) or a 3-sequence of positive ints
    (NumPy integers accepted)."""
    dims: tuple[object, ...] = ()
    if isinstance(grid, Integral):
        dims = (grid, grid, grid)
    elif isinstance(grid, Sequence) and not isinstance(grid, str):
        dims = tuple(grid)
    if len(dims) != 3 or not all(
        isinstance(n, Integral) and not isinstance(n, bool) and int(n) > 0 for n in dims
    ):
        raise ValueError(
            f"grid must be a positive int or three positive ints (NeX, NeY, NeZ), got {grid!r}"
        )
    return (int(dims[0]), int(dims[1]), int(dims[2]))  # type: ignore[call-overload]


def _nq(order: int) -> int:
    if isinstance(order, bool) or not isinstance(order, Integral) or int(order) < 1:
        raise ValueError(f"order must be a positive integer, got {order!r}")
    return int(order) + 1


def num_elements(grid: int | Sequence[int]) -> int:
    nex, ney, nez = as_grid(grid)
    return nex * ney * nez


def num_points(order: int, grid: int | Sequence[int]) -> int:
    """Volume points ``Nq^3 * Ne``."""
    return _nq(order) ** 3 * num_elements(grid)


def volume_array_bytes(order: int, grid: int | Sequence[int]) -> int:
    """One float64 volume field, shape ``(Ne, Nq, Nq, Nq)``."""
    return FP64 * num_points(order, grid)


def face_array_bytes(order: int, grid: int | Sequence[int], itemsize: int = FP64) -> int:
    """One face field, shape ``(Ne, 6, Nq, Nq)``."""
    return itemsize * NUM_FACES * _nq(order) ** 2 * num_elements(grid)


def flop(order: int, grid: int | Sequence[int]) -> int:
    """Conventional FLOP of one tendency call: the three contractions, ``3 * 2 * Nq^4 * Ne``."""
    return 3 * 2 * _nq(order) ** 4 * num_elements(grid)


def unique_bytes(order: int, grid: int | Sequence[int]) -> int:
    """Compulsory traffic of one call: 7 volume inputs + dqdt, 4 face inputs, each once:
    ``8 * Ne * (8*Nq^3 + 4*6*Nq^2)``."""
    nq = _nq(order)
    return (
        FP64 * num_elements(grid) * ((VOLUME_INPUTS + 1) * nq**3 + FACE_INPUTS * NUM_FACES * nq**2)
    )


def index_map_bytes(order: int, grid: int | Sequence[int]) -> int:
    """vmapM and vmapP as int64: ``2 * 8 * 6 * Nq^2 * Ne`` (reported apart from unique bytes)."""
    return 2 * face_array_bytes(order, grid, INT64)


# --- roofline ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Roofline:
    """Lower bounds on one tendency call: at the FP64 Tensor Core peak and at the HBM bandwidth."""

    flop: int
    bytes: int
    peak_flops: float
    bandwidth: float

    @property
    def t_compute(self) -> float:
        return self.flop / self.peak_flops

    @property
    def t_memory(self) -> float:
        return self.bytes / self.bandwidth

    @property
    def roof(self) -> float:
        return max(self.t_compute, self.t_memory)

    @property
    def bound(self) -> str:
        """Which roof binds: ``"compute"`` or ``"memory"``."""
        return "compute" if self.t_compute >= self.t_memory else "memory"

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per unique byte."""
        return self.flop / self.bytes

    @property
    def machine_balance(self) -> float:
        """FLOP per byte at which the two roofs meet."""
        return self.peak_flops / self.bandwidth


def roofline(order: int, grid: int | Sequence[int], machine: Machine) -> Roofline:
    """Roofline of one call on ``machine`` (TC peak; measured HBM bandwidth if known)."""
    return Roofline(
        flop(order, grid),
        unique_bytes(order, grid),
        machine.fp64_tc_peak_flops,
        machine.hbm_bandwidth,
    )


# --- device memory ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryItem:
    """``count`` device arrays of ``bytes_each``; ``note`` states the assumption behind it."""

    name: str
    count: int
    bytes_each: int
    note: str

    @property
    def bytes(self) -> int:
        return self.count * self.bytes_each


@dataclass(frozen=True)
class MemoryEstimate:
    path: str
    order: int
    grid: Grid
    items: tuple[MemoryItem, ...]

    @property
    def total_bytes(self) -> int:
        return sum(item.bytes for item in self.items)


def problem_memory_items(order: int, grid: int | Sequence[int]) -> tuple[MemoryItem, ...]:
    """The device arrays every path's run holds: inputs, maps, output, RK3 state and D (a path
    adds its own workspace: ``composer.paths.base.Path.workspace_items``)."""
    grid = as_grid(grid)
    vol = volume_array_bytes(order, grid)
    nq = _nq(order)
    return (
        MemoryItem(
            "volume inputs", VOLUME_INPUTS, vol, "q, u, v, w, Ex, Ey, Ez: all read as arrays (spec)"
        ),
        MemoryItem("face inputs", FACE_INPUTS, face_array_bytes(order, grid), "nx, ny, nz, F"),
        MemoryItem("index maps", 2, face_array_bytes(order, grid, INT64), "vmapM, vmapP as int64"),
        MemoryItem("dqdt", 1, vol, "tendency output"),
        MemoryItem(
            "RK3 state",
            4,
            vol,
            "q0, stage solution and two stage work arrays (conservative: an in-place Shu-Osher "
            "update needs only q0 beyond q and dqdt)",
        ),
        MemoryItem("D matrix", 1, FP64 * nq * nq, "LGL differentiation matrix, Nq x Nq"),
    )


def device_memory_estimate(order: int, grid: int | Sequence[int], path: str,
                           options: Mapping[str, Any] | None = None) -> MemoryEstimate:
    """Itemized device memory of a benchmark run of ``path`` built with ``options`` (its
    ``memory_estimate``); an unknown path is a ValueError naming the known ones, an option the path
    does not read a ComposerError."""
    # imported here: the registry imports the path modules, which build their estimates from this one
    from composer.paths.registry import path_class

    return path_class(path).memory_estimate(order, as_grid(grid), options)


def memory_limit_bytes(machine: Machine, reserve_fraction: float = 0.05) -> int:
    """Usable device memory: capacity less a reserve for the context, allocator and libraries."""
    if not 0.0 <= reserve_fraction < 1.0:
        raise ValueError(f"reserve_fraction must be in [0, 1), got {reserve_fraction!r}")
    return int(machine.memory_bytes * (1.0 - reserve_fraction))


def fits(
    order: int,
    grid: int | Sequence[int],
    path: str,
    machine: Machine,
    reserve_fraction: float = 0.05,
    options: Mapping[str, Any] | None = None,
) -> bool:
    """Whether ``path`` (built with ``options``) at ``order``/``grid`` fits ``machine``,
    ``reserve_fraction`` kept free."""
    return device_memory_estimate(order, grid, path, options).total_bytes <= memory_limit_bytes(
        machine, reserve_fraction
    )
