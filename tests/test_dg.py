"""The operator's numerics against independent methods (shared/spec/operator.md)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numpy.polynomial import legendre
from scipy.linalg import eigh_tridiagonal

from composer import dg
from composer.dg import Mesh
from composer.dg import double_double as dd
from tests.slow_loops import slow_tendency

EPS = np.finfo(float).eps


@pytest.mark.parametrize("order", [1, 2, 7, 63, 511, 1023])
def test_lgl_nodes_match_jacobi_matrix_eigenvalues(order: int) -> None:
    nodes, weights = dg.lgl(order)
    assert nodes[0] == -1.0 and nodes[-1] == 1.0
    assert np.all(np.diff(nodes) > 0)
    n = order - 1  # interior LGL nodes = Gauss-Jacobi(1, 1) nodes
    if n > 0:
        k = np.arange(1, n)
        golub_welsch = eigh_tridiagonal(np.zeros(n), np.sqrt(k * (k + 2) / ((2 * k + 1) * (2 * k + 3))), eigvals_only=True)
        assert np.max(np.abs(np.sort(golub_welsch) - nodes[1:-1])) < 16 * EPS
    np.testing.assert_allclose(nodes, -nodes[::-1], rtol=0, atol=0)
    assert abs(weights[0] - 2.0 / (order * (order + 1))) < 4 * EPS * weights[0]


@pytest.mark.parametrize("order", [1, 2, 7, 63, 511, 1023])
def test_lgl_quadrature_is_exact_to_degree_2p_minus_1(order: int) -> None:
    nodes, weights = dg.lgl(order)
    assert abs(weights.sum() - 2.0) < 16 * EPS
    for degree in sorted({0, 1, 2 * order - 2, 2 * order - 1}):
        coeffs = np.zeros(degree + 1)
        coeffs[-1] = 1.0  # Legendre P_degree: integral 2 if degree == 0 else 0
        exact = 2.0 if degree == 0 else 0.0
        assert abs(weights @ legendre.legval(nodes, coeffs) - exact) < 64 * EPS


def _mpmath_lgl_interior_left_half(order: int, start: np.ndarray) -> tuple[list, list]:
    """Interior LGL nodes of the left half and their weights at 40 digits, independently of the FP64 code.

    One Newton step from ``start`` (the FP64 nodes) on ``x P_n - P_{n-1}``, the recurrence run
    in mpmath: quadratic convergence takes a start within ~1e-16 to ~1e-32. The weight is
    evaluated at the refined node through ``P_n(x*) = P_n(x) + P_n'(x) (x* - x)``, whose
    remainder ``P_n'' (x* - x)^2 / 2`` is below 1e-20 relative at n = 1023 (``P_n'' / P_n`` is
    at most ~n^4 next to the end points). One recurrence pass per order keeps p = 1023 at ~2 s.
    """
    n = order
    with mpmath.workdps(40):
        x = np.array([mpmath.mpf(float(v)) for v in start[1 : (n + 2) // 2]], dtype=object)
        p_prev, p = np.full(x.shape, mpmath.mpf(1), dtype=object), x.copy()
        for k in range(1, n):
            p_prev, p = p, ((2 * k + 1) * x * p - k * p_prev) / (k + 1)
        step = (x * p - p_prev) / ((n + 1) * p)
        derivative = n * (p_prev - x * p) / (1 - x * x)
        p_at_node = p - derivative * step
        return list(x - step), list(2 / (n * (n + 1) * p_at_node**2))


@pytest.mark.parametrize("order", [63, 255, 511, 767, 1023])
def test_lgl_nodes_and_weights_match_mpmath_to_round_off(order: int) -> None:
    nodes, weights = dg.lgl(order)
    ref_nodes, ref_weights = _mpmath_lgl_interior_left_half(order, nodes)
    half = slice(1, 1 + len(ref_nodes))
    node_error = np.array([float(abs(r - mpmath.mpf(float(v)))) for r, v in zip(ref_nodes, nodes[half])])
    weight_error = np.array([float(abs((r - mpmath.mpf(float(v))) / r)) for r, v in zip(ref_weights, weights[half])])
    # Correctly rounded nodes are within half an ulp; one ulp leaves room, "a few ulp" would hide a regression.
    assert np.all(node_error <= np.spacing(np.abs(nodes[half]))), np.max(node_error / np.spacing(np.abs(nodes[half])))
    assert np.max(weight_error) <= 4 * EPS, np.max(weight_error)  # measured <= 1.1e-16 at every order here
    assert weights[0] == weights[-1] and abs(weights[0] - 2.0 / (order * (order + 1))) <= EPS * weights[0]
    # The right half is the mirror image, bit for bit.
    assert np.array_equal(nodes, -nodes[::-1]) and np.array_equal(weights, weights[::-1])


def test_double_double_operations_are_exact_to_about_2_to_the_minus_104() -> None:
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(64) for _ in range(3))
    exact = [Fraction(float(u)) * Fraction(float(v)) - Fraction(float(w)) / Fraction(float(v)) for u, v, w in zip(a, b, c)]
    got = dd.sub(dd.mul_float(dd.from_float(a), b), dd.div(dd.from_float(c), dd.from_float(b)))
    for value, hi, lo in zip(exact, got.hi, got.lo):
        assert abs(Fraction(float(hi)) + Fraction(float(lo)) - value) <= Fraction(1, 2**100) * max(abs(value), 1)
    third = dd.from_fraction(Fraction(1, 3))
    assert abs(Fraction(float(third.hi)) + Fraction(float(third.lo)) - Fraction(1, 3)) < Fraction(1, 2**106)
    product = dd.mul(third, dd.from_float(np.array([3.0])))
    assert abs(Fraction(float(product.hi[0])) + Fraction(float(product.lo[0])) - 1) < Fraction(1, 2**104)


@pytest.mark.parametrize("order", [1, 2, 3, 7, 15, 63, 255, 1023])
def test_diff_matrix_differentiates_degree_p_exactly(order: int) -> None:
    nodes, _ = dg.lgl(order)
    d = dg.diff_matrix(order)
    assert d.shape == (order + 1, order + 1)
    assert np.max(np.abs(d.sum(axis=1))) < 4 * EPS * np.max(np.abs(d))
    for degree in sorted({0, 1, order // 2, order}):
        coeffs = np.zeros(degree + 1)
        coeffs[-1] = 1.0
        exact = legendre.legval(nodes, legendre.legder(coeffs)) if degree else np.zeros_like(nodes)
        scale = max(1.0, np.max(np.abs(exact)))
        assert np.max(np.abs(d @ legendre.legval(nodes, coeffs) - exact)) < 8 * EPS * order**2 * scale


def test_face_maps_pair_coincident_nodes() -> None:
    mesh = Mesh(3, (3, 2, 1))
    vmap_m, vmap_p = mesh.face_maps
    coords = [mesh.volume_coords(axis).reshape(-1) for axis in range(3)]
    for axis in range(3):
        gap = (coords[axis][vmap_m] - coords[axis][vmap_p]) % 1.0
        assert np.all(np.minimum(gap, 1.0 - gap) < 1e-14)
    # The exterior of the exterior is the interior node itself.
    assert np.array_equal(np.sort(vmap_m.reshape(-1)), np.sort(vmap_p.reshape(-1)))


@pytest.mark.parametrize("varying", [False, True])
def test_fields_layout_and_point_varying_formulas(varying: bool) -> None:
    order, grid = 3, (2, 3, 1)
    fields = dg.make_fields(order, grid, varying=varying)
    mesh = Mesh(order, grid)
    nq = order + 1
    assert set(fields) == set(dg.FIELD_KEYS)
    assert fields["q"].shape == (6, nq, nq, nq) and fields["F"].shape == (6, 6, nq, nq)
    x, y, z = (mesh.volume_coords(a) for a in range(3))
    # Spot-check element 4 = (ex 0, ey 2, ez 0), node (k, j, i) = (1, 2, 3).
    e, k, j, i = 4, 1, 2, 3
    nodes, weights = dg.lgl(order)
    assert x[e, k, j, i] == pytest.approx(0.0 * 0.5 + (nodes[i] + 1) * 0.25)
    assert y[e, k, j, i] == pytest.approx(2 / 3 + (nodes[j] + 1) / 6)
    assert z[e, k, j, i] == pytest.approx((nodes[k] + 1) / 2)
    tp = 2 * np.pi
    X, Y, Z = x[e, k, j, i], y[e, k, j, i], z[e, k, j, i]
    assert fields["q"][e, k, j, i] == pytest.approx(np.sin(tp * X) * np.sin(tp * Y) * np.sin(tp * Z), abs=1e-15)
    if varying:
        assert fields["u"][e, k, j, i] == pytest.approx(1 + 0.15 * np.sin(tp * X), abs=1e-15)
        assert fields["v"][e, k, j, i] == pytest.approx(1 + 0.11 * np.cos(tp * Y), abs=1e-15)
        assert fields["w"][e, k, j, i] == pytest.approx(1 + 0.07 * np.sin(tp * Z), abs=1e-15)
        assert fields["Ex"][e, k, j, i] == pytest.approx(2 / 0.5 * (1 + 0.02 * np.sin(tp * X)))
        assert fields["Ey"][e, k, j, i] == pytest.approx(2 / (1 / 3) * (1 + 0.03 * np.cos(tp * Y)))
        assert fields["Ez"][e, k, j, i] == pytest.approx(2 / 1 * (1 + 0.04 * np.sin(tp * Z)))
        f, b, a = 3, 1, 2
        s = f * nq * nq + b * nq + a
        assert fields["F"][e, f, b, a] == pytest.approx((2 / (1 / 3)) / weights[0] * (1 + 0.01 * np.sin(s)))
        assert fields["nx"][e, f, b, a] == pytest.approx(0.01 * np.sin(s + e), abs=1e-16)
        assert fields["ny"][e, f, b, a] == pytest.approx(1 + 0.01 * np.cos(s + e))
        assert fields["nz"][e, f, b, a] == pytest.approx(0.01 * np.sin(2 * s + e), abs=1e-16)
    else:
        assert np.all(fields["u"] == 1.0)
        assert np.all(fields["nx"][:, 0] == -1.0) and np.all(fields["nx"][:, 1] == 1.0)
        assert np.all(fields["nz"][:, 5] == 1.0) and np.all(fields["ny"][:, 5] == 0.0)
        assert np.all(fields["F"][:, 2] == (2 / (1 / 3)) / weights[0])


def test_free_stream_preservation() -> None:
    order, grid = 5, (2, 1, 3)
    fields = dg.make_fields(order, grid)
    fields["q"] = np.full_like(fields["q"], 2.5)
    scale = 2.5 * np.max(np.abs(dg.diff_matrix(order))) * np.max(fields["Ex"]) * (order + 1)
    assert np.max(np.abs(dg.reference_tendency(fields, order, grid))) < 8 * EPS * scale


def _random_fields(order: int, grid: tuple[int, int, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    fields = dg.make_fields(order, grid, varying=True)
    return {k: a + 0.1 * rng.standard_normal(a.shape) for k, a in fields.items()}


def _random_non_cubic_grid(seed: int) -> tuple[int, int, int]:
    rng = np.random.default_rng(seed)
    while True:
        grid = tuple(int(n) for n in rng.integers(1, 4, size=3))
        if len(set(grid)) > 1:
            return grid  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("order", "grid"),
    [(1, (1, 1, 1)), (3, (1, 1, 1))]  # one-element periodic wrap: every neighbour is itself
    + [(p, _random_non_cubic_grid(100 + p)) for p in (1, 2, 3, 5, 7)],
)
def test_reference_matches_slow_loops(order: int, grid: tuple[int, int, int]) -> None:
    rng = np.random.default_rng(order)
    mesh = Mesh(order, grid)
    for fields in (dg.make_fields(order, grid, varying=True), _random_fields(order, grid, rng)):
        volume_slow, lift_slow = slow_tendency(fields, order, grid, dg.diff_matrix(order))
        volume = dg.volume_term(fields, mesh)
        lift = np.zeros(mesh.volume_shape)
        dg.add_lift(lift, dg.numerical_flux(fields, mesh), mesh)
        assert np.max(np.abs(volume - volume_slow)) <= 1e-13 * np.max(np.abs(volume_slow))
        assert np.max(np.abs(lift - lift_slow)) <= 1e-13 * np.max(np.abs(lift_slow))
        ref = dg.reference_tendency(fields, order, grid)
        slow = -(volume_slow + lift_slow)
        assert np.max(np.abs(ref - slow)) / np.max(np.abs(slow)) <= 1e-13


def test_slabbed_reference_equals_unslabbed() -> None:
    order, grid = 7, (2, 1, 1)
    fields = dg.make_fields(order, grid, varying=True)
    whole = dg.reference_tendency(fields, order, grid)
    slabbed = dg.reference_tendency(fields, order, grid, slab_bytes=8 * 8 * 8 * 3)
    assert np.max(np.abs(whole - slabbed)) <= 1e-15 * np.max(np.abs(whole))


def test_rk3_step_conserves_mass() -> None:
    order, grid = 4, (2, 3, 2)
    mesh = Mesh(order, grid)
    rng = np.random.default_rng(1)
    # Point-varying velocity and a random q; conservation needs the consistent geometry
    # (affine metric, unit normals) of the benchmark input.
    fields = dg.make_fields(order, grid)
    varying = dg.make_fields(order, grid, varying=True)
    fields.update(u=varying["u"], v=varying["v"], w=varying["w"])
    fields["q"] = 1.0 + rng.standard_normal(fields["q"].shape)
    q_new = dg.ssp_rk3_step(fields["q"], 1e-3, lambda q: dg.reference_tendency({**fields, "q": q}, order, grid))
    assert abs(dg.mass(q_new, mesh) - dg.mass(fields["q"], mesh)) < 64 * EPS * abs(dg.mass(fields["q"], mesh))


def _integration_error(order: int, grid: int, end_time: float, nstep: int) -> float:
    mesh = Mesh(order, grid)
    fields = dg.make_fields(order, grid)
    q = dg.integrate(fields["q"], end_time / nstep, nstep, lambda q: dg.reference_tendency({**fields, "q": q}, order, grid))
    return dg.relative_l2_error(q, dg.exact_solution(mesh, end_time), mesh)


def test_third_order_temporal_convergence() -> None:
    # p = 7 on 4^3: spatial error ~1e-9 is far below the time error at these steps.
    errors = [_integration_error(7, 4, 0.1, n) for n in (10, 20, 40)]
    ratios = [errors[i] / errors[i + 1] for i in range(2)]
    assert all(7.0 < r < 9.0 for r in ratios), ratios


def test_spatial_convergence_at_p3() -> None:
    # Long enough for the upwind scheme's O(h^(p+1)) to show (short times see O(h^p)).
    errors = [_integration_error(3, n, 0.25, 12 * n) for n in (2, 4, 8)]
    rates = [np.log2(errors[i] / errors[i + 1]) for i in range(2)]
    assert rates[-1] > 3.5, (errors, rates)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.pop("Ez"), "missing keys"),
        (lambda f: f.__setitem__("q", f["q"].astype(np.float32)), "float64"),
        (lambda f: f.__setitem__("u", f["u"][:, :2]), "'u' has shape"),
        (lambda f: f.__setitem__("F", f["F"].tolist()), "numpy.ndarray"),
    ],
)
def test_reference_rejects_bad_input(mutate, message: str) -> None:
    fields = dg.make_fields(2, (1, 2, 1))
    mutate(fields)
    with pytest.raises(ValueError, match=message):
        dg.reference_tendency(fields, 2, (1, 2, 1))


@pytest.mark.parametrize("order", [0, -3, 2.5, "7"])
def test_bad_order_rejected(order) -> None:
    with pytest.raises(ValueError, match="order"):
        dg.lgl(order)
    with pytest.raises(ValueError, match="order"):
        dg.make_fields(order, 1)


def test_bad_grid_rejected() -> None:
    with pytest.raises(ValueError, match="grid"):
        dg.make_fields(2, (1, 0, 1))
    with pytest.raises(ValueError, match="grid"):
        dg.make_fields(2, (1, 2))


def test_separable_field_evaluation_equals_pointwise_formulas_bitwise() -> None:
    order, grid = 5, (2, 3, 1)
    mesh = Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    x, y, z = (mesh.volume_coords(a) for a in range(3))
    tp = 2.0 * np.pi
    assert np.array_equal(fields["q"], np.sin(tp * x) * np.sin(tp * y) * np.sin(tp * z))
    assert np.array_equal(fields["v"], 1.0 + 0.11 * np.cos(tp * y))
    assert np.array_equal(fields["Ez"], 2.0 / 1.0 * (1.0 + 0.04 * np.sin(tp * z)))
    assert np.array_equal(dg.exact_solution(mesh, 0.3),
                          np.sin(tp * (x - 0.3)) * np.sin(tp * (y - 0.3)) * np.sin(tp * (z - 0.3)))
