"""The GEMM path with ``parity`` end to end on the CPU: the path's real allocation, plan and launch
code, with cuBLAS replaced by a NumPy column-major dgemm behind the nvmath binding names (so
``CublasGemm.run``'s pointer and offset arithmetic is what runs) and the support kernels by their
NumPy definitions (``composer.parity.reference`` for the parity pair). Checks which kernels run,
that every GEMM call stays inside its buffers, and dqdt against the reference."""

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
from tests.emulated_runtime import Memory, fake_runtime


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


@pytest.fixture
def runtime(monkeypatch):
    import composer.gemm.cublas as cublas
    import composer.paths.base as base
    import composer.paths.gemm as gemm
    import composer.paths.library as library
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
    monkeypatch.setattr(gemm, "load_parity_kernels",
                        lambda nq, device: {f: SupportKernel(f) for f in ("volume_flux_parity", "separable_lift_parity")})
    monkeypatch.setattr(cublas, "_bindings", lambda: _fake_cublas(memory, log))

    def upload(fields, order, grid) -> DeviceProblem:
        mesh = dg.Mesh(order, grid)
        meshes[:] = [mesh]
        vm, vp = mesh.face_maps
        b = fake.Buffer
        return DeviceProblem(order, mesh.grid, fake.Device(), fake.Stream(), {k: b.from_numpy(fields[k]) for k in dg.FIELD_KEYS},
                             b.from_numpy(vm), b.from_numpy(vp), b.from_numpy(dg.diff_matrix(order)),
                             b(8 * mesh.num_points), b(8 * mesh.num_points))

    yield memory, log, upload


@pytest.mark.parametrize(("order", "grid"), [(1, (3, 2, 1)), (3, (2, 3, 1)), (7, (1, 2, 3)), (15, (2, 1, 2))])
@pytest.mark.parametrize("parity", [False, True])
def test_gemm_path_launches_compute_the_reference(runtime, order, grid, parity):
    memory, log, upload = runtime
    fields = dg.make_fields(order, grid, varying=True)
    pb = upload(fields, order, grid)
    path = path_class("GEMM")(pb, parity=parity)
    path.launch(pb.ptr("q"), pb.dqdt.ptr)
    got = memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape)
    assert relative_max_difference(got, dg.reference_tendency(fields, order, grid)) <= 1e-13
    suffix = "_parity" if parity else ""
    assert f"volume_flux{suffix}" in log and f"separable_lift{suffix}" in log
    gemms = [name for name in log if name.startswith("dgemm")]
    # parity: x one batch of 2 halves, y and z two batched calls each; plain: x one GEMM, y and z one batch each
    expected = ["dgemm_batched2", *(["dgemm_batched"] * 4)] if parity else ["dgemm", "dgemm_batched", "dgemm_batched"]
    assert sorted(g.rstrip("0123456789") if g != "dgemm_batched2" else g for g in gemms) == sorted(expected)
    assert path.diagnostics().get("parity", False) == parity
