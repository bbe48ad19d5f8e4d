"""Path GEMM: the three volume GEMMs by cuBLAS (nvmath-python bindings)."""

from __future__ import annotations

from composer.gemm.cublas import CublasGemm
from composer.paths.library import LibraryPath
from composer.runtime import Stream


class GemmPath(LibraryPath):
    name = "GEMM"

    def setup_gemms(self) -> None:
        self.blas = {role: CublasGemm(int(stream.handle)) for role, stream in self.gemm_streams.items()}

    def run_gemm(self, role: str, stream: Stream) -> None:
        operands = {"D": self.problem.diff.ptr, "flux": self.flux[role].ptr}
        self.blas[role].run(self.specs[role], operands, self.derivative[role].ptr, int(stream.handle))

    def close(self) -> None:
        for blas in self.blas.values():
            blas.close()
        super().close()
