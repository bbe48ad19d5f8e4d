#!/usr/bin/env bash
# Session 30 call 4 (any GPU; about 560 s on an H200, 200 s elsewhere). On an H200: session 28's call 6. On any other
# GPU: where a block that walks elements loses DRAM bytes (call 3, FUSED_TC p = 7: one element per block 1670 MB,
# 8 elements walked 2776 MB, chained 1741 MB). The p = 15 sweep of docs/data/h200_s30/plans/sweep_plan_diag15.json
# (the one-element table, 8 walked, 8 chained at the 2-block cap), then ncu of one / strip8 / chain8 at p = 7 and 15:
# DRAM read and write bytes, L2 read sectors and their misses, L2 write sectors, local-memory bytes, warps active.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5 .cache/nvrtc_pin7.
# KEEP="docs/data/h200_s28 docs/data/h200_s29 docs/data/h200_s30" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin7
mkdir -p $OUT/sw $OUT/brk
timeout 120 python3 -m composer.cli.main sweep-fused run --orders 15 --plan docs/data/h200_s30/plans/sweep_plan_diag15.json \
  --out $OUT/sw --budget 80 > $OUT/logs/sweep.log 2>&1; t sweep $?
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,sm__warps_active.avg.pct_of_peak_sustained_active,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed"
for order in 7 15; do
  python3 - docs/data/h200_s30/plans/sweep_plan_diag$order.json $OUT/sched$order $order <<'PY'
import json, pathlib, shutil, sys
plan, root, order = json.load(open(sys.argv[1])), pathlib.Path(sys.argv[2]), int(sys.argv[3])
names = {"base": "one", "epb8 pio": "strip8", "epb8 ft2 pio": "strip8", "epb8 pio xchain": "chain8",
         "mb2 Mxfaces epb8 ft2 pio Wearly xchain": "chain8"}
for entry in plan[str(order)]["FUSED_TC"]:
    name = next((n for key, n in names.items() if entry["label"] == key or entry["label"].endswith(" " + key)), None)
    if name is None or (root / name).exists():
        continue
    d = root / name
    d.mkdir(parents=True)
    for f in pathlib.Path("schedules").glob("p0*.toml"):
        shutil.copy(f, d)
    path = d / f"p{order:04d}.toml"
    head, sep, rest = path.read_text().partition("[paths.FUSED_TC]")
    body, sep2, tail = rest.partition("\n[paths.")
    path.write_text(head + entry["table"] + "\n" + sep2 + tail)
    print(order, name, entry["label"])
PY
  for name in one strip8 chain8; do
    COMPOSER_SCHEDULE_MACHINE=generic COMPOSER_SCHEDULES=$OUT/sched$order/$name timeout 60 $NCU --target-processes all \
      --profile-from-start off --clock-control none --csv --page raw --print-units base --metrics $M \
      --log-file $OUT/brk/p${order}_$name.csv python3 -m composer.profile.target FUSED_TC $order > $OUT/logs/ncu_${order}_$name.log 2>&1
    t ncu_${order}_$name $?
  done
done
python3 - $OUT/brk <<'PY'
import csv, io, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    txt = f.read_text()
    if '"ID"' not in txt:
        print(f.name, "no rows"); continue
    for r in list(csv.DictReader(io.StringIO(txt[txt.index('"ID"'):])))[1:]:
        if "fused_tc" in r["Kernel Name"]:
            print(f.name, " ".join(f"{k.split('__', 1)[1][:40]}={r[k]}" for k in r if "__" in k))
PY
finish_call sw brk
