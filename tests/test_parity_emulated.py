"""The GEMM and GEMM_CUTE paths with ``parity`` end to end on the CPU: the paths' real allocation, plan
and launch code, with cuBLAS replaced by a NumPy column-major dgemm behind the nvmath binding names (so
``CublasGemm.run``'s pointer and offset arithmetic is what runs), the CuTe GEMMs of a real
``composer build`` by a NumPy model of their ABI (``_cute_kernel``: what the kernel computes from its
pointer, size, leading-dimension and stride arguments and the majors it was compiled with, so
GEMM_CUTE's offsets and transposed calls are what runs) and the support kernels by their NumPy
definitions (``composer.parity.reference`` for the parity pair). Checks which kernels run, that
every GEMM call stays inside its buffers, and dqdt against the reference."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from composer import dg
from composer.kernels.support import SIGNATURES
from composer.parity import reference as par
from composer.paths.problem import DeviceProblem
from composer.paths.registry import path_class
from composer.validation import relative_max_difference
from tests.emulated_runtime import Memory, fake_module, fake_runtime


def _fake_cublas(memory: Memory, log: list[str]) -> SimpleNamespace:
    """The nvmath ``cublas`` bindings CublasGemm uses, as column-major NumPy on ``memory``."""

    def view(ptr: int, rows: int, cols: int, ld: int) -> np.ndarray:
        buf = memory.tail(ptr)
        assert (cols - 1) * ld + rows <= buf.size, "a GEMM operand leaves its buffer"
        return np.lib.stride_tricks.as_strided(buf, (rows, cols), (8, 8 * ld))

    def gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc) -> None:
        am = view(a, *((k, m) if ta else (m, k)), lda)
        bm = view(b, *((n, k) if tb else (k, n)), ldb)
        view(c, m, n, ldc)[...] = (am.T if ta else am) @ (bm.T if tb else bm)

    def dgemm(handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        log.append("dgemm")
        gemm(ta == "T", tb == "T", m, n, k, a, lda, b, ldb, c, ldc)

    def dgemm_strided_batched(handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch) -> None:
        log.append(f"dgemm_batched{batch}")
        for i in range(batch):
            gemm(ta == "T", tb == "T", m, n, k, a + 8 * i * sa, lda, b + 8 * i * sb, ldb, c + 8 * i * sc, ldc)

    return SimpleNamespace(create=lambda: 1, destroy=lambda h: None, set_stream=lambda h, s: None,
                           set_pointer_mode=lambda h, m: None, PointerMode=SimpleNamespace(HOST=0),
                           Operation=SimpleNamespace(N="N", T="T"), dgemm=dgemm,
                           dgemm_strided_batched=dgemm_strided_batched)


def _cute_kernel(memory: Memory, log: list[str], entry, mesh) -> SimpleNamespace:
    """A CuTe GEMM of the build as its ABI defines it: per batch ``i``, C(m, n) = sum_k A(m, k) B(n, k)
    with A(m, k) at ``a + i stride_a`` + (k + m lda if A is k-major else m + k lda), B(n, k) at
    ``b + i stride_b`` + (k + n ldb if k-major else n + k ldb) and C(m, n) at ``c + i stride_c`` +
    (m + n ldc if m-major else n + m ldc) (``composer.gemm.cute.config.kernel_problem``). A kernel built
    with an epilogue tree (GEMM_FUSED's carrier) then runs the tree on that accumulator through
    ``composer.epilogues.numpy_eval`` (the index math and walk its CuTe code is emitted from), reading
    the arrays bound to its aux slots and face pointer; ``mesh()`` gives the volume and face sizes."""
    from composer.epilogues.index import OutputIndex
    from composer.epilogues.numpy_eval import emulate_epilogue
    from composer.epilogues.tree import from_dict
    from composer.gemm.cute.config import KERNEL_PARAMS, GemmConfig, KernelProblem

    cfg = GemmConfig.from_dict(entry.config["gemm"])
    assert not cfg.product, "no flux formed in the mainloop here"
    described = entry.config.get("epilogue")

    def view(ptr: int, rows: int, cols: int, ld: int, rows_contiguous: bool) -> np.ndarray:
        buf = memory.tail(ptr)
        strides = (8, 8 * ld) if rows_contiguous else (8 * ld, 8)
        extent = ((cols - 1) * ld + rows) if rows_contiguous else ((rows - 1) * ld + cols)
        assert extent <= buf.size, "a CuTe GEMM operand leaves its buffer"
        if cfg.vec == 2:
            assert ptr % 16 == 0 and ld % 2 == 0, "16-byte cp.async from an unaligned address"
        return np.lib.stride_tricks.as_strided(buf, (rows, cols), strides)

    def launch(grid, args, stream=None) -> None:
        a = dict(zip((p.name for p in KERNEL_PARAMS), args))
        log.append(entry.symbol)
        m, n, k = a["m"], a["n"], a["k"]
        tree = isinstance(described, dict)
        size = mesh().num_points
        acc = memory.new(np.zeros(size)) if tree else a["c"]  # a tree's accumulator, in C's layout
        for i in range(a["batch"]):
            am = view(a["a"] + 8 * i * a["stride_a"], m, k, a["lda"], cfg.a_major == "m")
            bm = view(a["b"] + 8 * i * a["stride_b"], n, k, a["ldb"], cfg.b_major == "n")
            view(acc + 8 * i * a["stride_c"], m, n, a["ldc"], cfg.c_major == "m")[...] = am @ bm.T
        if not tree:
            return
        volume = mesh().volume_shape
        arrays = {name: memory.at(a[f"aux{slot}"], size).reshape(volume).copy()
                  for slot, name in enumerate(described["aux_slots"])}
        if described["face"]:
            arrays[described["face"]] = memory.at(a["face"], mesh().num_elements * 6 * mesh().nq ** 2).reshape(
                mesh().face_shape)
        prob = KernelProblem(m, n, k, a["batch"], a["lda"], a["ldb"], a["ldc"], a["stride_a"], a["stride_b"],
                             a["stride_c"], "", "", (cfg.a_major, cfg.b_major, cfg.c_major))
        out = emulate_epilogue(from_dict(described["tree"]), OutputIndex(**described["index"]), prob,
                               memory.arrays[acc].reshape(volume), arrays)
        written = ~np.isnan(out.reshape(-1))
        memory.at(a["c"], size)[written] = out.reshape(-1)[written]

    return SimpleNamespace(launch=launch)


@pytest.fixture
def runtime(monkeypatch):
    import composer.gemm.cublas as cublas
    import composer.paths.base as base
    import composer.paths.gemm_cute as gemm_cute
    import composer.paths.library as library
    import composer.paths.parity as parity
    import composer.paths.problem as problem

    memory, log = Memory(), []
    fake = fake_runtime(memory)
    meshes: list[dg.Mesh] = []

    class SupportKernel:
        def __init__(self, family: str) -> None:
            self.family, mesh = family, meshes[0]
            self.name, self.block, self.device = f"{family}_nq{mesh.nq}", (256, 1, 1), fake.Device()

        def launch(self, grid, block, args, smem, stream) -> None:
            a = dict(zip((p.name for p in SIGNATURES[self.family]), args))
            log.append(self.family)
            mesh = meshes[0]
            vol, face = mesh.num_points, mesh.num_elements * 6 * mesh.nq**2

            def volume(name: str) -> np.ndarray:
                return memory.at(a[name], vol).reshape(mesh.volume_shape)

            if self.family in ("volume_flux", "volume_flux_parity"):
                fields = {k: volume(k) for k in "quvw"}
                if self.family == "volume_flux":
                    fluxes = {r: fields["q"] * fields[v] for r, v in (("x", "u"), ("y", "v"), ("z", "w"))}
                else:
                    fluxes = par.split_fluxes(fields)
                for role, out in (("x", "qu"), ("y", "qv"), ("z", "qw")):
                    memory.at(a[out], vol)[:] = fluxes[role].reshape(-1)
            elif self.family == "surface_flux":
                fields = {k: volume(k) for k in "quvw"}
                fields.update({k: memory.at(a[k], face).reshape(mesh.face_shape) for k in ("nx", "ny", "nz", "F")})
                memory.at(a["fstar"], face)[:] = dg.numerical_flux(fields, mesh).reshape(-1)
            else:
                derivatives = {r: volume(f"d{r}") for r in "xyz"}
                metric = {f"E{r}": volume(f"E{r}") for r in "xyz"}
                fstar = memory.at(a["fstar"], face).reshape(mesh.face_shape)
                if self.family == "separable_lift":
                    out = -(sum(metric[f"E{r}"] * derivatives[r] for r in "xyz"))
                    lifted = np.zeros(mesh.volume_shape)
                    dg.add_lift(lifted, fstar, mesh)
                    out -= lifted
                else:
                    out = par.lift_from_split(derivatives, metric, fstar, mesh)
                memory.at(a["dqdt"], vol)[:] = out.reshape(-1)

    class SupportKernels:
        @classmethod
        def load(cls, nq, device):
            return SimpleNamespace(**{f: SupportKernel(f) for f in ("volume_flux", "surface_flux", "separable_lift",
                                                                    "rk3_stage")})

    monkeypatch.setattr(problem, "DeviceBuffer", fake.Buffer)
    monkeypatch.setattr(base, "Stream", fake.Stream)
    monkeypatch.setattr(base, "Event", fake.Event)
    monkeypatch.setattr(base, "highest_priority", lambda device=None: -5)
    monkeypatch.setattr(library, "SupportKernels", SupportKernels)
    monkeypatch.setattr(parity, "load_parity_kernels",
                        lambda nq, device: {f: SupportKernel(f) for f in ("volume_flux_parity", "separable_lift_parity")})
    monkeypatch.setattr(cublas, "_bindings", lambda: _fake_cublas(memory, log))

    monkeypatch.setattr(gemm_cute, "Module", fake_module(lambda entry: _cute_kernel(memory, log, entry, lambda: meshes[0])))
    monkeypatch.setattr(base, "highest_priority", lambda device=None: -5)

    def upload(fields, order, grid) -> DeviceProblem:
        mesh = dg.Mesh(order, grid)
        meshes[:] = [mesh]
        vm, vp = mesh.face_maps
        b = fake.Buffer
        return DeviceProblem(order, mesh.grid, fake.Device(), fake.Stream(), {k: b.from_numpy(fields[k]) for k in dg.FIELD_KEYS},
                             b.from_numpy(vm), b.from_numpy(vp), b.from_numpy(dg.diff_matrix(order)),
                             b(8 * mesh.num_points), b(8 * mesh.num_points))

    yield memory, log, upload


def run_against_reference(runtime, path_name: str, order: int, grid: tuple, **options):
    """Launch ``path_name`` with ``options`` on the emulated runtime and check dqdt against the reference
    on the point-varying input; returns the launch log and the path."""
    memory, log, upload = runtime
    fields = dg.make_fields(order, grid, varying=True)
    pb = upload(fields, order, grid)
    path = path_class(path_name)(pb, **options)
    path.launch(pb.ptr("q"), pb.dqdt.ptr)
    got = memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape)
    assert relative_max_difference(got, dg.reference_tendency(fields, order, grid)) <= 1e-13
    return log, path


@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (3, (2, 3, 1)), (7, (1, 2, 3)), (15, (2, 1, 2))])
@pytest.mark.parametrize("parity", [False, True])
def test_gemm_path_launches_compute_the_reference(runtime, order, grid, parity):
    log, path = run_against_reference(runtime, "GEMM", order, grid, parity=parity)
    suffix = "_parity" if parity else ""
    assert f"volume_flux{suffix}" in log and f"separable_lift{suffix}" in log
    gemms = [name for name in log if name.startswith("dgemm")]
    # parity: x one batch of 2 halves, y and z two batched calls each; plain: x one GEMM, y and z one batch each
    expected = ["dgemm_batched2", *(["dgemm_batched"] * 4)] if parity else ["dgemm", "dgemm_batched", "dgemm_batched"]
    assert sorted(g.rstrip("0123456789") if g != "dgemm_batched2" else g for g in gemms) == sorted(expected)
    assert path.diagnostics().get("parity", False) == parity


CUTE_ORDERS = {7: (1, 2, 3), 15: (2, 1, 2)}


@pytest.fixture(scope="module")
def cute_build(tmp_path_factory):
    """GEMM_CUTE's kernels for sm_90 at the orders below (the CuTe DSL cross-compiles them here)."""
    from composer.build import build, plan

    out = tmp_path_factory.mktemp("gemm_cute_build")
    build(plan("sm_90", "16x8x4", sorted(CUTE_ORDERS), ["GEMM_CUTE"]), out)
    return out


@pytest.mark.parametrize("order", sorted(CUTE_ORDERS))
@pytest.mark.parametrize("library", ["cute", "x=cublas,y=cute,z=cute"])
@pytest.mark.parametrize("parity", [False, True])
def test_gemm_cute_path_launches_compute_the_reference(runtime, cute_build, order, library, parity):
    """GEMM_CUTE with ``parity`` runs the half-size calls on the kernels built for the full contractions
    (x transposed below Nq = 64: the swapped operands at their offsets), cuBLAS where the library says."""
    log, path = run_against_reference(runtime, "GEMM_CUTE", order, CUTE_ORDERS[order], parity=parity,
                                      library=library, build_dir=cute_build)
    suffix = "_parity" if parity else ""
    assert f"volume_flux{suffix}" in log and f"separable_lift{suffix}" in log
    cute = [name for name in log if name.startswith("dgemm_p")]
    on_cute = "yz" if library.startswith("x=cublas") else "xyz"
    # parity: x one launch over its 2 halves (a batch), y and z one launch per half; plain: one per role
    assert sorted(name.split("_")[2] for name in cute) == sorted(
        r for r in on_cute for _ in range(2 if parity and r != "x" else 1))
    assert ("dgemm_batched2" in log) == (parity and "x" not in on_cute)
    assert path.diagnostics().get("parity", False) == parity
    assert path_class("GEMM_CUTE").plan_settings(order, parity=parity, library=library).endswith(
        " parity") == parity


@pytest.fixture(scope="module")
def fused_build(tmp_path_factory):
    """GEMM_FUSED's parity kernels for sm_90 at the orders below: each carrier's merging tree, and the
    plain store kernels the non-carriers run on CuTe (``--fused-variants all`` filtered to them)."""
    from composer.build import build, plan

    out = tmp_path_factory.mktemp("gemm_fused_parity_build")
    jobs = plan("sm_90", "16x8x4", sorted(CUTE_ORDERS), ["GEMM_FUSED"], fused_variants="all")
    build([j for j in jobs if j.kind != "cute" or "carry" not in j.name or j.name.endswith("_carry_split")], out)
    return out


@pytest.mark.parametrize("order", sorted(CUTE_ORDERS))
@pytest.mark.parametrize("carrier", ["x", "y", "z"])
@pytest.mark.parametrize("library", ["cute", "cublas"])
def test_gemm_fused_parity_computes_the_reference(runtime, fused_build, order, carrier, library):
    """GEMM_FUSED with parity: every flux split, the non-carriers two half-size products each (on our CuTe
    kernels or cuBLAS), the carrier a whole GEMM on the split basis whose tree merges the split derivatives
    (two loads at each node's mirror) and lifts; no lift kernel, no fold."""
    others = ",".join(f"{r}={library}" for r in "xyz" if r != carrier)
    log, path = run_against_reference(runtime, "GEMM_FUSED", order, CUTE_ORDERS[order], parity=True, carrier=carrier,
                                      library=others, build_dir=fused_build)
    assert "volume_flux_parity" in log and not any(name.startswith("separable_lift") for name in log)
    cute = [name for name in log if name.startswith("dgemm_p")]
    assert f"_{carrier}_m16_8_4_carry_split" in cute[-1]
    split = [r for r in "xyz" if r != carrier]
    if library == "cute":  # x one launch over its halves, y and z one per half
        assert sorted(name.split("_")[2] for name in cute[:-1]) == sorted(
            r for r in split for _ in range(1 if r == "x" else 2))
    else:
        assert len(cute) == 1 and ("dgemm_batched2" in log) == ("x" in split)
    assert path.diagnostics().get("parity") is True
    assert path_class("GEMM_FUSED").plan_settings(order, parity=True, carrier=carrier).endswith(" parity")


def test_gemm_fused_parity_contract() -> None:
    """Parity needs an odd order, the fold off and the flux from arrays; it drops the schedule's overlap."""
    from composer.arch.machines import get_machine
    from composer.errors import ComposerError

    gf = path_class("GEMM_FUSED")
    with pytest.raises(ComposerError, match="needs an odd order"):
        gf.program(510, 1, get_machine("h200"), parity=True)
    with pytest.raises(ComposerError, match="parity needs the fold off"):
        gf.program(511, 1, get_machine("h200"), parity=True, carrier="z", fold=True)
    with pytest.raises(ComposerError, match='parity needs flux = "array"'):
        gf.program(511, 1, get_machine("h200"), parity=True, flux="staged")
    with pytest.raises(ComposerError, match="option overlap_sms needs parity off"):
        gf.program(511, 1, get_machine("h200"), parity=True, overlap_sms=44)
    nodes = {n.name: n for n in gf.program(511, 1, get_machine("h200"), parity=True, carrier="z")}
    plain = {n.name: n for n in gf.program(511, 1, get_machine("h200"), carrier="z", fold=False)}
    assert nodes["gemm_x"].cost < plain["gemm_x"].cost and nodes["gemm_z"].cost == plain["gemm_z"].cost
    names = {i.name for i in gf.memory_estimate(511, 1, {"parity": "on"}).items}
    assert {"parity matrices", "split basis"} <= names


def test_the_parity_carriers_compile_without_spills(tmp_path):
    """The y and z parity carriers at p = 255 (the trees with split leaves): the DMMA shape, no spills (x's
    carrier spills as the plain x carrier does: 264 B against 64 B at p = 255, 464 against 96 at 511)."""
    from composer.arch.sass import inspect_cubin
    from composer.build import build, plan
    from composer.runtime.manifest import read_manifest

    jobs = [j for j in plan("sm_90", "16x8x4", [255], ["GEMM_FUSED"], fused_variants="all")
            if j.name in ("dgemm_p0255_y_m16_8_4_carry_split", "dgemm_p0255_z_m16_8_4_carry_split")]
    assert len(jobs) == 2
    build(jobs, tmp_path)
    entries = read_manifest(tmp_path / "manifest.json")
    assert len(entries) == 2
    for entry in entries:
        (sass,) = inspect_cubin(tmp_path / entry.cubin).values()
        assert sass.spill_bytes == 0, entry.symbol
        assert set(sass.dmma) == {"16x8x4"} and sass.dmma["16x8x4"] > 0, entry.symbol
        assert entry.config["epilogue"]["text"].count("split(") == 2
