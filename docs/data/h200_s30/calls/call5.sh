#!/usr/bin/env bash
# Session 30 call 5 (any GPU; about 560 s on an H200, 120 s elsewhere). On an H200: session 28's call 6. On any other
# GPU: what the chained p = 15 kernel waits on (call 4: at the same occupancy, DRAM bytes and fewer L2 sectors, 665 us
# against 566 for one element per block): ncu's warp-state, scheduler and launch sections (details page) of FUSED_TC's
# one-element and 8-chained tables at p = 15, and the chained table's stalls by source line (SourceCounters).
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
mkdir -p $OUT/ncu
python3 - docs/data/h200_s30/plans/sweep_plan_diag15.json $OUT/sched <<'PY'
import json, pathlib, shutil, sys
plan, root = json.load(open(sys.argv[1])), pathlib.Path(sys.argv[2])
for entry in plan["15"]["FUSED_TC"]:
    name = {"base": "one"}.get(entry["label"], "chain8" if entry["label"].endswith("xchain") else None)
    if name is None:
        continue
    d = root / name
    d.mkdir(parents=True)
    for f in pathlib.Path("schedules").glob("p0*.toml"):
        shutil.copy(f, d)
    path = d / "p0015.toml"
    head, sep, rest = path.read_text().partition("[paths.FUSED_TC]")
    body, sep2, tail = rest.partition("\n[paths.")
    path.write_text(head + entry["table"] + "\n" + sep2 + tail)
    print(name, entry["label"])
PY
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for name in one chain8; do
  extra=(); [ $name = chain8 ] && extra=(--section SourceCounters)
  COMPOSER_SCHEDULE_MACHINE=generic COMPOSER_SCHEDULES=$OUT/sched/$name timeout 90 $NCU --target-processes all \
    --profile-from-start off --clock-control none --section WarpStateStats --section SchedulerStats \
    --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis "${extra[@]}" --page details \
    --log-file $OUT/ncu/$name.txt python3 -m composer.profile.target FUSED_TC 15 > $OUT/logs/ncu_$name.log 2>&1
  t ncu_$name $?
  grep -iE "Duration|Stall|Warp Cycles|Issued Warp|No Eligible|Active Warps|Eligible Warps|Waves|Mem Busy|Max Bandwidth|L2 Hit|Registers" $OUT/ncu/$name.txt | head -40
done
finish_call ncu
