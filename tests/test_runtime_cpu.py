"""CPU tests of composer.runtime: NVRTC + cache, manifests, grid rules, argument packing, no-GPU path."""

from __future__ import annotations

import ctypes
import json
import struct

import pytest

from composer.runtime import (
    CompileError,
    CudaError,
    KernelEntry,
    LaunchError,
    ManifestError,
    NoGpuError,
    Param,
    check,
    compile_cuda,
    elf_symbols,
    entry_points,
    file_sha256,
    gpu_available,
    read_manifest,
    write_manifest,
)
from composer.runtime import nvrtc as nvrtc_mod
from composer.runtime._bindings import driver, nvrtc
from composer.runtime.gridexpr import GridRuleError, check_rule, evaluate
from composer.runtime.params import BLOCK_LIMITS, GRID_LIMITS, PackedArgs, dim3, params

SRC = 'extern "C" __global__ void scale_nq2(double* a, long long n, double s)\n' \
      '{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n'


@pytest.fixture
def cache(tmp_path):
    nvrtc_mod.stats.reset()
    return tmp_path / "nvrtc"


# ---------------------------------------------------------------- errors / no GPU
def test_check_unwraps_values():
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS,)) is None
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS, 7)) == 7
    assert check((nvrtc.nvrtcResult.NVRTC_SUCCESS, 1, 2)) == (1, 2)


def test_check_raises_with_name():
    with pytest.raises(CudaError, match="NVRTC_ERROR_COMPILATION") as info:
        check((nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION,), "nvrtcCompileProgram")
    assert "nvrtcCompileProgram" in str(info.value)
    with pytest.raises(CudaError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        check((driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None), "cuMemAlloc")


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU")
def test_no_gpu_path():
    from composer.runtime import Device, DeviceBuffer, device_count

    assert gpu_available() is False
    with pytest.raises(NoGpuError, match="(?i)driver|gpu|device"):
        Device()
    with pytest.raises(NoGpuError):
        device_count()
    with pytest.raises(NoGpuError):
        DeviceBuffer(1024)


# ---------------------------------------------------------------- NVRTC
def test_compile_returns_cubin_and_lowered_names(cache):
    k = compile_cuda(SRC, "scale.cu", arch="sm_90", cache_dir=cache, entry_points=["scale_nq2"])
    assert k.cubin[:4] == b"\x7fELF"
    assert k.lowered_names == {"scale_nq2": "scale_nq2"} and k.symbol("scale_nq2") == "scale_nq2"
    assert entry_points(k.cubin) == ["scale_nq2"]
    assert k.nvrtc_version >= (12, 0) and not k.from_cache


def test_cache_hit_served_from_disk(cache):
    a = compile_cuda(SRC, "scale.cu", cache_dir=cache, entry_points=["scale_nq2"])
    b = compile_cuda(SRC, "scale.cu", cache_dir=cache, entry_points=["scale_nq2"])
    assert (nvrtc_mod.stats.compiles, nvrtc_mod.stats.hits) == (1, 1)
    assert b.from_cache and b.cubin == a.cubin and b.lowered_names == a.lowered_names
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]  # atomic writes leave nothing


@pytest.mark.parametrize("change", ["source", "options", "arch"])
def test_cache_invalidation(cache, change):
    compile_cuda(SRC, "scale.cu", cache_dir=cache)
    kwargs = {"source": SRC, "name": "scale.cu", "cache_dir": cache}
    if change == "source":
        kwargs["source"] = SRC + "// changed\n"
    elif change == "options":
        kwargs["options"] = ["-DEXTRA=1"]
    else:
        kwargs["arch"] = "sm_80"
    k = compile_cuda(**kwargs)
    assert not k.from_cache and nvrtc_mod.stats.compiles == 2 and nvrtc_mod.stats.hits == 0
    assert compile_cuda(**kwargs).from_cache  # and the new variant is cached in turn


def test_cache_key_ignores_option_order():
    v = (13, 0)
    assert nvrtc_mod.cache_key(SRC, "sm_90", ["-DA", "-DB"], [], v) == nvrtc_mod.cache_key(SRC, "sm_90", ["-DB", "-DA"], [], v)
    assert nvrtc_mod.cache_key(SRC, "sm_90", [], [], v) != nvrtc_mod.cache_key(SRC, "sm_90", [], [], (13, 1))


