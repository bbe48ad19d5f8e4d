"""Non-blocking CUDA streams and timing events."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

from .device import Device, ensure_context
from .errors import check

if TYPE_CHECKING:
    from typing_extensions import Self


class Stream:
    """A stream created with CU_STREAM_NON_BLOCKING: it never serializes with the legacy stream 0."""

    def __init__(self, device: Device | None = None, priority: int = 0) -> None:
        self.handle: Any = None
        self.device = ensure_context(device)
        self._drv = self.device._drv
        flags = self._drv.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.handle = check(self._drv.cuStreamCreateWithPriority(flags, priority), "cuStreamCreateWithPriority")

    def synchronize(self) -> None:
        """Block the host until all work queued on this stream has finished."""
        check(self._drv.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def wait(self, event: Event) -> None:
        """Make later work on this stream wait for ``event`` (no host blocking)."""
        check(self._drv.cuStreamWaitEvent(self.handle, event.handle, 0), "cuStreamWaitEvent")

    def query(self) -> bool:
        """True when all queued work has completed."""
        return _ready(self._drv, self._drv.cuStreamQuery(self.handle), "cuStreamQuery")

    def close(self) -> None:
        """Destroy the stream (idempotent)."""
        h, self.handle = self.handle, None
        if h is not None:
            check(self._drv.cuStreamDestroy(h), "cuStreamDestroy")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "handle", None) is not None and not sys.is_finalizing():
            with contextlib.suppress(Exception):  # a finalizer must never raise
                self.close()


def highest_priority(device: Device | None = None) -> int:
    """The highest stream priority the current context offers (the most negative number;
    cuCtxGetStreamPriorityRange: 0 is the default and the lowest)."""
    dev = ensure_context(device)
    _least, greatest = check(dev._drv.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
    return int(greatest)


def _ready(drv: Any, result: tuple, api: str) -> bool:
    (status,) = result
    if status == drv.CUresult.CUDA_ERROR_NOT_READY:
        return False
    check((status,), api)
    return True


class Event:
    """A timing-enabled event: ``start.elapsed_ms(end)`` is the GPU time between two records.

    ``timing=False`` makes a synchronization-only event (CU_EVENT_DISABLE_TIMING): what a
    cross-stream record/wait needs, and cheaper to record and wait on, since the device writes
    no timestamp; ``elapsed_ms`` on it is an error.
    """

    def __init__(self, device: Device | None = None, timing: bool = True) -> None:
        self.handle: Any = None
        self.device = ensure_context(device)
        self._drv = self.device._drv
        kind = self._drv.CUevent_flags
        flags = kind.CU_EVENT_DEFAULT if timing else kind.CU_EVENT_DISABLE_TIMING
        self.handle = check(self._drv.cuEventCreate(flags), "cuEventCreate")

    def record(self, stream: Stream | None = None) -> Event:
        """Record on ``stream`` (the legacy stream 0 if None); returns self for chaining."""
        h = 0 if stream is None else stream.handle
        check(self._drv.cuEventRecord(self.handle, h), "cuEventRecord")
        return self

    def synchronize(self) -> None:
        """Block the host until the recorded work has completed."""
        check(self._drv.cuEventSynchronize(self.handle), "cuEventSynchronize")

    def query(self) -> bool:
        """True when the recorded work has completed."""
        return _ready(self._drv, self._drv.cuEventQuery(self.handle), "cuEventQuery")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both recorded and completed)."""
        return float(check(self._drv.cuEventElapsedTime(self.handle, end.handle), "cuEventElapsedTime"))

    def close(self) -> None:
        """Destroy the event (idempotent)."""
        h, self.handle = self.handle, None
        if h is not None:
            check(self._drv.cuEventDestroy(h), "cuEventDestroy")

    def __del__(self) -> None:
        if getattr(self, "handle", None) is not None and not sys.is_finalizing():
            with contextlib.suppress(Exception):  # a finalizer must never raise
                self.close()
