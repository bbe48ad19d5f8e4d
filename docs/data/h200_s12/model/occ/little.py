"""c = lambda * W / X_dram (warp-SM-cycles per DRAM byte, ~ L/b) for every kernel with a fitted latency term."""
import sys, statistics
sys.argv = ["x"]
exec(open("/tmp/occ/occ_transfer.py").read().split("skipped: list")[0])  # helpers only
rows = []
for k in model.kernels:
    if k.machine != "h200" or k.sm_scaling is None or k.name not in manifest:
        continue
    try:
        b = binary(k)
    except AssertionError as e:
        print("skip (build binary differs from profiled):", e); continue
    lam = k.sm_scaling.latency_sm_cycles
    X = k.counters.counts["dram_bytes"]
    c = lam * b["warps"] / X if lam else 0.0
    share = (lam / 132) / max(k.demands.values()) if lam else 0
    rows.append((k.path, k.order, k.role, b["warps"], b["regs"], lam, c, share))
for r in sorted(rows, key=lambda r: (r[0], r[1])):
    print(f"{r[0]:11s} {r[1]:4d} {r[2]:22s} W={r[3]:5.1f} regs={r[4]:3d} lam={r[5]:.3g} c={r[6]:.3f} lat/roof@132={r[7]:.2f}")
for fam in sorted({r[0] for r in rows}):
    cs = [r[6] for r in rows if r[0] == fam and r[6] > 0]
    if cs: print(fam, "c median", f"{statistics.median(cs):.3f}", "range", f"{min(cs):.3f}-{max(cs):.3f}", len(cs), "of", sum(1 for r in rows if r[0]==fam))
