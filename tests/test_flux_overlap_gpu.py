"""GPU tests of the volume flux overlapped with the first GEMM (``composer.paths.overlap``).

- every product subset, in both forms, gives q * vel bit for bit, twice in a row (the confined
  form's last block resets its counters: a second launch with stale counters would skip the work);
- the confined form works only on the SMs below its ``%smid`` bound, at most ``sms`` of them (the
  blocks landing elsewhere leave), and its last block finds no chunk left (the fallback that keeps
  the result right when no block stays on the partition is not what did the work);
- the fallback itself: with the partition's SMs held by a spinning kernel, every block leaves, the
  last one takes every chunk, the result is still exact and the never-reset counter says so;
- a path's call captured in a CUDA graph and replayed: exact each time, the counters reset between
  replays, no fallback, and the confined kernel's node kept its stream's (higher) priority;
- GEMM and GEMM_FUSED with ``overlap_sms`` against the NumPy reference on the point-varying input
  (max|diff| / max|ref| <= 1e-12) on a small non-cubic grid and at p = 511's Table S29 size.

GEMM_FUSED needs a ``composer build`` directory (``COMPOSER_BUILD_DIR``), GEMM nvmath-python.
"""

from __future__ import annotations

import os
import time
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
        marks = seen.to_numpy((SMID_SLOTS,), np.uint32)
        used = np.flatnonzero(marks)
        if sms:
            counters = work.to_numpy((3,), np.uint64)
            assert not counters[:2].any(), f"the counters were not reset: {counters}"
            assert counters[2] == 0, f"the last block took {counters[2]} chunks: the partition did not work"
            # 1: an SM of the partition that worked; 2: the last block's leftovers (the partition failed)
            assert set(np.unique(marks[used])) == {1}, marks[used]
            assert used.size and used.max() < bound and used.size <= sms, used
        else:
            assert not used.size, "the grid-stride form marks no SM (it never takes chunks)"
    for buf in [*bufs.values(), *outs.values(), work, seen]:
        buf.free()


SPINNER = r"""
extern "C" __global__ void hold_partition(int bound, long long cycles, unsigned int* held)
{
    extern __shared__ unsigned char fill[];  // all of an SM's shared memory: nothing else fits beside it
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if ((int)smid >= bound) return;
    if (threadIdx.x == 0) atomicAdd(held, 1u);
    const long long start = clock64();
    while (clock64() - start < cycles) { fill[threadIdx.x] = (unsigned char)threadIdx.x; }
}
"""


