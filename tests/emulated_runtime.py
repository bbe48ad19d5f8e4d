"""Device memory and the CUDA runtime's objects faked on the CPU, for tests that run a path's real
launch code with every kernel emulated in NumPy (tests/test_gemm_fused_emulated.py,
tests/test_parity_emulated.py): buffers are NumPy arrays at fake addresses, streams and events do nothing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


class Memory:
    """Device memory as NumPy arrays at fake addresses far enough apart for any offset."""

    def __init__(self) -> None:
        self.arrays: dict[int, np.ndarray] = {}
        self.next = 1 << 36

    def new(self, values: np.ndarray) -> int:
        ptr, self.next = self.next, self.next + (1 << 36)
        self.arrays[ptr] = values
        return ptr

    def at(self, ptr: int, count: int) -> np.ndarray:
        """``count`` elements from address ``ptr`` (inside some array)."""
        base = max(p for p in self.arrays if p <= ptr)
        offset = (ptr - base) // self.arrays[base].itemsize
        return self.arrays[base][offset:offset + count]

    def tail(self, ptr: int) -> np.ndarray:
        """Everything from address ``ptr`` to the end of its array."""
        base = max(p for p in self.arrays if p <= ptr)
        return self.arrays[base][(ptr - base) // self.arrays[base].itemsize:]


def fake_runtime(memory: Memory) -> SimpleNamespace:
    """``Buffer`` (DeviceBuffer), ``Device``, ``Stream`` and ``Event`` backed by ``memory``."""

    class Buffer:
        def __init__(self, nbytes: int, device=None, values: np.ndarray | None = None) -> None:
            self.nbytes = int(nbytes)
            self.ptr = memory.new(np.full(nbytes // 8, np.nan) if values is None else
                                  np.ascontiguousarray(values).reshape(-1).copy())

        @classmethod
        def from_numpy(cls, values, stream=None, device=None):
            return cls(values.nbytes, values=values)

        def copy_from(self, values, stream=None) -> None:
            memory.arrays[self.ptr][:] = np.ascontiguousarray(values).reshape(-1)

        def to_numpy(self, shape, dtype, stream=None):
            return memory.arrays[self.ptr].reshape(shape).copy()

        def poison(self, stream) -> None:
            memory.arrays[self.ptr][:] = np.nan

        def zero(self, stream=None) -> None:
            memory.arrays[self.ptr][:] = 0.0

        def free(self) -> None:
            pass

    class Device:
        arch, sm_count = "sm_90", 132

    class Stream:
        handle = 0

        def __init__(self, device=None, priority: int = 0) -> None:
            self.priority = priority

        def wait(self, event) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def close(self) -> None:
            pass

    class Event(Stream):
        def __init__(self, device=None, timing: bool = True) -> None:
            pass

        def record(self, stream) -> None:
            pass

    return SimpleNamespace(Buffer=Buffer, Device=Device, Stream=Stream, Event=Event)


def fake_module(kernel_of):
    """A ``composer.runtime.module.Module`` stand-in for manifest entries: ``entry_kernel()`` returns
    ``kernel_of(entry)`` (the test's emulation of that CUBIN's kernel)."""

    class Module:
        def __init__(self, entry) -> None:
            self.entry = entry

        @classmethod
        def from_manifest_entry(cls, entry, device=None):
            return cls(entry)

        def entry_kernel(self):
            return kernel_of(self.entry)

        def close(self) -> None:
            pass

    return Module
