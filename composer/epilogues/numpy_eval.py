"""NumPy emulation of a tree-specialized GEMM epilogue: every output site of the kernel's problem
at once, through the same index math and tree walk the CuTe DSL kernel is emitted from.

Why emulate the kernel's frame rather than write the formula in the volume layout: the tests then
check what the kernel will compute (which (m, n, batch) element is which node, which face offsets
a site loads, the pairing of two elements into one site), not a second, independent derivation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from composer.epilogues.evaluate import site_values
from composer.epilogues.index import OutputIndex
from composer.epilogues.tree import Store, aux_names, face_names
from composer.gemm.cute.config import KernelProblem


class NumpyBackend:
    """Values of many sites at once: one NumPy vector per element position of the site."""

    def __init__(self, width: int, offset: np.ndarray, c_stride_n: int, acc: np.ndarray,
                 arrays: Mapping[str, np.ndarray], scalars: Mapping[str, float]) -> None:
        self.width = width
        self.offsets = [offset + lane * c_stride_n for lane in range(width)]
        self.acc = acc
        self.arrays = arrays
        self.scalars = scalars

    def accumulator(self) -> list[np.ndarray]:
        return [self.acc[o] for o in self.offsets]

    def aux(self, name: str) -> list[np.ndarray]:
        return [self.arrays[name][o] for o in self.offsets]

    def scalar(self, name: str) -> float:
        return float(self.scalars[name])

    def face(self, name: str, predicate: Any, offset: Any) -> np.ndarray:
        return np.where(predicate, self.arrays[name][offset], 0.0)

    def face_pair(self, name: str, predicate: Any, offset: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.face(name, predicate, offset), self.face(name, predicate, offset + 1)

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        return a * b + c

    def wide(self, value: Any) -> np.ndarray:
        return np.asarray(value, dtype=np.int64)

    def aux_at(self, name: str, offset: Any) -> np.ndarray:
        return self.arrays[name][offset]

    def select(self, predicate: Any, a: Any, b: Any) -> Any:
        return np.where(predicate, a, b)


def c_strides(prob: KernelProblem) -> tuple[int, int]:
    """Element strides of C(m, n) within a batch: m-contiguous or n-contiguous by the majors."""
    return (1, prob.ldc) if prob.majors[2] == "m" else (prob.ldc, 1)


def emulate_epilogue(tree: Store, index: OutputIndex, prob: KernelProblem, acc: np.ndarray,
                     arrays: Mapping[str, np.ndarray], scalars: Mapping[str, float] | None = None,
                     width: int = 1) -> np.ndarray:
    """C as the kernel writes it: ``tree`` at every (m, n, batch) of ``prob``.

    ``acc`` is the GEMM result in the volume layout (what the plain store kernel writes, e.g.
    ``composer.gemm.roles.emulate``); ``arrays`` holds every Aux and Face array the tree reads
    (volume or face layout). ``width`` 2 emulates the paired (16-byte) epilogue: sites at even n,
    which needs ``index.pairs_share_row``. Elements the kernel does not write stay NaN.
    """
    if width == 2 and not index.pairs_share_row:
        raise ValueError(f"role {index.role} (swap={index.swap}, nq={index.nq}) has no 16-byte pairs")
    missing = sorted(set(aux_names(tree) + face_names(tree)) - set(arrays))
    if missing:
        raise KeyError(f"arrays {missing} not given for {tree}")
    flat = {name: np.ascontiguousarray(a).reshape(-1) for name, a in arrays.items()}
    m, n, b = np.meshgrid(np.arange(prob.m), np.arange(0, prob.n, width), np.arange(prob.batch), indexing="ij")
    m, n, b = m.reshape(-1), n.reshape(-1), b.reshape(-1)
    stride_m, stride_n = c_strides(prob)
    offset = b.astype(np.int64) * prob.stride_c + m * stride_m + n * stride_n
    backend = NumpyBackend(width, offset, stride_n, np.ascontiguousarray(acc).reshape(-1), flat, scalars or {})
    values = site_values(tree, backend, index.node(m, n, b), index.nq)
    out = np.full(acc.size, np.nan)
    for o, v in zip(backend.offsets, values):
        out[o] = v
    return out.reshape(acc.shape)
