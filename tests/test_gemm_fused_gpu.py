"""GPU tests of GEMM_FUSED and its epilogue-tree kernels, run from CUBINs cross-compiled on a CPU.

Build first, where nvidia-cutlass-dsl is installed, every carrier and fold variant:
``python3 -c "from composer.build import build, plan; build(plan('sm_90', '16x8x4',
[7, 15, 31, 63, 127, 255, 511, 575, 767], ['GEMM_CUTE', 'GEMM_FUSED'], fused_variants='all'),
'build/sm_90_gf')"`` (``composer build --paths GEMM_FUSED`` builds the scheduled variant only),
carry the directory to the GPU host and set ``COMPOSER_BUILD_DIR=build/sm_90_gf``.

- every GEMM_FUSED kernel in the build (epilogue trees; kernels forming their flux q*vel in the
  mainloop) against the NumPy emulation of its epilogue (``composer.epilogues.numpy_eval``) on
  random operands, at ragged sizes (Nq = 8 against 16-row tiles, Nq = 576 against 128-wide ones,
  Ne = 3 elements), the fold's y GEMM in place as the path runs it;
- GEMM_FUSED against the NumPy reference on the point-varying input at every order 7 ... 767 on
  small non-cubic grids, for every carrier, fold and flux variant in the build, and at the Table
  S29 (benchmark) sizes of a few orders: max|diff| / max|ref| <= 1e-12.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import numpy as np
import pytest

from composer import dg
from composer.epilogues.index import OutputIndex
from composer.epilogues.numpy_eval import emulate_epilogue
from composer.epilogues.paper import fused_plan, store
from composer.epilogues.tree import from_dict, to_dict
from composer.gemm.cute.config import GemmConfig, kernel_problem
from composer.gemm.roles import emulate, gemm_spec

pytestmark = pytest.mark.gpu

ORDERS = (7, 15, 31, 63, 127, 255, 511, 575, 767)
#: Largest Nq whose kernels are compared element by element (the host emulation costs 2 Nq^4 FLOP).
MAX_CHECKED_NQ = 576
ALL_EMULATED_NQ = 256  # every kernel up to here, one per (order, role) above
#: the carrier sweep's kernels end in their tile's tag (composer.epilogues.carrier_tiles.tile_tag)
SWEPT_TILE = re.compile(r"_t\d+x\d+x\d+w\d+x\d+s\d+")
TOLERANCE = 1e-12


def build_dir() -> Path:
    return Path(os.environ.get("COMPOSER_BUILD_DIR", "build/sm_90"))


def fused_entries():
    """GEMM_FUSED's own GEMMs in the build: those with an epilogue tree or forming their flux."""
    from composer.runtime.manifest import read_manifest

    d = build_dir()
    if not (d / "manifest.json").is_file():
        pytest.skip(f"no build manifest in {d}; run composer build and set COMPOSER_BUILD_DIR")
    return [e for e in read_manifest(d / "manifest.json") if e.config.get("kind") == "cute_gemm" and "fused" in e.config]


def validation_grid(order: int) -> tuple[int, int, int]:
    """A small non-cubic grid: six elements up to Nq = 64, two above (p = 767: 7.3 GB per array)."""
    return (3, 2, 1) if order <= 63 else (2, 1, 1)


def test_every_fused_kernel_matches_its_numpy_emulation():
    from composer.runtime.device import ensure_context

    dev = ensure_context(None)
    entries = [e for e in fused_entries() if e.arch == dev.arch and e.config["order"] + 1 <= MAX_CHECKED_NQ]
    # above Nq = 256 the host emulation takes about a minute a kernel (56 kernels in a build with the p = 511
    # carrier sweep's tiles): one kernel per (order, role) there, for the index arithmetic at large Nq (every
    # tree is emulated at the orders below; the other kernels are compared with their twins bit for bit, and
    # validated against the reference by the sweep and by the validations below)
    firsts: dict = {}
    for e in sorted(entries, key=lambda e: e.symbol):
        if e.config["order"] + 1 > ALL_EMULATED_NQ:
            firsts.setdefault((e.config["order"], e.config["role"]), e)
    entries = [e for e in entries if e.config["order"] + 1 <= ALL_EMULATED_NQ] + list(firsts.values())
    if not entries:
        pytest.skip(f"no epilogue-tree GEMMs built for {dev.arch}")
    rng = np.random.default_rng(11)
    for e in entries:
        nq = e.config["order"] + 1
        case = _fused_case(e, rng, 3 if nq <= 128 else 1)
        got = _run_fused(e, dev, case)
        want = case["want"]()
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err <= 1e-14, (f"{e.symbol} ({case['described']['text']}, product {case['cfg'].product!r}): "
                              f"relative error {err:.3e}")


