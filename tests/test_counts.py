"""Work/traffic counts against the spec formulas, rooflines, and memory fits against the paper."""

from __future__ import annotations

import pytest

from composer import counts
from composer.arch.machines import get_machine


def test_flop_and_bytes_formulas():
    # p = 7 on 32^3: Nq = 8, Ne = 32768
    assert counts.flop(7, 32) == 3 * 2 * 8**4 * 32**3 == 805_306_368
    assert (
        counts.unique_bytes(7, (32, 32, 32))
        == 8 * 32**3 * (8 * 8**3 + 4 * 6 * 8**2)
        == 1_476_395_008
    )
    assert counts.index_map_bytes(7, 32) == 2 * 8 * 6 * 8**2 * 32**3
    # single element at p = 1023: Nq = 1024
    assert counts.flop(1023, 1) == 6 * 1024**4
    assert counts.unique_bytes(1023, [1, 1, 1]) == 8 * (8 * 1024**3 + 24 * 1024**2)
    # a non-cubic grid
    assert counts.num_elements((2, 3, 4)) == 24
    assert counts.flop(3, (2, 3, 4)) == 6 * 4**4 * 24
    assert counts.num_points(3, (2, 3, 4)) == 4**3 * 24


@pytest.mark.parametrize("bad", [0, (1, 2), (1, 0, 1), (1.5, 1, 1), True])
def test_bad_grid(bad):
    with pytest.raises(ValueError):
        counts.flop(7, bad)


def test_bad_order():
    with pytest.raises(ValueError):
        counts.flop(0, 1)


def test_roofline_h200():
    h200 = get_machine("h200")
    low = counts.roofline(7, 32, h200)
    assert low.t_compute == pytest.approx(805_306_368 / 66.908e12, rel=1e-4)
    assert low.t_memory == pytest.approx(1_476_395_008 / 4.24e12)
    assert low.bound == "memory" and low.roof == low.t_memory
    high = counts.roofline(1023, 1, h200)
    assert high.bound == "compute" and high.roof == high.t_compute
    assert high.intensity > high.machine_balance > low.intensity


def test_memory_items_and_path_differences():
    vol = counts.volume_array_bytes(63, 4)
    face = counts.face_array_bytes(63, 4)
    gemm = counts.device_memory_estimate(63, 4, "GEMM")
    einsum = counts.device_memory_estimate(63, 4, "EINSUM")
    from composer.fused.config import fused_config

    fused_low = counts.device_memory_estimate(31, 8, "FUSED_TC")
    fused_high = counts.device_memory_estimate(63, 4, "FUSED_TC")
    maps32 = 2 * counts.face_array_bytes(63, 4, counts.INT32)
    assert einsum.total_bytes - gemm.total_bytes == 2 * vol
    # the face array exactly where the schedule asks for one (p = 63 measured faster inline)
    array = fused_config("FUSED_TC", 63).flux == "array"
    assert ("face flux" in {i.name for i in fused_high.items}) == array
    assert "face flux" not in {i.name for i in fused_low.items}
    assert "face flux" in {i.name for i in counts.device_memory_estimate(255, 1, "FUSED_TC").items}
    assert gemm.total_bytes - fused_high.total_bytes == 6 * vol + (0 if array else face) - maps32
    base = (7 + 1 + 4) * vol + 4 * face + counts.index_map_bytes(63, 4) + 8 * 64**2 + maps32
    assert fused_high.total_bytes == base + (face if array else 0)
    assert all(item.note for item in gemm.items)
    with pytest.raises(ValueError, match="GEMM"):
        counts.device_memory_estimate(7, 1, "CUBLAS")


def test_fits_h200():
    h200 = get_machine("h200")
    assert not counts.fits(1023, 1, "GEMM", h200)
    assert counts.fits(767, 1, "GEMM", h200)
    from composer.paths.registry import path_names

    for path in path_names():
        assert counts.fits(255, 1, path, h200)


def test_fits_reproduce_paper_coverage():
    """Section 3.1: p = 1023 fits only GB200; A100 stops at p = 575 (GEMM runs everywhere)."""
    machines = {name: get_machine(name) for name in ("gb200", "h100", "a100")}
    assert [n for n, m in machines.items() if counts.fits(1023, 1, "GEMM", m)] == ["gb200"]
    assert counts.fits(767, 1, "GEMM", machines["h100"])
    assert counts.fits(575, 1, "GEMM", machines["a100"])
    assert not counts.fits(767, 1, "GEMM", machines["a100"])


def test_reserve_fraction():
    h200 = get_machine("h200")
    assert counts.memory_limit_bytes(h200, 0.0) == h200.memory_bytes
    with pytest.raises(ValueError):
        counts.memory_limit_bytes(h200, 1.0)


def test_memory_estimate_follows_the_path_options():
    """The estimate (and so the fit check before allocating) is of the path as its options build it."""
    import dataclasses

    from composer.errors import ComposerError
    from composer.fused.config import fused_config

    vol = counts.volume_array_bytes(1023, 1)
    plain = counts.device_memory_estimate(1023, 1, "GEMM")
    parity = counts.device_memory_estimate(1023, 1, "GEMM", {"parity": "on"})
    assert parity.total_bytes - plain.total_bytes == 2 * 8 * 512 * 512  # A and B, h x h
    assert counts.device_memory_estimate(1023, 1, "GEMM", {"parity": "off"}).total_bytes == plain.total_bytes
    # GEMM_FUSED: the fold off keeps both non-carrier results, the flux formed in the mainloop drops three fluxes
    fused = counts.device_memory_estimate(1023, 1, "GEMM_FUSED", {"fold": "on", "flux": "array"})
    assert counts.device_memory_estimate(1023, 1, "GEMM_FUSED", {"fold": "off"}).total_bytes - fused.total_bytes == vol
    mainloop = counts.device_memory_estimate(1023, 1, "GEMM_FUSED", {"fold": "on", "flux": "mainloop"})
    assert fused.total_bytes - mainloop.total_bytes == 3 * vol
    h200 = get_machine("h200")
    assert not counts.fits(1023, 1, "GEMM", h200, options={"parity": "on"})
    assert counts.fits(1023, 1, "GEMM_FUSED", h200, options={"flux": "mainloop"})
    # a fused table given as the option: its D operand, not the schedule's
    table = fused_config("FUSED_TC16", 255)
    rows = dataclasses.replace(table, d_layout="rows", parity=False)
    names = {i.name for i in counts.device_memory_estimate(255, 1, "FUSED_TC16", {"config": rows}).items}
    assert not any(name.startswith("D operand") for name in names)
    panels = dataclasses.replace(table, d_layout="panels", parity=False)
    items = {i.name: i for i in counts.device_memory_estimate(255, 1, "FUSED_TC16", {"config": panels}).items}
    assert items["D operand (d_panels)"].bytes == 8 * 256 * 256
    with pytest.raises(ComposerError, match="has no option 'carrier'"):
        counts.device_memory_estimate(511, 1, "GEMM", {"carrier": "z"})
