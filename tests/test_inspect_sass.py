"""CPU tests of composer.arch.sass on CUBINs compiled here with NVRTC.

Each kernel issues a known number of inline-PTX ``mma.sync`` of one shape, so the expected SASS
is exact: the notes' table (DMMA.884 on sm_80, native wide shapes on sm_90, m8n8k4 expansion on
sm_100).
"""

from __future__ import annotations

import pytest

from composer.arch.mma import SHAPES, UnsupportedShapeError, expected_sass, mma_shape
from composer.arch.sass import (
    InspectError,
    KernelSass,
    check_expected,
    find_cuobjdump,
    function_sass,
    inspect_cubin,
    normalize_dmma,
    parse_cuobjdump,
)
from composer.runtime import CompileError, compile_cuda

N_MMA = 3  # mma.sync per kernel: a dependent chain, so ptxas cannot merge or drop any


def mma_kernel(shape_name: str, name: str) -> str:
    """CUDA source of a kernel issuing N_MMA dependent ``mma.sync`` of ``shape_name``."""
    s = mma_shape(shape_name)
    outs = ", ".join(f"%{i}" for i in range(s.c_regs))
    a = ", ".join(f"%{s.c_regs + i}" for i in range(s.a_regs))
    b = ", ".join(f"%{s.c_regs + s.a_regs + i}" for i in range(s.b_regs))
    cons = ", ".join(f'"+d"(d[{i}])' for i in range(s.c_regs))
    ins = ", ".join([f'"d"(x[{i}])' for i in range(s.a_regs)] + [f'"d"(y[{i}])' for i in range(s.b_regs)])
    return f"""
extern "C" __global__ void {name}(const double* __restrict__ pa, const double* __restrict__ pb, double* pc) {{
  double d[{s.c_regs}] = {{}}; double x[{s.a_regs}]; double y[{s.b_regs}];
  #pragma unroll
  for (int i = 0; i < {s.a_regs}; ++i) x[i] = pa[threadIdx.x * {s.a_regs} + i];
  #pragma unroll
  for (int i = 0; i < {s.b_regs}; ++i) y[i] = pb[threadIdx.x * {s.b_regs} + i];
  #pragma unroll
  for (int r = 0; r < {N_MMA}; ++r)
    asm volatile("mma.sync.aligned.{s.ptx}.row.col.f64.f64.f64.f64 {{{outs}}}, {{{a}}}, {{{b}}}, {{{outs}}};"
                 : {cons} : {ins});
  #pragma unroll
  for (int i = 0; i < {s.c_regs}; ++i) pc[threadIdx.x * {s.c_regs} + i] = d[i];
}}
"""


DFMA_SRC = r"""
extern "C" __global__ void dfma_only(const double* a, double* c, int n) {
  __shared__ double s[128];
  s[threadIdx.x % 128] = a[threadIdx.x];
  __syncthreads();
  double acc = a[threadIdx.x + 1];
  for (int i = 0; i < n; ++i) acc = fma(s[(i + threadIdx.x) % 128], acc, 0.5);
  c[threadIdx.x] = acc;
}
"""

SPILL_SRC = r"""
extern "C" __global__ void local_array(const double* a, double* c, int k) {
  double buf[64];
  for (int i = 0; i < 64; ++i) buf[i] = a[i * blockDim.x + threadIdx.x];
  c[threadIdx.x] = buf[k & 63] + buf[(k * 7) & 63];
}
"""

ARCH_SHAPES = [("sm_80", "8x8x4")] + [(arch, s) for arch in ("sm_90", "sm_100") for s in SHAPES]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("nvrtc")


def _cubin(src: str, arch: str, cache) -> bytes:
    return compile_cuda(src, "inspect_test.cu", arch=arch, cache_dir=cache).cubin


def test_tools_present():
    assert find_cuobjdump().name == "cuobjdump"


def _kname(shape: str) -> str:
    return f"k_{shape.replace('x', '_')}"


@pytest.fixture(scope="module")
def per_arch(cache):
    """One CUBIN per arch holding a kernel for every shape the arch has, plus the DFMA kernel."""
    out = {}
    for arch in ("sm_80", "sm_90", "sm_100"):
        shapes = [s for a, s in ARCH_SHAPES if a == arch]
        src = "".join(mma_kernel(s, _kname(s)) for s in shapes) + DFMA_SRC
        out[arch] = inspect_cubin(_cubin(src, arch, cache))
    return out


