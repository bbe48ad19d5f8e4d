"""CPU tests of the CuTe DSL GEMM family, ``composer build`` and ``composer inspect``.

Kernels are cross-compiled here (no GPU) and their SASS is checked against the measured table:
sm_80 8x8x4 -> DMMA.884, sm_90 16x8x4 -> DMMA.16x8x4, sm_100 16x8x4 -> 2 x DMMA.8x8x4 per mma,
with the exact count the tile issues per k-tile. DSL compiles are cached on disk (keyed by the
kernel sources), so a re-run costs seconds.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")

from composer.build import build, plan  # noqa: E402
from composer.cli.main import main  # noqa: E402
from composer.gemm.cute.config import KERNEL_PARAMS, GemmConfig, GemmConfigError, kernel_problem  # noqa: E402
from composer.arch.limits import DEFAULT_ARCH, arch_limits  # noqa: E402
from composer.arch.mma import UnsupportedShapeError, expected_sass  # noqa: E402
from composer.gemm.cute.tiles import role_kernel  # noqa: E402
from composer.gemm.roles import ROLES, emulate, gemm_spec  # noqa: E402
from composer.arch.sass import check_expected, inspect_cubin  # noqa: E402
from composer.runtime.manifest import read_manifest  # noqa: E402

BUILDS = [("sm_80", "8x8x4"), ("sm_90", "16x8x4"), ("sm_100", "16x8x4")]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """One build directory per (arch, mma) for order 7 (the three role GEMMs + support kernels)."""
    out = {}
    for arch, mma in BUILDS:
        d = tmp_path_factory.mktemp(f"build_{arch}")
        report = build(plan(arch, mma, [7], ["GEMM_CUTE"]), d)
        assert len(report.built) == 7 and not report.reused
        out[(arch, mma)] = d
    return out


@pytest.mark.parametrize("arch,mma", BUILDS)
def test_build_sass_shapes(builds, arch, mma):
    entries = read_manifest(builds[(arch, mma)] / "manifest.json", verify=True)
    gemms = [e for e in entries if e.config["kind"] == "cute_gemm"]
    assert sorted(e.config["role"] for e in gemms) == sorted(ROLES)
    want, factor = expected_sass(mma, arch)
    for e in gemms:
        kernels = inspect_cubin(e.cubin_path)
        (k,) = kernels.values()
        assert k.name == e.symbol and k.arch == arch
        assert k.dmma == {want: factor * e.config["mma_per_ktile"]}, (e.symbol, k.dmma)
        assert k.spill_bytes == 0 and k.dfma == 0
        assert check_expected(kernels, mma, mma_per_kernel={e.symbol: e.config["mma_per_ktile"]}) == []


def test_sm100_wide_shapes_expand(builds):
    d = builds[("sm_100", "16x8x4")]
    for e in read_manifest(d / "manifest.json"):
        if e.config["kind"] == "cute_gemm":
            k = next(iter(inspect_cubin(e.cubin_path).values()))
            assert set(k.dmma) == {"8x8x4"} and k.dmma["8x8x4"] == 2 * e.config["mma_per_ktile"]


def test_manifest_schema(builds):
    d = builds[("sm_90", "16x8x4")]
    raw = json.loads((d / "manifest.json").read_text())
    assert raw["schema"] == "composer.kernel-manifest" and raw["version"] == 1
    for e in read_manifest(d / "manifest.json"):
        assert e.arch == "sm_90" and e.compiler and e.config["build_key"]
        if e.config["kind"] == "cute_gemm":
            cfg = GemmConfig.from_dict(e.config["gemm"])
            assert e.params == KERNEL_PARAMS
            assert e.block == (cfg.threads, 1, 1) and e.dynamic_smem == cfg.smem_bytes
            assert "nvidia-cutlass-dsl" in e.compiler
            assert e.symbol.startswith(e.config["job"])
            assert e.grid(m=1000, n=37, batch=3) == cfg.grid(1000, 37, 3)
        else:
            assert e.config["kind"] == "support" and "nvrtc" in e.compiler
            assert e.grid(ne=10, sms=132)[0] >= 1


def test_incremental_and_corruption(builds, tmp_path):
    src = builds[("sm_90", "16x8x4")]
    d = tmp_path / "b"
    shutil.copytree(src, d)
    jobs = plan("sm_90", "16x8x4", [7], ["GEMM_CUTE"])
    assert build(jobs, d).built == []
    x = next(e for e in read_manifest(d / "manifest.json") if e.config.get("role") == "x")
    x.cubin_path.write_bytes(x.cubin_path.read_bytes()[:100])  # truncated
    (d / "rk3_stage_nq8.cubin").unlink()
    report = build(jobs, d)
    assert sorted(report.built) == sorted([x.config["job"], "rk3_stage_nq8"])
    assert "sha256" in report.reasons[x.config["job"]] and report.reasons["rk3_stage_nq8"] == "cubin missing"
    read_manifest(d / "manifest.json", verify=True)
    (d / "manifest.json").write_text("{broken")
    assert len(build(jobs, d).built) == len(jobs)


def test_sm80_rejects_wide_shapes(tmp_path, capsys):
    with pytest.raises(UnsupportedShapeError, match="sm_90"):
        plan("sm_80", "16x8x8", [7])
    assert main(["build", "--arch", "sm_80", "--mma", "16x8x4", "--orders", "7",
                 "--out", str(tmp_path)]) == 2
    assert "use --mma 8x8x4" in capsys.readouterr().err


def test_inspect_cli(builds, capsys):
    d = builds[("sm_90", "16x8x4")]
    assert main(["inspect", str(d), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["problems"] == [] and len(out["kernels"]) == 7
    x = next(e for e in read_manifest(d / "manifest.json") if e.config.get("role") == "x")
    assert main(["inspect", str(x.cubin_path), "--expect", "16x8x8"]) == 1
    assert main(["inspect", str(x.cubin_path), "--expect", "16x8x4"]) == 0


INVALID_CONFIGS = [
    # shared memory: 4 stages of 128x64 A and B tiles are 512 KiB
    (GemmConfig("16x8x4", 128, 128, 64, 2, 4, 4), "sm_90", GemmConfigError,
     r"shared memory 4 stages x \(128 \+ 128\) x 64 doubles = 524288 B exceeds the 232448 B"),
    # an MMA shape the architecture lacks
    (GemmConfig("16x8x4", 64, 64, 16, 2, 2, 2), "sm_80", UnsupportedShapeError,
     r"mma 16x8x4 .* needs sm_90 or newer; sm_80 has only 8x8x4"),
    # a tile the MMA does not divide: 4 warps over 16 rows leave 4-row warp tiles for 16-row MMAs
    (GemmConfig("16x8x4", 16, 8, 8, 4, 1, 2), "sm_90", GemmConfigError,
     r"warp tile 4x8 .* is not a multiple of the mma 16x8"),
    (GemmConfig("8x8x4", 24, 8, 8, 1, 1, 2), "sm_90", GemmConfigError, r"bm=24 must be a power of two"),
    (GemmConfig("8x8x4", 8, 8, 8, 1, 1, 1, vec=4), "sm_90", GemmConfigError,
     r"stages=1 outside \[2, 8\]; vec=4 must be 1 .* or 2"),
    # the product formed in the stage needs a product operand, and the plain k-tile loop
    (GemmConfig("16x8x4", 64, 64, 16, 2, 2, 2, product_staged=True), "sm_90", GemmConfigError,
     r"product_staged needs a product operand"),
    (GemmConfig("16x8x4", 64, 64, 16, 2, 2, 2, product="b", product_staged=True, fragment_pipeline=True), "sm_90",
     GemmConfigError, r"product_staged runs without fragment_pipeline"),
]


@pytest.mark.parametrize("cfg,arch,error,message", INVALID_CONFIGS, ids=lambda x: getattr(x, "tag", None))
def test_invalid_configuration_is_rejected_before_compiling(cfg, arch, error, message, tmp_path, monkeypatch):
    """The kernel class and compile_config refuse a configuration the kernel cannot be built for
    with a ComposerError naming the problem, before the DSL traces or compiles anything."""
    import cutlass.cute as cute

    from composer.errors import ComposerError
    from composer.gemm.cute.compile import compile_config
    from composer.gemm.cute.kernel import TensorOpDgemm

    def no_compile(*args, **kwargs):
        raise AssertionError("the DSL was asked to compile an invalid configuration")

    monkeypatch.setattr(cute, "compile", no_compile)
    with pytest.raises(error, match=message) as raised:
        TensorOpDgemm(cfg, arch, "t_invalid")
    assert isinstance(raised.value, ComposerError)
    with pytest.raises(error, match=message):
        compile_config(cfg, arch, "t_invalid", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing cached either


@pytest.mark.parametrize("mma", ["8x8x4", "16x8x8", "16x8x16"])
def test_other_shapes_compile_on_sm90(mma):
    from composer.gemm.cute.compile import compile_config

    cfg = role_kernel("y", 16, 1, mma).config
    built = compile_config(cfg, "sm_90", f"t_{mma.replace('x', '_')}")
    k = next(iter(inspect_cubin(built.cubin).values()))
    assert k.dmma == {mma: cfg.mma_per_ktile} and k.spill_bytes == 0


# --- the kernel's view of the three roles (majors, strides, swap), checked with NumPy --------

def kernel_view_gemm(prob, majors, buffers, out_size):
    """C as the kernel computes it: A(m,k), B(n,k), C(m,n) read through majors and strides."""
    a_major, b_major, c_major = majors
    out = np.zeros(out_size)
    m, n, k = np.arange(prob.m), np.arange(prob.n), np.arange(prob.k)
    for bt in range(prob.batch):
        a_idx = bt * prob.stride_a + (m[:, None] + k[None, :] * prob.lda if a_major == "m"
                                      else k[None, :] + m[:, None] * prob.lda)
        b_idx = bt * prob.stride_b + (n[:, None] + k[None, :] * prob.ldb if b_major == "n"
                                      else k[None, :] + n[:, None] * prob.ldb)
        c = buffers[prob.a_operand][a_idx] @ buffers[prob.b_operand][b_idx].T
        c_idx = bt * prob.stride_c + (m[:, None] + n[None, :] * prob.ldc if c_major == "m"
                                      else n[None, :] + m[:, None] * prob.ldc)
        out[c_idx] = c
    return out


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("nq", [4, 6])
def test_kernel_problem_matches_blas(role, swap, nq):
    rng = np.random.default_rng(1)
    ne = 3
    diff = rng.standard_normal((nq, nq))
    flux = rng.standard_normal((ne, nq, nq, nq))
    spec = gemm_spec(role, nq, ne)
    prob = kernel_problem(spec, swap)
    got = kernel_view_gemm(prob, prob.majors, {"D": diff.reshape(-1), "flux": flux.reshape(-1)}, flux.size)
    np.testing.assert_allclose(got.reshape(flux.shape), emulate(spec, diff, flux), rtol=1e-13, atol=1e-13)


def test_launch_arguments_follow_the_abi_by_name():
    """KernelProblem.args binds each value to the KERNEL_PARAMS entry of the same name; aux
    pointers fill the aux slots in order, the rest are 0."""
    prob = kernel_problem(gemm_spec("y", 6, 3), swap=False)
    got = dict(zip((p.name for p in KERNEL_PARAMS), prob.args(11, 12, 13, aux=(14, 15), face=16,
                                                             alpha=2.0, beta=0.5, factor=17), strict=True))
    assert got == {"a": 11, "b": 12, "c": 13, "aux0": 14, "aux1": 15, "aux2": 0, "aux3": 0, "aux4": 0,
                   "face": 16, "factor": 17, "m": prob.m, "n": prob.n, "k": prob.k,
                   "batch": prob.batch, "lda": prob.lda, "ldb": prob.ldb, "ldc": prob.ldc,
                   "stride_a": prob.stride_a, "stride_b": prob.stride_b, "stride_c": prob.stride_c,
                   "alpha": 2.0, "beta": 0.5}
    with pytest.raises(ValueError, match="6 aux pointers; the kernel has 5 slots"):
        prob.args(1, 2, 3, aux=(1, 2, 3, 4, 5, 6))


def test_default_tiles_valid_for_all_orders():
    for nq in (8, 16, 32, 64, 128, 256, 512, 576, 768, 1024):
        for mma in ("8x8x4", "16x8x4", "16x8x8", "16x8x16"):
            for role in ROLES:
                rk = role_kernel(role, nq, 1, mma)
                assert rk.config.smem_bytes <= arch_limits(DEFAULT_ARCH).smem_per_block_optin
                assert rk.problem(gemm_spec(role, nq, 2)).majors == (
                    rk.config.a_major, rk.config.b_major, rk.config.c_major)


def test_shared_memory_limit_is_the_target_archs():
    """192 KiB of pipeline buffers: within sm_90's 227 KiB per block, over sm_80's 163 KiB."""
    cfg = GemmConfig("8x8x4", bm=128, bn=128, bk=32, warps_m=4, warps_n=4, stages=3)
    assert cfg.smem_bytes == 192 * 1024
    assert cfg.validate("sm_90") is cfg and cfg.validate("sm_100") is cfg
    with pytest.raises(ValueError, match=f"exceeds the {arch_limits('sm_80').smem_per_block_optin} B a block may use on sm_80"):
        cfg.validate("sm_80")


def test_stale_gemm_entry_is_refused_at_load_and_rebuilt(builds, tmp_path):
    """A manifest entry whose GEMM configuration carries a key this composer no longer knows (a
    build directory from an older version) stops the GEMM_CUTE path with the rebuild command,
    and `composer build` recompiles exactly that entry."""
    import dataclasses

    from composer.errors import ComposerError
    from composer.paths.gemm_cute import entry_gemm_config

    d = tmp_path / "b"
    shutil.copytree(builds[("sm_90", "16x8x4")], d)
    raw = json.loads((d / "manifest.json").read_text())
    x = next(k for k in raw["kernels"] if k["config"].get("role") == "x")
    x["config"]["gemm"]["prefetch"] = False  # as an older composer wrote it, with its own key
    x["config"]["build_key"] = "key-of-an-older-configuration"
    (d / "manifest.json").write_text(json.dumps(raw))
    entry = next(e for e in read_manifest(d / "manifest.json") if e.config.get("role") == "x")
    with pytest.raises(ComposerError, match=r"prefetch.*composer build --arch sm_90 --mma 16x8x4 --orders 7"):
        entry_gemm_config(entry)
    assert entry_gemm_config(dataclasses.replace(entry, config={**entry.config, "gemm": {
        k: v for k, v in entry.config["gemm"].items() if k != "prefetch"}})) is not None
    report = build(plan("sm_90", "16x8x4", [7], ["GEMM_CUTE"]), d)
    assert report.built == [x["config"]["job"]] and report.reasons[x["config"]["job"]] == "configuration changed"
    fresh = next(e for e in read_manifest(d / "manifest.json") if e.config.get("role") == "x")
    assert "prefetch" not in fresh.config["gemm"] and entry_gemm_config(fresh).mma == "16x8x4"
