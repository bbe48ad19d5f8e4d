"""Green contexts on the GPU (the balance axis): a context of N SMs runs kernels on exactly N SMs
(read back with %smid), and a path validates inside one. The probe kernel's compile is checked
on the CPU too, so a broken probe shows before a GPU run."""

from __future__ import annotations

import pytest

import composer
from composer import dg
from composer.runtime import compile_cuda

BALANCE_POINTS = (98, 96, 66, 52, 34, 2)


def test_smid_probe_compiles_without_a_gpu(tmp_path):
    from composer.runtime import smid

    built = compile_cuda(smid._SOURCE, "smid_probe.cu", arch="sm_90", cache_dir=tmp_path, entry_points=["smid_probe"])
    assert built.symbol("smid_probe") == "smid_probe" and built.cubin[:4] == b"\x7fELF"


@pytest.fixture(scope="module")
def full_sms():
    from composer.runtime import Device

    device = Device()
    try:
        return device.sm_count
    finally:
        device.close()


@pytest.mark.gpu
def test_whole_device_runs_on_every_sm(full_sms):
    from composer.runtime import Device, Stream
    from composer.runtime.smid import active_sm_count

    device = Device()
    try:
        assert active_sm_count(Stream(device), device) == full_sms
    finally:
        device.close()


@pytest.mark.gpu
@pytest.mark.parametrize("sms", BALANCE_POINTS)
def test_green_context_runs_on_exactly_n_sms(sms, full_sms):
    from composer.runtime import Stream
    from composer.runtime.green import RestrictedDevice
    from composer.runtime.smid import active_sm_count, active_sm_ids

    device = RestrictedDevice(sms)
    try:
        assert device.active_sms == sms and device.sm_count == full_sms  # launch shapes unchanged
        stream = Stream(device)  # an ordinary stream created while the green context is current
        ids = active_sm_ids(stream, device)
        assert len(ids) == sms, f"{sms}-SM green context ran on {len(ids)} SMs: {ids}"
        raw = device.green.create_stream()  # cuGreenCtxStreamCreate
        try:
            assert set(active_sm_ids(raw, device)) == set(ids)
        finally:
            device._drv.cuStreamDestroy(raw)
        stream.close()
        assert active_sm_count(None, device) == sms  # the green context's default stream
    finally:
        device.close()


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["FUSED_TC", "GEMM"])
def test_path_validates_inside_a_green_context(path):
    from composer.runtime.green import RestrictedDevice
    from composer.validation import relative_max_difference

    order, grid = 7, (2, 3, 2)
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    device = RestrictedDevice(34)
    try:
        got = composer.tendency(fields, order, grid, path=path, device=device)
    finally:
        device.close()
    assert relative_max_difference(got, ref) <= 1e-12


@pytest.mark.gpu
def test_copy_kernel_bandwidth_is_limited_by_a_small_partition():
    """The machine table's per-SM DRAM ceiling comes from this measurement (session 8: 1.55 TB/s on
    16 SMs against 3.84 on 132): the copy kernel runs on the partition only, and a small one cannot
    draw the chip's bandwidth."""
    from composer.bench.bandwidth import kernel_copy_bandwidth
    from composer.runtime import Device
    from composer.runtime.green import RestrictedDevice

    whole = Device()
    try:
        full = kernel_copy_bandwidth(whole, nbytes=2**30, repeats=5)
    finally:
        whole.close()
    small = RestrictedDevice(16)
    try:
        part = kernel_copy_bandwidth(small, nbytes=2**30, repeats=5)
    finally:
        small.close()
    assert part["active_sms"] == 16
    assert full["median_Bps"] > 2.5e12
    assert part["median_Bps"] < 0.6 * full["median_Bps"]


@pytest.mark.gpu
def test_an_l2_resident_copy_outruns_hbm_once_its_launch_is_hidden():
    """Session 9's single-pass copy of 2 x 8 MiB measured 0.65 TB/s at every SM count (launch-bound);
    with its ping-pong passes the same buffers stay in the 60 MB L2 and must beat the HBM copy."""
    from composer.bench.bandwidth import kernel_copy_bandwidth
    from composer.runtime import Device

    dev = Device()
    try:
        hbm = kernel_copy_bandwidth(dev, nbytes=2**31, repeats=3)  # one pass: 4 GiB per launch
        l2 = kernel_copy_bandwidth(dev, nbytes=8 * 2**20, repeats=5)
    finally:
        dev.close()
    assert hbm["passes"] == 1 and l2["passes"] > 100
    assert l2["median_Bps"] > 1.2 * hbm["median_Bps"]
