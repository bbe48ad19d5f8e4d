"""GEMM_FUSED end to end on the CPU: the path built from a real ``composer build`` manifest, its
launches issued through the scheduler's plan, and every launch executed by an emulated runtime that
reads the kernel's ABI arguments by name (the CuTe GEMMs through the roles' NumPy emulation and the
recorded epilogue tree, the support kernels through the reference's pieces). What this checks
without a GPU: the path's allocation, which pointer goes to which aux slot, the face pointer, the
fold's in-place partial sum, dqdt, the flux/factor pointers of the flux formed in the mainloop and
the launch order, for every carrier, fold and flux variant."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed (the test builds the kernels)")

from composer import dg  # noqa: E402
from composer.epilogues.index import OutputIndex  # noqa: E402
from composer.epilogues.numpy_eval import emulate_epilogue  # noqa: E402
from composer.epilogues.tree import from_dict  # noqa: E402
from composer.gemm.cute.config import KERNEL_PARAMS, GemmConfig, kernel_problem  # noqa: E402
from composer.gemm.roles import emulate, gemm_spec  # noqa: E402
from composer.kernels.support import PRODUCT_ARGS, PRODUCT_WORK_BYTES, PRODUCTS_SIGNATURE, SIGNATURES  # noqa: E402
from composer.paths.problem import DeviceProblem  # noqa: E402
from composer.paths.registry import path_class  # noqa: E402
from tests.emulated_runtime import Memory, fake_module, fake_runtime  # noqa: E402

ORDERS = {7: (2, 1, 3), 63: (2, 1, 1)}
VARIANTS = [(c, f, flux) for flux in ("array", "mainloop", "staged") for c, f in (("x", False), ("y", False), ("z", False),
                                                                        ("z", True))]


@pytest.fixture
def runtime(monkeypatch):
    """An emulated runtime patched into the modules the path uses; yields (memory, launch log)."""
    import composer.paths.base as base
    import composer.paths.gemm_cute as gemm_cute
    import composer.paths.library as library
    import composer.paths.overlap as overlap
    import composer.paths.problem as problem

    memory, log = Memory(), []
    fake = fake_runtime(memory)
    Buffer, Device, Stream, Event = fake.Buffer, fake.Device, fake.Stream, fake.Event

    class SupportKernel:
        """volume_flux and surface_flux by their NumPy definitions (GEMM_FUSED runs no lift)."""

        def __init__(self, family: str, mesh: dg.Mesh) -> None:
            self.family, self.mesh = family, mesh
            self.name, self.block, self.device = f"{family}_nq{mesh.nq}", (256, 1, 1), Device()

        def launch(self, grid, block, args, smem, stream) -> None:
            a = dict(zip((p.name for p in SIGNATURES[self.family]), args))
            log.append(self.family)
            vol, face = self.mesh.num_points, self.mesh.num_elements * 6 * self.mesh.nq**2
            if self.family == "volume_flux":
                for out, vel in (("qu", "u"), ("qv", "v"), ("qw", "w")):
                    memory.at(a[out], vol)[:] = memory.at(a["q"], vol) * memory.at(a[vel], vol)
                return
            assert self.family == "surface_flux", f"GEMM_FUSED launched {self.family}"
            fields = {k: memory.at(a[k], vol).reshape(self.mesh.volume_shape) for k in "quvw"}
            fields.update({k: memory.at(a[k], face).reshape(self.mesh.face_shape) for k in ("nx", "ny", "nz", "F")})
            memory.at(a["fstar"], face)[:] = dg.numerical_flux(fields, self.mesh).reshape(-1)

    class GemmKernel:
        def __init__(self, entry) -> None:
            self.entry = entry

        def launch(self, grid, args, stream=None) -> None:
            a = dict(zip((p.name for p in KERNEL_PARAMS), args))
            c = self.entry.config
            log.append(self.entry.symbol)
            nq, mesh = c["order"] + 1, runtime_mesh[0]
            size, cfg = mesh.num_points, GemmConfig.from_dict(c["gemm"])
            spec = gemm_spec(c["role"], nq, mesh.num_elements)
            prob = kernel_problem(spec, c["swap"])
            assert (a["m"], a["n"], a["k"], a["batch"], a["ldc"]) == (prob.m, prob.n, prob.k, prob.batch, prob.ldc)
            operands = {prob.a_operand: a["a"], prob.b_operand: a["b"]}
            flux = memory.at(operands["flux"], size) * (memory.at(a["factor"], size) if cfg.product else 1.0)
            acc = emulate(spec, memory.at(operands["D"], nq * nq).reshape(nq, nq), flux.reshape(mesh.volume_shape))
            described = c.get("epilogue")
            if isinstance(described, dict):
                arrays = {name: memory.at(a[f"aux{s}"], size).reshape(mesh.volume_shape).copy()
                          for s, name in enumerate(described["aux_slots"])}
                if described["face"]:
                    arrays[described["face"]] = memory.at(a["face"], mesh.num_elements * 6 * nq * nq).reshape(
                        mesh.face_shape)
                acc = emulate_epilogue(from_dict(described["tree"]), OutputIndex(**described["index"]), prob, acc,
                                       arrays)
            memory.at(a["c"], size)[:] = acc.reshape(-1)

    Module = fake_module(GemmKernel)

    class SupportKernels:
        @classmethod
        def load(cls, nq, device):
            return type("Loaded", (), {f: SupportKernel(f, runtime_mesh[0]) for f in SIGNATURES})()

    class ProductsKernel:
        """A volume_products kernel: the products it names, logged with its SM limit and, when
        confined, the counter buffer it was handed (the real kernel's reset is tested on the GPU)."""

        def __init__(self, products: str, mesh: dg.Mesh) -> None:
            self.products, self.mesh = products, mesh
            self.name, self.block, self.device = f"volume_products_{products}_nq{mesh.nq}", (256, 1, 1), Device()

        def launch(self, grid, block, args, smem, stream) -> None:
            a = dict(zip((p.name for p in PRODUCTS_SIGNATURE), args))
            log.append(f"{self.name}@{a['sm_limit']}")
            if a["sm_limit"]:
                log.append(f"work:{a['work']}")
            vol = self.mesh.num_points
            for role in self.products:
                vel, out = PRODUCT_ARGS[role]
                memory.at(a[out], vol)[:] = memory.at(a["q"], vol) * memory.at(a[vel], vol)
            for role in "xyz":
                if role not in self.products:
                    assert a[PRODUCT_ARGS[role][1]] == 0, f"{self.name} got a {role} output"

    runtime_mesh: list[dg.Mesh] = []
    monkeypatch.setattr(problem, "DeviceBuffer", Buffer)
    monkeypatch.setattr(base, "Stream", Stream)
    monkeypatch.setattr(base, "Event", Event)
    monkeypatch.setattr(gemm_cute, "Module", Module)
    monkeypatch.setattr(library, "SupportKernels", SupportKernels)
    monkeypatch.setattr(overlap, "load_products_kernel", lambda products, nq, device: ProductsKernel(products,
                                                                                                     runtime_mesh[0]))
    monkeypatch.setattr(base, "highest_priority", lambda device=None: -5)
    monkeypatch.setattr(overlap, "active_sm_ids", lambda device=None: list(range(0, 2 * 132, 2)))  # sparse ids

    def upload(fields, order, grid) -> DeviceProblem:
        mesh = dg.Mesh(order, grid)
        runtime_mesh[:] = [mesh]
        vm, vp = mesh.face_maps
        return DeviceProblem(order, mesh.grid, Device(), Stream(), {k: Buffer.from_numpy(fields[k]) for k in dg.FIELD_KEYS},
                             Buffer.from_numpy(vm), Buffer.from_numpy(vp), Buffer.from_numpy(dg.diff_matrix(order)),
                             Buffer(8 * mesh.num_points), Buffer(8 * mesh.num_points))

    yield memory, log, upload


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    from composer.build import build, plan

    out = tmp_path_factory.mktemp("gemm_fused_build")
    build(plan("sm_90", "16x8x4", sorted(ORDERS), ["GEMM_FUSED"], fused_variants="all"), out)
    return out


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("carrier,fold,flux", VARIANTS)
def test_gemm_fused_launches_compute_the_reference(runtime, build_dir, order, carrier, fold, flux):
    memory, log, upload = runtime
    grid = ORDERS[order]
    fields = dg.make_fields(order, grid, varying=True)
    pb = upload(fields, order, grid)
    path = path_class("GEMM_FUSED")(pb, build_dir=build_dir, carrier=carrier, fold=fold, flux=flux)
    path.launch(pb.ptr("q"), pb.dqdt.ptr)
    got = memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) <= 1e-13
    gemms = [name for name in log if name.startswith("dgemm")]
    assert len(gemms) == 3 and f"_{carrier}_" in gemms[-1] and "carry" in gemms[-1]
    assert ("volume_flux" in log) == (flux == "array") and "separable_lift" not in log
    assert all(name.endswith("_qv_0") for name in gemms) == (flux == "mainloop")
    assert all(name.endswith("_qs_0") for name in gemms) == (flux == "staged")


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("carrier,fold,first", [("y", False, None), ("y", False, "x"), ("x", False, None),
                                                ("z", False, "y"), ("z", True, None)])
