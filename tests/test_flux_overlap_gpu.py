"""GPU tests of the volume flux overlapped with the first GEMM (``composer.paths.overlap``).

- every product subset, in both forms, gives q * vel bit for bit, twice in a row (the confined
  form's last block resets its counters: a second launch with stale counters would skip the work);
- the confined form works only on the SMs below its ``%smid`` bound, at most ``sms`` of them (the
  blocks landing elsewhere leave), and its last block finds no chunk left (the fallback that keeps
  the result right when no block stays on the partition is not what did the work);
- GEMM and GEMM_FUSED with ``overlap_sms`` against the NumPy reference on the point-varying input
  (max|diff| / max|ref| <= 1e-12) on a small non-cubic grid and at p = 511's Table S29 size.

GEMM_FUSED needs a ``composer build`` directory (``COMPOSER_BUILD_DIR``), GEMM nvmath-python.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from composer import dg

pytestmark = pytest.mark.gpu

TOLERANCE = 1e-12


@pytest.fixture(scope="module")
def device():
    from composer.runtime.device import ensure_context

    return ensure_context(None)


@pytest.mark.parametrize("products", ("z", "xy", "xyz"))
@pytest.mark.parametrize("sms", (0, 44))
def test_products_are_exact_and_stay_on_their_sms(device, products, sms):
    from composer.kernels.support import PRODUCT_WORK_BYTES, launch_volume_products, load_products_kernel
    from composer.paths.overlap import partition_threshold
    from composer.runtime.memory import DeviceBuffer
    from composer.runtime.smid import SMID_SLOTS, active_sm_ids

    nq, ne = 15, 45  # 151875 nodes: an odd count (the one-node tail), 19 chunks of 4096 pairs
    n = ne * nq**3
    rng = np.random.default_rng(3)
    q, vel = rng.standard_normal(n), {r: rng.standard_normal(n) for r in "xyz"}
    kernel = load_products_kernel(products, nq, device)
    bufs = {"q": DeviceBuffer.from_numpy(q, device=device), **{r: DeviceBuffer.from_numpy(vel[r], device=device)
                                                             for r in products}}
    outs = {r: DeviceBuffer(8 * n, device) for r in products}
    work, seen = DeviceBuffer(PRODUCT_WORK_BYTES, device), DeviceBuffer(4 * SMID_SLOTS, device)
    work.zero()
    bound = partition_threshold(active_sm_ids(device=device), sms) if sms else 0
    for repeat in range(2):
        seen.zero()
        for out in outs.values():
            out.poison(None)
        launch_volume_products(kernel, products, bufs["q"].ptr, {r: bufs[r].ptr for r in products},
                               {r: outs[r].ptr for r in products}, ne, sm_limit=bound, work=work.ptr,
                               seen=seen.ptr)
        for r in products:
            got = outs[r].to_numpy((n,), np.float64)
            assert np.array_equal(got, q * vel[r]), f"{products} {r} launch {repeat}"
        assert not work.to_numpy((2,), np.uint64).any(), "the counters were not reset"
        marks = seen.to_numpy((SMID_SLOTS,), np.uint32)
        used = np.flatnonzero(marks)
        if sms:
            # 1: an SM of the partition that worked; 2: the last block's leftovers (the partition failed)
            assert set(np.unique(marks[used])) == {1}, marks[used]
            assert used.size and used.max() < bound and used.size <= sms, used
    for buf in [*bufs.values(), *outs.values(), work, seen]:
        buf.free()


def _validate(name: str, order: int, grid, **options) -> float:
    from composer.bench.runner import validate_path
    from composer.runtime.device import ensure_context

    reference_fields = dg.make_fields(order, grid, varying=True)
    reference = (reference_fields, dg.reference_tendency(reference_fields, order, grid))
    return validate_path(name, order, grid, ensure_context(None), reference, options)


def _gemm_fused_options(order: int) -> dict:
    from composer.runtime.manifest import read_manifest

    build = Path(os.environ.get("COMPOSER_BUILD_DIR", "build/sm_90"))
    if not (build / "manifest.json").is_file():
        pytest.skip(f"no build manifest in {build}; run composer build --paths GEMM_FUSED and set COMPOSER_BUILD_DIR")
    if not any(e.config.get("order") == order for e in read_manifest(build / "manifest.json")):
        pytest.skip(f"p={order} not in the build {build}")
    return {"build_dir": str(build)}


@pytest.mark.parametrize("order,grid", [(7, (3, 2, 1)), (63, (3, 2, 1))])
@pytest.mark.parametrize("first", (None, "x"))
def test_gemm_with_the_overlap_validates(order, grid, first):
    pytest.importorskip("nvmath", reason="the GEMM path needs nvmath-python")
    options = {"overlap_sms": 44, **({"overlap_first": first} if first else {})}
    assert _validate("GEMM", order, grid, **options) <= TOLERANCE


@pytest.mark.parametrize("order,grid", [(15, (3, 2, 1)), (511, None)])  # GEMM_FUSED ships flux = array there
def test_gemm_fused_with_the_overlap_validates(order, grid):
    from composer.config.schedules import load_schedule

    options = _gemm_fused_options(order)
    grid = grid or load_schedule(order).benchmark.grid
    assert _validate("GEMM_FUSED", order, grid, overlap_sms=44, **options) <= TOLERANCE