def _fused_case(e, rng, ne: int) -> dict:
    """Random operands of one GEMM_FUSED kernel (Ne elements) and the NumPy emulation of its output
    (``want()``, computed only when called: it costs 2 Nq^4 Ne FLOP on the host)."""
    nq, role = e.config["order"] + 1, e.config["role"]
    described = e.config.get("epilogue")
    described = described if isinstance(described, dict) else {
        "tree": to_dict(store()), "index": {"role": role, "swap": e.config["swap"], "nq": nq}, "aux_slots": [],
        "face": None, "text": "store(acc)"}
    cfg = GemmConfig.from_dict(e.config["gemm"])
    spec = gemm_spec(role, nq, ne)
    prob = kernel_problem(spec, e.config["swap"])
    diff = rng.standard_normal((nq, nq))
    # a kernel forming its flux reads q and a velocity; the others the flux array
    q, vel = rng.standard_normal((ne, nq, nq, nq)), rng.standard_normal((ne, nq, nq, nq))
    flux = q * vel if cfg.product else q
    arrays = {name: rng.standard_normal(flux.shape) for name in described["aux_slots"]}
    if described["face"]:
        arrays[described["face"]] = rng.standard_normal((ne, 6, nq, nq))
    fused = e.config["fused"]
    output = fused_plan(fused["carrier"], fused["fold"], nq).outputs[role]
    tree, index = from_dict(described["tree"]), OutputIndex(**described["index"])
    return {"described": described, "cfg": cfg, "prob": prob, "diff": diff, "q": q, "vel": vel, "arrays": arrays,
            "output": output, "shape": flux.shape,
            "want": lambda: emulate_epilogue(tree, index, prob, emulate(spec, diff, flux), arrays,
                                             {"alpha": 1.0, "beta": 0.0})}


def _run_fused(e, dev, case: dict) -> np.ndarray:
    """Launch entry ``e`` on ``case``'s operands as the path does (the fold's y GEMM updating its
    partial sum in place) and return its output; a fresh output starts as NaN."""
    from composer.runtime import DeviceBuffer
    from composer.runtime.module import Module

    described, prob, cfg = case["described"], case["prob"], case["cfg"]
    bufs = {name: DeviceBuffer.from_numpy(a, device=dev) for name, a in case["arrays"].items()}
    if case["output"] in bufs:
        out = bufs[case["output"]]
    else:
        out = DeviceBuffer(int(np.prod(case["shape"])) * 8, dev)
        out.poison()
    operands = {"D": DeviceBuffer.from_numpy(case["diff"], device=dev),
                "flux": DeviceBuffer.from_numpy(case["q"], device=dev)}
    factor = DeviceBuffer.from_numpy(case["vel"], device=dev)
    kernel = Module.from_manifest_entry(e, device=dev).entry_kernel()
    args = prob.args(operands[prob.a_operand].ptr, operands[prob.b_operand].ptr, out.ptr,
                     tuple(bufs[n].ptr for n in described["aux_slots"]),
                     bufs[described["face"]].ptr if described["face"] else 0, factor=factor.ptr)
    # the entry's own grid: an async-epilogue twin's block runs several tiles (the case's cfg may be it)
    own = GemmConfig.from_dict(e.config["gemm"]) if "gemm" in e.config else cfg
    kernel.launch(own.grid(prob.m, prob.n, prob.batch), args=args)
    dev.synchronize()
    got = out.to_numpy(case["shape"], np.float64)
    for b in {id(b): b for b in (*bufs.values(), *operands.values(), out, factor)}.values():
        b.free()
    return got


def _tree_text(entry) -> str | None:
    """A GEMM entry's epilogue: its tree's text, "store" for the plain GEMMs (a string in the manifest)."""
    epilogue = entry.config.get("epilogue")
    return epilogue.get("text") if isinstance(epilogue, dict) else epilogue


def test_every_async_epilogue_carrier_gives_its_plain_twins_bits():
    """``async_epilogue_tiles``: the epilogue warps run the plain kernel's epilogue on the MMA warps'
    accumulators handed over through shared memory (one buffer or two: ``async_buffers``), and
    ``min_blocks`` only caps the registers, so every such carrier in the build must give exactly the
    output of its twin without the options (same tile otherwise), at the kernel's own Nq (an epilogue
    tree's index is compiled for it) with one element; a hang is a barrier bug."""
    from dataclasses import replace

    _assert_twins_agree(lambda cfg: cfg.async_epilogue_tiles or cfg.min_blocks,
                        lambda cfg: replace(cfg, async_epilogue_tiles=0, async_buffers=2, min_blocks=0),
                        "no async-epilogue carrier with a plain twin in the build")


def test_every_staged_product_kernel_gives_its_fragment_twins_bits():
    """``product_staged`` (flux = "staged"): each element of the flux operand is formed once in shared
    memory by the thread that copied it, the same one DMUL the fragment loads of the ``flux =
    "mainloop"`` kernel perform, so the MMAs see the same operands and every staged kernel in the build
    must give exactly its twin's output (same tile; the pipeline depth, which staged kernels lower to
    keep their blocks per SM, and the block order do not change the order of the k sums), at each built
    order's Nq
    (Nq = 8: ragged tiles, the predicated path), plain GEMMs and epilogue trees alike; a wrong chunk
    mapping shows as a difference, a missing barrier as an intermittent one."""
    from dataclasses import replace

    _assert_twins_agree(lambda cfg: cfg.product_staged, lambda cfg: replace(cfg, product_staged=False, stages=0, n_fastest=False),
                        "no staged-product kernel with a fragment-product twin in the build", ignore_stages=True)


