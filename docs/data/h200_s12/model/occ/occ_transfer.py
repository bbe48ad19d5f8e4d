"""Shape transfer FUSED_TC16 <- FUSED_TC at 132 SMs: current model vs occupancy-aware variants.

Read-only: loads the model, the build and the schedules; writes nothing in the repo.
Run from /work/main:  python /tmp/occ/occ_transfer.py [--json /tmp/occ/out.json]
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import tomllib
from pathlib import Path

from composer.arch.limits import arch_limits
from composer.arch.machines import get_machine
from composer.arch.sass import inspect_cubin
from composer.model.build import Build
from composer.model.calibrate import Model
from composer.model.capacity import capacities
from composer.model.demand import combined
from composer.model.predict import predict

MODEL = "docs/data/h200_s11/model/model_h200_s11_sms34.json"
BUILD = ".cache/build_s9"
ORDERS = [7, 15, 31, 63, 127, 255, 511, 767]
LIM = arch_limits("sm_90")

model = Model.load(MODEL)
assert model.hash.startswith("932f144a"), model.hash
K = model.overlap
target = capacities(get_machine("h200"), None, floor=model.floor)
build = Build(BUILD)
manifest = {e["symbol"]: e for e in json.loads((Path(BUILD) / "manifest.json").read_text())["kernels"]}
_sass: dict[str, dict] = {}


def sass_of(symbol):
    cubin = manifest[symbol]["cubin"]
    if cubin not in _sass:
        _sass[cubin] = inspect_cubin(Path(BUILD) / cubin)
    return _sass[cubin][symbol]


def occupancy(regs, threads, smem_bytes):
    """CUDA occupancy rules (cuda_occupancy.h): blocks/SM and warps/SM, with the limiter."""
    wpb = math.ceil(threads / LIM.warp_size)
    rpw = math.ceil(regs * LIM.warp_size / 256) * 256
    warps_regs = (LIM.registers_per_sm // 4 // rpw) * 4  # per sub-partition allocation
    lims = {"regs": warps_regs // wpb, "threads": LIM.max_threads_per_sm // threads,
            "blocks": LIM.max_blocks_per_sm,
            "smem": LIM.smem_per_sm // (smem_bytes + LIM.smem_reserved_per_block)}
    b = min(lims.values())
    return b, b * wpb, min(lims, key=lims.get)


def binary(k):
    """regs, block, smem, blocks/SM, warps/SM, limiter of the calibrated kernel k."""
    c = k.counters
    e = manifest[c.name]
    s = sass_of(c.name)
    smem = e["dynamic_smem"] + s.shared_bytes
    assert s.registers == c.registers, (c.name, s.registers, c.registers)  # build == profiled binary
    assert e["block"][0] == c.block
    b, w, lim = occupancy(c.registers, c.block, smem)
    # resident warps also bounded by the grid (one partial wave): never binds here, checked
    w_grid = c.grid / 132 * (c.block // 32)
    return dict(regs=c.registers, block=c.block, smem=smem, blocks=b, warps=min(w, w_grid), lim=lim, grid=c.grid)


def schedule(order, path):
    t = tomllib.loads(Path(f"schedules/p{order:04d}.toml").read_text())["paths"][path]
    return t


def warp_tile(order, path, role):
    """(lines, positions) of one warp's output tile: (mm*WM, 8*WN) of the schedule's kernel."""
    sch = schedule(order, path)
    mm = int(sch["mma"].split("x")[0])
    kernels = sch["kernels"]
    dirs = role.split("_")[-1]
    for kc in kernels:
        if kc["dirs"] == dirs:
            return mm * kc["tile"][0], 8 * kc["tile"][1], sch
    return None, None, sch


def seconds_with(scaling, d, lam, overlap):
    drift = 1.0  # at the full SM count
    return scaling.eta * drift * combined({**d, "latency": lam / 132}, overlap) / target.clock_hz


def little_c(path):
    """median over path's 132-SM kernels with a fitted latency term of c = lambda W / X_dram (~ L / b_warp)."""
    cs = [k.sm_scaling.latency_sm_cycles * binary(k)["warps"] / k.counters.counts["dram_bytes"]
          for k in model.kernels if k.machine == "h200" and k.path == path and k.sm_scaling is not None
          and k.sm_scaling.latency_sm_cycles > 0]
    return statistics.median(cs), len(cs)


C_TC, N_C = little_c("FUSED_TC")
skipped: list[str] = []
preds = predict(model, target, build, paths=["FUSED_TC16"], orders=ORDERS, aliases={"FUSED_TC16": "FUSED_TC"},
                mma="16x8x4", skipped=skipped)
