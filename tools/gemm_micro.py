#!/usr/bin/env python3
"""Micro-benchmark and validation of the CuTe DSL FP64 GEMMs against cuBLAS, in one process.

Two modes:

``python tools/gemm_micro.py variants --out build/sm_90_var`` (CPU machine with the DSL):
    cross-compiles extra tile variants of the x/y/z GEMMs (beyond the schedule's defaults, which
    ``composer build`` puts into build/sm_90) so one GPU run can pick the best per shape.

``python tools/gemm_micro.py run --build build/sm_90 --build build/sm_90_var --out $OUT`` (GPU):
    1. validates every built CuTe GEMM (all roles and shapes, ragged Nq = 8 and 576) against the
       NumPy emulation of its BLAS call (``composer.gemm.roles.emulate``) and against cuBLAS;
    2. times the x role at Nq = 8 (N = 2,097,152) and Nq = 512 (M = K = 512, N = 262144) for every
       shape/variant side by side with cuBLAS (CUDA events around ``reps`` launches, median of
       ``samples`` after warm-up), with TFLOP/s and, at Nq = 8, the fraction of the byte roof;
       the y and z roles at a few orders likewise;
    3. validates the GEMM_CUTE path at p = 7 and 127 on the point-varying input;
    writing ``gemm_micro.json`` (rewritten after every section) and ``gemm_micro.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK_TFLOPS = 66.9
COPY_TBS = 4.24

# (role, order, mma, bm, bn, bk, warps_m, warps_n, stages, swap)
VARIANTS = [
    # x at Nq = 512: tile / depth / warp-tile alternatives
    *[("x", 511, s, *t) for s in ("16x8x4", "16x8x8") for t in (
        (128, 128, 16, 2, 4, 4, False), (128, 128, 32, 2, 4, 3, False),
        (128, 64, 16, 4, 2, 4, False), (64, 128, 16, 2, 4, 4, False),
        (128, 128, 16, 4, 2, 3, False), (128, 64, 32, 4, 2, 3, False),
        (64, 128, 16, 2, 2, 3, False), (128, 64, 16, 2, 2, 3, False))],  # the last two: cuBLAS's tiles
    *[("x", 511, "16x8x16", *t) for t in ((128, 128, 32, 2, 4, 3, False), (128, 64, 32, 4, 2, 3, False))],
    *[("x", 511, "8x8x4", *t) for t in ((128, 64, 16, 4, 2, 4, False), (128, 128, 16, 2, 4, 4, False))],
    # x at Nq = 8 (transposed): rows per block, warps
    *[("x", 7, s, *t) for s in ("16x8x4", "8x8x4", "16x8x8") for t in (
        (64, 8, 8, 2, 1, 2, True), (128, 8, 8, 4, 1, 2, True), (256, 8, 8, 8, 1, 2, True),
        (512, 8, 8, 8, 1, 2, True))],
    # z at p = 127 and y at p = 127
    ("z", 127, "16x8x4", 128, 128, 16, 2, 4, 3, False),
    ("z", 127, "16x8x4", 128, 64, 16, 4, 2, 4, False),
    ("y", 127, "16x8x4", 128, 128, 16, 2, 4, 3, False),
    ("y", 127, "16x8x4", 64, 64, 16, 2, 2, 3, False),
]


def variant_specs() -> list[tuple[str, int, str, dict, str]]:
    """(role, order, mma, tile overrides, name tag) of every tile alternative of VARIANTS to build,
    so that one GPU run compares them side by side with the default build."""
    return [(role, order, mma, {"bm": bm, "bn": bn, "bk": bk, "warps_m": wm, "warps_n": wn,
                                "stages": st, "swap": swap}, f"v{idx:02d}")
            for idx, (role, order, mma, bm, bn, bk, wm, wn, st, swap) in enumerate(VARIANTS)]


def build_variants(out: Path, arch: str, only: str | None = None, pipelines: tuple[bool, ...] = (False,),
                   async_tiles: int = 0) -> int:
    """``only`` ("x:511"): that role and order's variants; ``pipelines``: each variant without and/or
    with ``fragment_pipeline`` (tag suffix ``fp``); ``async_tiles``: also each variant that can take
    it with ``async_epilogue_tiles`` (tag suffix ``ae<T>``)."""
    from composer.build.builder import build
    from composer.build.plan import BuildJob
    from composer.gemm.cute.tiles import role_kernel

    jobs = []
    for idx, (role, order, mma, overrides, tag) in enumerate(variant_specs()):
        if only is not None and only != f"{role}:{order}":
            continue
        switches = [({"fragment_pipeline": p}, "fp" if p else "") for p in pipelines]
        if async_tiles:
            switches.append(({"async_epilogue_tiles": async_tiles}, f"ae{async_tiles}"))
        for switch, suffix in switches:
            try:
                rk = role_kernel(role, order + 1, 1, mma, {**overrides, **switch})
            except ValueError as exc:  # a tile the shape cannot take (validate() says why)
                print(f"skip {role} p{order} {mma} {suffix}: {exc}", file=sys.stderr)
                continue
            name = f"dgemm_p{order:04d}_{role}_m{mma.replace('x', '_')}_{tag}{suffix}"
            jobs.append(BuildJob(name, "cute", arch, order,
                                 {"role": role, "swap": rk.swap, "config": rk.config.to_dict(), "variant": idx}))
    rep = build(jobs, out, log=lambda m: print(m, file=sys.stderr))
    print(f"{out}: {len(rep.built)} compiled, {len(rep.reused)} reused")
    return 0


# ----------------------------------------------------------------------------------------- GPU


class Micro:
    def __init__(self, out: Path, builds: list[Path], budget_s: float) -> None:
        from composer.runtime.device import ensure_context

        self.out = out
        self.t0 = time.time()
        self.budget = budget_s
        self.profile = False  # set by --profile: one launch per kernel between cuProfilerStart/Stop
        self.dev = ensure_context(None)
        self.logf = open(out / "gemm_micro.log", "a")
        self.res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                          "validation": [], "timing": [], "path": [], "errors": []}
        from composer.runtime.manifest import read_manifest

        self.entries = []
        self.origin: dict[str, int] = {}  # symbol -> index of the build dir (0: schedule defaults)
        for i, b in enumerate(builds):
            if (b / "manifest.json").is_file():
                for e in read_manifest(b / "manifest.json"):
                    if e.config.get("kind") == "cute_gemm" and e.arch == self.dev.arch:
                        self.entries.append(e)
                        self.origin[id(e)] = i
        self.log(f"{len(self.entries)} CuTe GEMM entries for {self.dev.arch} from {builds}")
        from composer.runtime import Stream

        self.stream = Stream(self.dev)
        from composer.gemm.cublas import CublasGemm

        self.blas = CublasGemm(int(self.stream.handle))
        self._modules: dict[str, object] = {}

    def left(self) -> float:
        return self.budget - (time.time() - self.t0)

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.logf.write(line + "\n")
        self.logf.flush()

    def dump(self) -> None:
        (self.out / "gemm_micro.json").write_text(json.dumps(self.res, indent=1, default=str))

    def kernel(self, e):
        from composer.runtime.module import Module

        if id(e) not in self._modules:
            self._modules[id(e)] = Module.from_manifest_entry(e, device=self.dev).entry_kernel()
        return self._modules[id(e)]

    def launcher(self, e, spec, bufs, out):
        from composer.gemm.cute.config import kernel_problem
        from composer.paths.gemm_cute import entry_gemm_config

        cfg = entry_gemm_config(e)
        prob = kernel_problem(spec, bool(e.config["swap"]))
        assert prob.majors == (cfg.a_major, cfg.b_major, cfg.c_major), (e.symbol, prob.majors)
        k = self.kernel(e)
        grid = cfg.grid(prob.m, prob.n, prob.batch)
        args = prob.args(bufs[prob.a_operand].ptr, bufs[prob.b_operand].ptr, out.ptr)

        def go():
            k.launch(grid, args=args, stream=self.stream)
        return go, cfg

    def time_fn(self, fn, reps: int, samples: int = 12, warm: int = 2) -> dict:
        from composer.runtime import Event

        for _ in range(warm):
            fn()
        self.stream.synchronize()
        if self.profile:  # under ncu --profile-from-start off: exactly one launch per kernel is profiled
            from cuda.bindings import driver

            driver.cuProfilerStart()
            fn()
            self.stream.synchronize()
            driver.cuProfilerStop()
            samples, reps = 1, 1
        evs = [(Event(self.dev), Event(self.dev)) for _ in range(samples)]
        for a, b in evs:
            a.record(self.stream)
            for _ in range(reps):
                fn()
            b.record(self.stream)
        self.stream.synchronize()
        ms = [a.elapsed_ms(b) / reps for a, b in evs]
        for a, b in evs:
            a.close()
            b.close()
        return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
                "samples": samples, "reps": reps}

    # ---------------------------------------------------------------- validation
    def validate(self, numpy_limit_s: float) -> None:
        from composer.gemm.roles import emulate, gemm_spec
        from composer.runtime import DeviceBuffer

        rng = np.random.default_rng(7)
        groups: dict[tuple[str, int], list] = {}
        for e in self.entries:  # the schedule builds; variants are checked against cuBLAS in bench
            if self.origin[id(e)] == 0:
                groups.setdefault((e.config["role"], e.config["order"]), []).append(e)
        for (role, order), ents in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            nq = order + 1
            ne = 3 if nq <= 128 else 1
            spec = gemm_spec(role, nq, ne)
            diff = rng.standard_normal((nq, nq))
            flux = rng.standard_normal((ne, nq, nq, nq))
            bufs = {"D": DeviceBuffer.from_numpy(diff, device=self.dev),
                    "flux": DeviceBuffer.from_numpy(flux, device=self.dev)}
            out = DeviceBuffer(flux.nbytes, self.dev)
            # cuBLAS reference on the device
            out.zero()
            self.blas.run(spec, {"D": bufs["D"].ptr, "flux": bufs["flux"].ptr}, out.ptr)
            self.stream.synchronize()
            ref_blas = out.to_numpy(flux.shape, np.float64)
            ref = None
            if self.left() > numpy_limit_s:
                t = time.time()
                ref = emulate(spec, diff, flux)
                self.log(f"emulate {role} nq={nq} ne={ne}: {time.time() - t:.1f}s")
            scale_b = np.max(np.abs(ref_blas))
            if ref is not None:
                err_blas = float(np.max(np.abs(ref_blas - ref)) / np.max(np.abs(ref)))
                self.res["validation"].append({"symbol": "cublas", "role": role, "order": order,
                                               "err_numpy": err_blas})
            for e in ents:
                try:
                    out.zero()  # a stale result of the previous kernel must not pass
                    go, cfg = self.launcher(e, spec, bufs, out)
                    go()
                    self.stream.synchronize()
                    got = out.to_numpy(flux.shape, np.float64)
                    rec = {"symbol": f"{e.symbol}@{self.origin[id(e)]}", "role": role, "order": order, "mma": e.config["mma"],
                           "tag": cfg.tag, "build": self.origin[id(e)],
                           "err_cublas": float(np.max(np.abs(got - ref_blas)) / scale_b)}
                    if ref is not None:
                        rec["err_numpy"] = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
                    rec["ok"] = bool(rec.get("err_numpy", rec["err_cublas"]) <= 1e-13)
                    self.res["validation"].append(rec)
                    self.log(f"valid {e.symbol:34s} {cfg.tag:44s} err_np={rec.get('err_numpy', -1):.2e} "
                             f"err_blas={rec['err_cublas']:.2e} {'OK' if rec['ok'] else 'FAIL'}")
                except Exception as exc:  # keep going: one bad kernel must not cost the run
                    self.res["errors"].append(f"validate {e.symbol}: {exc!r}")
                    self.log(f"ERROR validate {e.symbol}: {exc!r}")
            for b in (*bufs.values(), out):
                b.free()
            self.dump()

    # ---------------------------------------------------------------- timing
    def bench(self, role: str, order: int, ne: int, reps: int) -> None:
        from composer.gemm.roles import gemm_spec
        from composer.runtime import DeviceBuffer

        nq = order + 1
        spec = gemm_spec(role, nq, ne)
        flop = 2.0 * nq * nq * nq * nq * ne  # every role: 2 Nq^4 Ne
        nbytes = 8.0 * (2 * nq**3 * ne + nq * nq)  # flux read once, derivative written once, D
        rng = np.random.default_rng(3)
        bufs = {"D": DeviceBuffer.from_numpy(rng.standard_normal((nq, nq)), device=self.dev),
                "flux": DeviceBuffer(8 * nq**3 * ne, self.dev)}
        host = rng.standard_normal(min(nq**3 * ne, 1 << 24))
        reps_needed = -(-(nq**3 * ne) // host.size)
        flux_host = np.tile(host, reps_needed)[: nq**3 * ne]
        bufs["flux"].copy_from(flux_host)
        del flux_host
        out = DeviceBuffer(8 * nq**3 * ne, self.dev)
        rows = []

        def record(name, mma, tag, t, err=None, build=-1):
            tf = flop / (t["median_ms"] * 1e-3) / 1e12
            row = {"role": role, "order": order, "nq": nq, "ne": ne, "n": spec.n, "kernel": name,
                   "mma": mma, "tag": tag, "build": build, **t, "tflops": tf, "frac_peak": tf / PEAK_TFLOPS,
                   "byte_roof_frac": (nbytes / (t["median_ms"] * 1e-3) / 1e12) / COPY_TBS,
                   "err_vs_cublas": err}
            rows.append(row)
            self.res["timing"].append(row)
            self.log(f"time {role} nq={nq:4d} {name:36s} {mma:8s} {tag:44s} {t['median_ms']:9.4f} ms "
                     f"{tf:7.2f} TF/s ({100 * tf / PEAK_TFLOPS:5.1f}% peak, "
                     f"{100 * row['byte_roof_frac']:5.1f}% byte roof) err={err}")

        ops = {"D": bufs["D"].ptr, "flux": bufs["flux"].ptr}
        t = self.time_fn(lambda: self.blas.run(spec, ops, out.ptr), reps)
        self.stream.synchronize()
        ref = out.to_numpy(None, np.float64)
        record("cublas", "cublas", "cublas", t)
        scale = np.max(np.abs(ref))
        for e in self.entries:
            if e.config["role"] != role or e.config["order"] != order:
                continue
            try:
                go, cfg = self.launcher(e, spec, bufs, out)
                t = self.time_fn(go, reps)
                got = out.to_numpy(None, np.float64)
                record(f"{e.symbol}@{self.origin[id(e)]}", e.config["mma"], cfg.tag, t,
                       float(np.max(np.abs(got - ref)) / scale), self.origin[id(e)])
            except Exception as exc:
                self.res["errors"].append(f"bench {e.symbol}: {exc!r}")
                self.log(f"ERROR bench {e.symbol}: {exc!r}")
        for b in (*bufs.values(), out):
            b.free()
        self.dump()

    def interleaved(self, role: str, order: int, ne: int, reps: int, rounds: int, match: list[str]) -> None:
        """cuBLAS and the built kernels whose symbol contains any of ``match`` (all without it),
        timed in ``rounds`` interleaved rounds (the order rotated each round, as composer bench
        does), each output compared with cuBLAS's, the SM clock sampled (NVML) during every
        timing: the comparison the power-capped H200 allows (docs/results.md, protocol)."""
        from composer.bench.nvml import ClockSampler
        from composer.gemm.roles import gemm_spec
        from composer.runtime import DeviceBuffer

        nq = order + 1
        spec = gemm_spec(role, nq, ne)
        flop = 2.0 * nq**4 * ne
        rng = np.random.default_rng(3)
        bufs = {"D": DeviceBuffer.from_numpy(rng.standard_normal((nq, nq)), device=self.dev),
                "flux": DeviceBuffer(8 * nq**3 * ne, self.dev)}
        host = rng.standard_normal(min(nq**3 * ne, 1 << 24))
        bufs["flux"].copy_from(np.tile(host, -(-(nq**3 * ne) // host.size))[: nq**3 * ne])
        out = DeviceBuffer(8 * nq**3 * ne, self.dev)
        ops = {"D": bufs["D"].ptr, "flux": bufs["flux"].ptr}
        if rounds < 1:
            raise SystemExit("--rounds must be at least 1")
        runs = [("cublas", "cublas", "cublas", lambda: self.blas.run(spec, ops, out.ptr))]
        out.poison()  # an element a kernel leaves unwritten cannot pass for cuBLAS's
        runs[0][3]()
        self.stream.synchronize()
        ref = out.to_numpy(None, np.float64)
        scale = np.max(np.abs(ref))
        errors = {"cublas": 0.0}
        for e in self.entries:
            if e.config["role"] != role or e.config["order"] != order or "fused" in e.config \
                    or (match and not any(m in e.symbol for m in match)):
                continue  # GEMM_FUSED's tree and product kernels read arrays a plain launch does not pass
            name = f"{e.symbol}@{self.origin[id(e)]}"
            try:
                go, cfg = self.launcher(e, spec, bufs, out)
                out.poison()
                go()
                self.stream.synchronize()
                errors[name] = float(np.max(np.abs(out.to_numpy(None, np.float64) - ref)) / scale)
            except Exception as exc:  # noqa: BLE001 - one kernel's failure is recorded, the rest still run
                self.res["errors"].append(f"interleaved {name}: {exc!r}")
                self.log(f"ERROR interleaved {name}: {exc!r}")
                continue
            runs.append((name, e.config["mma"], cfg.tag, go))
        times: dict[str, list[float]] = {name: [] for name, *_ in runs}
        clocks: dict[str, list[float]] = {name: [] for name, *_ in runs}
        sampler = ClockSampler(interval_s=0.02)
        try:
            for r in range(rounds):
                shift = r % len(runs)
                for name, mma, tag, go in runs[shift:] + runs[:shift]:
                    sampler.start()
                    t = self.time_fn(go, reps)
                    samples = sampler.stop()
                    times[name].append(t["median_ms"])
                    sm = [s.sm_clock_mhz for s in samples if s.sm_clock_mhz]
                    clocks[name].append(statistics.median(sm) if sm else float("nan"))
        finally:
            sampler.close()
        rows = []
        for name, mma, tag, _ in runs:
            ms = statistics.median(times[name])
            tf = flop / (ms * 1e-3) / 1e12
            row = {"role": role, "order": order, "nq": nq, "kernel": name, "mma": mma, "tag": tag, "rounds": rounds,
                   "median_ms": ms, "round_ms": times[name], "sm_mhz": clocks[name], "tflops": tf,
                   "frac_peak": tf / PEAK_TFLOPS, "err_vs_cublas": errors[name]}
            rows.append(row)
            self.log(f"interleaved {role} nq={nq} {name:36s} {tag:44s} {ms:8.4f} ms {tf:6.2f} TF/s "
                     f"({100 * tf / PEAK_TFLOPS:5.1f}%) vs cuBLAS {rows[0]['median_ms'] / ms:.3f}x "
                     f"clock {statistics.median(clocks[name]):.0f} MHz err={errors[name]:.2e}")
        self.res.setdefault("interleaved", []).extend(rows)
        for b in (*bufs.values(), out):
            b.free()
        self.dump()

    # ---------------------------------------------------------------- path
    def path(self, order: int, builds: list[Path]) -> None:
        from composer import dg
        from composer.bench.runner import validate_path
        from composer.config.schedules import load_schedule

        sched = load_schedule(order)
        grid = sched.validation.grid
        fields = dg.make_fields(order, grid, varying=True)
        t = time.time()
        reference = (fields, dg.reference_tendency(fields, order, grid))
        self.log(f"reference p={order}: {time.time() - t:.1f}s")
        mmas = sorted({e.config["mma"] for e in self.entries if e.config["order"] == order
                       and self.origin[id(e)] == 0})
        for mma in mmas:
            for lib in ({"x": "cute", "y": "cute", "z": "cute"},):
                try:
                    err = validate_path("GEMM_CUTE", order, grid, self.dev, reference,
                                        {"mma": mma, "library": lib, "build_dir": str(builds[0])})
                    rec = {"order": order, "mma": mma, "library": lib, "err": err,
                           "ok": bool(err <= sched.validation.tolerance)}
                except Exception as exc:
                    rec = {"order": order, "mma": mma, "library": lib, "error": repr(exc)}
                self.res["path"].append(rec)
                self.log(f"path GEMM_CUTE p={order} {mma}: {rec}")
                self.dump()


def gpu_info(out: Path) -> None:
    import subprocess

    q = "name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active"
    try:
        txt = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"], capture_output=True,
                             text=True, timeout=20).stdout
    except Exception as exc:  # noqa: BLE001
        txt = repr(exc)
    with open(out / "gpu.txt", "a") as f:
        f.write(txt)


def run_gpu(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    builds = [Path(b) for b in args.build]
    gpu_info(out)
    m = Micro(out, builds, args.budget)
    m.profile = args.profile
    if args.sections:
        wanted = {w.strip() for w in args.sections.split(",")}
    sections = [
        ("bench x p7", lambda: m.bench("x", 7, 32768, reps=5)),
        ("bench x p511", lambda: m.bench("x", 511, 1, reps=2)),
        # the 2026-11-29 run spent ~100 s in the NumPy checks at Nq = 512/576 and skipped the
        # path validation after them: the path now comes first
        ("path p7", lambda: m.path(7, builds)),
        ("path p127", lambda: m.path(127, builds)),
        ("bench y p7", lambda: m.bench("y", 7, 32768, reps=5)),
        ("bench z p7", lambda: m.bench("z", 7, 32768, reps=5)),
        ("bench y p127", lambda: m.bench("y", 127, 64, reps=3)),
        ("bench z p127", lambda: m.bench("z", 127, 64, reps=3)),
        ("bench x p127", lambda: m.bench("x", 127, 64, reps=3)),
        ("validate", lambda: m.validate(numpy_limit_s=args.numpy_guard)),
        ("bench y p511", lambda: m.bench("y", 511, 1, reps=2)),
        ("bench z p511", lambda: m.bench("z", 511, 1, reps=2)),
        ("interleaved x p511", lambda: m.interleaved("x", 511, 1, reps=2, rounds=args.rounds,
                                                     match=[s for s in (args.match or "").split(",") if s])),
    ]
    if args.sections:
        unknown = wanted - {name for name, _ in sections}
        if unknown:
            raise SystemExit(f"unknown sections {sorted(unknown)}; known: {[n for n, _ in sections]}")
        sections = [(name, fn) for name, fn in sections if name in wanted]
    for name, fn in sections:
        if m.left() < 8:
            m.log(f"skip {name}: budget")
            m.res["errors"].append(f"skipped {name} (budget)")
            continue
        m.log(f"== {name}")
        try:
            fn()
        except Exception as exc:
            m.res["errors"].append(f"{name}: {exc!r}")
            m.log(f"ERROR {name}: {traceback.format_exc()}")
        m.dump()
    gpu_info(out)
    m.log("done")
    m.dump()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("variants")
    v.add_argument("--out", default="build/sm_90_var")
    v.add_argument("--arch", default="sm_90")
    v.add_argument("--only", default=None, metavar="ROLE:ORDER", help="that role and order's variants only (e.g. x:511)")
    v.add_argument("--async-epilogue", type=int, default=0, metavar="T",
                   help="also build each variant that can take it with async_epilogue_tiles = T (tag aeT)")
    v.add_argument("--fragment-pipeline", choices=("off", "on", "both"), default="off",
                   help="build each variant without (off), with (on) or both ways (tag suffix fp)")
    r = sub.add_parser("run")
    r.add_argument("--build", action="append", required=True)
    r.add_argument("--out", default=os.environ.get("OUT", "/tmp/gemm-micro"))
    r.add_argument("--budget", type=float, default=165.0, help="seconds before sections are skipped")
    r.add_argument("--sections", default=None,
                   help="comma-separated section names to run (default: all), e.g. 'bench x p511'")
    r.add_argument("--profile", action="store_true",
                   help="bracket one launch per timed kernel with cuProfilerStart/Stop (run under "
                        "ncu --profile-from-start off); timings are then single launches")
    r.add_argument("--rounds", type=int, default=6, help="rounds of the interleaved sections")
    r.add_argument("--match", default=None, metavar="TEXT[,TEXT...]",
                   help="interleaved sections: only the kernels whose symbol contains one of these")
    r.add_argument("--numpy-guard", type=float, default=60.0,
                   help="skip NumPy emulation when fewer seconds than this are left")
    args = ap.parse_args()
    if args.cmd == "variants":
        pipelines = {"off": (False,), "on": (True,), "both": (False, True)}[args.fragment_pipeline]
        return build_variants(Path(args.out), args.arch, args.only, pipelines, args.async_epilogue)
    return run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