@pytest.mark.parametrize("damage", ["flip", "truncate", "sidecar", "missing_sidecar"])
def test_corrupt_cache_rebuilt(cache, damage):
    good = compile_cuda(SRC, "scale.cu", cache_dir=cache)
    cubin = cache / f"{good.key}.cubin"
    meta = cache / f"{good.key}.json"
    if damage == "flip":
        raw = bytearray(cubin.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        cubin.write_bytes(bytes(raw))
    elif damage == "truncate":
        cubin.write_bytes(cubin.read_bytes()[:100])
    elif damage == "sidecar":
        meta.write_text("{not json")
    else:
        meta.unlink()
    again = compile_cuda(SRC, "scale.cu", cache_dir=cache)
    assert not again.from_cache and again.cubin == good.cubin
    assert nvrtc_mod.stats.rebuilds == 1 and nvrtc_mod.stats.compiles == 2
    assert json.loads(meta.read_text())["sha256"] == file_sha256(cubin)
    assert compile_cuda(SRC, "scale.cu", cache_dir=cache).from_cache


def test_default_cache_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path))
    assert nvrtc_mod.default_cache_dir() == tmp_path / "nvrtc"
    nvrtc_mod.stats.reset()
    compile_cuda(SRC, "scale.cu")
    assert list((tmp_path / "nvrtc").glob("*.cubin"))


def test_compile_error_has_log_and_line(cache):
    bad = 'extern "C" __global__ void k(double* a)\n{\n    a[0] = not_declared;\n}\n'
    with pytest.raises(CompileError) as info:
        compile_cuda(bad, "bad.cu", cache_dir=cache)
    msg = str(info.value)
    assert "bad.cu(3)" in msg and "not_declared" in msg and "    3 |" in msg
    assert not list(cache.glob("*.cubin"))  # failures are not cached


@pytest.mark.parametrize("opt", ["--use_fast_math", "-use_fast_math", "--ftz=true", "--prec-div=false",
                                 "--gpu-architecture=sm_80", "-arch=sm_80"])
def test_forbidden_options(cache, opt):
    with pytest.raises(ValueError, match="not allowed"):
        compile_cuda(SRC, "scale.cu", options=[opt], cache_dir=cache)


@pytest.mark.parametrize("arch", ["sm90", "compute_90", "sm_9", "90"])
def test_bad_arch(cache, arch):
    with pytest.raises(ValueError, match="arch"):
        compile_cuda(SRC, "scale.cu", arch=arch, cache_dir=cache)


def test_elf_reader_finds_entry(cache):
    """(cuobjdump cross-checks the reader in test_support_kernels_cpu.py.)"""
    helper = 'extern "C" __device__ __noinline__ double twice(double x) { return 2 * x; }\n'
    k = compile_cuda(helper + SRC, "scale.cu", cache_dir=cache)
    funcs = {s.name: s for s in elf_symbols(k.cubin) if s.kind == 2}
    assert funcs["scale_nq2"].entry and funcs["scale_nq2"].size > 0 and funcs["scale_nq2"].binding == 1
    assert entry_points(k.cubin) == ["scale_nq2"]


def test_elf_reader_rejects_non_elf():
    with pytest.raises(ValueError):
        elf_symbols(b"not an elf image at all" * 4)


