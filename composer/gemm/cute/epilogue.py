"""Pluggable GEMM epilogues: what happens to each accumulator once the mainloop is done.

An epilogue is traced inside the CuTe DSL kernel, once per accumulator register, with the
element's (m, n) coordinates already bounds-checked. It receives an :class:`EpilogueContext`
holding the kernel's C and ``aux`` pointers (batch offsets applied), their strides and the
``alpha``/``beta`` scalars of the fixed kernel ABI, so new (fused) epilogues need no new launch
code: register a class in EPILOGUES under a name and put that name in a GemmConfig.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass
class EpilogueContext:
    """Device-side handles an epilogue may use (DSL values; built inside the kernel)."""

    c: Any  # cute.Pointer to C of this batch
    aux: Any  # cute.Pointer to aux of this batch
    c_stride_m: Any  # element strides of C(m, n)
    c_stride_n: Any
    ld_aux: Any
    alpha: Any
    beta: Any


class Epilogue:
    """Base: ``apply`` writes one accumulator (``apply_pair`` two, when ``pairs``)."""

    name: ClassVar[str]
    pairs: ClassVar[bool] = False  # has ``apply_pair`` (two n-adjacent elements, n even, ldc even)

    def apply(self, ctx: EpilogueContext, m: Any, n: Any, acc: Any) -> None:
        raise NotImplementedError

    def apply_pair(self, ctx: EpilogueContext, m: Any, n: Any, acc0: Any, acc1: Any) -> None:
        """Elements (m, n) and (m, n+1) at once; the kernel calls it only when ``pairs`` is set."""
        raise NotImplementedError


class StoreEpilogue(Epilogue):
    """``C = acc`` (BLAS alpha = 1, beta = 0): the plain volume GEMM."""

    name = "store"
    pairs = True

    def apply(self, ctx: EpilogueContext, m: Any, n: Any, acc: Any) -> None:
        ctx.c[m * ctx.c_stride_m + n * ctx.c_stride_n] = acc

    def apply_pair(self, ctx: EpilogueContext, m: Any, n: Any, acc0: Any, acc1: Any) -> None:
        """C[m, n], C[m, n+1] = acc0, acc1 as one 16-byte store (C n-contiguous, n and ldc even)."""
        from composer.gemm.cute.atom import stg_f64x2

        stg_f64x2((ctx.c + (m * ctx.c_stride_m + n)).toint(), acc0, acc1)


#: The epilogues a GemmConfig may name (GemmConfig.validate rejects any other name).
EPILOGUES: dict[str, type[Epilogue]] = {cls.name: cls for cls in (StoreEpilogue,)}
