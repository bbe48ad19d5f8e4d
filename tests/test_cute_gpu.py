"""GPU tests of the CuTe DSL GEMMs, run from CUBINs cross-compiled on a CPU machine.

Build first (where nvidia-cutlass-dsl is installed), then carry the directory to the GPU host:
``composer build --arch sm_90 --mma 16x8x4 --orders 7,15,127,575 --out build/sm_90_test`` (and the
other shapes with ``--mma``), and set ``COMPOSER_BUILD_DIR=build/sm_90_test``. Every role and built
shape is compared with the NumPy emulation of the BLAS call, including ragged sizes (Nq = 8
against 16-row tiles, Nq = 576 against 128-wide tiles) and GEMM_CUTE is validated like every path.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from composer.gemm.cute.config import GemmConfig, kernel_problem
from composer.gemm.roles import emulate, gemm_spec

pytestmark = pytest.mark.gpu

#: Largest Nq compared element by element: the NumPy emulation of one launch costs 2 Nq^4 FLOP on
#: the host (Nq = 576: 0.2 TFLOP, seconds; Nq = 1024: 2.2 TFLOP and an 8.6 GB operand, minutes), so
#: a build directory holding every scheduled order is checked up to the ragged Nq = 576 and the
#: larger orders are left to the path validation.
MAX_CHECKED_NQ = 576


def _entries():
    from composer.runtime.manifest import read_manifest

    d = Path(os.environ.get("COMPOSER_BUILD_DIR", "build/sm_90"))
    if not (d / "manifest.json").is_file():
        pytest.skip(f"no build manifest in {d}; run composer build and set COMPOSER_BUILD_DIR")
    # the plain GEMMs only: GEMM_FUSED's tree and product kernels read aux, face and factor arrays
    # that a plain launch does not pass (tests/test_gemm_fused_gpu.py runs those)
    return [e for e in read_manifest(d / "manifest.json") if e.config.get("kind") == "cute_gemm"
            and "fused" not in e.config]


def test_every_role_and_shape_matches_numpy():
    from composer.runtime import DeviceBuffer
    from composer.runtime.device import ensure_context
    from composer.runtime.module import Module

    dev = ensure_context(None)
    entries = [e for e in _entries() if e.arch == dev.arch and e.config["order"] + 1 <= MAX_CHECKED_NQ]
    if not entries:
        pytest.skip(f"no GEMMs built for {dev.arch}")
    rng = np.random.default_rng(7)
    for e in entries:
        nq = e.config["order"] + 1
        ne = 3 if nq <= 128 else 1
        cfg = GemmConfig.from_dict(e.config["gemm"])
        spec = gemm_spec(e.config["role"], nq, ne)
        prob = kernel_problem(spec, e.config["swap"])
        diff = rng.standard_normal((nq, nq))
        flux = rng.standard_normal((ne, nq, nq, nq))
        bufs = {"D": DeviceBuffer.from_numpy(diff, device=dev), "flux": DeviceBuffer.from_numpy(flux, device=dev)}
        out = DeviceBuffer(flux.nbytes, dev)
        kernel = Module.from_manifest_entry(e, device=dev).entry_kernel()
        kernel.launch(cfg.grid(prob.m, prob.n, prob.batch),
                      args=prob.args(bufs[prob.a_operand].ptr, bufs[prob.b_operand].ptr, out.ptr))
        dev.synchronize()
        got = out.to_numpy(flux.shape, np.float64)
        ref = emulate(spec, diff, flux)
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        assert err <= 1e-13, f"{e.symbol}: relative error {err:.3e}"
        for b in (*bufs.values(), out):
            b.free()


@pytest.mark.parametrize("order", [7, 127])
def test_gemm_cute_path_validates(order):
    """GEMM_CUTE on the point-varying input, like every path: <= the schedule's tolerance."""
    from composer import dg
    from composer.bench.runner import validate_path
    from composer.config.schedules import load_schedule
    from composer.runtime.device import ensure_context

    entries = _entries()
    if not any(e.config["order"] == order for e in entries):
        pytest.skip(f"p={order} not built")
    dev = ensure_context(None)
    sched = load_schedule(order)
    grid = sched.validation.grid
    fields = dg.make_fields(order, grid, varying=True)
    reference = (fields, dg.reference_tendency(fields, order, grid))
    mma = next(e.config["mma"] for e in entries if e.config["order"] == order)
    options = {"mma": mma, "library": {"x": "cute", "y": "cute", "z": "cute"},
               "build_dir": os.environ.get("COMPOSER_BUILD_DIR", "build/sm_90")}
    err = validate_path("GEMM_CUTE", order, grid, dev, reference, options)
    assert err <= sched.validation.tolerance


@pytest.mark.parametrize("switch", ["fragment_pipeline", "async_epilogue_tiles"])
def test_a_kernel_switch_changes_no_bit(switch):
    """``fragment_pipeline`` moves loads, the wait and the barrier; ``async_epilogue_tiles`` hands the
    accumulators to epilogue warps of their own: neither changes an MMA's operands or order, so every
    such kernel of the build gives exactly the output of its plain twin (same configuration without
    the switch), on ragged problems of several sizes (the kernels take their sizes at run time; the
    sizes give the asynchronous blocks different tile counts in their last block). A hang is a
    barrier bug."""
    from dataclasses import replace

    from composer.runtime import DeviceBuffer
    from composer.runtime.device import ensure_context
    from composer.runtime.module import Module

    dev = ensure_context(None)
    entries = [e for e in _entries() if e.arch == dev.arch]
    configs = {(e.config["role"], e.config["order"], GemmConfig.from_dict(e.config["gemm"])): e for e in entries}
    pairs = [(e, configs.get((role, order, replace(cfg, **{switch: type(getattr(cfg, switch))()}))))
             for (role, order, cfg), e in configs.items() if getattr(cfg, switch)]
    pairs = [(p, q) for p, q in pairs if q is not None]
    if not pairs:
        pytest.skip(f"no {switch} kernel with a plain twin in the build")
    rng = np.random.default_rng(11)
    for piped, plain in pairs:
        for nq in sorted({min(piped.config["order"] + 1, 136), 24, 8}):
            spec = gemm_spec(piped.config["role"], nq, 1)
            cfg = GemmConfig.from_dict(piped.config["gemm"])
            prob = kernel_problem(spec, piped.config["swap"])
            diff = rng.standard_normal((nq, nq))
            flux = rng.standard_normal((1, nq, nq, nq))
            bufs = {"D": DeviceBuffer.from_numpy(diff, device=dev), "flux": DeviceBuffer.from_numpy(flux, device=dev)}
            outs = []
            for e in (piped, plain):
                c = GemmConfig.from_dict(e.config["gemm"])
                out = DeviceBuffer(flux.nbytes, dev)
                out.poison()  # NaN: an unwritten element cannot match by leftover data
                Module.from_manifest_entry(e, device=dev).entry_kernel().launch(
                    c.grid(prob.m, prob.n, prob.batch),
                    args=prob.args(bufs[prob.a_operand].ptr, bufs[prob.b_operand].ptr, out.ptr))
                dev.synchronize()
                outs.append(out.to_numpy(flux.shape, np.float64))
                out.free()
            assert np.array_equal(outs[0], outs[1]), f"{piped.symbol} differs from {plain.symbol} at Nq = {nq}"
            assert np.isfinite(outs[0]).all() and np.abs(outs[0]).max() > 0  # every element written
            for b in bufs.values():
                b.free()