def test_the_overlapped_flux_computes_the_reference(runtime, build_dir, order, carrier, fold, first):
    """overlap_sms: the first GEMM's product alone on every SM, the other two confined to the partition, on a
    priority stream; the same dqdt as the reference, the single volume_flux kernel not launched."""
    memory, log, upload = runtime
    grid = ORDERS[order]
    fields = dg.make_fields(order, grid, varying=True)
    pb = upload(fields, order, grid)
    options = {"overlap_sms": 44, **({"overlap_first": first} if first else {})}
    path = path_class("GEMM_FUSED")(pb, build_dir=build_dir, carrier=carrier, fold=fold, flux="array", **options)
    path.launch(pb.ptr("q"), pb.dqdt.ptr)
    got = memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape)
    ref = dg.reference_tendency(fields, order, grid)
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) <= 1e-13
    expect_first = first or ("x" if fold else next(r for r in "zxy" if r != carrier))
    rest = "".join(r for r in "xyz" if r != expect_first)
    products = [n for n in log if n.startswith("volume_products")]
    # 44 SMs of the sparse ids 0, 2, 4, ...: the bound is one past the 44th id, 86
    assert products == [f"volume_products_{expect_first}_nq{order + 1}@0", f"volume_products_{rest}_nq{order + 1}@87"]
    assert "volume_flux" not in log
    confined = path.plan.stream_of[f"volume_flux_{rest}"]
    assert path.plan.priority_streams == (confined,) and path.side_streams[confined - 1].priority == -5
    assert all(s.priority == 0 for i, s in enumerate(path.side_streams, 1) if i != confined)
    # a second call: the same result, the same counter buffer (a captured graph replays its pointer):
    # the path's own, of the kernel's size, allocated zeroed (the kernel relies on starting from zero)
    memory.arrays[pb.dqdt.ptr][:] = np.nan
    path.launch(pb.ptr("q"), pb.dqdt.ptr)
    assert np.array_equal(memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape), got)
    work = path.overlap_kernels.work
    assert [n for n in log if n.startswith("work:")] == [f"work:{work.ptr}"] * 2
    assert work.nbytes == PRODUCT_WORK_BYTES and pb.extra["GEMM_FUSED.overlap_work"] is work
    assert not memory.at(work.ptr, PRODUCT_WORK_BYTES // 8).any()


def test_the_serial_plan_launches_the_products_on_every_sm(runtime, build_dir):
    """max_streams=1: nothing runs beside the second product, so it is launched unconfined."""
    memory, log, upload = runtime
    order = 7
    fields = dg.make_fields(order, ORDERS[order], varying=True)
    pb = upload(fields, order, ORDERS[order])
    path = path_class("GEMM_FUSED")(pb, build_dir=build_dir, carrier="z", flux="array", overlap_sms=44,
                                    max_streams=1)
    path.launch(pb.ptr("q"), pb.dqdt.ptr)
    assert [n for n in log if n.startswith("volume_products")] == [
        f"volume_products_x_nq{order + 1}@0", f"volume_products_yz_nq{order + 1}@0"]
    assert not path.overlap_confined and path.plan.priority_streams == ()
    ref = dg.reference_tendency(fields, order, ORDERS[order])
    got = memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape)
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) <= 1e-13