# ---------------------------------------------------------------- grid rules
@pytest.mark.parametrize("rule,names,want", [
    ("ceil(n/256)", {"n": 1000}, 4),
    ("ceil(n/256)", {"n": 1024}, 4),
    ("cdiv(n, 256)", {"n": 1025}, 5),
    ("(n + 255) // 256", {"n": 1025}, 5),
    ("min(ceil(ne*nq*nq*nq/256), sms*16)", {"ne": 4096, "nq": 8, "sms": 132}, 2112),
    ("max(1, n // 7) * 2 - 1 + n % 3", {"n": 20}, 5),
    ("ceil(n/3)", {"n": 2**60 + 1}, (2**60 + 1 + 2) // 3),  # exact beyond 2**53
    ("-(-n // 4)", {"n": 9}, 3),
    ("floor(n/2)", {"n": 9}, 4),
    (12, {}, 12),
])
def test_grid_rule_values(rule, names, want):
    assert evaluate(rule, names) == want


@pytest.mark.parametrize("rule,msg", [
    ("__import__('os').system('true')", "only calls"),
    ("n.bit_length()", "only calls"),
    ("open('x')", "only calls"),
    ("m + 1", "unknown name 'm'"),
    ("n ** 2", "Pow"),
    ("n if n else 1", "IfExp"),
    ("[n][0]", "not allowed"),
    ("lambda: 1", "not allowed"),
    ("n / 3", "not an integer"),
    ("n // 0", "division by zero"),
    ("1.5 * n", "integer constants"),
    ("'a'", "integer constants"),
    ("ceil(n, 2)", "argument"),
    ("ceil(n/2", "syntax"),
    ("ceil(x=n)", "only calls"),
])
def test_grid_rule_rejects(rule, msg):
    with pytest.raises(GridRuleError, match=msg if msg != "Pow" else "Pow|not allowed"):
        evaluate(rule, {"n": 10})


def test_check_rule_names():
    assert check_rule("min(ceil(n/256), sms*4)") == {"n", "sms"}
    with pytest.raises(GridRuleError):
        check_rule("os.system('x')")


# ---------------------------------------------------------------- argument packing
class FakeBuffer:
    ptr = 0xDEAD0000


def test_pack_args_layout():
    sig = params("a:ptr n:i64 s:f64 m:i32 u:u32 w:u64")
    packed = PackedArgs(sig, [FakeBuffer(), 2**40, 0.5, -3, 7, 2**63])
    ptrs = ctypes.cast(packed.address, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_uint64.from_address(ptrs[0]).value == 0xDEAD0000
    assert ctypes.c_int64.from_address(ptrs[1]).value == 2**40
    assert ctypes.c_double.from_address(ptrs[2]).value == 0.5
    assert ctypes.c_int32.from_address(ptrs[3]).value == -3
    assert struct.unpack("<I", ctypes.string_at(ptrs[4], 4))[0] == 7
    assert ctypes.c_uint64.from_address(ptrs[5]).value == 2**63
    assert PackedArgs((), []).address == 0


@pytest.mark.parametrize("args,msg", [
    ([1, 2], "expects 3 arguments"),
    ([0x1000, 1.5, 2.0], "expected an integer"),
    ([0x1000, 4, "x"], "expected a real"),
    ([0x1000, True, 1.0], "bool"),
    ([-1, 4, 1.0], "out of range"),
    ([0x1000, 2**63, 1.0], "out of range"),
    ([1.0, 4, 1.0], "'a'"),
])
def test_pack_args_validation(args, msg):
    with pytest.raises(LaunchError, match=msg):
        PackedArgs(params("a:ptr n:i64 s:f64"), args)


def test_param_and_dims_validation():
    with pytest.raises(ValueError, match="ctype"):
        Param("x", "f32")
    assert dim3(5, "grid", GRID_LIMITS) == (5, 1, 1)
    assert dim3((8, 4), "block", BLOCK_LIMITS) == (8, 4, 1)
    with pytest.raises(LaunchError, match="block.z"):
        dim3((1, 1, 65), "block", BLOCK_LIMITS)
    with pytest.raises(LaunchError, match="grid.x"):
        dim3(0, "grid", GRID_LIMITS)
    with pytest.raises(LaunchError):
        dim3((1, 1, 1, 1), "grid", GRID_LIMITS)


# ---------------------------------------------------------------- manifests
def _entry(cubin_name: str, sha: str = "", **over) -> dict:
    raw = {"symbol": "dgemm_x_0", "cubin": cubin_name, "sha256": sha, "block": [128, 1, 1],
           "dynamic_smem": 65536, "params": [{"name": "a", "ctype": "ptr"}, {"name": "n", "ctype": "i64"},
                                              {"name": "alpha", "ctype": "f64"}],
           "grid_rule": {"x": "ceil(n/128)", "y": "ne"}, "config": {"tile": [64, 64]}, "arch": "sm_90a",
           "compiler": {"cutlass_dsl": "4.8.1"}}
    raw.update(over)
    return raw


@pytest.fixture
def manifest(tmp_path):
    (tmp_path / "a.cubin").write_bytes(b"\x7fELF" + b"a" * 60)
    (tmp_path / "b.cubin").write_bytes(b"\x7fELF" + b"b" * 60)
    path = tmp_path / "manifest.json"
    write_manifest(path, [_entry("a.cubin"), _entry("b.cubin", symbol="other_1", grid_rule="ceil(n/64)")])
    return path


def test_manifest_round_trip(manifest, tmp_path):
    entries = read_manifest(manifest)
    assert [e.symbol for e in entries] == ["dgemm_x_0", "other_1"]
    e = entries[0]
    assert e.block == (128, 1, 1) and e.dynamic_smem == 65536 and e.arch == "sm_90a"
    assert e.params == (Param("a", "ptr"), Param("n", "i64"), Param("alpha", "f64"))
    assert e.sha256 == file_sha256(tmp_path / "a.cubin") and e.cubin_path == tmp_path / "a.cubin"
    assert e.grid(n=1000, ne=3) == (8, 3, 1) and entries[1].grid(n=65) == (2, 1, 1)
    assert e.config == {"tile": [64, 64]} and e.compiler == {"cutlass_dsl": "4.8.1"}
    write_manifest(tmp_path / "copy.json", entries)
    assert read_manifest(tmp_path / "copy.json") == entries
    assert not list(tmp_path.glob("*.tmp"))


def test_manifest_stale_sha(manifest, tmp_path):
    (tmp_path / "b.cubin").write_bytes(b"\x7fELF rebuilt")
    with pytest.raises(ManifestError, match=r"b\.cubin.*'other_1'.*stale") as info:
        read_manifest(manifest)
    assert "sha256" in str(info.value)
    assert len(read_manifest(manifest, verify=False)) == 2


def test_manifest_missing_cubin(manifest, tmp_path):
    (tmp_path / "a.cubin").unlink()
    with pytest.raises(ManifestError, match="not found"):
        read_manifest(manifest)


@pytest.mark.parametrize("mutate,key", [
    (lambda r: r.pop("symbol"), "symbol"),
    (lambda r: r.update(block=[128, 1]), "block"),
    (lambda r: r.update(block=[0, 1, 1]), "block"),
    (lambda r: r.update(dynamic_smem=-1), "dynamic_smem"),
    (lambda r: r.update(params=[{"name": "a", "ctype": "float"}]), "params[0].ctype"),
    (lambda r: r.update(params=[{"name": "a"}]), "params[0]"),
    (lambda r: r.update(grid_rule={"x": "eval('1')"}), "grid_rule.x"),
    (lambda r: r.update(grid_rule={"w": "1"}), "grid_rule"),
    (lambda r: r.update(sha256="abc"), "sha256"),
    (lambda r: r.update(cubin="../x.cubin"), "cubin"),
    (lambda r: r.update(config=[1]), "config"),
    (lambda r: r.update(colour="red"), "colour"),
])
def test_manifest_schema_errors_name_file_and_key(manifest, mutate, key):
    doc = json.loads(manifest.read_text())
    mutate(doc["kernels"][1])
    manifest.write_text(json.dumps(doc))
    with pytest.raises(ManifestError) as info:
        read_manifest(manifest)
    msg = str(info.value)
    assert str(manifest) in msg and "kernels[1]" in msg and f"key '{key}'" in msg


@pytest.mark.parametrize("doc,key", [
    ({"schema": "x", "version": 1, "kernels": []}, "schema"),
    ({"schema": "composer.kernel-manifest", "version": 99, "kernels": []}, "version"),
    ({"schema": "composer.kernel-manifest", "version": 1}, "kernels"),
])
def test_manifest_top_level_errors(tmp_path, doc, key):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=f"m.json: key '{key}'"):
        read_manifest(path)
    path.write_text("{broken")
    with pytest.raises(ManifestError, match="invalid JSON"):
        read_manifest(path)


def test_manifest_duplicate_symbols(tmp_path):
    (tmp_path / "a.cubin").write_bytes(b"x")
    with pytest.raises(ManifestError, match="duplicate"):
        path = tmp_path / "m.json"
        write_manifest(path, [_entry("a.cubin"), _entry("a.cubin")])
        read_manifest(path)


def test_write_manifest_validates(tmp_path):
    (tmp_path / "a.cubin").write_bytes(b"x")
    with pytest.raises(ManifestError, match="key 'block'"):
        write_manifest(tmp_path / "m.json", [_entry("a.cubin", block=[1])])
    assert not (tmp_path / "m.json").exists()


def test_kernel_entry_is_dataclass(manifest):
    e = read_manifest(manifest)[0]
    assert isinstance(e, KernelEntry) and e.to_dict()["params"][2] == {"name": "alpha", "ctype": "f64"}
