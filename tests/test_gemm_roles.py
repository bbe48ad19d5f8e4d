"""The BLAS shapes of the three volume GEMMs reproduce the three derivatives."""

import numpy as np
import pytest

from composer import dg
from composer.gemm.roles import ROLES, emulate, gemm_spec


@pytest.mark.parametrize(("order", "num_elements"), [(1, 3), (3, 2), (7, 1)])
def test_role_specs_compute_directional_derivatives(order: int, num_elements: int) -> None:
    nq = order + 1
    rng = np.random.default_rng(order)
    flux = rng.standard_normal((num_elements, nq, nq, nq))
    d = dg.diff_matrix(order)
    expected = {
        "x": np.einsum("im,ekjm->ekji", d, flux),
        "y": np.einsum("jm,ekmi->ekji", d, flux),
        "z": np.einsum("km,emji->ekji", d, flux),
    }
    for role in ROLES:
        got = emulate(gemm_spec(role, nq, num_elements), d, flux)
        np.testing.assert_allclose(got, expected[role], rtol=0, atol=1e-13 * np.abs(expected[role]).max())


def test_paper_shapes() -> None:
    nq, ne = 8, 32**3
    x, y, z = (gemm_spec(r, nq, ne) for r in ROLES)
    assert (x.m, x.n, x.k, x.batch) == (8, 2_097_152, 8, 1)
    assert (y.m, y.n, y.k, y.batch) == (8, 8, 8, 8 * ne)
    assert (z.m, z.n, z.k, z.batch) == (64, 8, 8, ne)
    assert x.flop == y.flop == z.flop == 2 * nq**4 * ne
    with pytest.raises(ValueError, match="unknown GEMM role"):
        gemm_spec("w", nq, ne)
