"""CPU tests of the parity decomposition (composer.parity): the premise (D centro-antisymmetric at
every order), the split/contract/merge algebra against the reference's contractions, the parity
GEMMs' column-major calls emulated against them, the whole tendency through the split arrays
against ``reference_tendency`` on point-varying non-cubic grids, the kernels' compilation, and the
GEMM path's option contract."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError
from composer.gemm.roles import ROLES, emulate_into, gemm_spec
from composer.kernels import support
from composer.parity import reference as par
from composer.parity.gemm import parity_specs
from composer.validation import relative_max_difference
from tests.test_support_kernels_cpu import _cuobjdump

AXES = {"x": 3, "y": 2, "z": 1}


def _contract(f: np.ndarray, d: np.ndarray, axis: int) -> np.ndarray:
    """``sum_m D[i, m] f[.., m, ..]`` along ``axis`` the plain way."""
    return np.moveaxis(np.moveaxis(f, axis, -1) @ d.T, -1, axis)


@pytest.mark.parametrize("order", [1, 3, 7, 15, 31, 63, 127, 255, 511, 1023])
def test_diff_matrix_is_centro_antisymmetric(order):
    """The premise: D[p-i, p-m] = -D[i, m] to round-off (the split uses only D's first h rows)."""
    d = dg.diff_matrix(order)
    assert np.abs(d + d[::-1, ::-1]).max() <= 1e-15 * np.abs(d).max()


def test_even_orders_are_refused_clearly():
    with pytest.raises(ComposerError, match="odd order"):
        par.check_order(4)
    with pytest.raises(ComposerError, match="odd order"):
        parity_specs("x", 5, 1)
    with pytest.raises(ValueError, match="even nq"):
        support.source("volume_flux_parity", 7)


@pytest.mark.parametrize("order", [1, 3, 7, 15])
def test_split_contract_merge_equals_the_contraction(order):
    rng = np.random.default_rng(order)
    nq = order + 1
    f = rng.standard_normal((3, nq, nq, nq))
    d = dg.diff_matrix(order)
    for axis in (1, 2, 3):
        ref = _contract(f, d, axis)
        assert relative_max_difference(par.contract(f, d, axis), ref) <= 1e-14


def test_split_halves_are_the_even_and_odd_parts():
    f = np.arange(2 * 4 * 4 * 4, dtype=float).reshape(2, 4, 4, 4) ** 1.5
    g = par.split(f, 3)
    assert np.array_equal(g[..., 1], f[..., 1] + f[..., 2])
    assert np.array_equal(g[..., 3], f[..., 1] - f[..., 2])
    g = par.split(f, 1)
    assert np.array_equal(g[:, 0], f[:, 0] + f[:, 3])
    assert np.array_equal(g[:, 2], f[:, 0] - f[:, 3])


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("order", "ne"), [(1, 3), (7, 2), (15, 3)])
def test_parity_gemms_emulated(role, order, ne):
    """The BLAS calls, executed as column-major BLAS would, write exactly the split derivative
    (every output entry once: the buffer starts as NaN) and use a quarter of the full GEMM's FLOP each."""
    rng = np.random.default_rng(7)
    nq = order + 1
    d = dg.diff_matrix(order)
    f = rng.standard_normal((ne, nq, nq, nq))
    g = par.split(f, AXES[role])
    out = np.full(f.size, np.nan)
    specs = parity_specs(role, nq, ne)
    for spec in specs:
        emulate_into(spec, {"parity": par.parity_matrices(d), "flux": g}, out)
    assert not np.isnan(out).any()
    expected = par.split_derivatives({role: g}, d)[role]
    assert relative_max_difference(out.reshape(f.shape), expected) <= 1e-15
    assert relative_max_difference(par.merge(out.reshape(f.shape), AXES[role]), _contract(f, d, AXES[role])) <= 1e-14
    assert sum(s.flop for s in specs) * 2 == gemm_spec(role, nq, ne).flop


