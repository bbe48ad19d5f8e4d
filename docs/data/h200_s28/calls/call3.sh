#!/usr/bin/env bash
# Session 28 call 3 (about 150 s, any GPU): did the chunked pipeline get its L2 reuse? Call 2 (graph replay) timed
# every chunked table slower than its unchunked one (best: FUSED_TC p = 31 in 4 chunks 676 against 616 us, FUSED_TC16
# p = 63 in 4 chunks 691 against 646, H100). ncu of one call of each at two chunk sizes against the shipped tables:
# DRAM bytes per launch (does z read q and dqdt back from L2?) and the launches' durations.
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
for chunks in "128 16" "32 4"; do
  set -- $chunks
  dir=$OUT/sched_c$1_$2
  python3 - "$dir" "$1" "$2" <<'PY'
import dataclasses, sys
from pathlib import Path
from composer.config.schedule_files import copy_schedules
from composer.fused.candidates import to_table
from composer.fused.config import fused_config
from composer.fused.sweep import write_table
out, c31, c63 = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
copy_schedules(out)
for variant, order, size in (("FUSED_TC", 31, c31), ("FUSED_TC16", 63, c63)):
    cfg = dataclasses.replace(fused_config(variant, order), chunk_elements=size, nvrtc="13.5")
    write_table(out / f"p{order:04d}.toml", to_table(cfg), note=f"session 28 call 3: chunk_elements = {size}")
PY
  COMPOSER_SCHEDULES=$dir timeout 100 python3 -m composer.cli.main profile --paths FUSED_TC --orders 31 \
    --out $OUT/prof/tc31_c$1 > $OUT/logs/prof_tc31_c$1.log 2>&1; t prof_tc31_c$1 $?
  COMPOSER_SCHEDULES=$dir timeout 100 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 63 \
    --out $OUT/prof/tc16_63_c$2 > $OUT/logs/prof_tc16_63_c$2.log 2>&1; t prof_tc16_63_c$2 $?
done
for f in $OUT/prof/*/profile.json; do
  python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for run, v in d.items():
    rows = v["kernels"]
    for name in dict.fromkeys(k["kernel"] for k in rows):
        mine = [k for k in rows if k["kernel"] == name]
        print(sys.argv[1].split("/")[-2], run, name, len(mine), "launches",
              round(sum(k["duration_us"] or 0 for k in mine), 1), "us",
              round(sum(k["dram_bytes"] or 0 for k in mine) / 1e6, 1), "MB DRAM",
              round(sum(k.get("l2_read_bytes") or 0 for k in mine) / 1e6, 1), "MB L2 reads")
PY
done
finish_call prof