@pytest.fixture(scope="module")
def tiles_build_dir(tmp_path_factory):
    from composer.build import build, plan

    out = tmp_path_factory.mktemp("gemm_fused_tiles")
    build(plan("sm_90", None, [63], ["GEMM_FUSED"], fused_variants="tiles"), out)
    return out


def test_each_carrier_tile_of_one_build_runs_its_own_kernel(runtime, tiles_build_dir):
    """--fused-variants tiles puts several tiles of one carrier into one build: the path loads the one its
    settings name (tagged name, exact config) and computes the reference with it; a tile the build lacks is
    one clear error naming the tile it found."""
    from composer.config.schedules import load_schedule
    from composer.epilogues.carrier_sweep import candidates
    from composer.errors import ComposerError

    memory, log, upload = runtime
    order, grid = 63, ORDERS[63]
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    cands = [c for c in candidates(order, load_schedule(order).paths, "sm_90", tiles_only=True) if c.settings]
    picked = [next(c for c in cands if c.shipped), next(c for c in cands if not c.shipped and not c.mma),
              next(c for c in cands if c.mma)]
    for cand in picked:
        log.clear()
        pb = upload(fields, order, grid)
        path = path_class("GEMM_FUSED")(pb, build_dir=tiles_build_dir, **cand.options())
        path.launch(pb.ptr("q"), pb.dqdt.ptr)
        got = memory.arrays[pb.dqdt.ptr].reshape(pb.mesh.volume_shape)
        assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) <= 1e-13, cand.label
        carrier_kernel = [n for n in log if n.startswith("dgemm") and "carry" in n][-1]
        assert ("_t" in carrier_kernel.split("carry")[-1]) == (not cand.shipped), (cand.label, carrier_kernel)
    tile = picked[0].tile
    odd = {**picked[0].options(), "carrier_tile": {**tile, "warps_m": tile["warps_n"], "warps_n": tile["warps_m"]}}
    with pytest.raises(ComposerError, match="built with tile .* the settings need"):
        path_class("GEMM_FUSED")(upload(fields, order, grid), build_dir=tiles_build_dir, **odd)