@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (3, (2, 3, 1)), (7, (1, 2, 3)), (15, (2, 1, 2))])
def test_tendency_through_split_arrays(order, grid):
    """What the parity path's kernels compute (split fluxes, the GEMMs' halves, the merging lift)
    against the reference on the point-varying input."""
    fields = dg.make_fields(order, grid, varying=True)
    mesh = dg.Mesh(order, grid)
    fluxes = par.split_fluxes(fields)
    for role, vel in (("x", "u"), ("y", "v"), ("z", "w")):
        assert np.array_equal(fluxes[role], par.split(fields["q"] * fields[vel], AXES[role]))
    derivatives = par.split_derivatives(fluxes, dg.diff_matrix(order))
    got = par.lift_from_split(derivatives, fields, dg.numerical_flux(fields, mesh), mesh)
    assert relative_max_difference(got, dg.reference_tendency(fields, order, grid)) <= 1e-13


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
@pytest.mark.parametrize("nq", [2, 8, 64, 768])
@pytest.mark.parametrize("family", support.PARITY_FAMILIES)
def test_parity_kernels_compile(family, nq, arch, tmp_path):
    built = support.compile_support(family, nq, arch, cache_dir=tmp_path)
    name = f"{family}_nq{nq}"
    assert built.symbol(name) == name
    assert built.log.strip() == ""


@pytest.mark.parametrize("family", support.PARITY_FAMILIES)
def test_parity_kernels_use_no_local_memory(family, tmp_path):
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not available")
    for nq in (8, 512):
        path = tmp_path / f"{family}_{nq}.cubin"
        path.write_bytes(support.compile_support(family, nq, "sm_90", cache_dir=tmp_path).cubin)
        usage = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
        assert "STACK:0" in usage and "LOCAL:0" in usage, usage


def test_launch_shape_counts_octets():
    assert support.launch_shape("volume_flux_parity", 8, 3, 64, 132) == (3, 64)  # 3 x 4^3 octets
    assert support.launch_shape("separable_lift_parity", 512, 1, 256, 132) == (132 * 16, 256)


def test_gemm_path_option_contract():
    from composer.arch.machines import get_machine
    from composer.paths.registry import path_class

    gemm = path_class("GEMM")
    assert gemm.parse_options({"parity": "on"}) == {"parity": True}
    with pytest.raises(ComposerError, match="parity"):
        gemm.parse_options({"parity": "maybe"})
    with pytest.raises(ComposerError, match="odd order"):
        gemm.parity(8, {"parity": True})
    with pytest.raises(ComposerError, match="do not combine"):
        gemm.parity(511, {"parity": True, "overlap_sms": 44})
    machine = get_machine("h200")
    plain = {n.name: n for n in gemm.program(511, 1, machine)}
    split = {n.name: n for n in gemm.program(511, 1, machine, parity=True)}
    assert list(plain) == list(split)
    for role in ROLES:
        assert split[f"gemm_{role}"].cost < plain[f"gemm_{role}"].cost
    assert gemm.plan_settings(511, parity=True).endswith(" parity") and "parity" not in gemm.plan_settings(511)
    # the plan's launch shapes are the parity kernels' (one thread per octet of mirrored nodes)
    for node, family in (("volume_flux", "volume_flux_parity"), ("lift", "separable_lift_parity")):
        assert (split[node].grid, split[node].block) == support.launch_shape(family, 512, 1, 256, machine.sm_count)
        assert (plain[node].grid, plain[node].block) == support.launch_shape(
            family.removesuffix("_parity"), 512, 1, 256, machine.sm_count)
    for other in ("GEMM_CUTE", "GEMM_FUSED"):
        with pytest.raises(ComposerError, match="no option 'parity'"):
            path_class(other).parse_options({"parity": True})


def test_info_reports_the_parity_roof():
    from composer.arch.machines import get_machine
    from composer.cli.info import build_report

    roof = build_report(511, (1, 1, 1), get_machine("h200"), 0.05)["roofline"]
    assert roof["t_compute_parity_s"] == pytest.approx(roof["t_compute_s"] / 2)
    assert roof["roof_parity_s"] == pytest.approx(max(roof["t_compute_s"] / 2, roof["t_memory_s"]))
    assert build_report(6, (1, 1, 1), get_machine("h200"), 0.05)["roofline"]["roof_parity_s"] is None