cells = model.cells()
rows, paths = [], []
for p in preds:
    src = {k.role: k for k in cells[("FUSED_TC", p.order)]["h200"]}
    tgt = {k.role: k for k in cells[("FUSED_TC16", p.order)]["h200"]}
    tot = {"meas": 0.0, "cur": 0.0, "v0": 0.0, "v1": 0.0, "v2": 0.0, "v3": 0.0, "v4": 0.0, "v4m": 0.0}
    for kp in p.kernels:
        ks, kt = src[kp.role], tgt[kp.role]
        assert kt.name == kp.target_name, (kt.name, kp.target_name)
        bs, bt = binary(ks), binary(kt)
        meas = kt.counters.duration_s
        sc = ks.sm_scaling
        cur = kp.seconds
        wr = bs["warps"] / bt["warps"]
        ls, ps, sch_s = warp_tile(p.order, "FUSED_TC", kp.role)
        lt, pt, sch_t = warp_tile(p.order, "FUSED_TC16", kp.role)
        # bytes per warp per k-step ~ A + B fragments of its warp tile: (lines + positions) x 4 doubles
        fr = None if ls is None or lt is None else (ls + ps) / (lt + pt)
        if sc is None:
            v0 = v1 = v2 = v3 = cur
        else:
            lam = sc.latency_sm_cycles
            v0 = seconds_with(sc, kp.demands, lam, K)  # FUSED_TC's form, lambda as is
            v1 = seconds_with(sc, kp.demands, lam * wr, K)  # lambda x W_calib / W_target
            v2 = seconds_with(sc, kp.demands, lam * wr * (fr or 1.0), K)  # and per-warp fragment bytes
            # v3: resident blocks (a block owns one box; the box is the same in both binaries)
            v3 = seconds_with(sc, kp.demands, lam * bs["blocks"] / bt["blocks"] * (1.0 if ls else 1.0), K)
        # v4: Little's law, lambda = c X_dram / W; c = the kernel's own (lambda W / X) where its fit has a
        # latency term, else FUSED_TC's family median; eta re-anchored on the calibration binary with lambda_c
        if sc is not None and sc.latency_sm_cycles > 0:
            lam_c = sc.latency_sm_cycles
        else:
            lam_c = C_TC * ks.counters.counts["dram_bytes"] / bs["warps"]
        eta4 = ks.counters.elapsed_cycles / combined({**ks.demands, "latency": lam_c / 132}, K)
        v4 = eta4 * combined({**kp.demands, "latency": lam_c * wr / 132}, K) / target.clock_hz
        # v4m: v4 only where the calibration binds a memory resource (dram, lsu, l2), else the current rule
        v4m = v4 if ks.binding in ("dram", "lsu_wavefronts", "l2_bytes") else cur
        tgt_sc = kt.sm_scaling
        r = dict(order=p.order, role=kp.role, src=bs, tgt=bt, meas_us=meas * 1e6, cur_us=cur * 1e6,
                 v0_us=v0 * 1e6, v1_us=v1 * 1e6, v2_us=v2 * 1e6, v3_us=v3 * 1e6, v4_us=v4 * 1e6, v4m_us=v4m * 1e6, clk=kt.counters.clock_hz, wr=wr, fr=fr,
                 lam_src=None if sc is None else sc.latency_sm_cycles,
                 lam_tgt=None if tgt_sc is None else tgt_sc.latency_sm_cycles,
                 eta_src=ks.eta_at(K), eta_tgt=kt.eta_at(K), bind_src=ks.binding, bind_pred=kp.binding,
                 bind_tgt=kt.binding, src_us=ks.counters.duration_s * 1e6,
                 lat_share_src=None if sc is None or sc.latency_sm_cycles == 0 else
                 (sc.latency_sm_cycles / 132) / max(ks.demands.values()))
        rows.append(r)
        for key in tot:
            tot[key] += r[f"{key}_us"]
    paths.append(dict(order=p.order, **tot))


def err(a, b):
    return 100 * (a / b - 1)


out = sys.stdout
print(f"model {model.hash[:16]} K={K} form={model.latency_form}; target h200 132 SMs clock {target.clock_hz/1e9:.3f} GHz")
print("skipped:", skipped)
print(f"FUSED_TC Little constant c = lambda W / X_dram: median {C_TC:.3f} over {N_C} kernels with lambda > 0")
print("\nper kernel: TC = FUSED_TC binary, 16 = FUSED_TC16 binary; warps = theoretical resident warps/SM (limiter)")
hdr = ("p", "role", "TC regs/blk/smem/W", "16 regs/blk/smem/W", "Wc/Wt", "frag", "lam_TC", "lam_16",
       "TC us", "16 meas", "cur", "V0", "V1", "V2", "V3", "V4", "V4m")
