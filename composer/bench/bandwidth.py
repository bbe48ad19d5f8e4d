"""Measured HBM bandwidth: the byte roof of the roofline fractions comes from this, not a datasheet.

A device-to-device copy of two large buffers (several times the L2), timed with CUDA events
over repeated copies; bytes counted as read + written.
"""

from __future__ import annotations

import statistics

from composer.runtime import Device, DeviceBuffer, Event, Stream


def copy_bandwidth(device: Device, nbytes: int = 2 * 2**30, repeats: int = 20) -> dict[str, float]:
    """Median and best copy bandwidth in bytes/s over ``repeats`` timed copies."""
    stream = Stream(device)
    src, dst = DeviceBuffer(nbytes, device), DeviceBuffer(nbytes, device)
    start, stop = Event(device), Event(device)
    try:
        src.zero(stream)
        dst.copy_from(src, stream)  # warm-up
        rates = []
        for _ in range(repeats):
            start.record(stream)
            dst.copy_from(src, stream)
            stop.record(stream)
            stop.synchronize()
            rates.append(2 * nbytes / (start.elapsed_ms(stop) * 1e-3))
        return {"median_Bps": statistics.median(rates), "max_Bps": max(rates), "bytes": float(nbytes),
                "repeats": float(repeats)}
    finally:
        src.free()
        dst.free()
        stream.close()
