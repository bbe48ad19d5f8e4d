"""Green contexts: run on N of the device's SMs without MPS (the balance axis, paper §8).

Why green contexts: the paper restricted SMs with MPS (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); a
green context does the same inside one process through the driver API, measured on the lab's
H200 (shared/notes/cute-dsl-fp64.md): cuDeviceGetDevResource -> cuDevSmResourceSplitByCount with
CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING (2-SM granularity; without it, multiples of 8)
-> cuDevResourceGenerateDesc -> cuGreenCtxCreate. The green context converted to a CUcontext
(cuCtxFromGreenCtx) is made current in place of the primary context, so every buffer, module and
stream the paths create afterwards belongs to it and every kernel runs on its SMs. The device
keeps reporting its full SM count, so launch shapes (grids sized by SM count) stay those of the
whole machine, as the paper's restricted runs kept the program fixed.

``RestrictedDevice(sms=N)`` is a ``Device`` whose current context is such a green context;
``check_sm_count`` validates N without a GPU.
"""

from __future__ import annotations

from typing import Any

from composer.errors import ComposerError

from .device import Device
from .errors import CudaError, check

#: Granularity and smallest partition of the IGNORE_SM_COSCHEDULING split (measured on the H200:
#: multiples of 2 SMs).
SM_GRANULARITY = 2
MIN_PARTITION_SMS = 2
_IGNORE_SM_COSCHEDULING = 1  # CUdevSmResourceSplitByCount_flags.CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING


class SmCountError(ComposerError, ValueError):
    """An SM count a green-context split cannot give."""


def check_sm_count(sms: int, device_sms: int, holder: str = "the device") -> int:
    """``sms`` when a green context of that many SMs can exist on ``holder`` of ``device_sms``."""
    if isinstance(sms, bool) or not isinstance(sms, int):
        raise SmCountError(f"SM count must be an integer, got {sms!r}")
    if sms > device_sms:
        raise SmCountError(f"{sms} SMs requested but {holder} has {device_sms}")
    if sms == device_sms:
        return sms
    if sms < MIN_PARTITION_SMS:
        raise SmCountError(f"{sms} SMs is below the minimum green-context partition of "
                           f"{MIN_PARTITION_SMS} SMs")
    if sms % SM_GRANULARITY:
        raise SmCountError(f"{sms} SMs is odd: a green-context split gives multiples of "
                           f"{SM_GRANULARITY} SMs (nearest: {sms - 1} or {sms + 1})")
    return sms


class GreenContext:
    """A green context of exactly ``sms`` SMs of ``device`` (the whole device when equal)."""

    def __init__(self, device: Device, sms: int) -> None:
        self.handle: Any = None
        drv = device._drv
        self._drv = drv
        self.requested = check_sm_count(sms, device.sm_count)
        whole = check(drv.cuDeviceGetDevResource(device.handle, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM),
                      "cuDeviceGetDevResource")
        if self.requested == device.sm_count:
            group = whole
        else:
            groups, count, _remainder = check(
                drv.cuDevSmResourceSplitByCount(1, whole, _IGNORE_SM_COSCHEDULING, self.requested),
                "cuDevSmResourceSplitByCount")
            if int(count) < 1:
                raise SmCountError(f"the driver split no group of {self.requested} SMs")
            group = groups[0]
        self.sm_count = int(group.sm.smCount)
        if self.sm_count != self.requested:
            raise SmCountError(f"a split for {self.requested} SMs gave {self.sm_count} SMs "
                               f"(granularity of this device/driver); ask for a count it gives")
        desc = check(drv.cuDevResourceGenerateDesc([group], 1), "cuDevResourceGenerateDesc")
        flags = drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM
        self.handle = check(drv.cuGreenCtxCreate(desc, device.handle, int(flags)), "cuGreenCtxCreate")
        try:
            self.context = check(drv.cuCtxFromGreenCtx(self.handle), "cuCtxFromGreenCtx")
        except BaseException:
            self.close()
            raise

    def create_stream(self, priority: int = 0) -> Any:
        """A raw CUstream of this green context (cuGreenCtxStreamCreate; destroy with cuStreamDestroy)."""
        flags = int(self._drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
        return check(self._drv.cuGreenCtxStreamCreate(self.handle, flags, priority), "cuGreenCtxStreamCreate")

    def close(self) -> None:
        """Destroy the green context (idempotent); its streams and buffers must be gone first."""
        handle, self.handle = self.handle, None
        if handle is not None:
            check(self._drv.cuGreenCtxDestroy(handle), "cuGreenCtxDestroy")


class RestrictedDevice(Device):
    """A Device whose current context is a green context of ``sms`` SMs.

    ``sm_count`` stays the device's (launch shapes unchanged); ``active_sms`` is the partition's.
    Everything created while it is current (buffers, modules, streams) lives in the green context.
    """

    def __init__(self, sms: int, ordinal: int = 0) -> None:
        super().__init__(ordinal)
        self.primary_context = self.context
        try:
            self.green = GreenContext(self, sms)
        except BaseException:
            super().close()
            raise
        self.active_sms: int = self.green.sm_count
        self.context = self.green.context
        self.make_current()

    def close(self) -> None:
        """Destroy the green context, then release the primary context (idempotent)."""
        green = getattr(self, "green", None)
        if green is not None and green.handle is not None:
            try:
                check(self._drv.cuCtxSynchronize(), "cuCtxSynchronize")
            except CudaError:
                pass
            self.context = self.primary_context
            self.make_current()
            green.close()
        super().close()

    def __repr__(self) -> str:
        return (f"Device({self.ordinal}: {self.name}, {self.arch}, {self.sm_count} SMs, "
                f"green context of {self.active_sms})")


def open_device(sms: int | None = None, ordinal: int = 0) -> Device:
    """The whole device, or a RestrictedDevice of ``sms`` SMs when given."""
    return Device(ordinal) if sms is None else RestrictedDevice(sms, ordinal)
