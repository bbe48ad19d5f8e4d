#!/usr/bin/env bash
# Session 30 call 3 (any GPU; about 560 s on an H200, 200 s elsewhere). On an H200: session 28's call 6. On any other
# GPU: why x chains lose (call 2: FUSED_TC at p = 7 558 us shipped, 619-711 chained; longer chains faster). 1. `composer
# sweep-fused run` of docs/data/h200_s30/plans/sweep_plan_diag7.json: FUSED_TC's one-element table, the same table
# walking 8 elements without a chain (strip, 32 registers), chained (40 registers, uncapped and mb6; mb4, 64), and
# chained under the 8-block cap (32 registers, 80 B spilled). 2. ncu (L2 and L1 breakdowns, DRAM and L2 sector
# bytes, warps active, the barrier and long-scoreboard stalls) of the one-element, strip, chained and capped-chain tables.
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
PLAN=docs/data/h200_s30/plans/sweep_plan_diag7.json
mkdir -p $OUT/sw $OUT/brk
timeout 120 python3 -m composer.cli.main sweep-fused run --orders 7 --plan $PLAN --out $OUT/sw --budget 80 \
  > $OUT/logs/sweep.log 2>&1; t sweep $?
# one schedules directory per FUSED_TC table of the plan: p0007.toml with that table
python3 - "$PLAN" "$OUT/sched" <<'PY'
import json, pathlib, shutil, sys
plan, root = json.load(open(sys.argv[1])), pathlib.Path(sys.argv[2])
names = {"base": "one", "epb8 pio": "strip8", "epb8 pio xchain": "chain8", "mb8 Mxfaces epb8 pio Wearly xchain": "chain8mb8"}
for entry in plan["7"]["FUSED_TC"]:
    name = next((n for key, n in names.items() if entry["label"] == key or entry["label"].endswith(key)), None)
    if name is None or name in [p.name for p in root.glob("*")]:
        continue
    d = root / name
    d.mkdir(parents=True)
    for f in pathlib.Path("schedules").glob("p0*.toml"):
        shutil.copy(f, d)
    text = (d / "p0007.toml").read_text()
    head, sep, rest = text.partition("[paths.FUSED_TC]")
    body, sep2, tail = rest.partition("\n[paths.")
    (d / "p0007.toml").write_text(head + entry["table"] + "\n" + sep2 + tail)
    print(name, entry["label"])
PY
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:l1tex__throughput.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__bytes.sum,lts__t_sectors.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,launch__registers_per_thread,launch__occupancy_limit_registers"
for name in one strip8 chain8 chain8mb8; do
  [ -d $OUT/sched/$name ] || continue
  COMPOSER_SCHEDULES=$OUT/sched/$name timeout 60 $NCU --target-processes all --profile-from-start off --clock-control none \
    --csv --page raw --print-units base --metrics $M --log-file $OUT/brk/$name.csv \
    python3 -m composer.profile.target FUSED_TC 7 > $OUT/logs/ncu_$name.log 2>&1
  t ncu_$name $?
done
python3 - $OUT/brk <<'PY'
import csv, io, sys, pathlib
keep = ("gpu__time_duration.sum", "dram__bytes.sum", "lts__t_sectors.sum", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__warp_issue_stalled_barrier_per_warp_active.pct", "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
        "launch__registers_per_thread", "launch__occupancy_limit_registers")
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    txt = f.read_text()
    if '"ID"' not in txt:
        print(f.name, "no rows"); continue
    for r in list(csv.DictReader(io.StringIO(txt[txt.index('"ID"'):])))[1:]:
        if "fused_tc" not in r["Kernel Name"]:
            continue
        print(f.name, " ".join(f"{k.split('__')[1][:28]}={r.get(k)}" for k in keep))
        top = sorted(((float(v.replace(",", "")), k) for k, v in r.items() if "pct" in k and v and v.replace(",", "").replace(".", "", 1).isdigit()), reverse=True)[:6]
        for x, k in top:
            print(f"   {x:6.1f} {k}")
PY
finish_call sw brk sched
