"""cuBLAS (through nvmath-python's low-level bindings) for the three volume GEMMs.

One handle per stream: cuBLAS handles keep a workspace, and GEMMs running concurrently on
different streams must not share it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from composer.errors import ComposerError
from composer.gemm.roles import GemmSpec

_ONE = np.ones(1)
_ZERO = np.zeros(1)


def _bindings() -> Any:
    try:
        from nvmath.bindings import cublas
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise ComposerError(
            "the GEMM path needs nvmath-python (pip install nvmath-python; on a machine "
            "without internet carry its wheel, see docs/device.md)"
        ) from exc
    return cublas


class CublasGemm:
    """Runs :class:`GemmSpec` calls with cuBLAS on one stream (pointer mode host)."""

    def __init__(self, stream_handle: int) -> None:
        self._cublas = _bindings()
        self.handle = self._cublas.create()
        self.stream_handle = int(stream_handle)
        self._cublas.set_stream(self.handle, self.stream_handle)
        self._cublas.set_pointer_mode(self.handle, self._cublas.PointerMode.HOST)

    def run(self, spec: GemmSpec, operands: dict[str, int], out_ptr: int, stream_handle: int | None = None) -> None:
        """Enqueue ``spec`` on ``stream_handle`` (default: the handle's stream); ``operands`` maps
        each operand name ("D", "flux", "parity") to a device pointer. A launch plan hands each GEMM the stream it chose, and a
        second plan (the serial one of ``composer graph --measure``) may choose another."""
        cb = self._cublas
        if stream_handle is not None and int(stream_handle) != self.stream_handle:
            self.stream_handle = int(stream_handle)
            cb.set_stream(self.handle, self.stream_handle)
        op = {False: cb.Operation.N, True: cb.Operation.T}
        a = operands[spec.a_operand] + 8 * spec.a_offset
        b = operands[spec.b_operand] + 8 * spec.b_offset
        out_ptr = int(out_ptr) + 8 * spec.c_offset
        if spec.batch == 1:
            cb.dgemm(self.handle, op[spec.transa], op[spec.transb], spec.m, spec.n, spec.k,
                     _ONE.ctypes.data, a, spec.lda, b, spec.ldb, _ZERO.ctypes.data, out_ptr, spec.ldc)
        else:
            cb.dgemm_strided_batched(
                self.handle, op[spec.transa], op[spec.transb], spec.m, spec.n, spec.k,
                _ONE.ctypes.data, a, spec.lda, spec.stride_a, b, spec.ldb, spec.stride_b,
                _ZERO.ctypes.data, out_ptr, spec.ldc, spec.stride_c, spec.batch)

    def close(self) -> None:
        if self.handle:
            self._cublas.destroy(self.handle)
            self.handle = 0
