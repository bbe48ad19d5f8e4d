"""Path GEMM: the three volume GEMMs by cuBLAS (nvmath-python bindings).

Option ``parity`` (beyond the paper; ``composer.paths.parity``): the volume flux is written split into
even and odd parts along each contraction axis, each GEMM becomes two half-size products (half the
multiply-adds), and the lift merges the halves on its way to dqdt. Same arrays, same bytes.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from composer.gemm.cublas import CublasGemm
from composer.paths.library import LibraryPath
from composer.paths.parity import PARITY_OPTION, ParityGemms
from composer.runtime import Stream


class GemmPath(ParityGemms, LibraryPath):
    name = "GEMM"
    options = MappingProxyType({**LibraryPath.options, **PARITY_OPTION})

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        return super().plan_settings(order, **options) + cls.parity_tag(order, options)

    def __init__(self, problem: Any, **options: Any) -> None:
        self.setup_parity(problem, options)
        super().__init__(problem, **options)

    def setup_gemms(self) -> None:
        self.blas = {role: CublasGemm(int(stream.handle)) for role, stream in self.gemm_streams.items()}

    def run_gemm(self, role: str, stream: Stream) -> None:
        operands = self.gemm_operands(role)
        for spec in self.gemm_calls[role]:
            self.blas[role].run(spec, operands, self.derivative[role].ptr, int(stream.handle))

    def close(self) -> None:
        for blas in self.blas.values():
            blas.close()
        super().close()
