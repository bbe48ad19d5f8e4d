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


# --- a copy kernel on the SMs: the bandwidth an SM partition can draw --------------------------

#: Why a kernel and not cuMemcpyDtoD: inside a green context the question is what the partition's
#: SMs can pull from HBM (the balance axis restricts SMs, and a DRAM-bound kernel is limited by the
#: bytes its SMs keep in flight), so the copy has to run on those SMs. 16-byte loads, four in flight
#: per thread before the stores, a grid of several blocks per SM of the whole device (a green
#: context places them on its own SMs only).
#: ``passes`` > 1 (L2-resident buffers): the kernel copies back and forth between the two buffers
#: that many times, so that one launch moves enough bytes to hide its own launch and drain (session 9:
#: a single pass over 2 x 8 MiB took 26 µs at every SM count from 16 to 132, 0.65 TB/s: launch-bound).
#: Ping-pong without __restrict__, so the compiler cannot drop a pass as a repeated store.
_COPY_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(256) stream_copy(double2* a_buf, double2* b_buf, long long n,
                                                              int passes) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int pass = 0; pass < passes; ++pass) {
        const double2* src = (pass & 1) ? b_buf : a_buf;
        double2* dst = (pass & 1) ? a_buf : b_buf;
        long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
        for (; i + 3 * stride < n; i += 4 * stride) {
            double2 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
            dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
        }
        for (; i < n; i += stride) dst[i] = src[i];
    }
}
"""
#: Bytes a launch should move at least (read + written) when the buffers are small: about 0.3 ms at
#: an L2 bandwidth near 10 TB/s, against a few µs of launch and drain.
MIN_BYTES_PER_LAUNCH = 3 * 2**30


def copy_passes(nbytes: int) -> int:
    """Passes per launch so that one launch moves at least MIN_BYTES_PER_LAUNCH (1 for big buffers)."""
    return max(1, -(-MIN_BYTES_PER_LAUNCH // (2 * nbytes)))
COPY_THREADS = 256
COPY_BLOCKS_PER_SM = 8  # 2048 threads: a full SM


def kernel_copy_bandwidth(device: Device, nbytes: int = 2 * 2**30, repeats: int = 20) -> dict[str, float]:
    """Median and best bandwidth (bytes/s, read + written) of a copy kernel on ``device``'s SMs
    (a RestrictedDevice's partition), with the active SM count read back with %smid on the same
    stream."""
    from composer.runtime.module import Module
    from composer.runtime.nvrtc import compile_cuda
    from composer.runtime.params import params
    from composer.runtime.smid import active_sm_count

    compiled = compile_cuda(_COPY_SOURCE, "stream_copy.cu", arch=device.arch, entry_points=["stream_copy"])
    module = Module.from_cubin(compiled.cubin, device)
    stream = Stream(device)
    src = dst = None
    start, stop = Event(device), Event(device)
    try:
        src, dst = DeviceBuffer(nbytes, device), DeviceBuffer(nbytes, device)
        kernel = module.get_kernel(compiled.symbol("stream_copy"), params("a:ptr b:ptr n:i64 passes:i32"),
                                   COPY_THREADS)
        n = nbytes // 16
        passes = copy_passes(n * 16)
        grid = COPY_BLOCKS_PER_SM * device.sm_count
        src.zero(stream)
        kernel.launch(grid, args=(src, dst, n, passes), stream=stream)  # warm-up (and L2 fill)
        rates = []
        for _ in range(repeats):
            start.record(stream)
            kernel.launch(grid, args=(src, dst, n, passes), stream=stream)
            stop.record(stream)
            stop.synchronize()
            rates.append(2 * n * 16 * passes / (start.elapsed_ms(stop) * 1e-3))
        active = active_sm_count(stream.handle, device)
        return {"median_Bps": statistics.median(rates), "max_Bps": max(rates), "bytes": float(2 * n * 16),
                "passes": float(passes), "repeats": float(repeats), "active_sms": float(active)}
    finally:
        for buffer in (src, dst):
            if buffer is not None:
                buffer.free()
        stream.close()
        module.close()