def _assert_twins_agree(has_option, twin_config, none_reason: str, ignore_stages: bool = False) -> None:
    """Every kernel of the build whose configuration ``has_option`` gives bitwise the output of the
    entry built with ``twin_config`` of it (same order, role and tree; with ``ignore_stages`` any
    pipeline depth, ``twin_config`` then setting stages to 0), on one element of random operands at
    the kernel's Nq (one operand set per (order, role, tree))."""
    from dataclasses import replace

    from composer.runtime.device import ensure_context

    def key_config(raw) -> GemmConfig:
        cfg = GemmConfig.from_dict(raw)
        return replace(cfg, stages=0) if ignore_stages and not has_option(cfg) else cfg

    dev = ensure_context(None)
    entries = [e for e in fused_entries() if e.arch == dev.arch]
    by_config = {(e.config["order"], e.config["role"], key_config(e.config["gemm"]), _tree_text(e)): e
                 for e in entries}
    pairs = [(e, by_config.get((order, role, twin_config(cfg), text)))
             for (order, role, cfg, text), e in by_config.items() if has_option(cfg)]
    # a schedule's own carrier (no tile tag in its name: p = 575 and 767 ship min_blocks = 3) has no twin in
    # a schedule or variants build; the validations against the reference below cover it end to end
    unpaired = sorted(a.symbol for a, b in pairs if b is None and SWEPT_TILE.search(a.symbol))
    pairs = sorted(((a, b) for a, b in pairs if b is not None), key=lambda ab: (ab[0].config["order"], ab[0].symbol))
    if not pairs:
        pytest.skip(none_reason)
    # every kernel with the option is tested: one without its twin in the build is a build to fix
    assert not unpaired, f"kernels without their twin in the build {build_dir()}: {unpaired}"
    rng = np.random.default_rng(5)
    cases: dict = {}  # one set of operands per (order, role, tree): at Nq = 512 each set is 7 GB of host arrays
    for variant, twin in pairs:
        key = (variant.config["order"], variant.config["role"], _tree_text(variant))
        if key not in cases:
            cases.clear()
            cases[key] = _fused_case(variant, rng, 1)
        case = cases[key]
        got, want = _run_fused(variant, dev, case), _run_fused(twin, dev, case)
        assert np.isfinite(want).all()
        assert np.array_equal(got, want), f"{variant.symbol} differs from {twin.symbol}"


def _variants(order: int) -> list[tuple[str, bool, str]]:
    """The (carrier, fold, flux) variants the build holds at ``order``."""
    entries = [e for e in fused_entries() if e.config["order"] == order]
    found = {(e.config["fused"]["carrier"], e.config["fused"]["fold"], e.config["fused"]["flux"]) for e in entries}
    if not found:
        pytest.skip(f"p={order} not built for GEMM_FUSED")
    return sorted(found)


@functools.lru_cache(maxsize=1)
def _reference(order: int, grid: tuple[int, int, int]):
    """The point-varying input and its NumPy tendency, computed once per (order, grid): every
    variant of an order is checked against the same reference (at p = 767 one reference costs
    minutes of host time and 60 GB)."""
    fields = dg.make_fields(order, grid, varying=True)
    return fields, dg.reference_tendency(fields, order, grid)


def _validate(order: int, grid, carrier: str | None = None, fold: bool | None = None,
              flux: str | None = None) -> float:
    from composer.bench.runner import validate_path
    from composer.counts import device_memory_estimate
    from composer.runtime.device import ensure_context

    dev = ensure_context(None)
    entries = [e for e in fused_entries() if e.config["order"] == order and e.arch == dev.arch]
    if not entries:
        pytest.skip(f"p={order} not built for {dev.arch}")
    need = device_memory_estimate(order, tuple(grid), "GEMM_FUSED").total_bytes
    if need > dev.free_memory():  # p = 767 on two elements: 124 GB, an H200's and not an H100's
        pytest.skip(f"p={order} on {tuple(grid)} needs about {need / 1e9:.0f} GB; {dev.name} has "
                    f"{dev.free_memory() / 1e9:.0f} GB free")
    reference = _reference(order, tuple(grid))
    options = {"mma": entries[0].config["mma"], "build_dir": str(build_dir()), "carrier": carrier, "fold": fold,
               "flux": flux}
    return validate_path("GEMM_FUSED", order, grid, dev, reference, options)


@pytest.mark.parametrize("order", ORDERS)
def test_gemm_fused_validates_at_every_order(order):
    for carrier, fold, flux in _variants(order):
        err = _validate(order, validation_grid(order), carrier, fold, flux)
        assert err <= TOLERANCE, f"p={order} carrier {carrier} fold {fold} flux {flux}: {err:.3e}"


@pytest.mark.parametrize("order", [7, 127, 511])
def test_gemm_fused_validates_at_the_table_s29_size(order):
    from composer.config.schedules import load_schedule

    assert _validate(order, load_schedule(order).benchmark.grid) <= TOLERANCE
