"""CPU tests of the parity decomposition (composer.parity): the premise (D centro-antisymmetric at
every order), the split/contract/merge algebra against the reference's contractions, the parity
GEMMs' column-major calls emulated against them, the whole tendency through the split arrays
against ``reference_tendency`` on point-varying non-cubic grids, the two kernels' index math, and the
GEMM path's option contract (their compilation: tests/test_support_kernels_cpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from composer import dg
from composer.errors import ComposerError
from composer.gemm.roles import ROLES, emulate_into, gemm_spec
from composer.kernels import support
from composer.parity import reference as par
from composer.parity.gemm import parity_specs
from composer.validation import relative_max_difference

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
    # GEMM_CUTE takes it too (its CuTe kernels run the half-size calls), and GEMM_FUSED for its non-carriers
    # (tests/test_parity_emulated.py)
    assert path_class("GEMM_CUTE").parse_options({"parity": "on"}) == {"parity": True}
    cute = {n.name: n for n in path_class("GEMM_CUTE").program(511, 1, machine, parity=True)}
    assert all(cute[f"gemm_{role}"].cost == split[f"gemm_{role}"].cost for role in ROLES)
    assert path_class("GEMM_FUSED").parse_options({"parity": "on"}) == {"parity": True}


def test_info_reports_the_parity_roof():
    from composer.arch.machines import get_machine
    from composer.cli.info import build_report

    roof = build_report(511, (1, 1, 1), get_machine("h200"), 0.05)["roofline"]
    assert roof["t_compute_parity_s"] == pytest.approx(roof["t_compute_s"] / 2)
    assert roof["roof_parity_s"] == pytest.approx(max(roof["t_compute_s"] / 2, roof["t_memory_s"]))
    assert build_report(6, (1, 1, 1), get_machine("h200"), 0.05)["roofline"]["roof_parity_s"] is None


def _octets(ne: int, nq: int):
    """The threads of the parity kernels' grid-stride loop, t = e * H^3 + (kk * H + jj) * H + ii, with the
    template's index expressions (``_parity.cuh.j2``): element base and the octet's low indices."""
    h = nq // 2
    t = np.arange(ne * h**3)
    e = t // h**3
    r = t - e * h**3
    return e * nq**3, r // (h * h), (r // h) % h, r % h


def _octet_node(base, kk, jj, ii, sk, sj, si, nq):
    """``octet_node`` of the template: index of octet node (sk, sj, si), s = 1 the mirrored index."""
    p = nq - 1
    k, j, i = (p - kk if sk else kk), (p - jj if sj else jj), (p - ii if si else ii)
    return base + k * nq * nq + j * nq + i


@pytest.mark.parametrize(("order", "ne"), [(1, 3), (7, 2), (15, 1)])
def test_volume_flux_parity_index_math(order, ne):
    """The parity volume flux kernel's reads and writes, executed with NumPy on the template's index
    expressions: every output written exactly once, equal to ``split_fluxes`` (the GPU test runs the CUDA)."""
    rng = np.random.default_rng(order)
    nq, h = order + 1, (order + 1) // 2
    fields = {k: rng.standard_normal((ne, nq, nq, nq)) for k in "quvw"}
    flat = {k: v.reshape(-1) for k, v in fields.items()}
    out = {name: np.full(ne * nq**3, np.nan) for name in ("qu", "qv", "qw")}
    writes = {name: np.zeros(ne * nq**3, int) for name in out}
    base, kk, jj, ii = _octets(ne, nq)
    f = {}
    for s in np.ndindex(2, 2, 2):
        x = _octet_node(base, kk, jj, ii, *s, nq)
        f[s] = {vel: flat["q"][x] * flat[vel][x] for vel in "uvw"}

    def store(name, index, value):
        out[name][index] = value
        np.add.at(writes[name], index, 1)

    for s1, s2 in np.ndindex(2, 2):
        row = _octet_node(base, kk, jj, 0 * ii, s1, s2, 0, nq)
        store("qu", row + ii, f[s1, s2, 0]["u"] + f[s1, s2, 1]["u"])
        store("qu", row + h + ii, f[s1, s2, 0]["u"] - f[s1, s2, 1]["u"])
        col = _octet_node(base, kk, 0 * jj, ii, s1, 0, s2, nq)
        store("qv", col + jj * nq, f[s1, 0, s2]["v"] + f[s1, 1, s2]["v"])
        store("qv", col + (h + jj) * nq, f[s1, 0, s2]["v"] - f[s1, 1, s2]["v"])
        pillar = _octet_node(base, 0 * kk, jj, ii, 0, s1, s2, nq)
        store("qw", pillar + kk * nq * nq, f[0, s1, s2]["w"] + f[1, s1, s2]["w"])
        store("qw", pillar + (h + kk) * nq * nq, f[0, s1, s2]["w"] - f[1, s1, s2]["w"])
    expected = par.split_fluxes(fields)
    for name, role in (("qu", "x"), ("qv", "y"), ("qw", "z")):
        assert (writes[name] == 1).all()
        assert np.array_equal(out[name].reshape(fields["q"].shape), expected[role])


@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (7, (1, 2, 2))])
def test_separable_lift_parity_index_math(order, grid):
    """The parity lift kernel's reads, merges, face terms and writes on the template's index expressions:
    each node written once, equal to ``lift_from_split``."""
    rng = np.random.default_rng(order)
    mesh = dg.Mesh(order, grid)
    nq, h, p, ne = mesh.nq, mesh.nq // 2, mesh.nq - 1, mesh.num_elements
    fields = dg.make_fields(order, grid, varying=True)
    split = {r: rng.standard_normal(mesh.volume_shape) for r in "xyz"}
    fstar = rng.standard_normal(mesh.face_shape)
    d = {r: split[r].reshape(-1) for r in "xyz"}
    metric = {r: fields[f"E{r}"].reshape(-1) for r in "xyz"}
    fe = fstar.reshape(ne, -1)
    out, writes = np.full(mesh.num_points, np.nan), np.zeros(mesh.num_points, int)
    base, kk, jj, ii = _octets(ne, nq)
    e = base // nq**3
    g = {r: {} for r in "xyz"}
    for s1, s2 in np.ndindex(2, 2):
        row = _octet_node(base, kk, jj, 0 * ii, s1, s2, 0, nq)
        a, b = d["x"][row + ii], d["x"][row + h + ii]
        g["x"][s1, s2, 0], g["x"][s1, s2, 1] = a + b, b - a
        col = _octet_node(base, kk, 0 * jj, ii, s1, 0, s2, nq)
        a, b = d["y"][col + jj * nq], d["y"][col + (h + jj) * nq]
        g["y"][s1, 0, s2], g["y"][s1, 1, s2] = a + b, b - a
        pillar = _octet_node(base, 0 * kk, jj, ii, 0, s1, s2, nq)
        a, b = d["z"][pillar + kk * nq * nq], d["z"][pillar + (h + kk) * nq * nq]
        g["z"][0, s1, s2], g["z"][1, s1, s2] = a + b, b - a
    for s in np.ndindex(2, 2, 2):
        k, j, i = (p - kk if s[0] else kk), (p - jj if s[1] else jj), (p - ii if s[2] else ii)
        x = _octet_node(base, kk, jj, ii, *s, nq)
        acc = metric["x"][x] * g["x"][s] + metric["y"][x] * g["y"][s] + metric["z"][x] * g["z"][s]
        for face, on, a_idx in ((0, i == 0, k * nq + j), (1, i == p, k * nq + j), (2, j == 0, k * nq + i),
                                (3, j == p, k * nq + i), (4, k == 0, j * nq + i), (5, k == p, j * nq + i)):
            acc = acc + np.where(on, fe[e, face * nq * nq + a_idx], 0.0)
        out[x] = -acc
        np.add.at(writes, x, 1)
    assert (writes == 1).all()
    expected = par.lift_from_split(split, fields, fstar, mesh)
    assert relative_max_difference(out.reshape(mesh.volume_shape), expected) <= 1e-15


@pytest.mark.parametrize("order", [1, 7, 63])
def test_split_basis_contracts_a_split_line_at_the_nodes(order):
    """M split(f) = D f along every axis: what GEMM_FUSED's carrier reads in place of D when its flux comes split."""
    from composer.parity.reference import ROLE_AXIS, split, split_basis

    d = dg.diff_matrix(order)
    f = np.random.default_rng(order).standard_normal((2, order + 1, order + 1, order + 1))
    for axis in ROLE_AXIS.values():
        whole = np.moveaxis(np.moveaxis(f, axis, -1) @ d.T, -1, axis)
        via = np.moveaxis(np.moveaxis(split(f, axis), axis, -1) @ split_basis(d).T, -1, axis)
        assert np.max(np.abs(via - whole)) <= 1e-13 * np.max(np.abs(whole))