def test_the_fallback_does_the_work_when_the_partition_is_held(device):
    """Every SM of the partition held by a kernel that fills its shared memory: the confined form's
    blocks can land only outside it and leave, so the last block must take every chunk itself."""
    from composer.kernels.support import (CHUNK_PAIRS, PRODUCT_LEFTOVER_SLOT, PRODUCT_WORK_BYTES,
                                          launch_volume_products, load_products_kernel)
    from composer.paths.overlap import partition_threshold
    from composer.runtime import Stream
    from composer.runtime.nvrtc import compile_cuda
    from composer.runtime.params import params
    from composer.runtime.memory import DeviceBuffer
    from composer.runtime.module import Module
    from composer.runtime.smid import active_sm_ids

    nq, ne, sms = 7, 64, 8
    n = ne * nq**3
    rng = np.random.default_rng(5)
    q, w = rng.standard_normal(n), rng.standard_normal(n)
    bound = partition_threshold(active_sm_ids(device=device), sms)
    compiled = compile_cuda(SPINNER, "hold_partition.cu", arch=device.arch, entry_points=["hold_partition"])
    module = Module.from_cubin(compiled.cubin, device)
    smem = device.max_smem_optin
    spinner = module.get_kernel(compiled.symbol("hold_partition"), params("bound:i32 cycles:i64 held:ptr"), 256)
    spinner.set_max_dynamic_smem(smem)
    kernel = load_products_kernel("z", nq, device)
    held, work = DeviceBuffer(4, device), DeviceBuffer(PRODUCT_WORK_BYTES, device)
    qb, wb, out = DeviceBuffer.from_numpy(q, device=device), DeviceBuffer.from_numpy(w, device=device), \
        DeviceBuffer(8 * n, device)
    held.zero(), work.zero(), out.poison(None)
    first, second = Stream(device), Stream(device)
    try:
        spinner.launch(4 * device.sm_count, args=(bound, 200_000_000, held), shared=smem, stream=first)
        time.sleep(0.02)  # the spinner is resident on the partition before the products launch
        launch_volume_products(kernel, "z", qb.ptr, {"z": wb.ptr}, {"z": out.ptr}, ne, sm_limit=bound,
                               work=work.ptr, stream=second)
        second.synchronize()
        first.synchronize()
        holders = int(held.to_numpy((1,), np.uint32)[0])
        assert holders == sms, f"the spinner held {holders} of the partition's {sms} SMs"
        assert np.array_equal(out.to_numpy((n,), np.float64), q * w)
        counters = work.to_numpy((3,), np.uint64)
        chunks = -(-(n // 2) // CHUNK_PAIRS)
        assert not counters[:2].any(), counters
        assert counters[PRODUCT_LEFTOVER_SLOT] == chunks, f"the last block took {counters[2]} of {chunks} chunks"
    finally:
        for stream in (first, second):
            stream.close()
        for buf in (held, work, qb, wb, out):
            buf.free()
        module.close()


@pytest.mark.parametrize("name", ("GEMM", "GEMM_FUSED"))
def test_a_captured_call_replays_with_the_overlap(device, name):
    """One tendency call of the path captured into a CUDA graph, replayed three times: exact against
    the reference each time (the counters reset inside the graph), no fallback, and a kernel node at
    a priority other than the default (the confined kernel's stream's)."""
    from composer.paths.problem import DeviceProblem
    from composer.paths.registry import path_class
    from composer.runtime import CudaGraph
    from composer.validation import relative_max_difference

    order, grid = 15, (3, 2, 1)
    if name == "GEMM":
        pytest.importorskip("nvmath", reason="the GEMM path needs nvmath-python")
        options = {}
    else:
        options = _gemm_fused_options(order)
    fields = dg.make_fields(order, grid, varying=True)
    reference = dg.reference_tendency(fields, order, grid)
    problem = DeviceProblem.upload(fields, order, grid, device)
    impl = path_class(name)(problem, overlap_sms=44, **options)
    q_ptr, dqdt_ptr = problem.ptr("q"), problem.dqdt.ptr
    graph = CudaGraph.capture(lambda _s: impl.launch(q_ptr, dqdt_ptr), problem.stream)
    try:
        assert impl.plan.priority_streams, "the overlap plan has no priority stream"
        priorities = graph.kernel_priorities()
        assert any(p != 0 for p in priorities), f"every kernel node at the default priority: {priorities}"
        for replay in range(3):
            problem.dqdt.poison(problem.stream)
            graph.replay(problem.stream)
            got = problem.download(problem.dqdt)
            assert relative_max_difference(got, reference) <= TOLERANCE, f"replay {replay}"
        assert impl.diagnostics()["overlap_leftover_chunks"] == 0
    finally:
        graph.close()
        impl.close()
        problem.close()


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
@pytest.mark.parametrize("first,face", [(None, False), ("x", False), (None, True)])
def test_gemm_with_the_overlap_validates(order, grid, first, face):
    pytest.importorskip("nvmath", reason="the GEMM path needs nvmath-python")
    options = {"overlap_sms": 44, **({"overlap_first": first} if first else {}), **({"overlap_face": True} if face else {})}
    assert _validate("GEMM", order, grid, **options) <= TOLERANCE


@pytest.mark.parametrize("order,grid", [(15, (3, 2, 1)), (511, None)])  # GEMM_FUSED ships flux = array there
@pytest.mark.parametrize("face", (False, True))
def test_gemm_fused_with_the_overlap_validates(order, grid, face):
    from composer.config.schedules import load_schedule

    options = _gemm_fused_options(order)
    grid = grid or load_schedule(order).benchmark.grid
    assert _validate("GEMM_FUSED", order, grid, overlap_sms=44, overlap_face=face, **options) <= TOLERANCE


@pytest.mark.parametrize("order", (511, 575))
def test_gemm_fused_with_the_first_gemm_forming_its_flux_validates(order):
    """``overlap_formed``: the first GEMM (z) forms q*w once per staged element beside the confined
    products; the build must hold that kernel (`composer build` of a schedule with the key, or
    ``--fused-variants all``)."""
    from composer.config.schedules import load_schedule
    from composer.runtime.manifest import read_manifest

    options = _gemm_fused_options(order)
    entries = read_manifest(Path(options["build_dir"]) / "manifest.json")
    if not any(e.config.get("order") == order and e.config.get("role") == "z"
               and (e.config.get("gemm") or {}).get("product_staged") for e in entries):
        pytest.skip(f"no z GEMM forming its flux at p={order} in {options['build_dir']}")
    grid = load_schedule(order).benchmark.grid
    assert _validate("GEMM_FUSED", order, grid, overlap_formed=True, **options) <= TOLERANCE
