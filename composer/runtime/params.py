"""Kernel parameter signatures and their packing into the ``void**`` array cuLaunchKernel expects.

Packing is done here with ctypes (not by the bindings' tuple form) so it is identical across
cuda-bindings versions and so argument validation is testable without a GPU.
"""

from __future__ import annotations

import ctypes
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from .errors import LaunchError

CTYPES: dict[str, type] = {
    "ptr": ctypes.c_uint64,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "u32": ctypes.c_uint32,
    "u64": ctypes.c_uint64,
    "f64": ctypes.c_double,
}
_INT_RANGES = {
    "ptr": (0, 2**64 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
}


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its name (for error messages) and C type tag (a key of CTYPES)."""

    name: str
    ctype: str

    def __post_init__(self) -> None:
        if self.ctype not in CTYPES:
            raise ValueError(f"parameter {self.name!r}: ctype {self.ctype!r} not in {sorted(CTYPES)}")


def params(spec: str) -> tuple[Param, ...]:
    """Shorthand: ``params("q:ptr u:ptr ne:i64")``."""
    out = []
    for item in spec.split():
        name, _, ctype = item.partition(":")
        out.append(Param(name, ctype))
    return tuple(out)


def _coerce(param: Param, value: Any) -> Any:
    if param.ctype == "ptr" and not isinstance(value, numbers.Integral):
        value = getattr(value, "ptr", value)  # DeviceBuffer and friends
    if isinstance(value, bool):
        raise LaunchError(f"argument {param.name!r} ({param.ctype}): bool is not accepted")
    if param.ctype == "f64":
        if not isinstance(value, numbers.Real):
            raise LaunchError(f"argument {param.name!r} (f64): expected a real number, got {type(value).__name__}")
        return ctypes.c_double(float(value))
    if not isinstance(value, numbers.Integral):
        raise LaunchError(f"argument {param.name!r} ({param.ctype}): expected an integer, got {type(value).__name__}")
    lo, hi = _INT_RANGES[param.ctype]
    if not lo <= int(value) <= hi:
        raise LaunchError(f"argument {param.name!r} ({param.ctype}): {int(value)} out of range [{lo}, {hi}]")
    return CTYPES[param.ctype](int(value))


class PackedArgs:
    """Owns the ctypes values and the pointer array; keep it alive until cuLaunchKernel returns."""

    def __init__(self, signature: Sequence[Param], args: Sequence[Any]) -> None:
        if len(args) != len(signature):
            names = ", ".join(p.name for p in signature)
            raise LaunchError(f"kernel expects {len(signature)} arguments ({names}), got {len(args)}")
        self.values = [_coerce(p, a) for p, a in zip(signature, args)]
        self.array = (ctypes.c_void_p * max(1, len(self.values)))(
            *[ctypes.addressof(v) for v in self.values])

    @property
    def address(self) -> int:
        """The ``void**`` to hand to cuLaunchKernel (0 when the kernel takes no arguments)."""
        return ctypes.addressof(self.array) if self.values else 0


def dim3(value: int | Sequence[int], what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    """Normalize an int or 1..3-sequence to (x, y, z) and check it against per-axis limits."""
    dims = (int(value),) if isinstance(value, numbers.Integral) else tuple(cast(Sequence[int], value))
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, (d, lim) in enumerate(zip(dims, limits)):
        if not 1 <= d <= lim:
            raise LaunchError(f"{what}.{'xyz'[axis]} = {d} outside [1, {lim}]")
    return dims  # type: ignore[return-value]


def cluster_dims(cluster: int | Sequence[int], grid: tuple[int, int, int], max_blocks: int,
                 what: str = "cluster") -> tuple[int, int, int]:
    """A thread-block cluster shape for ``grid``: each axis divides the grid's, and the cluster
    holds at most ``max_blocks`` blocks (the arch's limit, ``max_cluster_blocks`` of archs.toml:
    1 where the arch has no clusters)."""
    dims = dim3(cluster, what, GRID_LIMITS)
    blocks = dims[0] * dims[1] * dims[2]
    if blocks > max_blocks:
        raise LaunchError(f"{what} {dims} holds {blocks} blocks; this architecture allows at most {max_blocks}"
                          + (" (no thread-block clusters before sm_90)" if max_blocks <= 1 else ""))
    bad = [axis for axis in range(3) if grid[axis] % dims[axis]]
    if bad:
        raise LaunchError(f"grid {grid} is not a whole number of {what}s {dims} along "
                          + ", ".join("xyz"[a] for a in bad))
    return dims


#: Clusters of more blocks than this need the non-portable size attribute (CUDA Programming Guide).
PORTABLE_CLUSTER_BLOCKS = 8

GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
