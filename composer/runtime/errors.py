"""Exception types of the runtime layer and ``check``, the one place CUDA status codes become exceptions.

All derive from composer.errors.ComposerError (so the CLI reports them in one line; the failures of
a run itself through RunFailure) and keep their builtin base (RuntimeError, MemoryError,
ValueError) for callers that catch those.
"""

from __future__ import annotations

import contextlib
from typing import Any

from composer.errors import ComposerError, RunFailure

from . import _bindings

NO_GPU_HINT = ("this command needs an NVIDIA GPU with a CUDA driver; without one, composer info, "
               "composer validate --backend numpy and composer build work (kernels compile through "
               "NVRTC without a GPU)")


class CudaError(RunFailure, RuntimeError):
    """A CUDA driver or NVRTC call returned an error status."""

    def __init__(self, code: Any, name: str, message: str, api: str = "") -> None:
        self.code = code
        self.name = name
        self.api = api
        where = f"{api}: " if api else ""
        super().__init__(f"{where}{name} ({int(code)}): {message}")


class NoGpuError(ComposerError, RuntimeError):
    """No usable NVIDIA driver or device; raised instead of an opaque loader/cuInit failure."""

    hint = NO_GPU_HINT


class OutOfDeviceMemory(RunFailure, MemoryError):
    """A device allocation would not fit into the currently free device memory."""

    def __init__(self, requested: int, free: int, total: int | None = None) -> None:
        self.requested = requested
        self.free = free
        self.total = total
        tot = f" of {total} total" if total is not None else ""
        super().__init__(
            f"device allocation of {requested} bytes ({requested / 2**30:.3f} GiB) exceeds free device "
            f"memory {free} bytes ({free / 2**30:.3f} GiB){tot}"
        )


class CompileError(RunFailure, RuntimeError):
    """NVRTC rejected a source; the message carries the compile log and the offending source lines."""

    def __init__(self, name: str, arch: str, log: str, excerpt: str = "") -> None:
        self.log = log
        self.program = name
        self.arch = arch
        text = f"NVRTC failed to compile {name!r} for {arch}:\n{log.rstrip()}"
        if excerpt:
            text += f"\n--- source ---\n{excerpt.rstrip()}"
        self.excerpt = excerpt
        super().__init__(text)

    def __reduce__(self) -> tuple:
        # rebuilt from its own arguments: a compile error raised in a worker process (the sweep's
        # parallel check) must cross the process boundary as itself, not as a broken pool
        return (type(self), (self.program, self.arch, self.log, self.excerpt))


class ManifestError(ComposerError, ValueError):
    """A kernel manifest is malformed, or a cubin it describes is missing or stale."""


class LaunchError(RunFailure, ValueError):
    """Kernel arguments or launch geometry do not match the kernel's declared parameters."""


def _cu_error_text(code: Any) -> tuple[str, str]:
    drv = _bindings.driver
    name = getattr(code, "name", str(code))
    message = "(no description: driver unavailable)"
    with contextlib.suppress(Exception):  # driver library absent: the enum name is still informative
        err, raw_name = drv.cuGetErrorName(code)
        if int(err) == 0 and raw_name:
            name = raw_name.decode()
        err, raw_msg = drv.cuGetErrorString(code)
        if int(err) == 0 and raw_msg:
            message = raw_msg.decode()
    return name, message


def _nvrtc_error_text(code: Any) -> tuple[str, str]:
    name = getattr(code, "name", str(code))
    with contextlib.suppress(Exception):
        err, raw = _bindings.nvrtc.nvrtcGetErrorString(code)
        if int(err) == 0 and raw:
            return name, raw.decode()
    return name, name


def check(result: Any, api: str = "") -> Any:
    """Unwrap a cuda-python result tuple ``(status, *values)``.

    Returns None, the single value, or a tuple of values; raises CudaError on a non-success
    CUresult or nvrtcResult. ``api`` names the call in the message.
    """
    if not isinstance(result, tuple):
        result = (result,)
    if not result:
        raise TypeError("check() needs a (status, *values) tuple")
    status, values = result[0], result[1:]
    if int(status) != 0:
        drv, nv = _bindings.driver, _bindings.nvrtc
        if nv is not None and isinstance(status, nv.nvrtcResult):
            name, message = _nvrtc_error_text(status)
        elif drv is not None and isinstance(status, drv.CUresult):
            name, message = _cu_error_text(status)
        else:
            name, message = getattr(status, "name", repr(status)), "unknown status type"
        raise CudaError(status, name, message, api)
    if not values:
        return None
    return values[0] if len(values) == 1 else values