@pytest.mark.parametrize("arch,shape", ARCH_SHAPES)
def test_dmma_shapes_per_arch(arch, shape, per_arch):
    name = _kname(shape)
    k = per_arch[arch][name]
    assert k.arch == arch
    sass_shape, factor = expected_sass(shape, arch)
    assert k.dmma == {sass_shape: factor * N_MMA}
    assert k.dfma == 0 and k.registers > 0 and k.spill_bytes == 0
    assert check_expected([k], shape) == []
    assert check_expected([k], shape, mma_per_kernel={name: N_MMA}) == []
    if arch == "sm_80":
        assert k.dmma_spellings == {"DMMA.884": N_MMA}
    elif arch == "sm_90":
        assert k.dmma_spellings == {f"DMMA.{shape}": N_MMA}


def test_sm100_expands_wide_shapes(per_arch):
    """The paper's S7.3 check: on sm_100 a 16x8x4 mma is two DMMA.8x8x4 and never DMMA.16x8x4."""
    wide = per_arch["sm_100"][_kname("16x8x4")]
    assert wide.dmma == {"8x8x4": 2 * N_MMA}
    problems = check_expected([wide], "16x8x4", arch="sm_90")
    assert problems and "expected only DMMA 16x8x4" in problems[0]


def test_sm80_rejects_wide_shapes(cache):
    with pytest.raises(CompileError, match="sm_90"):
        _cubin(mma_kernel("16x8x4", "wide80"), "sm_80", cache)
    with pytest.raises(UnsupportedShapeError, match="8x8x4"):
        expected_sass("16x8x8", "sm_80")


def test_wrong_shape_detected(per_arch):
    problems = check_expected([per_arch["sm_90"][_kname("16x8x8")]], "16x8x4")
    assert len(problems) == 1 and "found {'16x8x8': 3}" in problems[0]
    name = _kname("16x8x4")
    assert "expected 2 x 5" in check_expected([per_arch["sm_100"][name]], "16x8x4",
                                              mma_per_kernel={name: 5})[0]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
def test_dfma_only_kernel(arch, per_arch):
    k = per_arch[arch]["dfma_only"]
    assert k.dmma == {} and k.dfma >= 1
    assert k.shared_bytes >= 128 * 8
    assert check_expected({"dfma_only": k}, "8x8x4") == [f"dfma_only ({arch}): no DMMA instruction "
                                                          "(expected DMMA 8x8x4)"]


def test_local_memory_reported(cache, tmp_path):
    path = tmp_path / "local.cubin"
    path.write_bytes(_cubin(SPILL_SRC, "sm_90", cache))
    k = inspect_cubin(path)["local_array"]
    assert k.spill_bytes >= 64 * 8 and k.local_stores > 0
    fake = KernelSass("local_array", "sm_90", {"8x8x4": 1}, 0, 40, k.spill_bytes, 0)
    assert check_expected([fake], "8x8x4") == []
    assert "register spills" in check_expected([fake], "8x8x4", allow_spills=False)[0]


def test_multi_kernel_cubin(per_arch):
    assert set(per_arch["sm_90"]) == {_kname(s) for s in SHAPES} | {"dfma_only"}


def test_normalize_and_parse_text():
    assert normalize_dmma("DMMA.884") == "8x8x4"
    assert normalize_dmma("DMMA.16x8x16") == "16x8x16"
    with pytest.raises(ValueError):
        normalize_dmma("DFMA")
    text = """
Resource usage:
 Function kern:
  REG:40 STACK:16 SHARED:2048 LOCAL:8 CONSTANT[0]:552 TEXTURE:0 SURFACE:0 SAMPLER:0

\tcode for sm_80
\t\tFunction : kern
        /*0010*/                   DMMA.884 R8, R2, R4, R8 ;    /* 0x0 */
        /*0020*/              @!P0 DMMA.884 R8, R2, R4, R8 ;    /* 0x0 */
        /*0030*/                   DFMA R6, R2, R14, 1.5 ;     /* 0x0 */
        /*0040*/                   STL.64 [R1], R8 ;           /* 0x0 */
"""
    k = parse_cuobjdump(text)["kern"]
    assert (k.arch, k.dmma, k.dfma, k.registers, k.spill_bytes, k.shared_bytes, k.local_stores) == \
        ("sm_80", {"8x8x4": 2}, 1, 40, 24, 2048, 1)
    listing = function_sass(text)
    assert set(listing) == {"kern"} and listing["kern"].count("DMMA.884") == 2 and "REG:" not in listing["kern"]
    two_archs = text + text.replace("sm_80", "sm_90")
    assert set(function_sass(two_archs)) == set(parse_cuobjdump(two_archs)) == {"sm_80:kern", "sm_90:kern"}


def test_not_a_cubin():
    with pytest.raises(InspectError):
        inspect_cubin(b"hello world")
