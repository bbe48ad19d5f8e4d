"""CUDA device and primary-context handling, with a no-GPU path that fails with a clear message."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from . import _bindings
from .errors import CudaError, NoGpuError, check

if TYPE_CHECKING:
    from typing_extensions import Self

_lock = threading.Lock()
_default: Device | None = None


def _init_driver() -> Any:
    """cuInit(0); turn a missing driver library or a failing cuInit into NoGpuError."""
    drv = _bindings.require_driver()
    try:
        (status,) = drv.cuInit(0)
    except Exception as exc:  # e.g. cuda.pathfinder DynamicLibNotFoundError: no libcuda.so
        raise NoGpuError(f"no NVIDIA driver: cannot load libcuda ({type(exc).__name__}: {exc})") from exc
    if int(status) != 0:
        raise NoGpuError(f"no usable NVIDIA GPU: cuInit failed with {getattr(status, 'name', status)}")
    return drv


def device_count() -> int:
    """Number of CUDA devices; raises NoGpuError without a driver."""
    drv = _init_driver()
    return int(check(drv.cuDeviceGetCount(), "cuDeviceGetCount"))


def gpu_available() -> bool:
    """True when a driver is loadable and at least one device exists; never raises."""
    try:
        return device_count() > 0
    except Exception:  # noqa: BLE001 - documented to never raise
        return False


class Device:
    """One GPU with its primary context made current on this thread.

    Holds a reference on the primary context (released by ``close`` or the context manager) so
    that modules, buffers and streams created while it is alive share one context.
    """

    def __init__(self, ordinal: int = 0) -> None:
        drv = _init_driver()
        count = int(check(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
        if count == 0:
            raise NoGpuError("NVIDIA driver present but no CUDA device found")
        if not 0 <= ordinal < count:
            raise NoGpuError(f"device ordinal {ordinal} requested but only {count} device(s) present")
        self.ordinal = ordinal
        self._drv = drv
        self.handle = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        self.context = check(drv.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self._retained = True
        self.make_current()
        raw = check(drv.cuDeviceGetName(256, self.handle), "cuDeviceGetName")
        self.name: str = raw.split(b"\0", 1)[0].decode()
        attr = drv.CUdevice_attribute
        self.sm_count: int = self.attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.cc: tuple[int, int] = (self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                                    self.attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.max_smem_optin: int = self.attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.total_memory: int = int(check(drv.cuDeviceTotalMem(self.handle), "cuDeviceTotalMem"))
        # the schedules this process loads from now on carry this GPU's machine overlay, if any
        from composer.config.machine_schedules import note_device

        self.machine: str | None = note_device(self)

    @property
    def arch(self) -> str:
        """SASS target of this device, e.g. ``sm_90`` (no ``a`` suffix: portable within the family)."""
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def attribute(self, attr: Any) -> int:
        """cuDeviceGetAttribute as an int."""
        return int(check(self._drv.cuDeviceGetAttribute(attr, self.handle), "cuDeviceGetAttribute"))

    def make_current(self) -> None:
        """Bind this device's primary context to the calling thread."""
        check(self._drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def free_memory(self) -> int:
        """Currently free device memory in bytes."""
        self.make_current()
        free, _total = check(self._drv.cuMemGetInfo(), "cuMemGetInfo")
        return int(free)

    def synchronize(self) -> None:
        """Wait for all work in the context; surfaces asynchronous kernel faults."""
        self.make_current()
        check(self._drv.cuCtxSynchronize(), "cuCtxSynchronize")

    def close(self) -> None:
        """Release the primary-context reference (idempotent)."""
        if getattr(self, "_retained", False):
            self._retained = False
            try:
                check(self._drv.cuDevicePrimaryCtxRelease(self.handle), "cuDevicePrimaryCtxRelease")
            except CudaError:
                pass

    def __enter__(self) -> Self:
        self.make_current()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Device({self.ordinal}: {self.name}, {self.arch}, {self.sm_count} SMs)"


def default_device() -> Device:
    """Process-wide Device(0), created on first use; made current for the calling thread."""
    global _default
    with _lock:
        if _default is None or not _default._retained:
            _default = Device(0)
    _default.make_current()
    return _default


def ensure_context(device: Device | None) -> Device:
    """Make ``device`` (or the default device) current and return it."""
    if device is None:
        return default_device()
    device.make_current()
    return device
