"""Device memory buffers (cuMemAlloc) and NumPy transfers; optional pinned host staging."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .device import Device, ensure_context
from .errors import CudaError, OutOfDeviceMemory, check


def _stream_handle(stream: Any) -> Any:
    return 0 if stream is None else getattr(stream, "handle", stream)


class DeviceBuffer:
    """A linear device allocation. ``ptr`` is the raw device address (int), usable as a ``ptr`` arg."""

    def __init__(self, nbytes: int, device: Device | None = None) -> None:
        self.ptr = 0
        self.nbytes = int(nbytes)
        if self.nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self.device = ensure_context(device)
        self._drv = self.device._drv
        if self.nbytes == 0:
            return
        free = self.device.free_memory()
        if self.nbytes > free:
            raise OutOfDeviceMemory(self.nbytes, free, self.device.total_memory)
        try:
            self.ptr = int(check(self._drv.cuMemAlloc(self.nbytes), "cuMemAlloc"))
        except CudaError as exc:
            if "OUT_OF_MEMORY" in exc.name:
                raise OutOfDeviceMemory(self.nbytes, self.device.free_memory(), self.device.total_memory) from exc
            raise

    @classmethod
    def from_numpy(cls, arr: np.ndarray, stream: Any = None, device: Device | None = None) -> DeviceBuffer:
        """Allocate and upload a C-contiguous copy of ``arr``."""
        host = np.ascontiguousarray(arr)
        buf = cls(host.nbytes, device)
        buf.copy_from(host, stream)
        return buf

    def _check_size(self, nbytes: int, what: str) -> None:
        if nbytes > self.nbytes:
            raise ValueError(f"{what}: {nbytes} bytes do not fit in a {self.nbytes}-byte buffer")

    def copy_from(self, src: DeviceBuffer | np.ndarray, stream: Any = None) -> None:
        """Copy a host array (HtoD) or another DeviceBuffer (DtoD) into the start of this buffer."""
        self.device.make_current()
        h = _stream_handle(stream)
        if isinstance(src, DeviceBuffer):
            self._check_size(src.nbytes, "copy_from")
            if src.nbytes:
                check(self._drv.cuMemcpyDtoDAsync(self.ptr, src.ptr, src.nbytes, h), "cuMemcpyDtoDAsync")
        else:
            host = np.ascontiguousarray(src)
            self._check_size(host.nbytes, "copy_from")
            if host.nbytes:
                # From pageable memory the call returns once the source is staged: safe to drop it.
                check(self._drv.cuMemcpyHtoDAsync(self.ptr, host.ctypes.data, host.nbytes, h), "cuMemcpyHtoDAsync")
        if stream is None:
            check(self._drv.cuStreamSynchronize(0), "cuStreamSynchronize")

    def to_numpy(self, shape: Sequence[int] | int | None = None, dtype: Any = np.float64,
                 stream: Any = None, out: np.ndarray | None = None) -> np.ndarray:
        """Download into a new (or the given C-contiguous ``out``) array; waits for the copy."""
        self.device.make_current()
        if out is None:
            dt = np.dtype(dtype)
            shape = (self.nbytes // dt.itemsize,) if shape is None else shape
            out = np.empty(shape, dtype=dt)
        elif not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
        self._check_size(out.nbytes, "to_numpy")
        if out.nbytes:
            h = _stream_handle(stream)
            check(self._drv.cuMemcpyDtoHAsync(out.ctypes.data, self.ptr, out.nbytes, h), "cuMemcpyDtoHAsync")
            check(self._drv.cuStreamSynchronize(h), "cuStreamSynchronize")
        return out

    def zero(self, stream: Any = None) -> None:
        """Set every byte to 0 (0.0 for float64)."""
        self.fill_bytes(0, stream)

    def poison(self, stream: Any = None) -> None:
        """Set every byte to 0xFF: every float64 becomes a NaN, so an output a kernel fails to
        write cannot pass a comparison by accident (freed memory often still holds a previous
        path's correct result)."""
        self.fill_bytes(0xFF, stream)

    def fill_bytes(self, value: int, stream: Any = None) -> None:
        """cuMemsetD8 of the whole buffer (synchronous when ``stream`` is None)."""
        self.device.make_current()
        if self.nbytes:
            h = _stream_handle(stream)
            check(self._drv.cuMemsetD8Async(self.ptr, int(value), self.nbytes, h), "cuMemsetD8Async")
            if stream is None:
                check(self._drv.cuStreamSynchronize(0), "cuStreamSynchronize")

    def free(self) -> None:
        """Release the allocation (idempotent)."""
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            self.device.make_current()
            check(self._drv.cuMemFree(ptr), "cuMemFree")

    def __del__(self) -> None:
        if getattr(self, "ptr", 0) and not sys.is_finalizing():
            with contextlib.suppress(Exception):  # a finalizer must never raise
                self.free()

    def __repr__(self) -> str:
        return f"DeviceBuffer(ptr=0x{self.ptr:x}, nbytes={self.nbytes})"


class PinnedHostBuffer:
    """Page-locked host memory (cuMemHostAlloc): truly asynchronous copies and full PCIe bandwidth."""

    def __init__(self, nbytes: int, device: Device | None = None) -> None:
        self.ptr = 0
        self.nbytes = int(nbytes)
        self.device = ensure_context(device)
        self._drv = self.device._drv
        if self.nbytes:
            self.ptr = int(check(self._drv.cuMemHostAlloc(self.nbytes, 0), "cuMemHostAlloc"))

    def array(self, shape: Sequence[int] | int, dtype: Any = np.float64) -> np.ndarray:
        """A NumPy view of the pinned memory (valid while this buffer lives)."""
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        if count * dt.itemsize > self.nbytes:
            raise ValueError(f"view of {count * dt.itemsize} bytes exceeds pinned buffer of {self.nbytes}")
        raw = (np.ctypeslib.as_array((ctypes.c_byte * self.nbytes).from_address(self.ptr))
               if self.nbytes else np.empty(0, np.byte))
        return raw[: count * dt.itemsize].view(dt).reshape(shape)

    def free(self) -> None:
        """Release the pinned allocation (idempotent); views must not be used afterwards."""
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            check(self._drv.cuMemFreeHost(ptr), "cuMemFreeHost")

    def __del__(self) -> None:
        if getattr(self, "ptr", 0) and not sys.is_finalizing():
            with contextlib.suppress(Exception):  # a finalizer must never raise
                self.free()
