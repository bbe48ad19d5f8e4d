"""Which kernel configuration runs each DG volume GEMM at a given order and MMA shape.

Defaults follow the shapes of the three roles (``roles.py``): the x GEMM is one long GEMM
(M = K = Nq, N = Nq^2 Ne), transposed below Nq = 64 so that its long mode is the MMA's M; y is
a batch of Nq x Nq x Nq GEMMs; z has M = Nq^2. A schedule's ``[paths.GEMM_CUTE.tiles.<role>]``
table overrides any field (bm, bn, bk, warps_m, warps_n, stages, swap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from composer.gemm.cute.config import GemmConfig, KernelProblem, config_for, kernel_problem
from composer.arch.mma import mma_shape
from composer.gemm.roles import GemmSpec, gemm_spec

TILE_KEYS = ("bm", "bn", "bk", "warps_m", "warps_n", "stages", "swap", "epilogue_prefetch", "epilogue_prefetch_split",
             "fragment_pipeline", "async_epilogue_tiles", "async_buffers", "min_blocks", "stagger_us")
#: Keys only a carrier's tile takes (GEMM_CUTE's store kernels read no array to prefetch, and have
#: no epilogue worth running on warps of its own).
CARRIER_ONLY_KEYS = ("epilogue_prefetch", "epilogue_prefetch_split", "async_epilogue_tiles", "async_buffers",
                     "min_blocks", "stagger_us")
#: The MMA shape of the CuTe GEMMs when neither an option nor the schedule names one.
DEFAULT_MMA = "16x8x4"


def _pow2_at_least(x: int, lo: int, hi: int) -> int:
    p = lo
    while p < x and p < hi:
        p *= 2
    return p


@dataclass(frozen=True)
class RoleKernel:
    """The kernel for one role: its configuration and whether it runs the transposed problem."""

    role: str
    swap: bool
    config: GemmConfig

    def problem(self, spec: GemmSpec) -> KernelProblem:
        prob = kernel_problem(spec, self.swap)
        if prob.majors != (self.config.a_major, self.config.b_major, self.config.c_major):
            raise ValueError(f"{self.role}: kernel compiled for majors "
                             f"{(self.config.a_major, self.config.b_major, self.config.c_major)}, "
                             f"problem needs {prob.majors}")
        return prob


def default_tiles(role: str, nq: int, mma: str) -> dict[str, Any]:
    """Heuristic tile for ``role`` at ``nq`` (before schedule overrides); bk >= the mma's k."""
    tiles = _heuristic(role, nq, mma)
    tiles["bk"] = max(tiles["bk"], mma_shape(mma).k)
    return tiles


def _heuristic(role: str, nq: int, mma: str) -> dict[str, Any]:
    s = mma_shape(mma)
    mn = _pow2_at_least(nq, 8, 64)
    if role == "x" and nq < 64:
        # transposed: M' = Nq^2 Ne (long), N' = K = Nq
        return dict(bm=128, bn=mn, bk=min(mn, 16), warps_m=4, warps_n=1, stages=3, swap=True)
    if role == "x":
        return dict(bm=_pow2_at_least(nq, 16, 128), bn=128, bk=16, warps_m=2, warps_n=4, stages=3,
                    swap=False)
    if role == "y":
        bm = max(mn, 16 if s.m == 16 else 8)
        return dict(bm=bm, bn=mn, bk=min(mn, 16), warps_m=max(1, bm // 32), warps_n=max(1, mn // 32),
                    stages=2, swap=False)
    if role == "z":
        return dict(bm=128, bn=mn, bk=min(mn, 16), warps_m=4, warps_n=max(1, mn // 32), stages=3,
                    swap=False)
    raise ValueError(f"unknown role {role!r}")


def role_overrides(tiles: Mapping[str, Any] | None, role: str, mma: str) -> dict[str, Any]:
    """The tile overrides a ``[paths.GEMM_CUTE.tiles]`` table gives ``role`` built with ``mma``:
    ``tiles.<mma>.<role>`` when present, else ``tiles.<role>``, else none."""
    tiles = tiles or {}
    per_shape = tiles.get(mma)
    if isinstance(per_shape, Mapping) and per_shape.get(role) is not None:
        return dict(per_shape[role])
    return dict(tiles.get(role) or {})


def role_kernel(role: str, nq: int, num_elements: int, mma: str,
                overrides: Mapping[str, Any] | None = None) -> RoleKernel:
    """The RoleKernel for ``role``; ``overrides`` from the schedule replace default fields."""
    tiles = default_tiles(role, nq, mma)
    for key, value in (overrides or {}).items():
        if key not in TILE_KEYS:
            raise ValueError(f"[paths.GEMM_CUTE.tiles.{role}]: unknown key {key!r} (allowed: {TILE_KEYS})")
        tiles[key] = value
    swap = bool(tiles.pop("swap"))
    spec = gemm_spec(role, nq, num_elements)
    cfg = config_for(spec, mma, swap=swap, **tiles)
    return RoleKernel(role, swap, cfg.validate())
