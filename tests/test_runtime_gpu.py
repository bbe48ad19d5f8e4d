"""GPU tests of composer.runtime and the support kernels (run on a CUDA machine; skipped otherwise).

Each support kernel is checked against a NumPy transcription of shared/spec/operator.md on small
random data (Nq=4, Ne=3, random permutation-like vmapP); graph replay must match eager launches
bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from composer.kernels import support
from composer.runtime import (
    CudaGraph,
    Device,
    DeviceBuffer,
    Event,
    Module,
    OutOfDeviceMemory,
    Stream,
    compile_cuda,
    file_sha256,
    params,
    read_manifest,
    write_manifest,
)
from composer.runtime.device import gpu_available

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="no NVIDIA GPU/driver")]

NQ, NE = 4, 3
ATOL = 1e-14  # relative to max|ref|: FMA contraction may differ from NumPy in the last bit


@pytest.fixture(scope="module")
def dev():
    d = Device(0)
    yield d
    d.synchronize()


@pytest.fixture(scope="module")
def kernels(dev, tmp_path_factory):
    return support.SupportKernels.load(NQ, dev, cache_dir=tmp_path_factory.mktemp("nvrtc"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def vol(rng, ne=NE, nq=NQ):
    return rng.standard_normal((ne, nq, nq, nq))


def face(rng, ne=NE, nq=NQ):
    return rng.standard_normal((ne, 6, nq, nq))


def interior_map(ne: int, nq: int) -> np.ndarray:
    """vmapM: flat volume index of the node under each face point [e, f, b, a]."""
    p = nq - 1
    e, b, a = np.meshgrid(np.arange(ne), np.arange(nq), np.arange(nq), indexing="ij")
    base = e * nq**3
    faces = [base + b * nq * nq + a * nq + 0, base + b * nq * nq + a * nq + p,   # x: (a,b)=(j,k)
             base + b * nq * nq + 0 * nq + a, base + b * nq * nq + p * nq + a,   # y: (a,b)=(i,k)
             base + 0 * nq * nq + b * nq + a, base + p * nq * nq + b * nq + a]   # z: (a,b)=(i,j)
    return np.stack(faces, axis=1).astype(np.int64)


def ref_surface(q, u, v, w, vM, vP, nx, ny, nz, F):
    qf, uf, vf, wf = (x.ravel() for x in (q, u, v, w))
    qM, uM, vMv, wM = qf[vM], uf[vM], vf[vM], wf[vM]
    qP, uP, vPv, wP = qf[vP], uf[vP], vf[vP], wf[vP]
    VM = uM * nx + vMv * ny + wM * nz
    VP = uP * nx + vPv * ny + wP * nz
    alpha = 0.5 * np.abs(VP + VM)
    return 0.5 * F * (qP * VP - qM * VM - alpha * (qP - qM))


def ref_lift(dx, dy, dz, Ex, Ey, Ez, fstar):
    acc = Ex * dx + Ey * dy + Ez * dz
    acc[:, :, :, 0] += fstar[:, 0]
    acc[:, :, :, -1] += fstar[:, 1]
    acc[:, :, 0, :] += fstar[:, 2]
    acc[:, :, -1, :] += fstar[:, 3]
    acc[:, 0, :, :] += fstar[:, 4]
    acc[:, -1, :, :] += fstar[:, 5]
    return -acc


def close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=0, atol=ATOL * np.abs(ref).max())


def up(*arrays):
    return [DeviceBuffer.from_numpy(a) for a in arrays]


def out_like(a):
    return DeviceBuffer(a.nbytes)


# ------------------------------------------------------------------ runtime basics
def test_device_properties(dev):
    assert dev.sm_count > 0 and dev.cc[0] >= 7 and dev.arch.startswith("sm_")
    assert 0 < dev.free_memory() <= dev.total_memory


def test_buffer_round_trip(dev, rng):
    a = vol(rng)
    buf = DeviceBuffer.from_numpy(a)
    assert np.array_equal(buf.to_numpy(a.shape), a)
    other = DeviceBuffer(a.nbytes)
    other.copy_from(buf)
    assert np.array_equal(other.to_numpy(a.shape), a)
    other.zero()
    assert not other.to_numpy(a.shape).any()
    with Stream(dev) as s:
        other.copy_from(a, stream=s)
        assert np.array_equal(other.to_numpy(a.shape, stream=s), a)
    buf.free()
    buf.free()  # idempotent
    assert buf.ptr == 0


def test_out_of_memory_is_reported(dev):
    with pytest.raises(OutOfDeviceMemory, match="exceeds free device memory"):
        DeviceBuffer(dev.total_memory * 2)


def test_events_and_stream_wait(dev, kernels, rng):
    a = vol(rng)
    q, = up(a)
    out = out_like(a)
    s1, s2 = Stream(dev), Stream(dev)
    start, mid, end = Event(dev), Event(dev), Event(dev)
    start.record(s1)
    support.launch_rk3_stage(kernels.rk3_stage, q, q, q, out, 0.0, 1.0, 1.0, NE, s1)
    mid.record(s1)
    s2.wait(mid)
    support.launch_rk3_stage(kernels.rk3_stage, out, out, out, out, 0.0, 1.0, 1.0, NE, s2)
    end.record(s2)
    end.synchronize()
    assert end.query() and start.elapsed_ms(end) >= 0.0
    assert np.array_equal(out.to_numpy(a.shape), 4 * a)


def test_kernel_attributes(kernels):
    for fam in support.FAMILIES:
        k = getattr(kernels, fam)
        assert k.num_regs > 0 and k.local_bytes == 0 and k.max_threads >= support.DEFAULT_BLOCK


# ------------------------------------------------------------------ support kernels vs NumPy
def test_volume_flux(dev, kernels, rng):
    q, u, v, w = (vol(rng) for _ in range(4))
    bufs = up(q, u, v, w)
    outs = [out_like(q) for _ in range(3)]
    support.launch_volume_flux(kernels.volume_flux, *bufs, *outs, ne=NE)
    for o, c in zip(outs, (u, v, w)):
        assert np.array_equal(o.to_numpy(q.shape), q * c)  # a single rounding: exact


@pytest.mark.parametrize("shift", [0, 1])  # 0: 16-byte aligned (paired loop + odd tail); 1: scalar path
@pytest.mark.parametrize("nq,ne", [(3, 1), (5, 2)])  # odd node counts
def test_pointwise_kernels_odd_sizes_and_alignment(dev, rng, nq, ne, shift, tmp_path):
    vf = support.load_support_kernel("volume_flux", nq, dev, cache_dir=tmp_path)
    rk = support.load_support_kernel("rk3_stage", nq, dev, cache_dir=tmp_path)
    q, u = vol(rng, ne, nq).ravel(), vol(rng, ne, nq).ravel()
    n = q.size
    stride = 2 * ((n + 2) // 2)  # doubles per row: rows start 16-byte aligned, one spare slot
    host = np.zeros((6, stride))
    host[0, shift:shift + n], host[1, shift:shift + n] = q, u
    big = DeviceBuffer.from_numpy(host)
    p = [big.ptr + (r * stride + shift) * 8 for r in range(6)]  # rows: q u qu qv qw rk_out
    support.launch_volume_flux(vf, p[0], p[1], p[1], p[1], p[2], p[3], p[4], ne=ne)
    support.launch_rk3_stage(rk, p[0], p[1], p[2], p[5], 0.75, 0.25, 0.5, ne=ne)
    dev.synchronize()
    got = big.to_numpy((6, stride))[:, shift:shift + n]
    for r in (2, 3, 4):
        assert np.array_equal(got[r], q * u)
    close(got[5], 0.75 * q + 0.25 * (u + 0.5 * (q * u)))


def test_surface_flux(dev, kernels, rng):
    q, u, v, w = (vol(rng) for _ in range(4))
    vM = interior_map(NE, NQ)
    vP = rng.permutation(vM.ravel()).reshape(vM.shape)
    nx, ny, nz, F = (face(rng) for _ in range(4))
    bufs = up(q, u, v, w, vM, vP, nx, ny, nz, F)
    fstar = out_like(nx)
    support.launch_surface_flux(kernels.surface_flux, *bufs, fstar, ne=NE)
    close(fstar.to_numpy(nx.shape), ref_surface(q, u, v, w, vM, vP, nx, ny, nz, F))


def test_separable_lift(dev, kernels, rng):
    dx, dy, dz, Ex, Ey, Ez = (vol(rng) for _ in range(6))
    fs = face(rng)
    bufs = up(dx, dy, dz, Ex, Ey, Ez, fs)
    dqdt = out_like(dx)
    support.launch_separable_lift(kernels.separable_lift, *bufs, dqdt, ne=NE)
    close(dqdt.to_numpy(dx.shape), ref_lift(dx, dy, dz, Ex, Ey, Ez, fs))


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_rk3_stage(dev, kernels, rng, stage):
    a, b = support.RK3_STAGES[stage]
    q0, qs, d = vol(rng), vol(rng), vol(rng)
    if stage == 0:
        qs = q0
    dt = 1e-3
    bq0, bqs, bd = up(q0, qs, d)
    out = out_like(q0)
    support.launch_rk3_stage(kernels.rk3_stage, bq0, bqs, bd, out, a, b, dt, ne=NE)
    close(out.to_numpy(q0.shape), a * q0 + b * (qs + dt * d))
    support.launch_rk3_stage(kernels.rk3_stage, bq0, bqs, bd, bqs, a, b, dt, ne=NE)  # in place
    close(bqs.to_numpy(q0.shape), a * q0 + b * (qs + dt * d))


# ------------------------------------------------------------------ graphs, manifests, smem
def test_graph_replay_matches_eager_bitwise(dev, kernels, rng):
    q, u, v, w = (vol(rng) for _ in range(4))
    vM = interior_map(NE, NQ)
    vP = rng.permutation(vM.ravel()).reshape(vM.shape)
    nx, ny, nz, F = (face(rng) for _ in range(4))
    ins = up(q, u, v, w, vM, vP, nx, ny, nz, F)
    stream = Stream(dev)

    def make_outputs():
        return [out_like(q) for _ in range(3)], out_like(nx), out_like(q)

    def sequence(outs, s):
        (qu, qv, qw), fstar, qn = outs
        support.launch_volume_flux(kernels.volume_flux, *ins[:4], qu, qv, qw, NE, s)
        support.launch_surface_flux(kernels.surface_flux, *ins, fstar, NE, s)
        support.launch_separable_lift(kernels.separable_lift, qu, qv, qw, *ins[1:4], fstar, qn, NE, s)
        support.launch_rk3_stage(kernels.rk3_stage, ins[0], ins[0], qn, qn, 0.0, 1.0, 1e-2, NE, s)

    eager = make_outputs()
    sequence(eager, stream)
    stream.synchronize()
    graphed = make_outputs()
    graph = CudaGraph.capture(lambda s: sequence(graphed, s), stream)
    graph.replay(stream)
    graph.replay(stream)  # idempotent sequence: a second replay must not change anything
    stream.synchronize()
    for e, g in zip([*eager[0], eager[1], eager[2]], [*graphed[0], graphed[1], graphed[2]]):
        assert e.to_numpy().tobytes() == g.to_numpy().tobytes()
    graph.close()


def test_manifest_kernel_launch(dev, rng, tmp_path):
    built = support.compile_support("rk3_stage", NQ, dev.arch, cache_dir=tmp_path / "c")
    (tmp_path / "rk.cubin").write_bytes(built.cubin)
    entry = {"symbol": "rk3_stage_nq4", "cubin": "rk.cubin", "sha256": file_sha256(tmp_path / "rk.cubin"),
             "block": [256, 1, 1], "dynamic_smem": 0,
             "params": [{"name": p.name, "ctype": p.ctype} for p in support.SIGNATURES["rk3_stage"]],
             "grid_rule": {"x": "min(ceil(ne*64/2/256), sms*4)"}, "arch": dev.arch, "config": {}, "compiler": {}}
    write_manifest(tmp_path / "m.json", [entry])
    (ent,) = read_manifest(tmp_path / "m.json")
    k = Module.from_manifest_entry(ent, device=dev).entry_kernel()
    q = vol(rng)
    bq, = up(q)
    out = out_like(q)
    k.launch(ent.grid(ne=NE, sms=dev.sm_count), args=(bq, bq, bq, out, 0.5, 1.0, 2.0, NE))
    close(out.to_numpy(q.shape), 0.5 * q + (q + 2.0 * q))


def test_large_dynamic_shared_memory(dev, rng, tmp_path):
    src = r'''extern "C" __global__ void rev(const double* x, double* y, int n)
{ extern __shared__ double s[]; for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[i];
  __syncthreads(); for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = s[n - 1 - i]; }'''
    built = compile_cuda(src, "rev.cu", dev.arch, cache_dir=tmp_path, entry_points=["rev"])
    k = Module.from_cubin(built.cubin, dev).get_kernel("rev", params("x:ptr y:ptr n:i32"))
    n = 12 * 1024  # 96 KiB > the 48 KiB default
    x = rng.standard_normal(n)
    bx, = up(x)
    y = out_like(x)
    k.launch(1, 256, (bx, y, n), shared=n * 8)
    assert np.array_equal(y.to_numpy(), x[::-1])