print(" | ".join(hdr))
for r in rows:
    s, t = r["src"], r["tgt"]
    frs = "-" if r["fr"] is None else f"{r['fr']:.2f}"
    f = lambda key: f"{r[key]:.1f} ({err(r[key], r['meas_us']):+.1f})"
    lam = lambda x: "-" if x is None else f"{x:.2e}"
    print(f"{r['order']} | {r['role']} | {s['regs']}/{s['block']}/{s['smem']//1024}K/{s['warps']:.0f}({s['lim']}) | "
          f"{t['regs']}/{t['block']}/{t['smem']//1024}K/{t['warps']:.0f}({t['lim']}) | {r['wr']:.2f} | "
          f"{frs} | {lam(r['lam_src'])} | {lam(r['lam_tgt'])} | {r['src_us']:.1f} | "
          f"{r['meas_us']:.1f} | {f('cur_us')} | {f('v0_us')} | {f('v1_us')} | {f('v2_us')} | {f('v3_us')} | {f('v4_us')} | {f('v4m_us')}"
          f" | bind {r['bind_src']}->{r['bind_pred']} (16: {r['bind_tgt']}) eta {r['eta_src']:.2f}/{r['eta_tgt']:.2f}")
print("\npath totals (sum of kernel us), error vs FUSED_TC16's own calibration")
for pth in paths:
    print(f"p={pth['order']}: meas {pth['meas']:.1f} | " + " | ".join(
        f"{k} {pth[k]:.1f} ({err(pth[k], pth['meas']):+.1f}%)" for k in ("cur", "v0", "v1", "v2", "v3", "v4", "v4m")))
for k in ("cur", "v0", "v1", "v2", "v3", "v4", "v4m"):
    e = [abs(err(p_[k], p_["meas"])) for p_ in paths]
    ek = [abs(err(r[f"{k}_us"], r["meas_us"])) for r in rows]
    print(f"{k}: median |path err| {statistics.median(e):.1f}% (max {max(e):.1f}), "
          f"median |kernel err| {statistics.median(ek):.1f}% over {len(ek)} kernels")
# does FUSED_TC16's own latency term follow 1/W? (uses the target's restricted calibrations: a check only)
print("\nlambda_16 / lambda_TC vs W_TC/W_16 (kernels where both have a latency term)")
for r in rows:
    if r["lam_src"] and r["lam_tgt"]:
        print(f"  p={r['order']} {r['role']}: lam ratio {r['lam_tgt']/r['lam_src']:.2f}, warp ratio {r['wr']:.2f}, "
              f"warp x frag {r['wr']*(r['fr'] or 1):.2f}, block ratio {r['src']['blocks']/r['tgt']['blocks']:.2f}")
if "--json" in sys.argv:
    Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(dict(rows=rows, paths=paths), indent=1))
clks = [r["clk"] for r in rows]
print(f"FUSED_TC16 ncu SM clocks {min(clks)/1e9:.4f}-{max(clks)/1e9:.4f} GHz (prediction at {target.clock_hz/1e9:.3f}):"
      " a same-binary prediction sits {:+.2f} to {:+.2f} % off".format(100*(min(clks)/target.clock_hz-1), 100*(max(clks)/target.clock_hz-1)))
for sub in ([7, 15, 31, 63], [255, 511, 767]):
    for k in ("cur", "v1", "v4", "v4m"):
        e = [abs(err(p_[k], p_["meas"])) for p_ in paths if p_["order"] in sub]
        print(f"  orders {sub} {k}: median |path err| {statistics.median(e):.1f}%")

# compact table for the report
print("\n| p | role | TC r/blk/smem/W | 16 r/blk/smem/W | 16 meas us | cur | V0 | V1 | V2 | V3 | V4 |")
for r in rows:
    s, t = r["src"], r["tgt"]
    e = lambda k: f"{err(r[k], r['meas_us']):+.1f}"
    print(f"| {r['order']} | {r['role']} | {s['regs']}/{s['block']}/{s['smem']/1024:.0f}K/{s['warps']:.0f}{s['lim'][0]} | "
          f"{t['regs']}/{t['block']}/{t['smem']/1024:.0f}K/{t['warps']:.0f}{t['lim'][0]} | {r['meas_us']:.1f} | "
          f"{r['cur_us']:.1f} ({e('cur_us')}) | {e('v0_us')} | {e('v1_us')} | {e('v2_us')} | {e('v3_us')} | {e('v4_us')} |")
