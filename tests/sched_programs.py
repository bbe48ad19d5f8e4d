"""Kernel programs for the scheduler tests: the library and fused paths' data flow, and random ones.

The GEMM program is the data flow that composer/paths/library.py hand-codes with streams and
events; the folded fused program is GEMM_FUSED's chain (paper §3.5: volume_flux -> x -> y -> the
z carrier, with the face flux beside it).
"""

from __future__ import annotations

import random

from composer.sched import KernelNode

FACE_INPUTS = ("q", "u", "v", "w", "vmapM", "vmapP", "nx", "ny", "nz", "F")
INPUTS = frozenset({*FACE_INPUTS, "D", "Ex", "Ey", "Ez"})


def gemm_program() -> list[KernelNode]:
    """GEMM / GEMM_CUTE: volume_flux -> three volume GEMMs -> lift, the face flux beside them."""
    return [
        KernelNode("volume_flux", "volume_flux", ("q", "u", "v", "w"), ("flux_x", "flux_y", "flux_z")),
        KernelNode("gemm_x", "gemm", ("D", "flux_x"), ("dx",)),
        KernelNode("gemm_y", "gemm", ("D", "flux_y"), ("dy",)),
        KernelNode("gemm_z", "gemm", ("D", "flux_z"), ("dz",)),
        KernelNode("surface_flux", "surface_flux", FACE_INPUTS, ("fstar",)),
        KernelNode("lift", "lift", ("dx", "dy", "dz", "Ex", "Ey", "Ez", "fstar"), ("dqdt",)),
    ]


def folded_program() -> list[KernelNode]:
    """GEMM_FUSED with the fold: each GEMM consumes the previous one's partial sum."""
    return [
        KernelNode("volume_flux", "volume_flux", ("q", "u", "v", "w"), ("flux_x", "flux_y", "flux_z")),
        KernelNode("surface_flux", "surface_flux", FACE_INPUTS, ("fstar",)),
        KernelNode("gemm_x", "gemm", ("D", "flux_x", "Ex"), ("h",)),
        KernelNode("gemm_y", "gemm", ("D", "flux_y", "Ey", "h"), ("s",)),
        KernelNode("gemm_z", "carrier", ("D", "flux_z", "Ez", "s", "fstar"), ("dqdt",)),
    ]


def random_program(rng: random.Random, kernels: int, arrays: int) -> list[KernelNode]:
    """Kernels reading and writing random arrays (all valid on entry), so every hazard kind occurs."""
    names = [f"a{i}" for i in range(arrays)]
    program = []
    for k in range(kernels):
        reads = tuple(rng.sample(names, rng.randint(0, 3)))
        writes = tuple(rng.sample(names, rng.randint(1, 2)))
        program.append(KernelNode(f"k{k}", "random", reads, writes, grid=rng.randint(1, 400),
                                  cost=rng.choice([None, 0.5, 1.0, 3.0])))
    return program


def random_inputs(arrays: int) -> frozenset[str]:
    return frozenset(f"a{i}" for i in range(arrays))
