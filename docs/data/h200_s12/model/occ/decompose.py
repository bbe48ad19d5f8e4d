"""Split each transfer miss: pred/meas = (eta_TC / eta_16) x (||D_transferred||_K / ||D_16 own||_K)."""
import json
from composer.model.calibrate import Model
from composer.model.demand import combined
m = Model.load("docs/data/h200_s11/model/model_h200_s11_sms34.json"); K = m.overlap
doc = json.load(open("/tmp/occ/pred_current.json"))
cells = m.cells()
for p in doc["paths"]:
    src = {k.role: k for k in cells[("FUSED_TC", p["order"])]["h200"]}
    tgt = {k.role: k for k in cells[("FUSED_TC16", p["order"])]["h200"]}
    for kp in p["kernels"]:
        ks, kt = src[kp["role"]], tgt[kp["role"]]
        dn, do = combined(kp["demands"], K), combined(kt.demands, K)
        cnt = {q: kt.counters.counts[q] / ks.counters.counts[q] if ks.counters.counts[q] else float('nan')
               for q in ("dram_bytes", "l2_bytes", "lsu_wavefronts", "issue", "fp64", "dmma")}
        print(p["order"], kp["role"], f"eta ratio {ks.eta_at(K)/kt.eta_at(K):.3f} norm ratio {dn/do:.3f} -> {ks.eta_at(K)/kt.eta_at(K)*dn/do*kt.counters.clock_hz/1.98e9:.3f}",
              " counts16/TC " + " ".join(f"{q}={v:.2f}" for q, v in cnt.items()))
