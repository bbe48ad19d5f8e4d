"""GPU tests of the parity decomposition: its two support kernels against their NumPy definitions
on ragged sizes, and the GEMM path with ``parity`` against the reference tendency on the
point-varying input (small non-cubic grids and the Table S29 sizes)."""

from __future__ import annotations

import numpy as np
import pytest

import composer
from composer import dg
from composer.config.schedules import load_schedule
from composer.kernels import support
from composer.parity import reference as par
from composer.validation import relative_max_difference

pytestmark = pytest.mark.gpu
TOLERANCE = 1e-12


@pytest.fixture(scope="module")
def device():
    from composer.runtime import Device

    return Device()


def _upload(*arrays: np.ndarray, device) -> list:
    from composer.runtime import DeviceBuffer

    return [DeviceBuffer.from_numpy(np.ascontiguousarray(a), None, device) for a in arrays]


@pytest.mark.parametrize(("order", "ne"), [(1, 3), (7, 5), (15, 3), (63, 2)])
def test_volume_flux_parity_kernel(order, ne, device, tmp_path):
    from composer.runtime import DeviceBuffer

    rng = np.random.default_rng(order)
    nq = order + 1
    shape = (ne, nq, nq, nq)
    fields = {k: rng.standard_normal(shape) for k in ("q", "u", "v", "w")}
    kernel = support.load_support_kernel("volume_flux_parity", nq, device, cache_dir=tmp_path)
    ins = _upload(*(fields[k] for k in ("q", "u", "v", "w")), device=device)
    outs = [DeviceBuffer(8 * fields["q"].size, device) for _ in range(3)]
    for buf in outs:
        buf.poison(None)
    support.launch_volume_flux_parity(kernel, *ins, *outs, ne=ne)
    expected = par.split_fluxes(fields)
    # each entry is a*u + b*u' (or a*u - b*u') of two products; the compiler contracts it into
    # fma(a, u, b*u'), which skips the rounding of one product: the two results differ by at most
    # 1.5 ulp of |a*u| + |b*u'| (a product's half ulp and each sum's), bounded here by 2
    # (session 43 on an H100: array_equal failed, the contracted sums differing in the last bit)
    for role, buf in zip(("x", "y", "z"), outs):
        got = buf.to_numpy(shape)
        assert not np.isnan(got).any(), f"{role}: an output entry was not written"
        vel = {"x": "u", "y": "v", "z": "w"}[role]
        products = np.abs(fields["q"] * fields[vel])
        axis = par.ROLE_AXIS[role]
        bound = np.abs(par.split(products, axis))  # |a u| + |b u'| in the even half, |a u| - |b u'| in the odd
        bound = np.concatenate([np.take(bound, range(nq // 2), axis=axis)] * 2, axis=axis)
        assert np.all(np.abs(got - expected[role]) <= 2 * np.finfo(float).eps * bound), role


@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (7, (1, 2, 3)), (15, (2, 1, 2)), (63, (2, 1, 1))])
def test_separable_lift_parity_kernel(order, grid, device, tmp_path):
    from composer.runtime import DeviceBuffer

    rng = np.random.default_rng(order + 1)
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid, varying=True)
    derivatives = {r: rng.standard_normal(mesh.volume_shape) for r in ("x", "y", "z")}
    fstar = rng.standard_normal(mesh.face_shape)
    kernel = support.load_support_kernel("separable_lift_parity", mesh.nq, device, cache_dir=tmp_path)
    args = _upload(derivatives["x"], derivatives["y"], derivatives["z"], fields["Ex"], fields["Ey"], fields["Ez"],
                   fstar, device=device)
    out = DeviceBuffer(8 * mesh.num_points, device)
    out.poison(None)
    support.launch_separable_lift_parity(kernel, *args, out, ne=mesh.num_elements)
    got = out.to_numpy(mesh.volume_shape)
    assert relative_max_difference(got, par.lift_from_split(derivatives, fields, fstar, mesh)) <= 1e-15


@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (3, (2, 3, 1)), (7, (1, 2, 3)), (15, (2, 1, 2))])
def test_gemm_parity_small_non_cubic_grids(order, grid, device):
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    got = composer.tendency(fields, order, grid, path="GEMM", device=device, parity=True)
    assert relative_max_difference(got, ref) <= TOLERANCE


