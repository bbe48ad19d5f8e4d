"""Peer baseline EINSUM: the operator as a competent Python user writes it with CuPy.

einsum for the three contractions, fancy indexing through vmapM/vmapP for the traces and a
scatter-add for the lift, all FP64 on the problem's stream. It shows in every benchmark what
composer's kernels buy over the obvious approach.

To the scheduler it is one node that reads the problem and writes dqdt: CuPy decides its kernels,
and its temporaries come from CuPy's pool on the one stream it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from composer import counts
from composer.arch.machines import Machine
from composer.errors import ComposerError
from composer.paths.base import Launcher, Path
from composer.paths.library import unfused_workspace
from composer.paths.problem import DeviceProblem
from composer.paths.program import OUTPUT, PROBLEM_INPUTS
from composer.sched import KernelNode


def _cupy() -> Any:
    try:
        import cupy
        import cupyx
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise ComposerError("the EINSUM path needs CuPy (pip install cupy-cuda13x)") from exc
    return cupy, cupyx


class EinsumPath(Path):
    name = "EINSUM"
    family = "baseline"
    supports_graph = False  # CuPy allocates temporaries from its pool inside the call

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """CuPy's temporaries: the unfused stages' arrays (flux products, contraction results,
        face flux) and two more volume-sized contraction temporaries."""
        return unfused_workspace(order, grid) + (counts.MemoryItem(
            "einsum temporaries", 2, counts.volume_array_bytes(order, grid),
            "assumed: two volume-sized contraction temporaries"),)

    @classmethod
    def program(cls, order: int, num_elements: int, machine: Machine, **options: Any) -> list[KernelNode]:
        return [KernelNode("einsum", "baseline", PROBLEM_INPUTS, (OUTPUT,))]

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        super().__init__(problem, **options)
        self.cp, self.cpx = _cupy()
        mesh = problem.mesh
        self.volume_shape, self.face_shape = mesh.volume_shape, mesh.face_shape
        self.arrays = {key: self._wrap(buf.ptr, self.volume_shape if key in "q u v w Ex Ey Ez".split()
                                       else self.face_shape) for key, buf in problem.fields.items()}
        self.vmap_m = self._wrap(problem.vmap_m.ptr, (problem.vmap_m.nbytes // 8,), np.int64)
        self.vmap_p = self._wrap(problem.vmap_p.ptr, (problem.vmap_p.nbytes // 8,), np.int64)
        self.diff = self._wrap(problem.diff.ptr, (problem.nq, problem.nq))
        self.schedule()

    def _wrap(self, ptr: int, shape: tuple[int, ...], dtype: Any = np.float64) -> Any:
        cp = self.cp
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        memory = cp.cuda.UnownedMemory(int(ptr), nbytes, self)
        return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(memory, 0))

    def bind(self, q_ptr: int, dqdt_ptr: int) -> Mapping[str, Launcher]:
        return {"einsum": lambda stream: self.evaluate(q_ptr, dqdt_ptr, stream)}

    def evaluate(self, q_ptr: int, dqdt_ptr: int, stream: Any) -> None:
        """The whole operator in CuPy on ``stream``, the one the plan gives its only node (the
        problem's main stream): CuPy's kernels and pool temporaries follow that stream."""
        cp, a, d = self.cp, self.arrays, self.diff
        with cp.cuda.ExternalStream(int(stream.handle)):
            q = self._wrap(q_ptr, self.volume_shape)
            volume = a["Ex"] * cp.einsum("im,ekjm->ekji", d, q * a["u"])
            volume += a["Ey"] * cp.einsum("jm,ekmi->ekji", d, q * a["v"])
            volume += a["Ez"] * cp.einsum("km,emji->ekji", d, q * a["w"])
            flat = {k: a[k].reshape(-1) for k in "quvw"}
            flat["q"] = q.reshape(-1)
            nx, ny, nz = (a[k].reshape(-1) for k in ("nx", "ny", "nz"))
            vel_m = flat["u"][self.vmap_m] * nx + flat["v"][self.vmap_m] * ny + flat["w"][self.vmap_m] * nz
            vel_p = flat["u"][self.vmap_p] * nx + flat["v"][self.vmap_p] * ny + flat["w"][self.vmap_p] * nz
            q_m, q_p = flat["q"][self.vmap_m], flat["q"][self.vmap_p]
            fstar = 0.5 * a["F"].reshape(-1) * (q_p * vel_p - q_m * vel_m - 0.5 * cp.abs(vel_p + vel_m) * (q_p - q_m))
            self.cpx.scatter_add(volume.reshape(-1), self.vmap_m, fstar)
            cp.negative(volume, out=self._wrap(dqdt_ptr, self.volume_shape))
