"""CPU tests of composer.kernels: templates render, compile for sm_80/90/100, export the right
entry symbols with signatures matching the Python launch helpers, and use no local memory."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from composer.kernels import support
from composer.kernels.render import render
from composer.runtime import LaunchError, entry_points
from composer.runtime.params import PackedArgs

ARCHS = ("sm_80", "sm_90", "sm_100")
NQS = (2, 8, 64, 768)
C_TO_CTYPE = {"const double*": "ptr", "double*": "ptr", "const i64*": "ptr", "i64": "i64", "double": "f64"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("nvrtc")


def _cuobjdump() -> str | None:
    tool = shutil.which("cuobjdump")
    if tool:
        return tool
    try:
        import nvidia.cu13
    except ImportError:
        return None
    cand = Path(next(iter(nvidia.cu13.__path__))) / "bin" / "cuobjdump"
    return str(cand) if cand.exists() else None


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("nq", NQS)
@pytest.mark.parametrize("family", (*support.FAMILIES, *support.PARITY_FAMILIES))  # NQS are even: parity's too
def test_compiles_with_entry_symbol(family, nq, arch, cache_dir):
    built = support.compile_support(family, nq, arch, cache_dir=cache_dir)
    name = f"{family}_nq{nq}"
    assert built.symbol(name) == name
    assert entry_points(built.cubin) == [name]
    assert built.log.strip() == ""  # no warnings either


@pytest.mark.parametrize("family", (*support.FAMILIES, *support.PARITY_FAMILIES))
def test_cuobjdump_sees_entry_and_no_local_memory(family, cache_dir, tmp_path):
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not available")
    for nq in (8, 768):
        path = tmp_path / f"{family}_{nq}.cubin"
        path.write_bytes(support.compile_support(family, nq, "sm_90", cache_dir=cache_dir).cubin)
        elf = subprocess.run([tool, "-elf", str(path)], capture_output=True, text=True, check=True).stdout
        assert _cuobjdump_lists_entry(elf, f"{family}_nq{nq}"), elf
        assert entry_points(path.read_bytes()) == [f"{family}_nq{nq}"]  # our reader agrees
        res = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
        assert "STACK:0" in res and "LOCAL:0" in res, res


def _cuobjdump_lists_entry(elf_dump: str, name: str) -> bool:
    """Symbol-table line for ``name`` marked as a global function entry: cuobjdump 13.5 spells it
    ``FUNC GLOBAL DEFAULT ENTRY``, 13.0 prints st_info/st_other numerically (0x12, 0x10)."""
    for line in elf_dump.splitlines():
        marked = re.search(r"FUNC\s+GLOBAL\s+\S+\s+ENTRY", line) or re.search(r"\s0x12\s+0x10\s", line)
        if line.split() and line.split()[-1] == name and marked:
            return True
    return False


_SIG_RE = re.compile(r'extern "C" __global__ void __launch_bounds__\((\d+)\)\s*(\w+)\(([^)]*)\)', re.DOTALL)


@pytest.mark.parametrize("family", support.FAMILIES)
def test_c_signature_matches_python_params(family):
    src = support.source(family, 8, block=128)
    m = _SIG_RE.search(src)
    assert m, src
    assert m.group(1) == "128" and m.group(2) == f"{family}_nq8"
    c_params = []
    for decl in m.group(3).split(","):
        decl = " ".join(decl.replace("__restrict__", "").split())
        ctype, _, pname = decl.rpartition(" ")
        c_params.append((pname, C_TO_CTYPE[ctype.replace(" *", "*")]))
    assert c_params == [(p.name, p.ctype) for p in support.SIGNATURES[family]]


def test_sources_are_64bit_safe():
    for family in support.FAMILIES:
        src = support.source(family, 1024)
        assert "constexpr i64 NQ = 1024;" in src and "i64 ne)" in src
        assert re.search(r"for \(i64 \w+ = ", src)  # 64-bit loop counters everywhere


def test_source_validation():
    with pytest.raises(ValueError, match="unknown support kernel"):
        support.source("nope", 8)
    with pytest.raises(ValueError, match="nq"):
        support.source("rk3_stage", 1)
    with pytest.raises(ValueError, match="block"):
        support.source("rk3_stage", 4, block=2048)


def test_render_is_strict_and_takes_template_dir(tmp_path):
    with pytest.raises(jinja2.UndefinedError):
        render("volume_flux.cu.j2", nq=8, family="volume_flux")  # block missing
    (tmp_path / "mine.cu.j2").write_text("__global__ void k{{ nq }}() {}\n")
    assert render("mine.cu.j2", template_dir=tmp_path, nq=3) == "__global__ void k3() {}\n"
    with pytest.raises(jinja2.UndefinedError):
        render("mine.cu.j2", template_dir=tmp_path)


def test_grid_size_and_launch_shape():
    assert support.grid_size(1, 256, 132) == 1
    assert support.grid_size(10_000, 256, 132) == 40
    assert support.grid_size(10**9, 256, 132) == 132 * support.BLOCKS_PER_SM
    assert support.grid_size(10**12, 256, None) == 2**31 - 1
    assert support.launch_shape("surface_flux", 4, 3, 256, 132) == (2, 256)   # 288 face nodes
    assert support.launch_shape("separable_lift", 4, 3, 64, 132) == (3, 64)   # 192 volume nodes
    assert support.launch_shape("rk3_stage", 4, 3, 64, 132) == (2, 64)        # 96 pairs
    assert support.RK3_STAGES[1] == (0.75, 0.25)


class _FakeKernel:
    """Stands in for a loaded Kernel: records the launch and packs args like the real one."""

    def __init__(self, name: str, family: str) -> None:
        self.name, self.family = name, family
        self.block = (128, 1, 1)
        self.device = SimpleNamespace(sm_count=132)
        self.calls: list = []

    def launch(self, grid, block, args, shared, stream):
        PackedArgs(support.SIGNATURES[self.family], args)
        self.calls.append((grid, block, tuple(args), shared, stream))


def test_launch_helpers_pack_in_signature_order():
    k = _FakeKernel("surface_flux_nq4", "surface_flux")
    support.launch_surface_flux(k, *range(1, 12), ne=3)
    assert k.calls == [(3, 128, tuple(range(1, 12)) + (3,), 0, None)]  # 288 nodes / 128
    k = _FakeKernel("rk3_stage_nq4", "rk3_stage")
    support.launch_rk3_stage(k, 1, 2, 3, 4, 0.75, 0.25, 1e-3, ne=3, stream="s")
    assert k.calls[0][2] == (1, 2, 3, 4, 0.75, 0.25, 1e-3, 3) and k.calls[0][4] == "s"
    k = _FakeKernel("separable_lift_nq4", "separable_lift")
    support.launch_separable_lift(k, *range(1, 9), ne=0)
    assert k.calls == []  # nothing to do for an empty mesh
    with pytest.raises(LaunchError, match="expected a volume_flux kernel"):
        support.launch_volume_flux(_FakeKernel("rk3_stage_nq4", "rk3_stage"), *range(1, 8), ne=1)
    with pytest.raises(LaunchError, match="expects 8 arguments"):
        support._launch(_FakeKernel("volume_flux_nq4", "volume_flux"), "volume_flux", (1, 2), 1, None)