@pytest.mark.parametrize("order", [7, 63, 255])
def test_gemm_parity_table_s29_size(order, device):
    grid = load_schedule(order).benchmark.grid
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    err = relative_max_difference(composer.tendency(fields, order, grid, path="GEMM", device=device, parity=True), ref)
    print(f"GEMM parity p={order} grid={grid}: max|diff|/max|ref| = {err:.3e}")
    assert err <= TOLERANCE


@pytest.mark.parametrize(("order", "grid"), [(7, (1, 2, 3)), (15, (2, 1, 2)), (63, (2, 1, 1)), (255, "s29")])
def test_gemm_cute_parity_on_the_built_kernels(order, grid, device):
    """GEMM_CUTE:parity=on with every role on our CuTe kernels (the half-size calls on the kernels built for
    the full contractions) from $COMPOSER_BUILD_DIR (else build/sm_90), against the reference."""
    import os
    from pathlib import Path

    from composer.runtime.manifest import read_manifest

    build_dir = Path(os.environ.get("COMPOSER_BUILD_DIR", "build/sm_90"))
    if not (build_dir / "manifest.json").is_file():
        pytest.skip(f"no build manifest in {build_dir}; run composer build and set COMPOSER_BUILD_DIR")
    if not any(e.config.get("kind") == "cute_gemm" and e.config.get("order") == order and e.arch == device.arch
               for e in read_manifest(build_dir / "manifest.json")):
        pytest.skip(f"p={order} not built for {device.arch} in {build_dir}")
    grid = load_schedule(order).benchmark.grid if grid == "s29" else grid
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    got = composer.tendency(fields, order, grid, path="GEMM_CUTE", device=device, parity=True, library="cute",
                            build_dir=str(build_dir))
    err = relative_max_difference(got, ref)
    print(f"GEMM_CUTE parity p={order} grid={grid}: max|diff|/max|ref| = {err:.3e}")
    assert err <= TOLERANCE


@pytest.mark.parametrize(("order", "grid"), [(7, (1, 2, 3)), (15, (2, 1, 2)), (63, (2, 1, 1)), (255, "s29")])
@pytest.mark.parametrize("carrier", ["x", "y", "z"])
def test_gemm_fused_parity_on_the_built_kernels(order, grid, carrier, device):
    """GEMM_FUSED:parity=on (the non-carriers split, the carrier on the split basis merging them in its
    tree) from $COMPOSER_BUILD_DIR (``composer build --paths GEMM_FUSED --fused-variants all``), against the
    reference on the point-varying input."""
    import os
    from pathlib import Path

    from composer.runtime.manifest import read_manifest

    build_dir = Path(os.environ.get("COMPOSER_BUILD_DIR", "build/sm_90"))
    if not (build_dir / "manifest.json").is_file():
        pytest.skip(f"no build manifest in {build_dir}; run composer build and set COMPOSER_BUILD_DIR")
    if not any(f"_{carrier}_" in e.symbol and "_carry_split" in e.symbol and e.config.get("order") == order
               for e in read_manifest(build_dir / "manifest.json") if e.arch == device.arch):
        pytest.skip(f"p={order}: no {carrier} parity carrier for {device.arch} in {build_dir}")
    grid = load_schedule(order).benchmark.grid if grid == "s29" else grid
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    got = composer.tendency(fields, order, grid, path="GEMM_FUSED", device=device, parity=True, carrier=carrier,
                            build_dir=str(build_dir))
    err = relative_max_difference(got, ref)
    print(f"GEMM_FUSED parity carrier {carrier} p={order} grid={grid}: max|diff|/max|ref| = {err:.3e}")
    assert err <= TOLERANCE
